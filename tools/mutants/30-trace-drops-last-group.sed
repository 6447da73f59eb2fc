#file runtime/trace.c
# The trace writer leaves each step's last group span out of the file.
s/^    for (uint32_t g = 0; g < gr->n; g++) {$/    for (uint32_t g = 0; g + 1 < gr->n; g++) {/
