#file passes/lifetimes.c
# Arena packing frees a buffer's bytes one epoch early (in its last epoch).
s/while (nh \&\& v\[heap\[0\]\].last < b->first)/while (nh \&\& v[heap[0]].last <= b->first)/
