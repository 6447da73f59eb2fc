// Decoders of the block dtypes (ir/loom_ops.h: GGUF's layouts byte for
// byte), as chunks of 8 consecutive weights of a row: the unit in which the
// matvec kernels stream f16 weights, so that every form reads x, g and the
// epilogue as it does for f16. The includer defines QWORD(m, i), QVEC2(m,
// i) and QVEC4(m, i): the 32-bit word i, the 8-byte pair i and the 16-byte
// quad i of the weights bound for matrix m. Blocks of Q8_0, Q4_0 and Q6_K
// are 34, 18 and 210 bytes, so a block starts on a 2-byte boundary: a span
// is read as the aligned words that hold it and shifted into place, which
// needs no 16-bit storage; the words read are only those that hold a byte
// of the span, so a read never passes the end of a binding of whole words.
//
// Chunk j of block blk of a row (rb: the row's first byte) is weights
// 8j to 8j + 8 of the block. The matvec kernels take chunks t, t + 256, ...
// in invocation t, so j (t modulo the chunks a block) is the same on every
// trip: what depends on j alone is computed once, outside the loop.

// A load and what is made of it are two steps below (q_*words, q_*of;
// each chunk decoder q*_raw, q*_dec), so that a kernel may hold the words
// in flight across other work and decode them where it uses them (the
// cooperative-matrix forms' staging); odd: the span starts 2 bytes into
// its first word.

// The 16-bit value at (2-aligned) byte o: from the word holding it, and
// loaded.
uint q_u16_of(uint w, bool odd) { return odd ? w >> 16u : w & 0xffffu; }
uint q_u16(uint m, uint o) { return q_u16_of(QWORD(m, o >> 2u), (o & 2u) != 0u); }

// The 8 bytes at (2-aligned) byte o, as two words: the three words holding
// them, shifted by 2 bytes where o is not 4-aligned (the third is the second
// where it is).
uvec3 q_8words(uint m, uint o)
{
    uint i = o >> 2u;
    return uvec3(QWORD(m, i), QWORD(m, i + 1u), QWORD(m, (o + 7u) >> 2u));
}
uvec2 q_8of(uvec3 w, bool odd)
{
    if (!odd)
        return w.xy;
    return uvec2((w.x >> 16u) | (w.y << 16u), (w.y >> 16u) | (w.z << 16u));
}
uvec2 q_8bytes(uint m, uint o) { return q_8of(q_8words(m, o), (o & 2u) != 0u); }

float q_half(uint bits) { return unpackHalf2x16(bits).x; }

// A chunk as its kernels use it: the signed codes q of its 8 weights as
// floats, and s such that weight = s.x * q - s.y. A code is made a float
// without an integer-to-float conversion (a quarter of the FMA rate): the
// f16 bits 0x6400 | byte are 1024 + byte, made f32 two at a time, then the
// bias comes off exactly. s.y (Q4_K's min) meets the sum of x once a chunk:
// sum w x = s.x (q . x) - s.y (sum x).
struct QChunk {
    vec4 a, b;   // codes of weights 0-3 and 4-7
    vec2 s;
};

// A chunk's words as loaded, and what its decoder needs of the offsets (s;
// Q_NONE: no chunk, a weight past the row or the rows).
struct QCRaw {
    uvec4 a, b;
    uint s;
};
#define Q_NONE 0xffffffffu

// Four bytes of w as floats, less bias (1024 + the codes' own offset).
vec4 q_code4(uint w, float bias)
{
    vec2 lo = unpackHalf2x16((w & 0x00ff00ffu) | 0x64006400u);
    vec2 hi = unpackHalf2x16(((w >> 8u) & 0x00ff00ffu) | 0x64006400u);
    return vec4(lo.x, hi.x, lo.y, hi.y) - bias;
}

// The chunk's 8 weights (EMBED and the tests read weights one by one).
void q_weights(QChunk q, out vec4 a, out vec4 b)
{
    a = q.a * q.s.x - q.s.y;
    b = q.b * q.s.x - q.s.y;
}

