// The seven table blocks of EMBED_BLOCKS (see embed.glsl), as words of
// TABLE_WORD (float, or uint holding two f16): word(b, i) reads word i of
// block b. Every block is bound; the token picks the one read.
#define EMBED_BLOCKS
#define TABLE_BLOCK(k) \
    layout(set = 0, binding = k) readonly buffer Table##k { TABLE_WORD t##k[]; };
TABLE_BLOCK(0)
TABLE_BLOCK(1)
TABLE_BLOCK(2)
TABLE_BLOCK(3)
TABLE_BLOCK(4)
TABLE_BLOCK(5)
TABLE_BLOCK(6)

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
