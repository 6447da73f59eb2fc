#file passes/fuse.c
# Bug 3 again: chain members move across sentinels and non-reorderable nodes.
s/if (loom_node_is_fence(kn) || loom_nodes_conflict/if ((0 \&\& loom_node_is_fence(kn)) || loom_nodes_conflict/
