#file passes/fuse.c
# An eliminated intermediate is not checked for readers outside the chain.
s/if (!(e->lo < hi \&\& lo < e->hi) || in_chain(m, e->node))/if (1 || in_chain(m, e->node))/
