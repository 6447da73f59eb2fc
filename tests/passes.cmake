# Suites "passes" (unit + property) and "compiler" (compile, plan cache).
if(TARGET loom_compiler)
  loom_test(test_passes SOURCES test_passes.c LIBS loom_passes)
  loom_test(test_passes_property SOURCES test_passes_property.c LIBS loom_compiler)
  loom_test(test_compiler SOURCES test_compiler.c LIBS loom_compiler)
endif()
# The executable oracle: random frontend-built graphs run on the CPU with
# the reference ops, captured order against the plan (needs loom_ref).
if(TARGET loom_compiler AND TARGET loom_ref)
  loom_test(test_passes_oracle SOURCES test_passes_oracle.c LIBS loom_compiler loom_ref m)
  set_tests_properties(test_passes_oracle PROPERTIES LABELS passes)
endif()
# Planted bugs must die: tools/mutate.sh rebuilds a private copy of the
# sources once per mutant (incrementally, under build/mutants) and requires
# the pass suites to fail for each.
if(TARGET loom_compiler AND TARGET loom_ref AND NOT LOOM_SANITIZE)
  add_test(NAME mutants COMMAND sh ${PROJECT_SOURCE_DIR}/tools/mutate.sh ${CMAKE_BINARY_DIR}/mutants)
  set_tests_properties(mutants PROPERTIES LABELS mutants TIMEOUT 1800)
endif()
