#!/bin/sh
# On the GPU machine: awaited edges (tagged vectors polled with no barrier
# in front, docs/design-notes.md "Awaited edges") under load. Every run is
# `llama-decode --check` over STEPS steps on the NVIDIA device: the CPU
# reference on every step, whose logits and argmax the GPU's must match.
# For each weight type in TYPES (f16, and Q4_K_M, whose block kernels poll
# too) the cases are
#   alone  one process, the GPU otherwise idle: the baseline, so that a
#          failure under load is not a tolerance the model misses anyway;
#   pair   two processes at once on the one GPU;
#   busy   one process while another keeps the GPU busy: f16 matrix products
#          in a loop under PyTorch (or, without it, llama-decode --bench of
#          1b), started before the run (it waits until the load is up) and
#          ended after it; a load that ended early fails the case.
# A run passes when it exits 0, its check saw STEPS steps and 0 mismatches,
# it polled (dependencies left without a barrier: its per-token "polled" > 0,
# so awaited edges really were on), and llama-decode's awaited-edges line
# reads "on" with 0 poll timeouts. LOOM_VALIDATE and LOOM_TAGS are cleared:
# either would keep every barrier, and the runs would prove nothing.
# The model: a shape of 57M parameters (SHAPE replaces it), sized for the
# CPU reference, which sets a --check run's pace: 0.23 s a step for f16, 0.33
# for Q4_K_M on a busy 2-core build machine, so 1000 steps take a few
# minutes at most on the GPU machine's free cores. GPU utilization
# (nvidia-smi, sampled every 2 s) is the mean over each run. One line per
# run as it ends, then the table; exit 1 if any run failed.
#   DECODE=.gx/new/llama-decode sh bench/load_check.sh ["f16 q4_k_m" [1000]]
#   CASES="busy" LOAD=decode DEVICE=NVIDIA ...   (a subset; the load by decode)
types=${1:-"f16 q4_k_m"}
steps=${2:-1000}
DECODE=${DECODE:-${LOOM_BIN:-.gl/bin}/llama-decode}
DEVICE=${DEVICE:-NVIDIA}
CASES=${CASES:-"alone pair busy"}
LIMIT_S=${LIMIT_S:-1800}
SHAPE=${SHAPE:-"--dim 768 --layers 8 --heads 12 --kv-heads 4 --head-dim 64 --ffn 2048 --vocab 8192 --kv-f16"}
unset LOOM_VALIDATE LOOM_TAGS
dir=${OUT:-${TMPDIR:-/tmp}}/loom-load
mkdir -p "$dir"
rows=$dir/rows.txt
: > "$rows"
[ -x "$DECODE" ] || { echo "load_check: no llama-decode at $DECODE (set DECODE)" >&2; exit 2; }
# --check needs the whole run inside the context.
ctx=$(( steps > 64 ? steps : 64 ))

# The load: PyTorch when it has a CUDA device, else llama-decode's benchmark.
if [ -z "${LOAD:-}" ]; then
  if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    LOAD=torch
  else
    LOAD=decode
  fi
fi
LOAD_PY='
import torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.half)
b = torch.randn_like(a)
c = a @ b
torch.cuda.synchronize()
print("busy", flush=True)
while True:
    for _ in range(16):
        c = a @ b
    torch.cuda.synchronize()
'
start_load() {   # file -> pid of the load in $load_pid
  if [ "$LOAD" = torch ]; then
    python3 -c "$LOAD_PY" > "$1" 2>&1 &
  else
    "$DECODE" --config 1b --bench --steps 10000000 --quiet --device "$DEVICE" > "$1" 2>&1 &
  fi
  load_pid=$!
}
util() { nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits 2>/dev/null | head -1 | tr -dc 0-9; }
# Until the load is up: PyTorch says so; llama-decode's benchmark shows as
# utilization. At most 300 s (1b's synthetic weights take a while).
wait_busy() {   # file pid
  t=0
  while [ $t -lt 300 ]; do
    kill -0 "$2" 2>/dev/null || return 1
    grep -q '^busy' "$1" 2>/dev/null && return 0
    u=$(util)
    [ "$LOAD" = decode ] && [ -n "$u" ] && [ "$u" -ge 50 ] && return 0
    sleep 2
    t=$((t + 2))
  done
  return 1
}
sampler() {   # file: utilization every 2 s until killed
  while :; do util >> "$1"; echo >> "$1"; sleep 2; done
}
mean() { awk 'NF { s += $1; n++ } END { if (n) printf "%.0f%%", s / n; else printf "n/a" }' "$1"; }

