#!/bin/sh
# On the GPU machine, with .gl carried (tools/gpu-bundle.sh, then
# bench/peer/setup.sh): loom and llama.cpp's Vulkan backend decoding the same
# GGUF files, one line each. loom writes its CONFIG model as f16 GGUF,
# llama.cpp quantizes it to each TYPE with its own quantizer, then each file
# is timed by loom (llama-decode --model FILE --bench: 512 steps after the
# warm-up) and by llama.cpp (llama-peer bench FILE: the same 512 steps,
# flash attention on). The SM clock is read after each pair.
#   bench/quant_bench.sh 1b "q4_k_m q8_0 q4_0"
set -e
cfg=${1:-1b}
types=${2:-"q4_k_m q8_0 q4_0"}
dir=${TMPDIR:-/tmp}/loom-quant
mkdir -p "$dir"
B=${LOOM_BIN:-.gl/bin}
P=${PEER:-.gl/peer/llama-peer}
clock() { nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader 2>/dev/null; }
t0=$(date +%s)
[ -f "$dir/$cfg-f16.gguf" ] || "$B/llama-decode" --config "$cfg" --write-gguf "$dir/$cfg-f16.gguf" > /dev/null
for t in $types; do
  [ -f "$dir/$cfg-$t.gguf" ] || "$P" quantize "$dir/$cfg-f16.gguf" "$dir/$cfg-$t.gguf" "$t" > /dev/null
done
echo "files ready in $(( $(date +%s) - t0 )) s"
for t in f16 $types; do
  f=$dir/$cfg-$t.gguf
  loom=$("$B/llama-decode" --model "$f" --bench --device NVIDIA 2>&1 | grep "us/token GPU" | sed 's/.*wall, //')
  peer=$("$P" bench "$f" 2>&1 | grep "^decode:" | sed 's/^decode: //')
  echo "$cfg $t | loom: $loom | llama.cpp: $peer | $(clock)"
done
