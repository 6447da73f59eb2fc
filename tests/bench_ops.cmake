# `loom bench ops --isolated`, cold and --hot, one quick pass each on the
# default device under the validation layer; and --hot alone refused as a
# usage error. `loom bench occupancy --quick` too: each row's workgroups
# counted in and out again (an unbalanced count or none fails the run).
if(TARGET loom AND TARGET loom_runtime)
  set(bench_ops_env "LOOM_VALIDATE=1")
  if(LOOM_SANITIZE)
    list(APPEND bench_ops_env "ASAN_OPTIONS=detect_leaks=0")
  endif()
  add_test(NAME bench_ops_isolated_quick COMMAND $<TARGET_FILE:loom> bench ops --quick --isolated)
  add_test(NAME bench_ops_isolated_hot_quick COMMAND $<TARGET_FILE:loom> bench ops --quick --isolated --hot)
  foreach(t bench_ops_isolated_quick bench_ops_isolated_hot_quick)
    set_tests_properties(${t} PROPERTIES ENVIRONMENT "${bench_ops_env}" RESOURCE_LOCK gpu
                         FAIL_REGULAR_EXPRESSION "failed:")
  endforeach()
  add_test(NAME bench_occupancy_quick COMMAND $<TARGET_FILE:loom> bench occupancy --quick)
  set_tests_properties(bench_occupancy_quick PROPERTIES ENVIRONMENT "${bench_ops_env}" RESOURCE_LOCK gpu
                       FAIL_REGULAR_EXPRESSION "loom bench occupancy:")
  add_test(NAME bench_ops_hot_needs_isolated COMMAND $<TARGET_FILE:loom> bench ops --quick --hot)
  set_tests_properties(bench_ops_hot_needs_isolated PROPERTIES PASS_REGULAR_EXPRESSION "--hot goes with --isolated")
endif()
