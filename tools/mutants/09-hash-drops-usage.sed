#file ir/encode.c
# The canonical encoding (the plan cache's key) leaves out a buffer's usage.
s/p = st32(p, b->usage);/p = st32(p, 0);/
