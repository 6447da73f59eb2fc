# Bad input at the public API (tests/test_api.c): NULLs, kernel layouts,
# unknown kernels, ranges against bindings, wrapped messages, device loss,
# the thread-local error slot and one plan replayed from two threads.
if(TARGET loom_runtime)
  loom_test(test_api SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_api.c
            LIBS loom_runtime loom_compiler loom_passes loom_ir Threads::Threads GPU)
endif()
