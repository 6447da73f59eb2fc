# Suites "passes" (unit + property) and "compiler" (compile, plan cache).
if(TARGET loom_compiler)
  loom_test(test_passes SOURCES test_passes.c LIBS loom_passes)
  loom_test(test_passes_property SOURCES test_passes_property.c LIBS loom_compiler)
  loom_test(test_compiler SOURCES test_compiler.c LIBS loom_compiler)
endif()
