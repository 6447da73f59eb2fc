#!/bin/sh
# On the GPU machine, from the repository root with .gl/ carried (see
# tools/gpu-bundle.sh): unpacks the Vulkan loader, then runs each argument
# as a shell command with .gl/bin first on PATH, printing the SM clock
# before and after each, so every table stands between two clock readings,
# and the seconds each took, so that the next call can be sized to the
# device time left.
#   tools/gpu-run.sh 'loom bench decode --config 1b --device NVIDIA --rounds 3' \
#                    'python3 bench/torch_decode.py --config 1b'
for f in .gl/*.deb; do dpkg -x "$f" / >/dev/null; done
ldconfig
export PATH="$PWD/.gl/bin:$PATH"
clock() { nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null | sed "s/^/clock $1: /"; }
echo "binaries: $(cat .gl/commit 2>/dev/null || echo unknown)"
status=0
for cmd in "$@"; do
  echo "== $cmd"
  clock before
  t0=$(date +%s)
  sh -c "$cmd" || { echo "== exit $? from: $cmd"; status=1; }
  clock after
  echo "== $(( $(date +%s) - t0 )) s"
done
exit $status
