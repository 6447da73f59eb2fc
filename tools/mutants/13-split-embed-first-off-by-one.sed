#file passes/split.c
# The EMBED nodes after the first claim their token range one row early: the
# boundary token is written twice, and every token of a later node reads the
# row after its own.
s/loom_op_embed_blocks(s->g, t, n, (uint32_t)first, /loom_op_embed_blocks(s->g, t, n, (uint32_t)(first ? first - 1 : 0), /
