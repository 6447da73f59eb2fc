#file passes/stage.c
# The narrow attention (gather's) is given to half activations too, as the
# wide one's f16-output kernel.
s/if (writer \&\& nd->op == LOOM_OP_ATTENTION \&\& loom_form_has(k, "TPR=32u")) {/if (writer \&\& nd->op == LOOM_OP_ATTENTION) {/
s/return loom_form_variant(k, "ATT_O16", NULL);/return "attention_wide_o16";/
