# Runs `llama-decode --dry-run --config 1b --json` (no Vulkan device) and
# checks the JSON object on its last line: it parses, names the config, and
# its figures are sane for the 1b shape. The dry run plans awaited edges as
# a device allowing them gets them: barriers and awaited edges together
# cover the dependency bound, and the text says how many of each; with
# LOOM_TAGS=0 every dependency is a barrier. Invoked as
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
foreach(key dispatches_per_token barriers barriers_per_token barrier_lower_bound levels_per_layer weight_bytes
            arena_bytes layers awaited)
  string(JSON ${key} GET "${last}" ${key})
endforeach()
if(NOT out MATCHES "dependencies per token: ${barriers} barriers, ${awaited} awaited\n")
  message(FATAL_ERROR "no 'dependencies per token: ${barriers} barriers, ${awaited} awaited' line:\n${out}")
endif()
# f16 weights have the tagged forms: each layer's FFN -> down and
# attention -> o-projection are awaited.
if(awaited LESS 32)
  message(FATAL_ERROR "${awaited} awaited edges, want at least 2 a layer (32)")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env LOOM_TAGS=0 ${DECODE} --dry-run --config 1b --json
                RESULT_VARIABLE rc OUTPUT_VARIABLE off ERROR_VARIABLE err)
string(STRIP "${off}" off)
string(REGEX REPLACE ".*\n" "" off "${off}")
string(JSON off_awaited GET "${off}" awaited)
string(JSON off_barriers GET "${off}" barriers)
math(EXPR both "${barriers} + ${awaited}")
if(NOT rc EQUAL 0 OR NOT off_awaited EQUAL 0 OR NOT off_barriers EQUAL both)
  message(FATAL_ERROR "LOOM_TAGS=0 (${rc}): ${off_barriers} barriers and ${off_awaited} awaited, want ${both} and 0")
endif()
# 16 layers of 2048-wide f16 matrices: 1.95 GB of layer weights, plus the
# 32000 x 2048 LM head and one embedding row.
if(weight_bytes LESS 2000000000 OR weight_bytes GREATER 2200000000)
  message(FATAL_ERROR "weight_bytes ${weight_bytes} is not about 2.08 GB")
endif()
if(NOT layers EQUAL 16 OR dispatches_per_token LESS 16 OR both LESS barrier_lower_bound)
  message(FATAL_ERROR "implausible plan: ${dispatches_per_token} dispatches, ${barriers_per_token} barriers, "
                      "lower bound ${barrier_lower_bound}")
endif()
if(levels_per_layer LESS 1 OR levels_per_layer GREATER 30 OR arena_bytes LESS 1)
  message(FATAL_ERROR "implausible plan: ${levels_per_layer} levels per layer, arena ${arena_bytes} bytes")
endif()
message(STATUS "dry run 1b: ${dispatches_per_token} dispatches, ${barriers_per_token} barriers, ${awaited} awaited "
               "(bound ${barrier_lower_bound}), ${levels_per_layer} levels per layer, ${weight_bytes} weight bytes")
