#file passes/split.c
# A row block of a gated matvec reads Wu's first rows for every block: the
# second matrix's offset does not advance with the block.
s/        bv\.u\.offset += r0 \* row_bytes;/        bv.u.offset += 0;/
