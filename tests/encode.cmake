# Suite "encode": the node records kept from capture for the canonical
# encoding, their rebuild after edits, and the plan cache's piecewise key.
if(TARGET loom_compiler)
  loom_test(test_encode SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_encode.c LIBS loom_compiler)
endif()
