// out = table[token_buf[token_index]] for one row of dim elements; a token
// outside the vocabulary gives zeros rather than reading out of bounds.
layout(local_size_x = 256) in;
layout(set = 0, binding = 1) readonly buffer Tokens { uint tokens[]; };
layout(set = 0, binding = 2) writeonly buffer Out { float out_row[]; };
layout(push_constant) uniform Pc { uint dim; uint vocab; uint token_index; } pc;

float table_at(uint i);

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= pc.dim)
        return;
    uint token = tokens[pc.token_index];
    out_row[i] = token < pc.vocab ? table_at(token * pc.dim + i) : 0.0;
}
