#!/bin/sh
# On the GPU machine: two llama-decode binaries (A: the baseline, B: the
# change) timed on one prefill each of synthetic models, alternating A, B,
# B, A so that neither always runs on a warmer card; first each binary's
# prefill against the CPU reference on a 2-layer model of the shape (the
# coopmat forms included on a device that has them), then one line a
# configuration: the median GPU us of one N-row prefill (after the
# warm-up) and the time to first token, A and B, and the SM clock read
# after them. With PROFILE=1 each binary's last run prints its op kinds.
# A configuration is CONFIG:N, or CONFIG:Nv for a verification step of N
# rows (--verify: every row's argmax). AT=P times the rows at position P,
# after P ids prefilled once (--bench-at; both binaries must have it).
# BENV=... puts environment settings in front of B's runs only, so that one
# binary can be timed against itself with a form switched on:
#   A=.gl/bin/llama-decode B=.gl/bin/llama-decode BENV=LOOM_DISABLE=split_k sh bench/ab_prefill.sh "1b:512"
#   A=.gl/base/llama-decode B=.gl/bin/llama-decode sh bench/ab_prefill.sh "1b:512 7b:512 1b:4v" [WTYPE]
set -e
A=${A:-.gl/base/llama-decode}
B=${B:-.gl/bin/llama-decode}
W=${2:-f16}
AT=${AT:-0}
BENV=${BENV:-}
at=; [ "$AT" = 0 ] || at="--bench-at $AT"
clock() { nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader 2>/dev/null | tr -d '\n'; }
ids=$(seq -s, 3 7 700)
envof() { if [ "$1" = B ]; then echo "$BENV"; fi; }
for side in A B; do
  bin=$A; [ "$side" = B ] && bin=$B
  for cfg in $1; do
    c=${cfg%%:*}
    echo "check $side $bin $c: $(env $(envof $side) "$bin" --config "$c" --wtype "$W" --layers 2 --vocab 4096 --max-seq 256 --prompt-ids "$ids" \
      --check --steps 4 --quiet --device NVIDIA 2>&1 | grep 'check:')"
  done
done
one() {   # side config rows[v] -> "gpu_us (ttft us)"
  v=; n=$3; bin=$A
  [ "$1" = B ] && bin=$B
  case $n in *v) v=--verify; n=${n%v} ;; esac
  env $(envof "$1") "$bin" --config "$2" --wtype "$W" --max-seq 1024 --bench-prefill "$n" $v $at --quiet --device NVIDIA 2>&1 |
    awk '/us GPU/ { g = $1 } /time to first token/ { t = $5 } END { print g " us (first token " t " us)" }'
}
for cfg in $1; do
  c=${cfg%%:*}; n=${cfg#*:}
  a1=$(one A "$c" "$n"); b1=$(one B "$c" "$n"); b2=$(one B "$c" "$n"); a2=$(one A "$c" "$n")
  echo "$c $W prefill $n at $AT | A: $a1 / $a2 | B: $b1 / $b2 | $(clock)"
done
if [ "${PROFILE:-0}" = 1 ]; then
  for side in A B; do
    bin=$A; [ "$side" = B ] && bin=$B
    for cfg in $1; do
      echo "profile $side $bin ${cfg%%:*} ${cfg#*:}:"
      n=${cfg#*:}; v=
      case $n in *v) v=--verify; n=${n%v} ;; esac
      env $(envof $side) "$bin" --config "${cfg%%:*}" --wtype "$W" --max-seq 1024 --bench-prefill "$n" $v $at --profile --quiet \
        --device NVIDIA 2>&1 | grep -E '^[A-Z_]+ +[0-9]+ +[0-9]+ '
    done
  done
fi
