#file passes/coopmat.c
# A producer's vector goes as f16 whatever reads it (readers that have no
# f16 form of x, or read a part of it).
s/if (nr == 64 || repl\[d\] != d || !half_reader(g, d, \&y))/if (nr == 64 || repl[d] != d || (!half_reader(g, d, \&y) \&\& 0))/
