#file passes/fuse.c
# Bug 3 again: chain members move across sentinels and non-reorderable nodes.
s/if (is_fence(kn) || loom_nodes_conflict/if ((0 \&\& is_fence(kn)) || loom_nodes_conflict/
