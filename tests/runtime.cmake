# The Vulkan runtime: plans of small run-time-compiled kernels on the default
# device under the validation layer (GPU: LOOM_VALIDATE=1), results checked
# on the host, zero validation messages required.
if(TARGET loom_runtime)
  loom_test(test_runtime SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_runtime.c LIBS loom_runtime loom_ir GPU)
endif()
