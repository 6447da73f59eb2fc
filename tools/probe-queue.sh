#!/bin/sh
# The decode step on a compute-only queue family (LOOM_QUEUE=compute)
# against a family with graphics as well (the default), a process
# each, alternating, then the fixed costs on each (GPU machine):
#   tools/gpu-run.sh 'sh tools/probe-queue.sh'
for round in 1 2 3; do
  for q in compute graphics; do
    r=$(LOOM_QUEUE=$q llama-decode --config 1b --bench --device NVIDIA 2>&1 | grep -o '[0-9.]* us/token GPU')
    echo "round $round $q: $r"
  done
done
for q in compute graphics; do
  echo "-- loom bench micro, LOOM_QUEUE=$q"
  LOOM_QUEUE=$q loom bench micro --device NVIDIA 2>&1 | tail -15
done
