#file passes/access.c
# The hazard query behind reorder forgets write-after-read.
/scan(s, s->rhead\[wr\[i\].buffer\], &wr\[i\], false, &max);/d
