#file passes/coopmat.c
# A vector passes as f16 to readers whose rows of x are not whole 16-byte
# chunks of halves (their MM_X16 form would read across rows).
s/!loom_binding_same(x, y) || loom_op_args_of(g, i, \&pc) || pc.cols % 8)/!loom_binding_same(x, y) || loom_op_args_of(g, i, \&pc))/
