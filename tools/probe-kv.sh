#!/bin/sh
# The 1b step with f16 KV caches (the preset's default) against f32 ones,
# a process each, alternating (GPU machine):
#   tools/gpu-run.sh 'sh tools/probe-kv.sh'
# LOOM_KV_PROBE_EXTRA names more binaries to take turns with (built from
# other commits, run with f16 caches).
for round in 1 2 3; do
  for v in "llama-decode --kv-f16" "llama-decode --kv-f32" $LOOM_KV_PROBE_EXTRA; do
    r=$($v --config 1b --bench --device NVIDIA 2>&1 | grep -o '[0-9.]* us/token GPU')
    echo "round $round $v: $r"
  done
done
