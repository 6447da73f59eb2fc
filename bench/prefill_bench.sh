#!/bin/sh
# On the GPU machine, with .gl carried (tools/gpu-bundle.sh, then
# bench/peer/setup.sh): loom's prefill against llama.cpp's Vulkan backend
# on the same f16 GGUF file, one line each, the SM clock read right after
# loom's runs and again after llama.cpp's (a reading taken once the card
# idles says 345-450 MHz whatever the runs saw).
#   bench/prefill_bench.sh [CONFIG [N [TYPE]]]      (default 1b 512 f16)
# TYPE other than f16 (q4_k_m, q8_0, ...): llama.cpp's own quantizer makes
# the file from loom's f16 one (llama-peer quantize), as
# bench/quant_bench.sh does, and both time that file.
# loom: llama-decode --bench-prefill N (a prefill of N ids in one step
# after the warm-up, median of 9, tokens/s of GPU time, and the time to the
# first token); the verification step of 4 rows (--verify: every row's
# argmax) beside a one-token decode step (--bench); llama.cpp: llama-peer's
# ppN (one N-token batch, flash attention on).
set -e
cfg=${1:-1b}
n=${2:-512}
type=${3:-f16}
dir=${TMPDIR:-/tmp}/loom-prefill
mkdir -p "$dir"
B=${LOOM_BIN:-.gl/bin}
P=${PEER:-.gl/peer/llama-peer}
f=$dir/$cfg-f16-ctx1024.gguf
[ -f "$f" ] || "$B/llama-decode" --config "$cfg" --max-seq 1024 --write-gguf "$f" > /dev/null
if [ "$type" != f16 ]; then
  q=$dir/$cfg-$type-ctx1024.gguf
  [ -f "$q" ] || "$P" quantize "$f" "$q" "$type" > /dev/null
  f=$q
fi
clock() { nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"; }
line() { "$B/llama-decode" --model "$f" --device NVIDIA --json "$@" 2>&1 | tail -1; }
echo "loom prefill $n: $(line --bench-prefill "$n")"
echo "loom verify 4:   $(line --bench-prefill 4 --verify)"
echo "loom decode:     $(line --bench --steps 256 --quiet | grep -o '"gpu_us_per_token":[0-9.]*')"
echo "clock (loom):    $(clock)"
echo "llama.cpp:       $("$P" bench "$f" --pp "$n" --tokens 64 2>&1 | grep -E '^(pp|decode)' | tr '\n' ' ')"
echo "clock (peer):    $(clock)"