// Q8_0: f16 d, then 32 int8; chunk j of a block is bytes 2 + 8j. The sign
// bit flipped, a byte is q + 128.
#define Q8_0_CHUNKS 4u
// (The codes at o + 2 + 8j start 2 bytes into a word where d does not.)
QCRaw q8_0_raw(uint m, uint rb, uint blk, uint j)
{
    uint o = rb + blk * 34u;
    return QCRaw(uvec4(QWORD(m, o >> 2u), q_8words(m, o + 2u + j * 8u)), uvec4(0u), o & 2u);
}
QChunk q8_0_dec(QCRaw r)
{
    float d = q_half(q_u16_of(r.a.x, r.s != 0u));
    uvec2 q = q_8of(r.a.yzw, r.s == 0u) ^ 0x80808080u;
    return QChunk(q_code4(q.x, 1152.0), q_code4(q.y, 1152.0), vec2(d, 0.0));
}
QChunk q8_0_chunk(uint m, uint rb, uint blk, uint j) { return q8_0_dec(q8_0_raw(m, rb, blk, j)); }

// Q4_0: f16 d, then 16 bytes: weight j is the low nibble of byte j, weight
// j + 16 its high nibble, each minus 8. Chunk j (0-3) is the low (j < 2) or
// high nibbles of bytes 8 (j & 1) to 8 (j & 1) + 8.
#define Q4_0_CHUNKS 4u
QCRaw q4_0_raw(uint m, uint rb, uint blk, uint j)
{
    uint o = rb + blk * 18u;
    return QCRaw(uvec4(QWORD(m, o >> 2u), q_8words(m, o + 2u + (j & 1u) * 8u)), uvec4(0u), (o & 2u) | (j >> 1u) << 2u);
}
QChunk q4_0_dec(QCRaw r)
{
    float d = q_half(q_u16_of(r.a.x, (r.s & 2u) != 0u));
    uvec2 q = (q_8of(r.a.yzw, (r.s & 2u) == 0u) >> ((r.s >> 2u) * 4u)) & 0x0f0f0f0fu;
    return QChunk(q_code4(q.x, 1032.0), q_code4(q.y, 1032.0), vec2(d, 0.0));
}
QChunk q4_0_chunk(uint m, uint rb, uint blk, uint j) { return q4_0_dec(q4_0_raw(m, rb, blk, j)); }

// Q4_K: 256 weights in 144 bytes (4-aligned): f16 d and dmin, 12 bytes of
// 6-bit (scale, min) pairs of 8 sub-blocks of 32, then four groups of 32
// bytes, group g holding weights 64g + l (low nibbles) and 64g + 32 + l
// (high). Weight = d * scale * q - dmin * min.
#define Q4_K_CHUNKS 32u

// Sub-block sb's weight = s.x * (n - 8) - s.y, from the block's header hd:
// s.x = d * scale, s.y = dmin * min - 8 s.x. Sub-block sb < 4: scale = byte
// sb & 63, min = byte sb + 4 & 63. Else the low 4 bits come from byte sb + 4
// (scale low nibble, min high) and the top 2 from the top bits of bytes
// sb - 4 (scale) and sb (min). Both ways, then a select: the two halves of
// a subgroup take both. Codes centred (n - 8) and the min less 8 s.x: for a
// sub-block of weights around 0 both parts of a dot product are then
// small, and little cancels between them.
vec2 q4_k_scale(uvec4 hd, uint sb)
{
    vec2 dm = unpackHalf2x16(hd.x);
    uint k = 8u * (sb & 3u), a = hd.y >> k, b = hd.z >> k, c = hd.w >> k;
    uint sc = sb < 4u ? a & 63u : (c & 15u) | ((a >> 6u) & 3u) << 4u;
    uint mn = sb < 4u ? b & 63u : ((c >> 4u) & 15u) | ((b >> 6u) & 3u) << 4u;
    float ds = dm.x * float(sc);
    return vec2(ds, dm.y * float(mn) - 8.0 * ds);
}

// A row of Q4_K blocks is a multiple of 16 bytes (144 = 9 x 16) and a
// binding starts 256-aligned: the header is one 16-byte load, a chunk's
// codes one 8-byte load. s: the sub-block.
QCRaw q4_k_raw(uint m, uint rb, uint blk, uint j)
{
    uint o = rb + blk * 144u, g = j >> 3u;
    uvec2 q = QVEC2(m, (o + 16u + 32u * g + 8u * (j & 3u)) >> 3u);
    return QCRaw(QVEC4(m, o >> 4u), uvec4(q, 0u, 0u), 2u * g + ((j >> 2u) & 1u));
}
QChunk q4_k_dec(QCRaw r)
{
    uvec2 q = (r.b.xy >> ((r.s & 1u) * 4u)) & 0x0f0f0f0fu;
    return QChunk(q_code4(q.x, 1032.0), q_code4(q.y, 1032.0), q4_k_scale(r.a, r.s));
}
QChunk q4_k_chunk(uint m, uint rb, uint blk, uint j) { return q4_k_dec(q4_k_raw(m, rb, blk, j)); }

