// ROPE at step_params.pos: one invocation per pair (i, i + head_dim/2) of a
// head, rotated by pos * theta^(-2i/head_dim) (rope_angle.glsl).
// ROPE_ROWS: the same over the T rows of a T x n_heads*head_dim matrix, row
// t at position pos + t.
layout(local_size_x = 256) in;
#include "params.glsl"
#include "rope_angle.glsl"
layout(set = 0, binding = 1) readonly buffer X { float x[]; };
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };
#ifdef ROPE_ROWS
layout(push_constant) uniform Pc { uint n_heads; uint head_dim; float theta; uint T; } pc;
#else
layout(push_constant) uniform Pc { uint n_heads; uint head_dim; float theta; } pc;
#endif

void main()
{
    uint half_dim = pc.head_dim / 2u;
    uint k = gl_GlobalInvocationID.x;
#ifdef ROPE_ROWS
    uint pairs = pc.n_heads * half_dim;
    if (k >= pairs * pc.T)
        return;
    uint row = k / pairs, pos = step_params.pos + row, base = row * pc.n_heads * pc.head_dim;
    k -= row * pairs;
#else
    if (k >= pc.n_heads * half_dim)
        return;
    uint pos = step_params.pos, base = 0u;
#endif
    uint h = k / half_dim, i = k % half_dim;
    uint a = base + h * pc.head_dim + i, b = a + half_dim;
    vec2 r = rope_rotate(vec2(x[a], x[b]), pos, i, pc.head_dim, pc.theta);
    y[a] = r.x;
    y[b] = r.y;
}
