#file runtime/trace.c
# GPU spans are written in ns where the trace format counts microseconds.
s/TID_GPU, b0 - origin, end - b0)/TID_GPU, (b0 - origin) * 1000, (end - b0) * 1000)/
s/TID_GPU, a - origin, b - a)/TID_GPU, (a - origin) * 1000, (b - a) * 1000)/
