# The example model end to end on the GPU: GPU vs CPU reference, optimized vs
# unoptimized plans, cache reuse, GPU-chained tokens; validation-clean.
if(TARGET loom_llama)
  loom_test(test_llama SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_llama.c LIBS loom_llama GPU)
endif()
