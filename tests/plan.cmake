# Compile-and-cache on the device: hits record nothing, changes miss, forced
# collisions and in-flight eviction are safe, the frontend loop is stable.
if(TARGET loom_runtime)
  loom_test(test_plan SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_plan.c LIBS loom_runtime loom_compiler loom_ir m GPU)
endif()
