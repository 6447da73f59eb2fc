# The loom tool's conventions (tests/cli/run.sh): help, exit codes, options.
add_test(NAME cli_conventions COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/run.sh $<TARGET_FILE:loom> ${PROJECT_SOURCE_DIR})

# `loom info` says which plan the chosen device gets and why (runtime/
# device.c: rt_awaits_rule). CI's device is lavapipe, a CPU device: awaited
# edges allowed; LOOM_TAGS=0 turns them off by name. Its subgroups (8 or 16
# wide) take the block-typed forms.
if(TARGET loom_runtime)
  add_test(NAME info_awaited_edges COMMAND $<TARGET_FILE:loom> info)
  set_tests_properties(info_awaited_edges PROPERTIES RESOURCE_LOCK gpu
    PASS_REGULAR_EXPRESSION "awaited edges: +(yes: (NVIDIA|a CPU device)|no \\(barrier plan\\): launch order)")
  add_test(NAME info_block_weights COMMAND $<TARGET_FILE:loom> info)
  set_tests_properties(info_block_weights PROPERTIES RESOURCE_LOCK gpu
    PASS_REGULAR_EXPRESSION "subgroup size +([1-9]|[12][0-9]|3[0-2]) \\(block-typed weights: yes\\)")
  add_test(NAME info_awaited_edges_off COMMAND $<TARGET_FILE:loom> info)
  set_tests_properties(info_awaited_edges_off PROPERTIES RESOURCE_LOCK gpu ENVIRONMENT "LOOM_TAGS=0"
    PASS_REGULAR_EXPRESSION "awaited edges: +no \\(barrier plan\\): LOOM_TAGS=0")
  # One wave as a 132-SM card has it (LOOM_WAVE_GROUPS; lavapipe tells no
  # SM count): the argmax cap and the waves pass's threshold.
  add_test(NAME info_one_wave COMMAND $<TARGET_FILE:loom> info)
  set_tests_properties(info_one_wave PROPERTIES RESOURCE_LOCK gpu ENVIRONMENT "LOOM_WAVE_GROUPS=528"
    PASS_REGULAR_EXPRESSION "one wave +528 workgroups [^\n]*\n[^\n]*residual projection of more than 132\n[^\n]*\n[^\n]*Q6_K Wv of more than 264 ")
endif()
