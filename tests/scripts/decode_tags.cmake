# Tagged vectors (shaders/tag.glsl) end to end, without the validation
# layer (it cannot see a poll; under it the runtime keeps every barrier, and
# the decode_check_* tests run the tagged kernels that way):
#  - by default the tiny f16 model's four down projections poll the gated
#    FFN's output and its four o-projections the attention's (waiting for
#    all of it first): 8 barriers a token fewer, 8 polled, and every step
#    agrees with the CPU reference (llama-decode --check fails otherwise),
#    with f16 and f32 KV caches, without the stage pass (no float atomics:
#    the plain residual-add kernels) and at rows that are not a multiple
#    of 8;
#  - LOOM_TAGS=keep runs the same kernels with every barrier, LOOM_TAGS=0
#    the plain kernels: both poll nothing, and all three give the same
#    tokens;
#  - f32 weights have no tagged forms: nothing polled.
# lavapipe runs one dispatch after another, so this checks the words, the
# tags and the plan, not the overlap; the GPU's --check does that.
# Invoked as  cmake -DDECODE=<llama-decode> -P decode_tags.cmake
function(run_json out)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ARGN} failed (${rc}): ${err}${text}")
  endif()
  string(STRIP "${text}" text)
  string(REGEX REPLACE ".*\n" "" last "${text}")
  set(${out} "${last}" PARENT_SCOPE)
endfunction()

function(expect json key want what)
  string(JSON got GET "${json}" ${key})
  if(NOT got EQUAL want)
    message(FATAL_ERROR "${what}: ${key} ${got}, want ${want}")
  endif()
endfunction()

set(env ${CMAKE_COMMAND} -E env --unset=LOOM_VALIDATE)
set(tiny ${DECODE} --config tiny --f16 --kv-f16 --steps 24 --check --quiet --json)
# The last: rows of 684 and 60 (not a multiple of 8): the down projection
# and the o-projection read their tagged x two words at a time, and the
# attention's head_dim of 12 takes the 16-bit path.
set(awkward --dim 64 --heads 5 --kv-heads 1 --head-dim 12 --ffn 684)
foreach(run "1" "3" "1;--kv-f32" "3;LOOM_ATOMIC_FLOAT=0" "1;${awkward}")
  list(GET run 0 k)
  set(extra ${run})
  list(REMOVE_AT extra 0)
  set(opts "")
  set(vars "")
  foreach(x ${extra})
    if(x MATCHES "=")
      list(APPEND vars ${x})
    else()
      list(APPEND opts ${x})
    endif()
  endforeach()
  run_json(json ${env} --unset=LOOM_TAGS ${vars} ${tiny} --in-flight ${k} ${opts})
  string(JSON b GET "${json}" barrier_lower_bound)
  math(EXPR want "${b} - 8")
  expect("${json}" polled_per_token 8 "default, ${run}")
  expect("${json}" barriers_per_token ${want} "default, ${run}")
  expect("${json}" mismatches 0 "default, ${run}")
  if(run STREQUAL "3")
    set(polled "${json}")
    set(bound ${b})
  endif()
endforeach()
string(JSON tokens GET "${polled}" tokens)
foreach(mode keep 0)
  run_json(other ${env} LOOM_TAGS=${mode} ${tiny})
  expect("${other}" polled_per_token 0 "LOOM_TAGS=${mode}")
  expect("${other}" barriers_per_token ${bound} "LOOM_TAGS=${mode}")
  string(JSON other_tokens GET "${other}" tokens)
  if(NOT other_tokens STREQUAL tokens)
    message(FATAL_ERROR "LOOM_TAGS=${mode}: tokens ${other_tokens}, polled ${tokens}")
  endif()
endforeach()
run_json(f32 ${env} --unset=LOOM_TAGS ${DECODE} --config tiny --f32 --steps 4 --check --quiet --json)
expect("${f32}" polled_per_token 0 "f32 weights")
message(STATUS "tiny f16: 8 polled a token, tokens ${tokens} with and without")
