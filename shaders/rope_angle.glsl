// RoPE's rotation of pair (v.x, v.y) = elements (i, i + head_dim/2) of a
// head at position pos: by pos * theta^(-2i/head_dim), the angle reduced to
// [-pi, pi] first (sin and cos are only specified to be accurate there).
// ROPE (rope.glsl) and the q/k/v forms' epilogues (mv_qkv.glsl, matmul.glsl)
// rotate through it.
vec2 rope_rotate(vec2 v, uint pos, uint i, uint head_dim, float theta)
{
    const float TWO_PI = 6.28318530717958647692;
    float freq = exp2(-2.0 * float(i) / float(head_dim) * log2(theta));
    float ang = float(pos) * freq;
    ang -= TWO_PI * floor(ang / TWO_PI + 0.5);
    float c = cos(ang), s = sin(ang);
    return vec2(v.x * c - v.y * s, v.x * s + v.y * c);
}
