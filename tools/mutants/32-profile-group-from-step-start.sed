#file runtime/profile.c
# A group's time is counted from the step's start, not from the end of the
# group before it.
s/p->group_ticks\[g\] += t\[q\] - t\[prev\];/p->group_ticks[g] += t[q] - t[0];/
