# Thin wrapper around CMake. `make demo` and `make test` install what is
# missing (Debian packages, as root), configure, build into build/, then run.
BUILD   ?= build
ASAN    ?= build-asan
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build demo test test-asan clean

all: build

deps:
	@sh tools/deps.sh

# Configure every time (cheap once configured), naming the options the
# targets rely on, so a build/ left configured otherwise cannot skip the
# runtime or the tests.
build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_RUNTIME=ON -DLOOM_TESTS=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/llama-decode --config tiny

test: build
	cd $(BUILD) && ctest --output-on-failure --no-tests=error -j $(JOBS)

test-asan: deps
	cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DLOOM_SANITIZE=ON -DLOOM_RUNTIME=ON -DLOOM_TESTS=ON $(CMAKE_FLAGS)
	cmake --build $(ASAN) -j $(JOBS)
	cd $(ASAN) && ctest --output-on-failure --no-tests=error -j $(JOBS)

clean:
	rm -rf $(BUILD) $(ASAN)
