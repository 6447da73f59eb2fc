// ROPE at step_params.pos: one invocation per pair (i, i + head_dim/2) of a
// head, rotated by pos * theta^(-2i/head_dim). The angle is reduced to
// [-pi, pi] first: sin and cos are only specified to be accurate there.
// ROPE_ROWS: the same over the T rows of a T x n_heads*head_dim matrix, row
// t at position pos + t.
layout(local_size_x = 256) in;
#include "params.glsl"
layout(set = 0, binding = 1) readonly buffer X { float x[]; };
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };
#ifdef ROPE_ROWS
layout(push_constant) uniform Pc { uint n_heads; uint head_dim; float theta; uint T; } pc;
#else
layout(push_constant) uniform Pc { uint n_heads; uint head_dim; float theta; } pc;
#endif

const float TWO_PI = 6.28318530717958647692;

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
    float freq = exp2(-2.0 * float(i) / float(pc.head_dim) * log2(pc.theta));
    float ang = float(pos) * freq;
    ang -= TWO_PI * floor(ang / TWO_PI + 0.5);
    float c = cos(ang), s = sin(ang);
    uint a = base + h * pc.head_dim + i, b = a + half_dim;
    float x0 = x[a], x1 = x[b];
    y[a] = x0 * c - x1 * s;
    y[b] = x0 * s + x1 * c;
}
