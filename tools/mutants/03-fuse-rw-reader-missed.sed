#file passes/fuse.c
# Bug 2 again: a node that reads and rewrites the intermediate is no reader.
s/e->node <= next_cover))/e->node < next_cover))/
