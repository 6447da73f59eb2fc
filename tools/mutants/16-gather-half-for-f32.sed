#file passes/gather.c
# Half shares asked for are given to an f32 projection too (which has no
# half form).
s/^    half &= f16;$/    (void)0;/
