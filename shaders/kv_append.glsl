// KV_APPEND: row step_params.pos of both caches = k, v. A position past the
// cache writes nothing (the graph declares the whole caches written). With
// KV_KH the caches are f16 and each value is rounded to f16 as it is stored.
// KV_ROWS (a T-token step): k and v are T x dim, and row t < params.rows
// goes to cache row pos + t; padding rows write nothing.
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
#ifdef KV_ROWS
layout(push_constant) uniform Pc { uint dim; uint max_seq; uint T; } pc;
#else
layout(push_constant) uniform Pc { uint dim; uint max_seq; } pc;
#endif
void main()
{
    uint i = gl_GlobalInvocationID.x;
#ifdef KV_ROWS
    uint t = i / pc.dim, src = i;
    i -= t * pc.dim;
    if (t >= min(pc.T, step_params.rows))
        return;
    uint pos = step_params.pos + t;
#else
    uint pos = step_params.pos, src = i;
    if (i >= pc.dim)
        return;
#endif
    if (pos >= pc.max_seq)
        return;
    kcache[pos * pc.dim + i] = CACHE_T(k[src]);
    vcache[pos * pc.dim + i] = CACHE_T(v[src]);
}
