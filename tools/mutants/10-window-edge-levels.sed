#file passes/reorder.c
# Bug 7 again: each window levelled from scratch, the open epoch forgotten.
s/        uint32_t l = pass_accset_max_tag(&s->acc, g, nd);/        uint32_t l = pass_accset_max_tag(\&s->acc, g, nd); l = l ? l : 1;/
