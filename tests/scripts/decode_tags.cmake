# Tagged vectors (shaders/tag.glsl) end to end, without the validation
# layer (it cannot see a poll; under it the runtime keeps every barrier, and
# the decode_check_* tests run the tagged kernels that way):
#  - by default the tiny f16 model's four down projections poll the gated
#    FFN's output and its four o-projections the attention's (waiting for
#    all of it first): 8 barriers a token fewer, 8 polled, and every step
#    agrees with the CPU reference (llama-decode --check fails otherwise),
#    with f16 and f32 KV caches, without the stage pass (no float atomics:
#    the plain residual-add kernels), at rows that are not a multiple
#    of 8 and with the wide attention of head_dim 128 (Q4_K_M);
#  - LOOM_TAGS=keep runs the same kernels with every barrier, LOOM_TAGS=0
#    the plain kernels: both poll nothing, and all three give the same
#    tokens;
#  - f32 weights have no tagged forms: nothing polled;
#  - the run reports the device rule's verdict and the polls that gave up
#    (awaited_edges, poll_timeouts: what bench/load_check.sh judges a run
#    by), and a poll that gives up (LOOM_PROBE_DROP_TAG, test builds) fails
#    the run with the count still printed, a poll of f32 words and one of
#    tagged int8 quads (Q4_K_M: the down projection reading the gated FFN's
#    output).
# lavapipe runs one dispatch after another, so this checks the words, the
# tags and the plan, not the overlap; the GPU's --check does that.
# Invoked as  cmake -DDECODE=<llama-decode> -DPROBES=<LOOM_PROBES> -P decode_tags.cmake
include(${CMAKE_CURRENT_LIST_DIR}/last_json.cmake)

function(expect json key want what)
  string(JSON got GET "${json}" ${key})
  if(NOT got EQUAL want)
    message(FATAL_ERROR "${what}: ${key} ${got}, want ${want}")
  endif()
endfunction()

set(env ${CMAKE_COMMAND} -E env --unset=LOOM_VALIDATE)
set(tiny ${DECODE} --config tiny --f16 --kv-f16 --steps 24 --check --quiet --json)
# Rows of 684 and 60 (not a multiple of 8): the down projection and the
# o-projection read their tagged x two words at a time, and the attention's
# head_dim of 12 takes the 16-bit path.
set(awkward --dim 64 --heads 5 --kv-heads 1 --head-dim 12 --ffn 684)
# A default run: k steps in flight, ENV settings, OPTS; POLLED (default 8)
# polled a token, as many barriers fewer than the bound, and no mismatch.
# OUT gets the JSON.
function(polled_run out k)
  cmake_parse_arguments(R "" "POLLED" "ENV;OPTS" ${ARGN})
  if(NOT R_POLLED)
    set(R_POLLED 8)
  endif()
  last_json(json ${env} --unset=LOOM_TAGS ${R_ENV} ${tiny} --in-flight ${k} ${R_OPTS})
  string(JSON b GET "${json}" barrier_lower_bound)
  math(EXPR want "${b} - ${R_POLLED}")
  set(what "default, ${k} in flight ${R_ENV} ${R_OPTS}")
  expect("${json}" polled_per_token ${R_POLLED} "${what}")
  expect("${json}" barriers_per_token ${want} "${what}")
  expect("${json}" mismatches 0 "${what}")
  expect("${json}" poll_timeouts 0 "${what}")
  string(JSON awaited GET "${json}" awaited_edges)
  if(NOT awaited)
    message(FATAL_ERROR "${what}: awaited_edges ${awaited} on a CPU device")
  endif()
  set(${out} "${json}" PARENT_SCOPE)
endfunction()
polled_run(json 1)
polled_run(polled 3)
polled_run(json 1 OPTS --kv-f32)
polled_run(json 3 ENV LOOM_ATOMIC_FLOAT=0)
polled_run(json 1 OPTS ${awkward})
# head_dim 128: the wide attention (TPR 32) on its tagged form, behind it
# a block-typed o-projection (passes/awaits.c: not an f16 one).
polled_run(json 3 OPTS --dim 256 --heads 2 --kv-heads 1 --head-dim 128 --wtype q4_k_m --ffn 768)
# Block-typed (Q4_K_M; rows of the down projection whole blocks): the gated
# FFN's output goes to the down projection as tagged int8 quads (MV_YQT,
# MV_XQT), polled as the f32 words are.
set(quads --wtype q4_k_m --ffn 768)
polled_run(json 1 OPTS ${quads})
polled_run(json 3 OPTS ${quads})
string(JSON bound GET "${polled}" barrier_lower_bound)
string(JSON tokens GET "${polled}" tokens)
foreach(mode keep 0)
  last_json(other ${env} LOOM_TAGS=${mode} ${tiny})
  expect("${other}" polled_per_token 0 "LOOM_TAGS=${mode}")
  expect("${other}" barriers_per_token ${bound} "LOOM_TAGS=${mode}")
  string(JSON awaited GET "${other}" awaited_edges)
  if((mode STREQUAL "0" AND awaited) OR (mode STREQUAL "keep" AND NOT awaited))
    message(FATAL_ERROR "LOOM_TAGS=${mode}: awaited_edges ${awaited}")
  endif()
  string(JSON other_tokens GET "${other}" tokens)
  if(NOT other_tokens STREQUAL tokens)
    message(FATAL_ERROR "LOOM_TAGS=${mode}: tokens ${other_tokens}, polled ${tokens}")
  endif()
