# `llama-decode --model` on a GGUF file of the tiny model in WTYPE (written
# by `test_gguf --write-model`, each matrix in the dtype `--wtype WTYPE`
# gives it, quantized from the same draws), as a user runs it. Invoked as
#   cmake -DDECODE=<llama-decode> -DMODEL=<file.gguf> -DWTYPE=<type> -P decode_gguf.cmake
# - the dry run describes the file's model, not the default one: config
#   "gguf", the file's context (64), layers, per-tensor types, weight bytes
#   and plan, as the synthetic `--config tiny --wtype WTYPE` has them;
# - --max-seq lowers the context; raising it past the file's is a usage
#   error naming the flag, and so is --wtype with --model;
# - the file's model decodes the tokens the synthetic one does: the same
#   weights, bit for bit (24 steps: q and k rows left in the file's RoPE
#   order part the sequences by the twelfth).
include(${CMAKE_CURRENT_LIST_DIR}/last_json.cmake)

last_json(file ${DECODE} --model ${MODEL} --dry-run --json)
last_json(synth ${DECODE} --config tiny --wtype ${WTYPE} --dry-run --json)
foreach(key config max_seq layers weight_types weight_bytes levels_per_layer dispatches barriers)
  string(JSON f_${key} GET "${file}" ${key})
  string(JSON s_${key} GET "${synth}" ${key})
endforeach()
if(NOT f_config STREQUAL "gguf" OR NOT f_max_seq EQUAL 64 OR NOT f_layers EQUAL 4)
  message(FATAL_ERROR "the dry run does not describe the file: config ${f_config}, context ${f_max_seq}, "
                      "${f_layers} layers\n${file}")
endif()
foreach(key weight_types weight_bytes levels_per_layer dispatches barriers)
  if(NOT "${f_${key}}" STREQUAL "${s_${key}}")
    message(FATAL_ERROR "${key}: the file's model has '${f_${key}}', --wtype ${WTYPE} '${s_${key}}'")
  endif()
endforeach()

last_json(low ${DECODE} --model ${MODEL} --max-seq 32 --dry-run --json)
string(JSON low_max_seq GET "${low}" max_seq)
if(NOT low_max_seq EQUAL 32)
  message(FATAL_ERROR "--max-seq 32 gave a context of ${low_max_seq}")
endif()
foreach(bad "--max-seq;65" "--wtype;q4_0" "--f16")
  execute_process(COMMAND ${DECODE} --model ${MODEL} ${bad} --dry-run RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  list(GET bad 0 flag)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "${flag}")
    message(FATAL_ERROR "--model with ${bad}: exit ${rc}, not a usage error naming ${flag}: ${err}")
  endif()
endforeach()

last_json(ft ${DECODE} --model ${MODEL} --kv-f32 --steps 24 --quiet --json)
last_json(st ${DECODE} --config tiny --wtype ${WTYPE} --steps 24 --quiet --json)
string(JSON f_tokens GET "${ft}" tokens)
string(JSON s_tokens GET "${st}" tokens)
if(NOT f_tokens STREQUAL s_tokens)
  message(FATAL_ERROR "the file decodes ${f_tokens}, --wtype ${WTYPE} ${s_tokens}")
endif()
message(STATUS "${MODEL}: ${f_weight_types}; ${f_weight_bytes} weight bytes; tokens ${f_tokens}")