launch() {   # file weights -> pid in $run_pid
  timeout "$LIMIT_S" "$DECODE" $SHAPE --max-seq "$ctx" --wtype "$2" --steps "$steps" --check --quiet --json \
    --device "$DEVICE" > "$1" 2>&1 &
  run_pid=$!
}
# One run's row from its output: case weights n exit util [note].
judge() {   # file case weights n exit util note
  f=$1
  chk=$(sed -n 's/^check: \([0-9]*\) mismatches in \([0-9]*\) steps.*/\1 \2/p' "$f")
  mis=${chk% *}; seen=${chk#* }
  polled=$(sed -n 's/^per token: .* and \([0-9.]*\) polled[ ,].*/\1/p' "$f")
  aw=$(sed -n 's/^awaited edges: \([a-z]*\) .*/\1/p' "$f")
  pt=$(sed -n 's/^awaited edges: .*; \([0-9]*\) poll timeouts$/\1/p' "$f")
  note=$7
  [ "$5" = 0 ] || note="${note:+$note; }exit $5$( [ "$5" = 124 ] && echo " (over $LIMIT_S s)")"
  if [ -z "$chk" ]; then
    note="${note:+$note; }no check line"
  elif [ "$mis" != 0 ] || [ "$seen" != "$steps" ]; then
    note="${note:+$note; }check failed"
  fi
  [ -z "$polled" ] || awk -v p="$polled" 'BEGIN { exit !(p > 0) }' || note="${note:+$note; }nothing polled"
  [ "$aw" = on ] || note="${note:+$note; }awaited edges ${aw:-not reported}"
  [ "$pt" = 0 ] || note="${note:+$note; }${pt:-unknown} poll timeouts"
  [ -n "$pt" ] || note="$note (no awaited-edges line: a llama-decode that predates it?)"
  printf '%-6s %-7s %-3s %-5s %-11s %-8s %-13s %-8s %-8s %s\n' "$2" "$3" "$4" "$5" \
    "${mis:-?}/${seen:-?}" "${polled:-?}" "${pt:-?}" "${aw:-?}" "$6" "${note:-ok}" | tee -a "$rows"
  grep -m1 '^llama-decode: ' "$f" | sed 's/^/         /'
}

echo "load_check: $DECODE on $DEVICE, $steps steps, weights: $types; cases: $CASES; load: $LOAD; output in $dir"
# The device, and the rule's verdict on it, from one step of the model.
"$DECODE" --device "$DEVICE" --steps 1 $SHAPE --quiet 2>&1 | grep -e '^llama-decode on' -e '^awaited edges' |
  sed 's/^/  /'
t0=$(date +%s)
for w in $types; do
  for c in $CASES; do
    base=$dir/$c-$w
    rm -f "$base".util
    note=""
    case $c in
      alone)
        sampler "$base.util" & sp=$!
        launch "$base-1.txt" "$w"; p1=$run_pid
        wait "$p1"; e1=$?
        kill "$sp"; wait "$sp" 2>/dev/null
        judge "$base-1.txt" "$c" "$w" 1 "$e1" "$(mean "$base.util")" "" ;;
      pair)
        sampler "$base.util" & sp=$!
        launch "$base-1.txt" "$w"; p1=$run_pid
        launch "$base-2.txt" "$w"; p2=$run_pid
        wait "$p1"; e1=$?
        wait "$p2"; e2=$?
        kill "$sp"; wait "$sp" 2>/dev/null
        u=$(mean "$base.util")
        judge "$base-1.txt" "$c" "$w" 1 "$e1" "$u" ""
        judge "$base-2.txt" "$c" "$w" 2 "$e2" "$u" "" ;;
      busy)
        start_load "$base-load.txt"; lp=$load_pid
        if ! wait_busy "$base-load.txt" "$lp"; then
          note="the load never came up ($LOAD; $base-load.txt)"
          kill "$lp" 2>/dev/null; wait "$lp" 2>/dev/null
          printf '%-6s %-7s %-3s %-5s %-11s %-8s %-13s %-8s %-8s %s\n' "$c" "$w" 1 - - - - - - "$note" |
            tee -a "$rows"
          continue
        fi
        sampler "$base.util" & sp=$!
        launch "$base-1.txt" "$w"; p1=$run_pid
        wait "$p1"; e1=$?
        kill "$sp"; wait "$sp" 2>/dev/null
        kill -0 "$lp" 2>/dev/null || note="the load ended before the run ($base-load.txt)"
        kill "$lp" 2>/dev/null; wait "$lp" 2>/dev/null
        judge "$base-1.txt" "$c" "$w" 1 "$e1" "$(mean "$base.util")" "$note" ;;
      *)
        echo "load_check: unknown case $c (alone, pair, busy)" >&2; exit 2 ;;
    esac
  done
done
echo
echo "load_check: $(( $(date +%s) - t0 )) s; $(nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader 2>/dev/null)"
printf '%-6s %-7s %-3s %-5s %-11s %-8s %-13s %-8s %-8s %s\n' case weights run exit mismatches polled "poll timeouts" \
  awaited "GPU util" verdict
cat "$rows"
if grep -qv ' ok$' "$rows" || [ ! -s "$rows" ]; then
  echo "load_check: FAILED"
  exit 1
fi
echo "load_check: all $(wc -l < "$rows") runs passed"
