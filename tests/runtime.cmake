# The Vulkan runtime: plans of small run-time-compiled kernels on the default
# device under the validation layer (GPU: LOOM_VALIDATE=1), results checked
# on the host, zero validation messages required.
if(TARGET loom_runtime)
  loom_test(test_runtime SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_runtime.c LIBS loom_runtime loom_ir GPU)
  if(LOOM_PROBES)   # the probe's test runs where the runtime has it
    target_compile_definitions(test_runtime PRIVATE LOOM_PROBES=1)
  endif()
endif()

# runtime/ has no call circles: every reference between its files points to
# a lower layer of the list in runtime/internal.h.
if(TARGET loom_runtime)
  add_test(NAME runtime_layers
           COMMAND ${CMAKE_COMMAND} -DNM=${CMAKE_NM} -DLIB=$<TARGET_FILE:loom_runtime>
                   -DHEADER=${PROJECT_SOURCE_DIR}/runtime/internal.h -P ${CMAKE_CURRENT_SOURCE_DIR}/scripts/runtime_layers.cmake)
endif()
