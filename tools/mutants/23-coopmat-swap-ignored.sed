#file passes/coopmat.c
# The split pass leaves the tiled matmul forms where the device has
# cooperative matrices.
s/return ctx \&\& ctx->coopmat ? pass_rename_nodes/return ctx \&\& 0 ? pass_rename_nodes/
