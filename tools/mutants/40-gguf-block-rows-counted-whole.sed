#file models/llama/gguf.c
# The reader checks that a block-typed tensor's element count, not each of
# its rows, is whole blocks: rows that split a block pass.
s/^    if (t->dims\[0\] % block)$/    if (n % block)/
