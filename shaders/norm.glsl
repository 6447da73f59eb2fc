// RMS_NORM and its fused forms, one workgroup over the whole vector:
//   NORM_ADD: s = a + b is stored to sum, then normalised;
//   NORM_MUL: the result is scaled elementwise by w;
//   NORM_ROWS: x and y are T x n, a workgroup a row (w one row for all);
//   NORM_Y16 (with NORM_ROWS, NORM_MUL): y is stored as f16 pairs (n even),
//     for a cooperative-matrix reader, which rounds it so anyway.
// Each invocation touches the same indices in both passes, so y may replace
// x/a/b and sum may replace a/b: nothing is written before its own read.
// sum is read-write in the shader (it re-reads its own stores) but written
// only, as far as the graph is concerned.
#define WG_SIZE 256u
layout(local_size_x = 256) in;
#ifdef NORM_ROWS
layout(push_constant) uniform Pc { uint n; float eps; uint T; } pc;
#else
layout(push_constant) uniform Pc { uint n; float eps; } pc;
#endif

#ifdef NORM_ADD
layout(set = 0, binding = 0) readonly buffer A { float a[]; };
layout(set = 0, binding = 1) readonly buffer B { float b[]; };
#ifdef NORM_MUL
layout(set = 0, binding = 2) readonly buffer W { float w[]; };
layout(set = 0, binding = 3) buffer S { float sum[]; };
layout(set = 0, binding = 4) writeonly buffer Y { float y[]; };
#else
layout(set = 0, binding = 2) buffer S { float sum[]; };
layout(set = 0, binding = 3) writeonly buffer Y { float y[]; };
#endif
#else
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
#ifdef NORM_MUL
layout(set = 0, binding = 1) readonly buffer W { float w[]; };
#ifdef NORM_Y16
layout(set = 0, binding = 2) writeonly buffer Y { uint yh[]; };
#else
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };
#endif
#else
layout(set = 0, binding = 1) writeonly buffer Y { float y[]; };
#endif
#endif

#include "reduce.glsl"

void main()
{
    uint t = gl_LocalInvocationID.x;
#ifdef NORM_ROWS
    uint off = gl_WorkGroupID.x * pc.n;
#else
    const uint off = 0u;
#endif
    float ss = 0.0;
    for (uint i = t; i < pc.n; i += WG_SIZE) {
#ifdef NORM_ADD
        float v = a[i] + b[i];
        sum[i] = v;
#else
        float v = x[off + i];
#endif
        ss += v * v;
    }
    float r = inversesqrt(wg_reduce_sum(ss) / float(pc.n) + pc.eps);
#ifdef NORM_Y16
    for (uint i = 2u * t; i < pc.n; i += 2u * WG_SIZE)
        yh[(off + i) >> 1u] = packHalf2x16(vec2(x[off + i] * r * w[i], x[off + i + 1u] * r * w[i + 1u]));
#else
    for (uint i = t; i < pc.n; i += WG_SIZE) {
#ifdef NORM_ADD
        float v = sum[i] * r;
#else
        float v = x[off + i] * r;
#endif
#ifdef NORM_MUL
        v *= w[i];
#endif
        y[off + i] = v;
    }
#endif
}
