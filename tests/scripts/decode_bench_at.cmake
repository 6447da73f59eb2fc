# `llama-decode --bench-prefill N --bench-at P` times rows P .. P + N - 1
# after the P ids before them were prefilled: the token its time-to-first-
# token step generates (the decode step after the timed rows) is the second
# token a plain run of the same P + N prompt ids generates, for the
# prefill form and the verification form alike. The same 3 rows timed at
# position 0 give another token (77, not 61). This small model's token does
# not depend on the context's ids (other contexts before the same 3 ids
# give 61 too), so leaving the context's cache rows unwritten is not seen
# here. Invoked as cmake -DDECODE=<llama-decode> -P decode_bench_at.cmake

set(small --config tiny --dim 64 --heads 4 --kv-heads 2 --ffn 96 --vocab 128 --layers 2 --json --quiet)
set(ids 3,8,13,18,23,28,33,38,43,48,53,58,63,68,73,78,83,88,93,98,103,108,113)

include(${CMAKE_CURRENT_LIST_DIR}/last_json.cmake)

last_json(run ${DECODE} ${small} --prompt-ids ${ids} --steps 2)
string(JSON want GET "${run}" tokens 1)
foreach(form "" --verify)
  last_json(bench ${DECODE} ${small} --prompt-ids ${ids} --bench-prefill 3 --bench-at 20 ${form})
  string(JSON at GET "${bench}" at)
  string(JSON got GET "${bench}" first_token)
  if(NOT at EQUAL 20 OR NOT got EQUAL want)
    message(FATAL_ERROR "--bench-prefill 3 --bench-at 20 ${form}: at ${at}, first token ${got}; the plain run's "
                        "second token is ${want}")
  endif()
endforeach()
