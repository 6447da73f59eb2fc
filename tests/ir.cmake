# Tests of the IR module: the Check suite, a replay of the fuzz corpus
# through the fuzz target (so every build exercises it without libFuzzer),
# and `loom dump` against a golden file. Run as a script (cmake -P), this
# file is also the comparison step of that last test.
if(CMAKE_SCRIPT_MODE_FILE)
  execute_process(COMMAND ${LOOM} dump ${IN} --format ${FORMAT} OUTPUT_VARIABLE got RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "loom dump ${IN} exited with ${rc}")
  endif()
  file(READ ${EXPECT} want)
  if(NOT got STREQUAL want)
    message(FATAL_ERROR "loom dump ${IN} differs from ${EXPECT}:\n${got}")
  endif()
  return()
endif()

loom_test(test_ir SOURCES test_ir.c LIBS loom_ir)

add_executable(fuzz_json_replay ${PROJECT_SOURCE_DIR}/fuzz/fuzz_json.c ${PROJECT_SOURCE_DIR}/fuzz/replay.c)
target_link_libraries(fuzz_json_replay PRIVATE loom_ir)
add_test(NAME ir_fuzz_corpus COMMAND fuzz_json_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-corpus)

foreach(fmt text json)
  if(fmt STREQUAL "text")
    set(ext txt)
  else()
    set(ext ${fmt})
  endif()
  add_test(NAME ir_cli_dump_${fmt}
           COMMAND ${CMAKE_COMMAND} -DLOOM=$<TARGET_FILE:loom> -DFORMAT=${fmt}
                   -DIN=${CMAKE_CURRENT_SOURCE_DIR}/golden/scheduled.json
                   -DEXPECT=${CMAKE_CURRENT_SOURCE_DIR}/golden/scheduled.${ext}
                   -P ${CMAKE_CURRENT_LIST_FILE})
endforeach()
add_test(NAME ir_cli_dump_missing COMMAND loom dump ${CMAKE_CURRENT_SOURCE_DIR}/golden/no-such-file.json)
add_test(NAME ir_cli_dump_bad_format
         COMMAND loom dump ${CMAKE_CURRENT_SOURCE_DIR}/golden/scheduled.json --format svg)
set_tests_properties(ir_cli_dump_missing ir_cli_dump_bad_format PROPERTIES WILL_FAIL TRUE)