endforeach()
if(PROBES)
  execute_process(COMMAND ${env} --unset=LOOM_TAGS LOOM_PROBE_DROP_TAG=1 ${tiny} --in-flight 1
                  RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT text MATCHES "\nawaited edges: on \\([^\n]*\\); 1 poll timeouts\n")
    message(FATAL_ERROR "a poll that gave up: exit ${rc}, want 1 and one poll timeout reported:\n${text}${err}")
  endif()
  # The second tagged producer: layer 0's gated FFN, whose down projection
  # polls quads.
  execute_process(COMMAND ${env} --unset=LOOM_TAGS LOOM_PROBE_DROP_TAG=2 ${tiny} --in-flight 1 ${quads}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT text MATCHES "\nawaited edges: on \\([^\n]*\\); 1 poll timeouts\n")
    message(FATAL_ERROR "a poll of quads that gave up: exit ${rc}, want 1 and one poll timeout reported:\n${text}${err}")
  endif()
endif()
# LOOM_ENABLE=qkv_await: the attention polls q/k/v's tagged output too
# (q, then the step's k and v rows) in every layer but the first (whose
# q/k/v also writes the embedding row): 3 more polled a token, 3 barriers
# fewer, no mismatch; narrow and wide attention (head_dim 128, 40 steps
# over shares of the cache), f16 and f32 caches. A dropped q/k/v tag (the
# third tagged producer: layer 1's q/k/v) is a poll that gives up.
set(qkv ENV LOOM_ENABLE=qkv_await POLLED 11)
polled_run(json 3 ${qkv})
polled_run(json 1 ${qkv} OPTS --kv-f32 ${awkward})
polled_run(json 3 ${qkv} OPTS --dim 256 --heads 2 --kv-heads 1 --head-dim 128 --wtype q4_k_m --ffn 768 --max-seq 256
           --steps 40)
if(PROBES)
  execute_process(COMMAND ${env} --unset=LOOM_TAGS LOOM_ENABLE=qkv_await LOOM_PROBE_DROP_TAG=3 ${tiny} --in-flight 1
                  RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT text MATCHES "\nawaited edges: on \\([^\n]*\\); 1 poll timeouts\n")
    message(FATAL_ERROR "a poll of q/k/v that gave up: exit ${rc}, want 1 and one poll timeout reported:\n${text}${err}")
  endif()
endif()
# LOOM_ENABLE=counts: block-typed residual projections count their
# workgroups (tag.glsl, "Counted edges"): each layer's gated FFN waits on
# its o-projection's count, the next layer's q/k/v on the down
# projection's, and the down projection reads the o-projection's y after
# the same count: 2L - 1 = 7 more polled a token on 4 layers (q/k/v fold
# the staged norm at head_dim 64), as many barriers fewer, the tokens of
# the run without, with the integer forms and without (LOOM_INT_DOT=0). A
# counting producer that counts nothing (the second producer: layer 0's
# o-projection) is a wait that gives up.
set(counted --dim 256 --heads 4 --kv-heads 2 --head-dim 64 --ffn 512 --wtype q4_k_m)
polled_run(plain 3 OPTS ${counted})
polled_run(json 3 ENV LOOM_ENABLE=counts POLLED 15 OPTS ${counted})
string(JSON plain_tokens GET "${plain}" tokens)
string(JSON counted_tokens GET "${json}" tokens)
if(NOT plain_tokens STREQUAL counted_tokens)
  message(FATAL_ERROR "LOOM_ENABLE=counts: tokens ${counted_tokens}, without ${plain_tokens}")
endif()
polled_run(json 1 ENV LOOM_ENABLE=counts LOOM_INT_DOT=0 POLLED 15 OPTS ${counted} --kv-f32)
if(PROBES)
  execute_process(COMMAND ${env} --unset=LOOM_TAGS LOOM_ENABLE=counts LOOM_PROBE_DROP_TAG=2 ${tiny} --in-flight 1
                  ${counted} RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT text MATCHES "\nawaited edges: on \\([^\n]*\\); 1 poll timeouts\n")
    message(FATAL_ERROR "a counted wait that gave up: exit ${rc}, want 1 and one poll timeout reported:\n${text}${err}")
  endif()
endif()
last_json(f32 ${env} --unset=LOOM_TAGS ${DECODE} --config tiny --f32 --steps 4 --check --quiet --json)
expect("${f32}" polled_per_token 0 "f32 weights")
message(STATUS "tiny f16: 8 polled a token, tokens ${tokens} with and without")
