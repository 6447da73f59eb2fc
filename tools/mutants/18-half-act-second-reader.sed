#file passes/stage.c
# The FFN output goes to f16 although a second node reads it (as f32).
s/if (found != LOOM_NONE || pass_writes(g, nd, y)/if (pass_writes(g, nd, y)/