// Q6_K: 256 weights in 210 bytes: 128 bytes of low nibbles ql, 64 of high
// bit pairs qh, 16 int8 scales, f16 d. Half h (128 weights) uses ql[64h..],
// qh[32h..], scales[8h..]; within it weight 32q + l (quarter q, l < 32) is
// the low (q < 2) or high nibble of ql[32 (q & 1) + l], with bits 2q, 2q + 1
// of qh[l] above it, minus 32, times d * scales[l / 16 + 2q].
#define Q6_K_CHUNKS 32u
// The codes' spans and d share o's offset in a word (64h + 32(q & 1) + l,
// 128 + 32h + l and 208 are multiples of 4); the scale's pair of bytes may
// not. s: bit 0 o's, bit 1 the scale pair's, bit 2 the scale's byte in
// it, bits 3-4 q.
QCRaw q6_k_raw(uint m, uint rb, uint blk, uint j)
{
    uint o = rb + blk * 210u;
    uint h = j >> 4u, q = (j >> 2u) & 3u, l = (j & 3u) * 8u;
    uint si = 192u + 8u * h + (l >> 4u) + 2u * q, so = o + (si & ~1u);
    return QCRaw(uvec4(q_8words(m, o + 64u * h + 32u * (q & 1u) + l), QWORD(m, so >> 2u)),
                uvec4(q_8words(m, o + 128u + 32u * h + l), QWORD(m, (o + 208u) >> 2u)),
                (o & 2u) >> 1u | (so & 2u) | (si & 1u) << 2u | q << 3u);
}
QChunk q6_k_dec(QCRaw r)
{
    bool odd = (r.s & 1u) != 0u;
    uint q = r.s >> 3u;
    uvec2 lo = q_8of(r.a.xyz, odd), hb = q_8of(r.b.xyz, odd);
    uint sw = q_u16_of(r.a.w, (r.s & 2u) != 0u);
    float s = float(bitfieldExtract(int(sw), int(8u * ((r.s >> 2u) & 1u)), 8));
    float d = q_half(q_u16_of(r.b.w, odd)) * s;
    uvec2 v = ((lo >> ((q >> 1u) * 4u)) & 0x0f0f0f0fu) | (((hb >> (2u * q)) & 0x03030303u) << 4u);
    return QChunk(q_code4(v.x, 1056.0), q_code4(v.y, 1056.0), vec2(d, 0.0));
}
QChunk q6_k_chunk(uint m, uint rb, uint blk, uint j) { return q6_k_dec(q6_k_raw(m, rb, blk, j)); }

// Q4_K by 32 weights: bytes 16h to 16h + 16 of group g (unit u = 2g + h of
// its block) hold weights 64g + 16h + i (low nibbles, sub-block 2g) and
// 64g + 32 + 16h + i (high, sub-block 2g + 1), i < 16: x chunks c, c + 1
// (low) and c + 4, c + 5 (high), c = 8g + 2h of the block. hd: the block's
// header; sx: the sums of x over the low and the high chunks. One header
// decode for 32 weights, where q4_k_chunk pays one for 8.
float q4_k_unit_dot(uvec4 hd, uvec4 qs, uint u, vec4 xa[4], vec4 xb[4], vec2 sx)
{
    uint sb0 = 2u * (u >> 1u);
    uvec4 lo = qs & 0x0f0f0f0fu, hi = (qs >> 4u) & 0x0f0f0f0fu;
    float d0 = dot(q_code4(lo.x, 1032.0), xa[0]) + dot(q_code4(lo.y, 1032.0), xb[0]) +
               dot(q_code4(lo.z, 1032.0), xa[1]) + dot(q_code4(lo.w, 1032.0), xb[1]);
    float d1 = dot(q_code4(hi.x, 1032.0), xa[2]) + dot(q_code4(hi.y, 1032.0), xb[2]) +
               dot(q_code4(hi.z, 1032.0), xa[3]) + dot(q_code4(hi.w, 1032.0), xb[3]);
    vec2 s0 = q4_k_scale(hd, sb0), s1 = q4_k_scale(hd, sb0 + 1u);
    return s0.x * d0 - s0.y * sx.x + s1.x * d1 - s1.y * sx.y;
}

