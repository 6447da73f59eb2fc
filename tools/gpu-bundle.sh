#!/bin/sh
# Builds the GPU machine's binaries (Release, no tests) into build-gpu/ and
# puts them, with the Vulkan loader packages from ../shared/gpu, into .gl/
# (git-ignored), the folder a device run carries. On the GPU machine,
# tools/gpu-run.sh unpacks the packages and runs commands against .gl/bin.
set -e
cd "$(dirname "$0")/.."
SHARED=${LOOM_SHARED:-../shared}
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DLOOM_RUNTIME=ON -DLOOM_TESTS=OFF >/dev/null
cmake --build build-gpu -j "$(nproc)" --target loom llama-decode
mkdir -p .gl/bin
cp build-gpu/bin/loom build-gpu/bin/llama-decode .gl/bin/
cp "$SHARED"/gpu/*.deb .gl/
# What the binaries need beyond the base image: libvulkan (from the .debs).
for b in .gl/bin/*; do
  if ldd "$b" | grep -v -e libvulkan -e libstdc++ -e libm.so -e libgcc_s -e libc.so -e ld-linux -e vdso | grep -q '=>'; then
    echo "gpu-bundle: $b needs more than libvulkan:" >&2
    ldd "$b" >&2
    exit 1
  fi
done
git rev-parse --short HEAD > .gl/commit
du -sh .gl | sed 's/^/gpu-bundle: /'
