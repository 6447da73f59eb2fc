#file passes/stage.c
# The producer stores t as int8 quads but its norms keep the f32 reading
# form: they would read the quads as floats.
s/e->tq ? "MV_PRE MV_XQ" : "MV_PRE"/e->tq ? "MV_PRE" : "MV_PRE"/
