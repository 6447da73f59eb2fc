# The loom tool's conventions (tests/cli/run.sh): help, exit codes, options.
add_test(NAME cli_conventions COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/run.sh $<TARGET_FILE:loom> ${PROJECT_SOURCE_DIR})
