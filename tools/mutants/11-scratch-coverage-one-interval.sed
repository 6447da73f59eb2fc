#file passes/lifetimes.c
# Bug 4 again: a read counts as covered only inside the first written piece.
s/    return l > 0 \&\& hi <= b->cov\[2 \* (l - 1) + 1\];/    return l == 1 \&\& hi <= b->cov[1];/
