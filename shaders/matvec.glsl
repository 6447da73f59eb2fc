// MATVEC and its fused forms: y[row] = W[row] . x, one subgroup per row,
// ROWS_PER_WG rows per workgroup (the subgroups of a workgroup take its rows
// in turn, so any subgroup size works and rows never straddle subgroups).
// Weights stream in 16-byte loads (8 halves or 4 floats), four loads in
// flight per lane, accumulated in f32 and summed with subgroupAdd — no
// shared memory, no barriers. Rows whose length is not a multiple of the
// vector width take the scalar path. Variants:
//   MV_F16  weights are f16 pairs packed in u32 (no 16-bit storage needed);
//   MV_ADD  y = W x + r, r read by the same invocation that writes y;
//   MV_SILU y = silu(Wg x) * (Wu x), the two rows streamed side by side.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x = 256) in;
const uint ROWS_PER_WG = 8u;  // ir/ops.c: MATVEC_ROWS_PER_WG
layout(push_constant) uniform Pc { uint rows; uint cols; } pc;

#ifdef MV_F16
#define WVEC uvec4
#define WSCALAR uint
#else
#define WVEC vec4
#define WSCALAR float
#endif

layout(set = 0, binding = 0) readonly buffer Wv { WVEC w4[]; };
layout(set = 0, binding = 0) readonly buffer Ws { WSCALAR w1[]; };
#ifdef MV_SILU
layout(set = 0, binding = 1) readonly buffer Uv { WVEC u4[]; };
layout(set = 0, binding = 1) readonly buffer Us { WSCALAR u1[]; };
#define B_X 2
#define B_Y 3
#elif defined(MV_ADD)
#define B_X 1
#define B_R 2
#define B_Y 3
#else
#define B_X 1
#define B_Y 2
#endif
layout(set = 0, binding = B_X) readonly buffer Xv { vec4 x4[]; };
layout(set = 0, binding = B_X) readonly buffer Xs { float x1[]; };
#ifdef MV_ADD
layout(set = 0, binding = B_R) readonly buffer R { float r[]; };
#endif
layout(set = 0, binding = B_Y) writeonly buffer Y { float y[]; };

#ifdef MV_F16
// Elements per vector load, and the dot product of one vector load with x.
#define VW 8u
float vdot(uvec4 w, uint i)
{
    return dot(vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)), x4[2u * i]) +
           dot(vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w)), x4[2u * i + 1u]);
}
#define SW 2u
float sdot(uint w, uint i)
{
    vec2 h = unpackHalf2x16(w);
    return h.x * x1[2u * i] + h.y * x1[2u * i + 1u];
}
#else
#define VW 4u
float vdot(vec4 w, uint i) { return dot(w, x4[i]); }
#define SW 1u
float sdot(float w, uint i) { return w * x1[i]; }
#endif

#define AT(arr, i) arr[base + (i)]

void main()
{
    uint lane = gl_SubgroupInvocationID, S = gl_SubgroupSize;
    for (uint sub = gl_SubgroupID; sub < ROWS_PER_WG; sub += gl_NumSubgroups) {
        uint row = gl_WorkGroupID.x * ROWS_PER_WG + sub;
        if (row >= pc.rows)
            break;  // uniform across the subgroup
        float acc = 0.0, accu = 0.0;
        if (pc.cols % VW == 0u) {
            uint n = pc.cols / VW, base = row * n, i = lane;
            // Four independent loads before any use keep enough bytes in
            // flight to cover memory latency.
            for (; i + 3u * S < n; i += 4u * S) {
                WVEC a0 = AT(w4, i), a1 = AT(w4, i + S), a2 = AT(w4, i + 2u * S), a3 = AT(w4, i + 3u * S);
#ifdef MV_SILU
                WVEC b0 = AT(u4, i), b1 = AT(u4, i + S), b2 = AT(u4, i + 2u * S), b3 = AT(u4, i + 3u * S);
                accu += (vdot(b0, i) + vdot(b1, i + S)) + (vdot(b2, i + 2u * S) + vdot(b3, i + 3u * S));
#endif
                acc += (vdot(a0, i) + vdot(a1, i + S)) + (vdot(a2, i + 2u * S) + vdot(a3, i + 3u * S));
            }
            for (; i < n; i += S) {
                acc += vdot(AT(w4, i), i);
#ifdef MV_SILU
                accu += vdot(AT(u4, i), i);
#endif
            }
        } else {
            uint n = pc.cols / SW, base = row * n;
            for (uint i = lane; i < n; i += S) {
                acc += sdot(AT(w1, i), i);
#ifdef MV_SILU
                accu += sdot(AT(u1, i), i);
#endif
            }
        }
        float s = subgroupAdd(acc);
#ifdef MV_SILU
        float u = subgroupAdd(accu);
        s = s / (1.0 + exp(-s)) * u;
#endif
        if (subgroupElect()) {
#ifdef MV_ADD
            s += r[row];
#endif
            y[row] = s;
        }
    }
}
