# Runs `llama-decode --dry-run --config 1b --json` for f16 and for each
# block type (and the Q4_K_M mix, whose Wv and down projections are Q6_K in
# some layers) and checks that every type's plan fuses as f16's does: the
# same dispatches and barriers a token. The fuse pass once read a matrix's
# type from its bytes, which no block type matches (and in which Q4_0 and
# Q4_K agree), and left those chains unfused. Invoked as
#   cmake -DDECODE=<llama-decode> -P decode_dry_run_types.cmake
function(plan_of wtype out_disp out_bar)
  execute_process(COMMAND ${DECODE} --dry-run --config 1b --wtype ${wtype} --json RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "llama-decode --dry-run --wtype ${wtype} failed (${rc}): ${err}${out}")
  endif()
  string(STRIP "${out}" out)
  string(REGEX REPLACE ".*\n" "" last "${out}")
  string(JSON d GET "${last}" dispatches_per_token)
  string(JSON b GET "${last}" barriers_per_token)
  set(${out_disp} ${d} PARENT_SCOPE)
  set(${out_bar} ${b} PARENT_SCOPE)
endfunction()
plan_of(f16 d16 b16)
foreach(t q8_0 q4_0 q4_k q6_k q4_k_m)
  plan_of(${t} d b)
  if(NOT d EQUAL d16 OR NOT b EQUAL b16)
    message(FATAL_ERROR "${t}: ${d} dispatches and ${b} barriers a token, f16 ${d16} and ${b16}")
  endif()
endforeach()
message(STATUS "every weight type plans as f16: ${d16} dispatches, ${b16} barriers a token")
