#!/bin/sh
# Planted bugs must die: applies each mutant of tools/mutants/ in turn to a
# private copy of the sources, rebuilds incrementally, and requires the
# pass suites to fail. The checkout itself is never modified.
#
#   tools/mutate.sh [BUILD_DIR] [MUTANT...]
#
# BUILD_DIR (default build-mutants) holds the copy (src/) and its build
# (build/); it is reused between runs, so only what a mutant touches is
# rebuilt. With no MUTANT every tools/mutants/*.sed runs. `make test` runs
# this as the ctest entry "mutants".
#
# Adding a mutant: write tools/mutants/NN-what.sed. Its first line is
# "#file <path from the repository root>", the next comment lines say what
# bug it plants, the rest is a sed script applied to that file. The script
# fails if the sed changes nothing (the code moved: update the mutant) or
# if the suites still pass (the tests have a blind spot: add the test that
# kills it). Keep each to the smallest edit that reproduces one real bug.
#
# The suites run in order, stopping at the first failure: the oracle (a
# reduced seed count, LOOM_ORACLE_SEEDS, default 400), the unit suites of
# passes, ir, encode and compiler, the pair-scan property test, then the
# profile and trace suite and the GGUF reader and loader's (on the default
# Vulkan device).
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-"$root/build-mutants"}
[ $# -gt 0 ] && shift
case $work in /*) ;; *) work="$PWD/$work" ;; esac
src="$work/src"
bld="$work/build"
jobs=${JOBS:-2}
seeds=${LOOM_ORACLE_SEEDS:-400}
suites="test_passes_oracle test_passes test_ir test_encode test_compiler test_passes_property test_profile test_gguf"

mkdir -p "$src" "$bld"
# The copy follows the checkout, deletions too; unchanged files keep their
# time stamps, so the build stays incremental across runs.
for d in CMakeLists.txt cmake include tools ir reference passes compiler runtime shaders models examples cli tests fuzz bench docs; do
    [ -e "$root/$d" ] || continue
    if [ -d "$root/$d" ]; then
        mkdir -p "$src/$d"
        (cd "$root/$d" && find . -type f | while read -r f; do
            mkdir -p "$src/$d/$(dirname "$f")"
            cmp -s "$f" "$src/$d/$f" 2>/dev/null || cp -p "$f" "$src/$d/$f"
        done)
        # and loses what the checkout no longer has (a deleted .comp would
        # still be built)
        (cd "$src/$d" && find . -type f | while read -r f; do
            [ -e "$root/$d/$f" ] || rm -f "$f"
        done)
    else
        cmp -s "$root/$d" "$src/$d" 2>/dev/null || cp -p "$root/$d" "$src/$d"
    fi
done

if [ ! -f "$bld/CMakeCache.txt" ]; then
    cmake -S "$src" -B "$bld" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_RUNTIME=ON -DLOOM_TESTS=ON >/dev/null
fi
build() { cmake --build "$bld" -j "$jobs" --target $suites >"$work/build.log" 2>&1; }
echo "mutate: building the unmutated copy"
build || { tail -30 "$work/build.log"; echo "mutate: the unmutated build fails"; exit 1; }

run_suites() {   # 0 when some suite fails (the mutant is killed)
    for t in $suites; do
        if ! (cd "$src/tests" && LOOM_TEST_DATA="$src/tests" LOOM_ORACLE_SEEDS=$seeds CK_DEFAULT_TIMEOUT=600 \
              "$bld/bin/$t" >"$work/$t.log" 2>&1); then
            killer=$t
            return 0
        fi
    done
    return 1
}

if [ $# -eq 0 ]; then
    set -- "$root"/tools/mutants/*.sed
fi
total=0
survivors=""
for m in "$@"; do
    name=$(basename "$m" .sed)
    target=$(sed -n '1s/^#file //p' "$m")
    [ -n "$target" ] && [ -f "$src/$target" ] || { echo "mutate: $name: first line must be '#file <path>'"; exit 1; }
    total=$((total + 1))
    sed -f "$m" "$root/$target" >"$src/$target"
    if cmp -s "$root/$target" "$src/$target"; then
        cp -p "$root/$target" "$src/$target"
        echo "mutate: $name: the sed script changed nothing in $target; update the mutant"
        exit 1
    fi
    t0=$(date +%s)
    killer=""
    if ! build; then
        cp -p "$root/$target" "$src/$target"
        touch "$src/$target"
        tail -20 "$work/build.log"
        echo "mutate: $name: the mutated code does not build; fix the mutant"
        exit 1
    elif ! run_suites; then
        survivors="$survivors $name"
    fi
    cp -p "$root/$target" "$src/$target"   # restore (same time stamp: the next build recompiles it)
    touch "$src/$target"
    if [ -n "$killer" ]; then
        echo "mutate: $name: killed by $killer ($(( $(date +%s) - t0 )) s)"
    else
        echo "mutate: $name: SURVIVED — no suite noticed"
    fi
done
build || true
if [ -n "$survivors" ]; then
    echo "mutate: survivors:$survivors"
    exit 1
fi
echo "mutate: all $total mutants killed"
