#version 450
#extension GL_GOOGLE_include_directive : require
// SOFTMAX over n elements in one workgroup: max, then sum of exp(x - max),
// then the scaled write. y may replace x: every read precedes the barriers
// that come before the first write.
#define WG_SIZE 256u
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Pc { uint n; } pc;
#include "reduce.glsl"
void main()
{
    uint t = gl_LocalInvocationID.x;
    float m = -3.402823466e38;
    for (uint i = t; i < pc.n; i += WG_SIZE)
        m = max(m, x[i]);
    m = wg_reduce_max(m);
    float l = 0.0;
    for (uint i = t; i < pc.n; i += WG_SIZE)
        l += exp(x[i] - m);
    float inv = 1.0 / wg_reduce_sum(l);
    for (uint i = t; i < pc.n; i += WG_SIZE)
        y[i] = exp(x[i] - m) * inv;
}
