#file passes/coopmat.c
# The narrow form taken at every T of the multi-column form, 2 and 4 token
# rows too (where it reads slower than the multi-column form).
s/ || pc->T < LOOM_MATMUL_NARROW_FROM_T//
