# Suite "gguf": the GGUF reader and llama loader on files the test writes
# itself (the decode cases run on the device), and a replay of the GGUF fuzz
# corpus through the fuzz target, reader and loader both.
if(TARGET loom_llama)
  loom_test(test_gguf SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_gguf.c LIBS loom_llama GPU)

  add_executable(fuzz_gguf_replay ${PROJECT_SOURCE_DIR}/fuzz/fuzz_gguf.c ${PROJECT_SOURCE_DIR}/fuzz/replay.c)
  target_compile_definitions(fuzz_gguf_replay PRIVATE LOOM_FUZZ_GGUF_LLAMA=1)
  target_link_libraries(fuzz_gguf_replay PRIVATE loom_llama)
  add_test(NAME gguf_fuzz_corpus COMMAND fuzz_gguf_replay ${CMAKE_CURRENT_SOURCE_DIR}/gguf-corpus)
endif()

# The default-config model as GGUF files in the build tree, for frontends'
# tests: add FIXTURES_REQUIRED gguf_models and read tests/tiny-<type>.gguf
# under the build directory (the block types and q4_k_m as --wtype makes
# them: each matrix in its own dtype, ffn_down in f16).
if(TARGET loom_llama)
  foreach(t f32 f16 bf16 q8_0 q4_0 q4_k q6_k q4_k_m)
    add_test(NAME gguf_write_tiny_${t} COMMAND test_gguf --write-model ${CMAKE_CURRENT_BINARY_DIR}/tiny-${t}.gguf ${t})
    set_tests_properties(gguf_write_tiny_${t} PROPERTIES FIXTURES_SETUP gguf_models)
  endforeach()
endif()
