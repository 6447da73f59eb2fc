#!/bin/sh
# Greedy tokens of loom and llama.cpp on the same GGUF files
# (bench/peer/README.md). For each model named (default: tiny small), loom's
# llama-decode writes its random weights as an f16 GGUF file, llama.cpp
# quantizes it to q8_0, q4_0 and q4_k_m, and both decode each file from the
# same prompt. A line per file says whether the tokens match, and where
# they do not, llama.cpp's margin between its token and its runner-up there.
# A file loom cannot read is reported as such and skipped.
#
#   bench/peer/compare_tokens.sh [tiny|small|1b|7b ...]
#
# Environment (defaults in brackets):
#   LLAMA_DECODE  loom's llama-decode [build/bin/llama-decode, else .gl/bin/llama-decode]
#   PEER          llama-peer [bench/.peer/dist/llama-peer, else .gl/peer/llama-peer]
#   OUT           where the GGUF files go [build/peer-compare]
#   TYPES         files compared [f16 q8_0 q4_0 q4_k_m]
#   PROMPT STEPS  prompt ids and tokens generated [1,2,3,4 and 32]
#   LOOM_ARGS     llama-decode's extra options [--kv-f16: llama.cpp's f16 KV cache; the weight
#                 types come from each file]
#   PEER_ARGS     llama-peer tokens' options (--cpu, --serial, --threads N) [--threads 1:
#                 a CPU decode of these sizes is fastest on one thread of a busy machine]
# Exit: 0 when every file both read gives the same tokens, 1 when some
# differ, 2 when a tool fails.
set -u
cd "$(dirname "$0")/../.."
pick() { for f in "$@"; do [ -x "$f" ] && { echo "$f"; return; }; done; echo "$1"; }
LLAMA_DECODE=${LLAMA_DECODE:-$(pick build/bin/llama-decode .gl/bin/llama-decode)}
PEER=${PEER:-$(pick bench/.peer/dist/llama-peer .gl/peer/llama-peer)}
OUT=${OUT:-build/peer-compare}
TYPES=${TYPES:-f16 q8_0 q4_0 q4_k_m}
PROMPT=${PROMPT:-1,2,3,4}
STEPS=${STEPS:-32}
LOOM_ARGS=${LOOM_ARGS:---kv-f16}
PEER_ARGS=${PEER_ARGS---threads 1}
[ $# -gt 0 ] || set -- tiny small

for t in "$LLAMA_DECODE" "$PEER"; do
  [ -x "$t" ] || { echo "compare: $t is missing (build loom; run bench/peer/setup.sh)" >&2; exit 2; }
done
mkdir -p "$OUT"

# A model's shape flags for llama-decode. small: a few times tiny, every
# width a multiple of 256 so the k-quants need no fallback.
shape() {
  case $1 in
    tiny | 1b | 7b) echo "--config $1" ;;
    small) echo "--config tiny --dim 512 --layers 8 --heads 8 --kv-heads 4 --ffn 1536 --vocab 4096 --max-seq 128" ;;
    *) echo "compare: unknown model $1 (tiny, small, 1b, 7b)" >&2; return 1 ;;
  esac
}

# Field $2 of "label: values" line $1 of a file.
field() { sed -n "s/^$2: *//p" "$1" | head -n 1; }
# Word $2 (from 1) of the words $1.
nth() { echo "$1" | tr ' ' '\n' | sed -n "${2}p"; }

status=0
for model in "$@"; do
  flags=$(shape "$model") || exit 2
  f16=$OUT/$model-f16.gguf
  # shellcheck disable=SC2086
  "$LLAMA_DECODE" $flags --f16 --write-gguf "$f16" > "$OUT/$model-write.log" 2>&1 ||
    { cat "$OUT/$model-write.log" >&2; exit 2; }
  for type in $TYPES; do
    file=$OUT/$model-$type.gguf
    if [ "$type" != f16 ]; then
      # shellcheck disable=SC2086
      "$PEER" quantize "$f16" "$file" "$type" > "$OUT/$model-$type-quantize.log" 2>&1 ||
        { cat "$OUT/$model-$type-quantize.log" >&2; exit 2; }
    fi
    peer_log=$OUT/$model-$type-peer.log loom_log=$OUT/$model-$type-loom.log
    # shellcheck disable=SC2086
    "$PEER" tokens "$file" --prompt-ids "$PROMPT" --steps "$STEPS" $PEER_ARGS > "$peer_log" 2>&1 ||
      { cat "$peer_log" >&2; exit 2; }
    peer_tokens=$(field "$peer_log" tokens)
    peer_second=$(field "$peer_log" second)
    peer_margins=$(field "$peer_log" margins)
    peer_on=$(sed -n 's/^llama\.cpp [^ ]* on \(.*\): llama .*/\1/p' "$peer_log" | head -n 1)
    # shellcheck disable=SC2086
    if ! "$LLAMA_DECODE" --model "$file" $LOOM_ARGS --prompt-ids "$PROMPT" --steps "$STEPS" --quiet --json \
        > "$loom_log" 2>&1; then
      echo "$model $type: loom cannot run it: $(grep -m1 'llama-decode' "$loom_log")"
      continue
    fi
    loom_on=$(sed -n 's/^llama-decode on \([^:]*\): .*/\1/p' "$loom_log" | head -n 1)
    loom_tokens=$(tail -n 1 "$loom_log" | sed -n 's/.*"tokens":\[\([0-9,]*\)\].*/\1/p' | tr ',' ' ')
    # The first step where they differ, if any, and llama.cpp's smallest margin.
    i=1 diff=0 min_i=1
    for p in $peer_tokens; do
      l=$(nth "$loom_tokens" "$i")
      [ "$p" = "$l" ] || { diff=$i; break; }
      awk "BEGIN { exit !($(nth "$peer_margins" "$i") < $(nth "$peer_margins" "$min_i")) }" && min_i=$i
      i=$((i + 1))
    done
    where="loom on $loom_on, llama.cpp on $peer_on"
    if [ "$diff" = 0 ]; then
      echo "$model $type: match, $STEPS of $STEPS tokens; llama.cpp's smallest margin $(nth "$peer_margins" "$min_i")" \
           "(step $((min_i - 1))) ($where)"
    else
      l=$(nth "$loom_tokens" "$diff") p=$(nth "$peer_tokens" "$diff") s=$(nth "$peer_second" "$diff")
      tie=""
      [ "$l" = "$s" ] && tie=", loom's token is llama.cpp's runner-up: a near tie"
      echo "$model $type: differ at step $((diff - 1)) of $STEPS: loom $l, llama.cpp $p (llama.cpp's margin" \
           "$(nth "$peer_margins" "$diff") over $s$tie) ($where)"
      status=1
    fi
  done
done
exit $status