#ifdef MV_IDOT
// ---- integer dot products against x quantized per block of 32 ----------
// x is quantized per block of 32 to int8 codes with one scale (xd: the
// block's largest magnitude / 127) into shared memory by the includer:
// QXV(i) is the 16-byte quad i of codes (x elements 16i to 16i + 16), QXS(i)
// the pair (xd, xd * the sum of those 16 codes). Every dot takes each
// quad's scale as its own: a staged x (matvec.glsl's MV_XQ) comes with one
// scale per quad of 16, not per block of 32. A unit is 32 weights whose
// codes meet x's as 4 at a time (OpSDot: signed by signed; OpSUDot: signed
// x by unsigned codes), so the only float work left is a few products of
// scales a unit. Every type's unit is 32 weights: unit u of a row is
// weights 32u to 32u + 32 of it for Q8_0 and Q4_0 (a block), and for the
// K-quants the u % 8-th unit of block u / 8 in the layouts below.
#extension GL_EXT_spirv_intrinsics : require
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int dot_ss(uint a, uint b, spirv_literal int fmt);   // OpSDot, 4 packed int8 each
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4452)
int dot_su(uint a, uint b, spirv_literal int fmt);   // OpSUDot: a int8, b uint8
#define DOT_SS(a, b) dot_ss(a, b, 0)
#define DOT_SU(a, b) dot_su(a, b, 0)

int dot4_ss(uvec4 a, uvec4 b) { return DOT_SS(a.x, b.x) + DOT_SS(a.y, b.y) + DOT_SS(a.z, b.z) + DOT_SS(a.w, b.w); }
int dot4_su(uvec4 a, uvec4 b) { return DOT_SU(a.x, b.x) + DOT_SU(a.y, b.y) + DOT_SU(a.z, b.z) + DOT_SU(a.w, b.w); }

#ifdef QX_PUT
// x quantized per block of 32 by the kernel itself, a chunk of 8 elements
// an invocation, a block by 4 neighbouring invocations (a subgroup holds
// whole blocks: its size is a multiple of 4, as the workgroup's is): scale
// d = the block's largest magnitude / 127, codes round(x / d) (|code| <=
// 127). A code is rounded by adding 1.5 * 2^23 (its low byte is then the
// code's) rather than converted. Chunk c (a, b: its 8 elements, already
// scaled by g where the kernel has a norm) makes half of quad c / 2, which
// the invocation of the even chunk stores through the includer's
// QX_PUT(quad, codes, (d, d * the codes' sum)); lanes with w false store
// nothing but take part in the shuffles.
void quantize_chunk(uint c, vec4 a, vec4 b, bool w)
{
    vec4 mx = max(abs(a), abs(b));
    float amax = max(max(mx.x, mx.y), max(mx.z, mx.w));
    amax = max(amax, subgroupShuffleXor(amax, 1u));
    amax = max(amax, subgroupShuffleXor(amax, 2u));
    // A block below 1e-30 is zeros (127 / amax would overflow). The
    // operations are those of loom_ref_quantize_x8, the tests' model
    // (precise: no fused multiply-add rounds the code).
    float id = amax > 1e-30 ? 127.0 * (1.0 / amax) : 0.0, d = id > 0.0 ? amax * (1.0 / 127.0) : 0.0;
    precise vec4 pa = a * id, pb = b * id;
    precise vec4 ra = pa + 12582912.0, rb = pb + 12582912.0;
    uvec4 ua = floatBitsToUint(ra) & 0xffu, ub = floatBitsToUint(rb) & 0xffu;
    uint w0 = ua.x | ua.y << 8u | ua.z << 16u | ua.w << 24u;
    uint w1 = ub.x | ub.y << 8u | ub.z << 16u | ub.w << 24u;
    int s = DOT_SS(w0, 0x01010101u) + DOT_SS(w1, 0x01010101u);
    // Chunks 2i and 2i + 1 (neighbouring invocations) make quad i.
    uvec2 pw = uvec2(subgroupShuffleXor(w0, 1u), subgroupShuffleXor(w1, 1u));
    s += subgroupShuffleXor(s, 1u);
    if (w && (c & 1u) == 0u)
        QX_PUT(c / 2u, uvec4(w0, w1, pw), vec2(d, d * float(s)))
}
#endif

