#file passes/coopmat.c
# The split pass leaves the tiled matmul forms where the device has
# cooperative matrices.
s/loom_result rc = pass_rename_nodes(g, "split", to_coop, ctx, \&count);/loom_result rc = LOOM_OK; (void)to_coop;/
