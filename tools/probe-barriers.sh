#!/bin/sh
# What each dependency of the 1b decode step costs, on the GPU machine
# (tools/gpu-run.sh 'sh tools/probe-barriers.sh'): GPU us/token with the
# barrier in front of one kernel of every layer left out
# (LOOM_PROBE_SKIP_BARRIER), so that it overlaps the level before it. The
# tokens are wrong; only the timing means anything. Two rounds, in turn.
for round in 1 2; do
  for k in none matvec_add_stage_comb attention_part rms_norm_matvec_silu_mul_pre matvec_add_stage_f16 \
           rms_norm_qkv_rope_pre; do
    if [ "$k" = none ]; then v=""; else v=$k; fi
    r=$(LOOM_PROBE_SKIP_BARRIER=$v llama-decode --config 1b --bench --device NVIDIA "$@" 2>&1 |
        grep -o '[0-9.]* us/token GPU')
    echo "round $round, no barrier before $k: $r"
  done
done
