#file ir/graph.c
# Every op kind is treated as reorderable (SOFTMAX, ATTENTION included).
s/return (unsigned)op < LOOM_OP_COUNT \&\& op_table\[op\].reorderable;/return (unsigned)op < LOOM_OP_COUNT;/
