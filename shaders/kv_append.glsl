// KV_APPEND: row step_params.pos of both caches = k, v. A position past the
// cache writes nothing (the graph declares the whole caches written). With
// KV_KH the caches are f16 and each value is rounded to f16 as it is stored.
#ifdef KV_KH
#extension GL_EXT_shader_16bit_storage : require
#define CACHE_T float16_t
#else
#define CACHE_T float
#endif
layout(local_size_x = 256) in;
#include "params.glsl"
layout(set = 0, binding = 1) readonly buffer K { float k[]; };
layout(set = 0, binding = 2) readonly buffer V { float v[]; };
layout(set = 0, binding = 3) writeonly buffer KC { CACHE_T kcache[]; };
layout(set = 0, binding = 4) writeonly buffer VC { CACHE_T vcache[]; };
layout(push_constant) uniform Pc { uint dim; uint max_seq; } pc;
void main()
{
    uint i = gl_GlobalInvocationID.x;
    uint pos = step_params.pos;
    if (i >= pc.dim || pos >= pc.max_seq)
        return;
    kcache[pos * pc.dim + i] = CACHE_T(k[i]);
    vcache[pos * pc.dim + i] = CACHE_T(v[i]);
}
