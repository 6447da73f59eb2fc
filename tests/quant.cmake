# The host conversions of ir/quant.c (f16 and GGUF's block types): CPU only.
loom_test(test_quant SOURCES test_quant.c LIBS loom_ir m)
