# The op library: builder checks with no GPU, and every kernel against the
# CPU reference on the device (under the validation layer).
loom_test(test_ops_cpu SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_ops_cpu.c LIBS loom_ir)
if(TARGET loom_runtime AND TARGET loom_ref AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/test_ops.c)
  set(ops_libs loom_runtime loom_ref loom_ir m)
  if(TARGET loom_compiler)
    list(APPEND ops_libs loom_compiler)
  endif()
  loom_test(test_ops SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_ops.c LIBS ${ops_libs} GPU)
  if(TARGET loom_compiler)
    target_compile_definitions(test_ops PRIVATE LOOM_OPS_FUSE_TESTS=1)
  endif()
  # The block types' float kernels, which a device without integer dot
  # products takes (lavapipe has them, so test_ops runs the integer form).
  add_test(NAME test_ops_blocks_float COMMAND test_ops)
  set_tests_properties(test_ops_blocks_float PROPERTIES RESOURCE_LOCK gpu ENVIRONMENT
                       "CK_DEFAULT_TIMEOUT=600;LOOM_VALIDATE=1;LOOM_INT_DOT=0;CK_RUN_SUITE=ops;CK_RUN_CASE=blocks")
  # and the multi-column matmul forms' (their block types have an integer form too)
  add_test(NAME test_ops_matmul_float COMMAND test_ops)
  set_tests_properties(test_ops_matmul_float PROPERTIES RESOURCE_LOCK gpu ENVIRONMENT
                       "CK_DEFAULT_TIMEOUT=600;LOOM_VALIDATE=1;LOOM_INT_DOT=0;CK_RUN_SUITE=ops;CK_RUN_CASE=matmul")
endif()
