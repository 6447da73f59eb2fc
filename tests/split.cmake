# Weights larger than one binding: every matvec form, an unfused LM head and
# EMBED on a runtime with a small forced binding limit (row blocks from the
# split pass) against the CPU reference and the unsplit run, under the
# validation layer; limits below one row block fail with LOOM_LIMIT.
if(TARGET loom_runtime AND TARGET loom_ref AND TARGET loom_compiler)
  loom_test(test_split SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_split.c
            LIBS loom_runtime loom_compiler loom_ref loom_ir m GPU)
endif()
