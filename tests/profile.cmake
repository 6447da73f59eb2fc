# Profiling and tracing: the group profile of compiled plans, and the trace
# file read back as strict JSON and checked as a Chrome trace (GPU: under
# the validation layer). With the example decoder built, its capture and
# compile spans are checked too.
if(TARGET loom_runtime)
  set(profile_libs loom_runtime loom_ir)
  if(TARGET loom_llama)
    list(PREPEND profile_libs loom_llama)
  endif()
  loom_test(test_profile SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_profile.c LIBS ${profile_libs} m GPU)
  if(TARGET loom_llama)
    target_compile_definitions(test_profile PRIVATE LOOM_TEST_LLAMA)
  endif()
endif()
# One quick pass of the profiling-cost benchmark, every variant, validated.
if(TARGET loom AND TARGET loom_llama)
  add_test(NAME bench_profile_quick COMMAND $<TARGET_FILE:loom> bench profile --config tiny --layers 1 --quick
           --trace-file ${CMAKE_CURRENT_BINARY_DIR}/bench_profile_quick.json)
  set(bench_env "LOOM_VALIDATE=1")
  if(LOOM_SANITIZE)
    list(APPEND bench_env "ASAN_OPTIONS=detect_leaks=0")
  endif()
  set_tests_properties(bench_profile_quick PROPERTIES ENVIRONMENT "${bench_env}" RESOURCE_LOCK gpu)
endif()
