#file passes/lifetimes.c
# Scratch buffers no node touches are packed like live ones: each takes
# bytes of its own at the top of the arena.
s/if (info\[i\].first == LOOM_NONE) {/if (info[i].first == LOOM_NONE \&\& 0) {/
