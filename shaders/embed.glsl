// out = table[token_buf[token_index]] for one row of dim elements; a token
// outside the vocabulary gives zeros rather than reading out of bounds.
// The table's type is the form's (forms.def): f32, f16 read as packed pairs
// (dim is even, so a row starts on a pair; no 16-bit storage needed), or a
// block type (quant.glsl; dim is whole blocks), an invocation decoding the
// chunk of 8 that holds its element.
// EMBED_ROWS (a T-token step): out row t = the table's row of tokens[pos +
// t], zeros for rows t >= params.rows; the table's rows are its binding's.
// EMBED_BLOCKS: the table is up to seven row blocks, one binding each; the
// node covers tokens [first, first + vocab) of a table of total rows and
// writes nothing for another node's tokens, zeros for a token past the
// table when it holds the table's last rows.
layout(local_size_x = 256) in;
#if defined(MV_Q8_0) || defined(MV_Q4_0) || defined(MV_Q4_K) || defined(MV_Q6_K)
#define EMB_Q
#endif
#if defined(MV_F16) || defined(EMB_Q)
#define TABLE_WORD uint
#else
#define TABLE_WORD float
#endif

#ifdef EMBED_BLOCKS
#define TABLE_BLOCK(k) \
    layout(set = 0, binding = k) readonly buffer Table##k { TABLE_WORD t##k[]; };
TABLE_BLOCK(0)
TABLE_BLOCK(1)
TABLE_BLOCK(2)
TABLE_BLOCK(3)
TABLE_BLOCK(4)
TABLE_BLOCK(5)
TABLE_BLOCK(6)
// Word i of block b: every block is bound; the token picks the one read.
TABLE_WORD word(uint b, uint i)
{
    switch (b) {
    case 0u: return t0[i];
    case 1u: return t1[i];
    case 2u: return t2[i];
    case 3u: return t3[i];
    case 4u: return t4[i];
    case 5u: return t5[i];
    default: return t6[i];
    }
}
layout(set = 0, binding = 7) readonly buffer Tokens { uint tokens[]; };
layout(set = 0, binding = 8) writeonly buffer Out { float out_row[]; };
layout(push_constant) uniform Pc {
    uint dim; uint vocab; uint token_index; uint block_rows; uint first; uint total;
} pc;
#elif defined(EMBED_ROWS)
#include "params.glsl"
layout(set = 0, binding = 1) readonly buffer Table { TABLE_WORD table[]; };
TABLE_WORD word(uint b, uint i) { return table[i]; }
layout(set = 0, binding = 2) readonly buffer Tokens { uint tokens[]; };
layout(set = 0, binding = 3) writeonly buffer Out { float out_row[]; };
layout(push_constant) uniform Pc { uint dim; uint T; } pc;
#else
layout(set = 0, binding = 0) readonly buffer Table { TABLE_WORD table[]; };
TABLE_WORD word(uint b, uint i) { return table[i]; }
layout(set = 0, binding = 1) readonly buffer Tokens { uint tokens[]; };
layout(set = 0, binding = 2) writeonly buffer Out { float out_row[]; };
layout(push_constant) uniform Pc { uint dim; uint vocab; uint token_index; } pc;
#endif

#ifdef EMB_Q
#define QWORD(m, i) word(m, i)
#define QVEC2(m, i) uvec2(word(m, 2u * (i)), word(m, 2u * (i) + 1u))
#define QVEC4(m, i) uvec4(word(m, 4u * (i)), word(m, 4u * (i) + 1u), word(m, 4u * (i) + 2u), word(m, 4u * (i) + 3u))
#include "quant.glsl"
#endif

// Element col of row row of block b.
float table_at(uint b, uint row, uint col)
{
#if defined(EMB_Q)
    vec4 a, v;
#if defined(MV_Q8_0)
    q_weights(q8_0_chunk(b, row * (pc.dim / 32u) * 34u, col >> 5u, (col >> 3u) & 3u), a, v);
#elif defined(MV_Q4_0)
    q_weights(q4_0_chunk(b, row * (pc.dim / 32u) * 18u, col >> 5u, (col >> 3u) & 3u), a, v);
#elif defined(MV_Q4_K)
    q_weights(q4_k_chunk(b, row * (pc.dim / 256u) * 144u, col >> 8u, (col >> 3u) & 31u), a, v);
#else
    q_weights(q6_k_chunk(b, row * (pc.dim / 256u) * 210u, col >> 8u, (col >> 3u) & 31u), a, v);
#endif
    uint k = col & 7u;
    return k < 4u ? a[k] : v[k - 4u];
#elif defined(MV_F16)
    uint i = row * pc.dim + col;
    vec2 h = unpackHalf2x16(word(b, i >> 1));
    return (i & 1u) != 0u ? h.y : h.x;
#else
    return word(b, row * pc.dim + col);
#endif
}

#ifdef EMBED_ROWS
// Rows of the table its binding holds: the binding is whole rows (a block
// table's last word rounded up, never a whole row more).
uint table_rows()
{
#if defined(EMB_Q)
#if defined(MV_Q8_0)
    uint row_bytes = pc.dim / 32u * 34u;
#elif defined(MV_Q4_0)
    uint row_bytes = pc.dim / 32u * 18u;
#elif defined(MV_Q4_K)
    uint row_bytes = pc.dim / 256u * 144u;
#else
    uint row_bytes = pc.dim / 256u * 210u;
#endif
    return uint(table.length()) * 4u / row_bytes;
#elif defined(MV_F16)
    return uint(table.length()) * 2u / pc.dim;
#else
    return uint(table.length()) / pc.dim;
#endif
}

// EMBED_ROWS: a row of workgroups per token row t; row t's token is
// tokens[pos + t]. Padding rows, positions past the prompt and tokens past
// the table give zeros.
void main()
{
    uint groups = (pc.dim + 255u) / 256u;
    uint t = gl_WorkGroupID.x / groups, i = (gl_WorkGroupID.x % groups) * 256u + gl_LocalInvocationID.x;
    if (i >= pc.dim || t >= pc.T)
        return;
    uint at = step_params.pos + t;
    float v = 0.0;
    if (t < step_params.rows && at < uint(tokens.length())) {
        uint token = tokens[at];
        if (token < table_rows())
            v = table_at(0u, token, i);
    }
    out_row[t * pc.dim + i] = v;
}
#else
void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= pc.dim)
        return;
    uint token = tokens[pc.token_index];
#ifdef EMBED_BLOCKS
    uint t = token - pc.first;   // wraps past vocab for a token below first
    if (t < pc.vocab) {
        uint b = t / pc.block_rows;
        out_row[i] = table_at(b, t - b * pc.block_rows, i);
    } else if (token >= pc.total && pc.first + pc.vocab == pc.total) {
        out_row[i] = 0.0;
    }
#else
    out_row[i] = token < pc.vocab ? table_at(0u, token, i) : 0.0;
#endif
}
#endif
