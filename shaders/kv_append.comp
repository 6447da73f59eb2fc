#version 450
#extension GL_GOOGLE_include_directive : require
// KV_APPEND: row step_params.pos of both caches = k, v. A position past the
// cache writes nothing (the graph declares the whole caches written).
layout(local_size_x = 256) in;
#include "params.glsl"
layout(set = 0, binding = 1) readonly buffer K { float k[]; };
layout(set = 0, binding = 2) readonly buffer V { float v[]; };
layout(set = 0, binding = 3) writeonly buffer KC { float kcache[]; };
layout(set = 0, binding = 4) writeonly buffer VC { float vcache[]; };
layout(push_constant) uniform Pc { uint dim; uint max_seq; } pc;
void main()
{
    uint i = gl_GlobalInvocationID.x;
    uint pos = step_params.pos;
    if (i >= pc.dim || pos >= pc.max_seq)
        return;
    kcache[pos * pc.dim + i] = k[i];
    vcache[pos * pc.dim + i] = v[i];
}
