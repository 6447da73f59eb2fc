# Installing: the install test (tests/install/run.sh) installs into a
# temporary prefix and builds a frontend against it with find_package and
# with pkg-config, shared and static, plus the README's example; the symbol
# test checks that the shared library exports the public API only. Not in
# sanitizer builds, whose library needs the sanitizer runtime loaded first.
if(TARGET loom_runtime AND NOT LOOM_SANITIZE)
  add_test(NAME install_consumer COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/install/run.sh ${CMAKE_BINARY_DIR}
                                         ${PROJECT_SOURCE_DIR})
  set_tests_properties(install_consumer PROPERTIES RESOURCE_LOCK gpu ENVIRONMENT "LOOM_VALIDATE=1")
  add_test(NAME install_symbols COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/install/symbols.sh $<TARGET_FILE:loom_shared>)
endif()
