// ARGMAX: out[0] = index of the largest of n elements, lowest index on
// ties, in one workgroup. ARGMAX_ROWS: the same for each row t < T of a
// T x n matrix, workgroup t writing out[t]. Each invocation scans its elements (t, t + 256,
// ...) in ascending order, UNROLL loads issued together per round so the
// scan is n / (256 * UNROLL) round trips, not n / 256; then pairs combine
// in a tree. UINT_MAX marks "no element yet".
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) writeonly buffer Out { uint result[]; };
#ifdef ARGMAX_ROWS
layout(push_constant) uniform Pc { uint n; uint T; } pc;
#else
layout(push_constant) uniform Pc { uint n; } pc;
#endif
const uint NONE = 0xffffffffu;
#define UNROLL 8u
shared float best_v[256];
shared uint best_i[256];

bool better(float v, uint i, float bv, uint bi)
{
    return i != NONE && (bi == NONE || v > bv || (v == bv && i < bi));
}

void main()
{
    uint t = gl_LocalInvocationID.x;
#ifdef ARGMAX_ROWS
    uint row = gl_WorkGroupID.x, off = row * pc.n;
#else
    const uint row = 0u, off = 0u;
#endif
    float bv = 0.0;
    uint bi = NONE;
    for (uint base = t; base < pc.n; base += 256u * UNROLL) {
        float v[UNROLL];
        for (uint j = 0u; j < UNROLL; j++) {
            uint i = base + j * 256u;
            v[j] = i < pc.n ? x[off + i] : 0.0;
        }
        for (uint j = 0u; j < UNROLL; j++) {
            uint i = base + j * 256u;
            if (i < pc.n && better(v[j], i, bv, bi)) {
                bv = v[j];
                bi = i;
            }
        }
    }
    best_v[t] = bv;
    best_i[t] = bi;
    memoryBarrierShared();
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1u) {
        if (t < s && better(best_v[t + s], best_i[t + s], best_v[t], best_i[t])) {
            best_v[t] = best_v[t + s];
            best_i[t] = best_i[t + s];
        }
        memoryBarrierShared();
        barrier();
    }
    if (t == 0u)
        result[row] = best_i[0];
}
