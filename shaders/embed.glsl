// out = table[token_buf[token_index]] for one row of dim elements; a token
// outside the vocabulary gives zeros rather than reading out of bounds.
// EMBED_BLOCKS: the table is up to seven row blocks, one binding each
// (embed_blocks.glsl); the node covers tokens [first, first + vocab) of a
// table of total rows and writes nothing for another node's tokens, zeros
// for a token past the table when it holds the table's last rows.
layout(local_size_x = 256) in;
#ifdef EMBED_BLOCKS
layout(set = 0, binding = 7) readonly buffer Tokens { uint tokens[]; };
layout(set = 0, binding = 8) writeonly buffer Out { float out_row[]; };
layout(push_constant) uniform Pc {
    uint dim; uint vocab; uint token_index; uint block_rows; uint first; uint total;
} pc;
float table_at(uint block, uint i);
#else
layout(set = 0, binding = 1) readonly buffer Tokens { uint tokens[]; };
layout(set = 0, binding = 2) writeonly buffer Out { float out_row[]; };
layout(push_constant) uniform Pc { uint dim; uint vocab; uint token_index; } pc;
float table_at(uint i);
#endif

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
        out_row[i] = table_at(b, (t - b * pc.block_rows) * pc.dim + i);
    } else if (token >= pc.total && pc.first + pc.vocab == pc.total) {
        out_row[i] = 0.0;
    }
#else
    out_row[i] = token < pc.vocab ? table_at(token * pc.dim + i) : 0.0;
#endif
}