// A unit's raw words, loaded before any arithmetic so that every row's
// loads are in flight at once.
struct QRaw {
    uvec4 a, b, c;
    uint e;
};

// n + 1 words from word i: Q8_0 and Q4_0 blocks start on 2-byte boundaries,
// so a block of 4k + 2 bytes is the k + 1 words from the one holding its
// first byte (n = k, even). They are loaded as the 8-byte pairs among them
// and the word left over: where i is even, the pairs from word i and word
// i + n alone; where i is odd (lone_first), word i alone and the pairs
// after it. Fewer loads than words, none outside them: on an H200 the 1b
// Q8_0 step took 681.1 -> 654.3 us/token, Q4_0 546.0 -> 533.9, 7b with 8
// layers Q8_0 789.1 -> 780.7 (docs/perf-log.md, "Q8_0 and Q4_0 units by
// 8-byte pairs").
// Q8_0 (34 bytes: f16 d, 32 int8): words i .. i + 8.
QRaw q8_0_load(uint m, uint rb, uint u)
{
    uint i = (rb + u * 34u) >> 2u, k = (i + 1u) >> 1u;
    bool lone_first = (i & 1u) != 0u;
    uvec2 p0 = QVEC2(m, k), p1 = QVEC2(m, k + 1u), p2 = QVEC2(m, k + 2u), p3 = QVEC2(m, k + 3u);
    uint x = QWORD(m, lone_first ? i : i + 8u);
    return QRaw(lone_first ? uvec4(x, p0, p1.x) : uvec4(p0, p1), lone_first ? uvec4(p1.y, p2, p3.x) : uvec4(p2, p3),
                uvec4(0u), lone_first ? p3.y : x);
}
// Words a (4), b (4), e: the 16 or 32 bytes after a block's d, and d. Where
// the block starts 4-aligned (odd == false) d is the low half of a.x and
// each code word straddles two words.
void q_shift(bool odd, uvec4 a, uvec4 b, uint e, out uvec4 lo, out uvec4 hi, out float d)
{
    d = q_half(odd ? a.x >> 16u : a.x & 0xffffu);
    uvec4 s0 = uvec4(a.yzw, b.x), s1 = uvec4(b.yzw, e);
    lo = odd ? s0 : (a >> 16u) | (s0 << 16u);
    hi = odd ? s1 : (b >> 16u) | (s1 << 16u);
}
float q8_0_dot(QRaw r, uint rb, uint u, uint xu)
{
    uvec4 lo, hi;
    float d;
    q_shift(((rb + u * 34u) & 2u) != 0u, r.a, r.b, r.e, lo, hi, d);
    // Each quad of x with its own scale: the kernel's own quantization gives
    // a block's two the same, a staged t (MV_XQ) one per 16 rows.
    vec2 x0 = QXS(2u * xu), x1 = QXS(2u * xu + 1u);
    return d * (x0.x * float(dot4_ss(lo, QXV(2u * xu))) + x1.x * float(dot4_ss(hi, QXV(2u * xu + 1u))));
}

// Q4_0 (18 bytes: f16 d, 16 bytes; weight j the low nibble of byte j,
// j + 16 its high nibble, less 8): words i .. i + 4.
QRaw q4_0_load(uint m, uint rb, uint u)
{
    uint i = (rb + u * 18u) >> 2u, k = (i + 1u) >> 1u;
    bool lone_first = (i & 1u) != 0u;
    uvec2 p0 = QVEC2(m, k), p1 = QVEC2(m, k + 1u);
    uint x = QWORD(m, lone_first ? i : i + 4u);
    return QRaw(lone_first ? uvec4(x, p0, p1.x) : uvec4(p0, p1), uvec4(0u), uvec4(0u), lone_first ? p1.y : x);
}
float q4_0_dot(QRaw r, uint rb, uint u, uint xu)
{
    bool odd = ((rb + u * 18u) & 2u) != 0u;
    float d = q_half(odd ? r.a.x >> 16u : r.a.x & 0xffffu);
    uvec4 s0 = uvec4(r.a.yzw, r.e), w = odd ? s0 : (r.a >> 16u) | (s0 << 16u);
    vec2 x0 = QXS(2u * xu), x1 = QXS(2u * xu + 1u);
    int c0 = dot4_su(QXV(2u * xu), w & 0x0f0f0f0fu), c1 = dot4_su(QXV(2u * xu + 1u), (w >> 4u) & 0x0f0f0f0fu);
    return d * (x0.x * float(c0) + x1.x * float(c1) - 8.0 * (x0.y + x1.y));
}

