#!/bin/sh
# The early log against the default step log, each in a process of its own
# (one model a process), alternating, on the GPU machine:
#   tools/gpu-run.sh 'sh tools/probe-early-log.sh'
# loom bench decode runs the early-log variants on a second model in the
# same process, which read about 3 us faster or slower than the first for
# reasons of their own (docs/perf.md), so this compares them apart.
for round in 1 2 3; do
  for f in "" "--early-log"; do
    r=$(llama-decode --config 1b --bench --device NVIDIA $f 2>&1 | grep -o '[0-9.]* us/token GPU')
    echo "round $round ${f:-default}: $r"
  done
done
