#file ir/op_table.c
# Every op kind is treated as reorderable (SOFTMAX, ATTENTION included).
s/return (unsigned)op < LOOM_OP_COUNT \&\& rows\[op\].reorderable;/return (unsigned)op < LOOM_OP_COUNT;/
