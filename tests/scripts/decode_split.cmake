# Weights split into row blocks change nothing a frontend sees:
#  - `llama-decode --config tiny --ffn 256` generates the same tokens with a
#    64 KiB binding limit forced through LOOM_MAX_BINDING_RANGE (LM head,
#    embedding, q/k/o/down and gate/up projections all split) as without;
#  - the device-free dry run of the 1b shape with a Llama-3 vocabulary
#    (128256) at Vulkan's guaranteed 128 MiB splits the LM head and the
#    embedding, and reads the same weight bytes per token.
# Invoked as  cmake -DDECODE=<llama-decode> -P decode_split.cmake
include(${CMAKE_CURRENT_LIST_DIR}/last_json.cmake)

set(tiny ${DECODE} --config tiny --ffn 256 --steps 12 --quiet --json)
last_json(whole ${CMAKE_COMMAND} -E env LOOM_MAX_BINDING_RANGE=0 ${tiny})
last_json(split ${CMAKE_COMMAND} -E env LOOM_MAX_BINDING_RANGE=65536 ${tiny})
string(JSON whole_tokens GET "${whole}" tokens)
string(JSON split_tokens GET "${split}" tokens)
string(JSON whole_split GET "${whole}" split_nodes)
string(JSON split_split GET "${split}" split_nodes)
if(NOT whole_split EQUAL 0 OR split_split LESS 10)
  message(FATAL_ERROR "split nodes: ${whole_split} without a limit, ${split_split} with 64 KiB (want 0 and >= 10)")
endif()
if(NOT whole_tokens STREQUAL split_tokens)
  message(FATAL_ERROR "tokens differ: ${whole_tokens} whole, ${split_tokens} split")
endif()
message(STATUS "tiny, 64 KiB bindings: ${split_split} nodes split, tokens ${split_tokens} as unsplit")

set(dry ${DECODE} --dry-run --config 1b --vocab 128256 --json)
last_json(whole ${dry})
last_json(split ${dry} --max-binding-range 134217728)
foreach(key split_nodes weight_bytes dispatches)
  string(JSON whole_${key} GET "${whole}" ${key})
  string(JSON split_${key} GET "${split}" ${key})
endforeach()
# The LM head (525 MB of f16) and the embedding table: 4 row blocks each.
if(NOT whole_split_nodes EQUAL 0 OR NOT split_split_nodes EQUAL 2 OR NOT whole_weight_bytes EQUAL split_weight_bytes)
  message(FATAL_ERROR "1b vocab 128256 at 128 MiB: ${split_split_nodes} nodes split (want 2), weight bytes "
                      "${split_weight_bytes} vs ${whole_weight_bytes}")
endif()
# LM head: 4 blocks + ARGMAX for the one fused dispatch; the token's log,
# which the whole plan folds into that dispatch, a dispatch of its own
# after the split ARGMAX; and the embedding, which the whole plan folds into
# the first q/k/v dispatch, also a dispatch of its own (a table above the
# limit is not fused).
math(EXPR extra "${split_dispatches} - ${whole_dispatches}")
if(NOT extra EQUAL 6)
  message(FATAL_ERROR "1b vocab 128256 at 128 MiB: ${extra} more dispatches, want 6 (LM head: 4 blocks + ARGMAX; "
                      "the token's log and the embedding unfused)")
endif()
message(STATUS "1b vocab 128256 at 128 MiB: LM head and embedding split, ${split_dispatches} dispatches")
