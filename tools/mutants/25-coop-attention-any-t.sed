#file passes/coopmat.c
# The prefill's attention takes its cooperative-matrix form whatever the
# queries a kv head: a verification step of 4 rows fills 16 of a
# workgroup's 64 query slots.
s/if (!hd || per_kv < LOOM_ATTN_ROWS_COOP_Q)/if (!hd || per_kv < 1)/
