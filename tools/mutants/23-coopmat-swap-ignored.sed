#file passes/coopmat.c
# The split pass leaves the tiled matmul forms where the device has
# cooperative matrices.
s/rc = pass_rename_nodes(g, "split", to_coop, ctx, \&count);/rc = LOOM_OK; (void)to_coop;/
