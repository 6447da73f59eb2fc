#!/bin/sh
# On the GPU machine: two llama-decode binaries (A: the baseline, B: the
# change) timed on the same synthetic models, alternating A, B, B, A so that
# neither always runs on a warmer card. Each run is `--bench` (warm-up until
# two windows agree, then STEPS steps) with `--profile`; one line each, then
# the table: GPU us/token of A and B, the SM clock read after them.
# ORDER=AB runs each once (for the 7b models, whose set-up is long).
#   A=.gl/base/llama-decode B=.gl/bin/llama-decode sh bench/ab_decode.sh "7b:q4_k_m 1b:q8_0"
set -e
A=${A:-.gl/base/llama-decode}
B=${B:-.gl/bin/llama-decode}
STEPS=${STEPS:-256}
clock() { nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader 2>/dev/null | tr -d '\n'; }
one() {   # binary config wtype tag -> "gpu_us (wall us, share of floor)"
  "$1" --config "$2" --wtype "$3" --bench --steps "$STEPS" --profile --quiet --device NVIDIA > "${OUT:-/tmp}/ab-$4-$2-$3.txt" 2>&1
  grep "us/token GPU" "${OUT:-/tmp}/ab-$4-$2-$3.txt" | head -1 |
    sed -E 's/.* ([0-9.]+) us\/token wall, ([0-9.]+) us\/token GPU \(([0-9]+%).*/\2 (wall \1, \3 of floor)/'
}
for cw in $1; do
  c=${cw%%:*}; w=${cw#*:}
  a1=$(one "$A" "$c" "$w" A); b1=$(one "$B" "$c" "$w" B)
  if [ "${ORDER:-ABBA}" = ABBA ]; then
    b2=$(one "$B" "$c" "$w" B2); a2=$(one "$A" "$c" "$w" A2)
    echo "$c $w | A: $a1 / $a2 | B: $b1 / $b2 | $(clock)"
  else
    echo "$c $w | A: $a1 | B: $b1 | $(clock)"
  fi
done
