#file passes/stage.c
# The narrow attention (gather's) is given to half activations too.
s/{ LOOM_OP_ATTENTION, "out", "attention_wide", "attention_wide_o16" }/{ LOOM_OP_ATTENTION, "out", "attention", "attention_wide_o16" }/
