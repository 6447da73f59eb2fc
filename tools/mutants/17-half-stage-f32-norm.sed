#file passes/stage.c
# A norm with f32 weights no longer keeps its producer's t in f32: it would
# be handed a t16 kernel it has no form of.
s/s\.st\[s\.prod\[i\]\]\.t16 &= pass_weight_dtype(g, nd) != LOOM_F32;/(void)0;/
