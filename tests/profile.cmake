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