// Q4_K: unit ui = u % 8 of a block is bytes 16 (ui & 1) to 16 (ui & 1) + 16
// of group g = ui / 2: weights 64g + 16h + l (low nibbles, sub-block 2g) and
// 64g + 32 + 16h + l (high, sub-block 2g + 1), l < 16 (q4_k_unit_dot's).
// a: the block's header, b: the codes.
// The 8 units of a block are 8 neighbouring invocations of one subgroup
// (units u = lane, lane + 32, ... of a row): each loads one word of the
// block's 16-byte header (word lane % 4) and q4_k_dot gathers the four by
// shuffles, so a trip's registers hold 4 header bytes a unit, not 16.
QRaw q4_k_load(uint m, uint rb, uint u)
{
    uint o = rb + (u >> 3u) * 144u, ui = u & 7u;
    return QRaw(uvec4(QWORD(m, (o >> 2u) + (gl_SubgroupInvocationID & 3u)), 0u, 0u, 0u),
                QVEC4(m, (o + 16u + 32u * (ui >> 1u) + 16u * (ui & 1u)) >> 4u), uvec4(0u), 0u);
}
// xu: the unit's index in x as the caller places it (a multiple of 8 at
// the block's start, as u is).
float q4_k_dot(QRaw r, uint rb, uint u, uint xu)
{
    // Sub-blocks 2g and 2g + 1: their 6-bit scales and mins as byte pairs
    // (bytes 2g, 2g + 1 of each field), then integer products with the
    // codes' dot products: four conversions a unit, not eight.
    uint ui = u & 7u, g = ui >> 1u, k = 16u * (g & 1u), q = 16u * (xu >> 3u) + 4u * g + (ui & 1u);
    uint lb = gl_SubgroupInvocationID & ~7u;
    uvec4 hd = uvec4(subgroupShuffle(r.a.x, lb), subgroupShuffle(r.a.x, lb | 1u), subgroupShuffle(r.a.x, lb | 2u),
                     subgroupShuffle(r.a.x, lb | 3u));
    uint a = hd.y >> k, b = hd.z >> k, c = hd.w >> k;
    uint sc = g < 2u ? a & 0x3f3fu : (c & 0x0f0fu) | ((a >> 2u) & 0x3030u);
    uint mn = g < 2u ? b & 0x3f3fu : ((c >> 4u) & 0x0f0fu) | ((b >> 2u) & 0x3030u);
    vec2 x0 = QXS(q), x1 = QXS(q + 2u);
    int d0 = dot4_su(QXV(q), r.b & 0x0f0f0f0fu), d1 = dot4_su(QXV(q + 2u), (r.b >> 4u) & 0x0f0f0f0fu);
    vec2 dm = unpackHalf2x16(hd.x);
    float s = x0.x * float(int(sc & 0xffu) * d0) + x1.x * float(int((sc >> 8u) & 0xffu) * d1);
    float m = x0.y * float(mn & 0xffu) + x1.y * float((mn >> 8u) & 0xffu);
    return dm.x * s - dm.y * m;
}

