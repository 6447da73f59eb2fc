#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
// KV_APPEND into f16 caches: kv_append.comp, each value rounded to f16.
layout(local_size_x = 256) in;
#include "params.glsl"
layout(set = 0, binding = 1) readonly buffer K { float k[]; };
layout(set = 0, binding = 2) readonly buffer V { float v[]; };
layout(set = 0, binding = 3) writeonly buffer KC { float16_t kcache[]; };
layout(set = 0, binding = 4) writeonly buffer VC { float16_t vcache[]; };
layout(push_constant) uniform Pc { uint dim; uint max_seq; } pc;
void main()
{
    uint i = gl_GlobalInvocationID.x;
    uint pos = step_params.pos;
    if (i >= pc.dim || pos >= pc.max_seq)
        return;
    kcache[pos * pc.dim + i] = float16_t(k[i]);
    vcache[pos * pc.dim + i] = float16_t(v[i]);
}
