// Workgroup-wide sum and max through shared memory, for kernels that run
// WG_SIZE invocations (a power of two). Every invocation must call these in
// uniform control flow; all of them get the result. The closing barrier
// lets the caller reuse the scratch (and publishes its own shared writes).
shared float red_scratch[WG_SIZE];

float wg_reduce_sum(float v)
{
    uint t = gl_LocalInvocationID.x;
    red_scratch[t] = v;
    memoryBarrierShared();
    barrier();
    for (uint s = WG_SIZE / 2u; s > 0u; s >>= 1u) {
        if (t < s)
            red_scratch[t] += red_scratch[t + s];
        memoryBarrierShared();
        barrier();
    }
    float r = red_scratch[0];
    barrier();
    return r;
}

float wg_reduce_max(float v)
{
    uint t = gl_LocalInvocationID.x;
    red_scratch[t] = v;
    memoryBarrierShared();
    barrier();
    for (uint s = WG_SIZE / 2u; s > 0u; s >>= 1u) {
        if (t < s)
            red_scratch[t] = max(red_scratch[t], red_scratch[t + s]);
        memoryBarrierShared();
        barrier();
    }
    float r = red_scratch[0];
    barrier();
    return r;
}
