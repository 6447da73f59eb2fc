#file passes/fuse.c
# Bugs 1 and 9 again: the fused node may read what the chain wrote.
s/    if (reads_chain_writes(fs, m))/    if (0 \&\& reads_chain_writes(fs, m))/
