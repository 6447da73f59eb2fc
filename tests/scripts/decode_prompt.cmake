# `llama-decode --prompt-ids` end to end (prefill by decode steps), under the
# validation layer. Invoked as
#   cmake -DDECODE=<llama-decode> -P decode_prompt.cmake
# - --token T and --prompt-ids T generate the same tokens;
# - generation goes on from the last prompt id's argmax: feeding the first
#   generated token as one more prompt id gives the rest of the sequence;
# - an id outside the vocabulary is a usage error (exit 2) naming the id.

# Runs llama-decode with ARGN --json --quiet; sets <prefix>_tokens and
# <prefix>_prompt (CMake lists) from the JSON object on the last line.
function(decode prefix)
  execute_process(COMMAND ${DECODE} ${ARGN} --json --quiet RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "llama-decode ${ARGN} failed (${rc}): ${err}${out}")
  endif()
  string(STRIP "${out}" out)
  string(REGEX REPLACE ".*\n" "" last "${out}")
  foreach(key tokens prompt)
    string(JSON n ERROR_VARIABLE jerr LENGTH "${last}" ${key})
    if(jerr)
      message(FATAL_ERROR "llama-decode ${ARGN}: no '${key}' in the JSON line: ${jerr}\n${last}")
    endif()
    set(list "")
    if(n GREATER 0)
      math(EXPR end "${n} - 1")
      foreach(i RANGE ${end})
        string(JSON v GET "${last}" ${key} ${i})
        list(APPEND list ${v})
      endforeach()
    endif()
    set(${prefix}_${key} "${list}" PARENT_SCOPE)
  endforeach()
endfunction()

decode(tok --token 5 --steps 4)
decode(one --prompt-ids 5 --steps 4)
if(NOT tok_tokens STREQUAL one_tokens OR NOT one_prompt STREQUAL "5")
  message(FATAL_ERROR "--token 5 gave ${tok_tokens}, --prompt-ids 5 gave ${one_tokens} (prompt ${one_prompt})")
endif()

decode(a --prompt-ids 5,17,300,2 --steps 3)
list(LENGTH a_tokens n)
if(NOT n EQUAL 3 OR NOT a_prompt STREQUAL "5;17;300;2")
  message(FATAL_ERROR "--prompt-ids 5,17,300,2 --steps 3: tokens ${a_tokens}, prompt ${a_prompt}")
endif()
list(GET a_tokens 0 g1)
decode(b --prompt-ids 5,17,300,2,${g1} --steps 2)
list(SUBLIST a_tokens 1 2 rest)
if(NOT b_tokens STREQUAL rest)
  message(FATAL_ERROR "prompt 5,17,300,2 generated ${a_tokens}, but prompt 5,17,300,2,${g1} generated "
                      "${b_tokens} instead of ${rest}")
endif()

# Prefill in multi-token steps generates what prefill by decode steps does.
set(p40 "5,17,300,2,9,11,480,77,3,250,6,199,41,8,123,64,500,1,33,270,13,90,402,7,15,311,29,2,88,150,460,19,5,240,71,333,4,99,210,47")
decode(by --prompt-ids ${p40} --steps 6 --prefill-by-decode)
foreach(ch 7 16 512)
  decode(ch${ch} --prompt-ids ${p40} --steps 6 --prefill-chunk ${ch})
  if(NOT ch${ch}_tokens STREQUAL by_tokens)
    message(FATAL_ERROR "40 ids prefilled in steps of ${ch} generated ${ch${ch}_tokens}, by decode steps "
                        "${by_tokens}")
  endif()
endforeach()
foreach(bad 0 513 x)
  execute_process(COMMAND ${DECODE} --prompt-ids 5,17 --prefill-chunk ${bad} RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "prefill-chunk")
    message(FATAL_ERROR "--prefill-chunk ${bad} exited ${rc}, not 2 (usage) naming the flag: ${err}")
  endif()
endforeach()

foreach(bad "5,512" "5,,2" "x" "")
  execute_process(COMMAND ${DECODE} --prompt-ids "${bad}" --steps 2 RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 2)
    message(FATAL_ERROR "--prompt-ids '${bad}' exited ${rc}, not 2 (usage): ${err}")
  endif()
endforeach()
execute_process(COMMAND ${DECODE} --prompt-ids 5,512 --steps 2 RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT err MATCHES "512")
  message(FATAL_ERROR "the error for id 512 does not name it: ${err}")
endif()
message(STATUS "prompt 5,17,300,2 -> ${a_tokens}; --token and one-id prompt agree: ${tok_tokens}")