// Q6_K: unit ui = u % 8 of a block is half h = ui / 4, quarters p =
// (ui / 2) % 2 and p + 2, and l = 16 (ui % 2) to l + 16 of each: weights
// 128h + 32p + l + i and 128h + 32(p + 2) + l + i, i < 16. Both quarters'
// low 4 bits are in the same 16 bytes of ql (64h + 32p + l: low nibbles
// quarter p, high nibbles p + 2), their top 2 in the same 16 of qh (128 +
// 32h + l: bits 2p, 2p + 1 and 2p + 4, 2p + 5); each quarter's 16 weights
// meet one 16-element quad of x, whose sum the quantizer kept, so the codes
// stay unsigned (0..63) and the 32 comes off once a quarter: sum (v - 32) x
// = sum v x - 32 sum x. Scales: bytes 8h + l / 16 + 2p and + 4 of the
// block's 16 (at 192), of the 8 at 192 + 8h; d at 208.
uvec4 q_16bytes(uint m, uint o)
{
#ifdef MV_Q6W
    // MV_Q6W: the five words holding the span (the fifth the fourth again
    // where o is 4-aligned), which keep fewer registers in flight than the
    // pairs below: q/k/v with a Q6_K Wv 40 registers, not 53
    // (passes/waves.c).
    uint i = o >> 2u;
    uvec4 w = uvec4(QWORD(m, i), QWORD(m, i + 1u), QWORD(m, i + 2u), QWORD(m, i + 3u));
    uint e = QWORD(m, (o + 15u) >> 2u);
#else
    // Three 8-byte loads: the pairs holding bytes o, o + 8 and o + 15 (the
    // second again where o is 8-aligned; no branch between a subgroup's
    // blocks). A pair may pass the span's end by up to 6 bytes, which are
    // the block's own: ql and qh are followed by more of it (the scales,
    // d), so no load leaves the binding. Five 4-byte loads took the 7b
    // Q4_K_M step with 8 layers 0.4% more time on an H200, the 1b step
    // 0.8% (docs/perf-log.md, "Q6_K spans by 8-byte pairs").
    uint k = o >> 3u;
    uvec2 a = QVEC2(m, k), b = QVEC2(m, k + 1u), c = QVEC2(m, (o + 15u) >> 3u);
    bool hi = (o & 4u) != 0u;
    uvec4 w = hi ? uvec4(a.y, b.x, b.y, c.x) : uvec4(a, b);
    uint e = hi ? c.y : c.x;
#endif
    return (o & 2u) == 0u ? w : (w >> 16u) | (uvec4(w.yzw, e) << 16u);
}
QRaw q6_k_load(uint m, uint rb, uint u)
{
    uint o = rb + (u >> 3u) * 210u, ui = u & 7u, h = ui >> 2u, p = (ui >> 1u) & 1u, l = 16u * (ui & 1u);
    uvec2 sc = q_8bytes(m, o + 192u + 8u * h);
    return QRaw(q_16bytes(m, o + 64u * h + 32u * p + l), q_16bytes(m, o + 128u + 32u * h + l),
                uvec4(sc, 0u, 0u), q_u16(m, o + 208u));
}
float q6_k_dot(QRaw r, uint rb, uint u, uint xu)
{
    uint ui = u & 7u, h = ui >> 2u, p = (ui >> 1u) & 1u, k = (ui & 1u) + 2u * p;
    // Quarter p: low nibbles, qh bits 2p, 2p + 1 moved to bits 4, 5;
    // quarter p + 2: high nibbles, bits 2p + 4, 2p + 5 already there.
    uvec4 v0 = (r.a & 0x0f0f0f0fu) | ((r.b << (4u - 2u * p)) & 0x30303030u);
    uvec4 v1 = ((r.a >> 4u) & 0x0f0f0f0fu) | ((r.b >> (2u * p)) & 0x30303030u);
    float s0 = float(bitfieldExtract(int(r.c.x), int(8u * k), 8));
    float s1 = float(bitfieldExtract(int(r.c.y), int(8u * k), 8));
    // x elements 256 (xu / 8) + 128h + 32p + l: quad qi; + 64: quad qi + 4.
    uint qi = 16u * (xu >> 3u) + 8u * h + 2u * p + (ui & 1u);
    vec2 x0 = QXS(qi), x1 = QXS(qi + 4u);
    float d0 = float(dot4_su(QXV(qi), v0)), d1 = float(dot4_su(QXV(qi + 4u), v1));
    return q_half(r.e) * (s0 * (x0.x * d0 - 32.0 * x0.y) + s1 * (x1.x * d1 - 32.0 * x1.y));
}
#ifdef QLOAD0
// The unit loads and dots of matrix m's type: the includer's QLOAD0 and
// QDOT0, and for a third matrix of another type (a q/k/v form's Wv)
// QLOAD2 and QDOT2.
QRaw qload(uint m, uint rb, uint u)
{
#ifdef QLOAD2
    if (m == 2u)
        return QLOAD2(m, rb, u);
#endif
    return QLOAD0(m, rb, u);
}
float qdot(uint m, QRaw r, uint rb, uint u, uint xu)
{
#ifdef QDOT2
    if (m == 2u)
        return QDOT2(r, rb, u, xu);
#endif
    return QDOT0(r, rb, u, xu);
}
#endif
#endif
