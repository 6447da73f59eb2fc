#!/bin/sh
# Variants of the 1b decode step, a process each (one model a process),
# taking turns for LOOM_PROBE_ROUNDS rounds (default 3), on the GPU machine:
#   tools/gpu-run.sh "sh tools/probe-variants.sh '' '--half-stage' 'LOOM_QUEUE=compute'"
# Each argument is put in front of or after `llama-decode --config 1b
# --bench --device NVIDIA`: words with '=' are environment settings, words
# that name a file in .gl/bin replace the binary, the rest are options.
# An empty argument is the default build and plan. Prints each round, then
# each variant's median and its ratio to the first variant's median.
rounds=${LOOM_PROBE_ROUNDS:-3}
out=$(mktemp)
r=1
while [ "$r" -le "$rounds" ]; do
  i=0
  for v in "$@"; do
    i=$((i + 1))
    env=""; bin=llama-decode; opts=""
    for w in $v; do
      case "$w" in
        *=*) env="$env $w" ;;
        *) if [ -x ".gl/bin/$w" ]; then bin="$w"; else opts="$opts $w"; fi ;;
      esac
    done
    us=$(env $env "$bin" --config 1b --bench --device NVIDIA $opts 2>&1 | grep -o '[0-9.]* us/token GPU' | cut -d' ' -f1)
    echo "round $r [${v:-default}]: ${us:-failed}"
    echo "$i ${us:-0}" >> "$out"
  done
  r=$((r + 1))
done
i=0
for v in "$@"; do
  i=$((i + 1))
  med=$(awk -v k="$i" '$1 == k { print $2 }' "$out" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
  [ "$i" -eq 1 ] && base=$med
  awk -v v="${v:-default}" -v m="$med" -v b="$base" 'BEGIN { printf "median [%s]: %.1f us/token, %.4f of the first\n", v, m, m / b }'
done
rm -f "$out"
