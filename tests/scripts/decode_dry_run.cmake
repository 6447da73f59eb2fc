# Runs `llama-decode --dry-run --config 1b --json` (no Vulkan device) and
# checks the JSON object on its last line: it parses, names the config, and
# its figures are sane for the 1b shape. Invoked as
#   cmake -DDECODE=<llama-decode> -P decode_dry_run.cmake
execute_process(COMMAND ${DECODE} --dry-run --config 1b --json RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "llama-decode --dry-run failed (${rc}): ${err}${out}")
endif()
string(STRIP "${out}" out)
string(REGEX REPLACE ".*\n" "" last "${out}")
string(JSON config ERROR_VARIABLE jerr GET "${last}" config)
if(jerr)
  message(FATAL_ERROR "last line is not the JSON object: ${jerr}\n${last}")
endif()
if(NOT config STREQUAL "1b")
  message(FATAL_ERROR "config is '${config}', not 1b")
endif()
foreach(key dispatches_per_token barriers_per_token barrier_lower_bound levels_per_layer weight_bytes
            arena_bytes layers)
  string(JSON ${key} GET "${last}" ${key})
endforeach()
# 16 layers of 2048-wide f16 matrices: 1.95 GB of layer weights, plus the
# 32000 x 2048 LM head and one embedding row.
if(weight_bytes LESS 2000000000 OR weight_bytes GREATER 2200000000)
  message(FATAL_ERROR "weight_bytes ${weight_bytes} is not about 2.08 GB")
endif()
if(NOT layers EQUAL 16 OR dispatches_per_token LESS 16 OR barriers_per_token LESS barrier_lower_bound)
  message(FATAL_ERROR "implausible plan: ${dispatches_per_token} dispatches, ${barriers_per_token} barriers, "
                      "lower bound ${barrier_lower_bound}")
endif()
if(levels_per_layer LESS 1 OR levels_per_layer GREATER 30 OR arena_bytes LESS 1)
  message(FATAL_ERROR "implausible plan: ${levels_per_layer} levels per layer, arena ${arena_bytes} bytes")
endif()
message(STATUS "dry run 1b: ${dispatches_per_token} dispatches, ${barriers_per_token} barriers "
               "(bound ${barrier_lower_bound}), ${levels_per_layer} levels per layer, ${weight_bytes} weight bytes")
