// MV_TAG, the tagged forms (matvec.glsl includes this before x_chunk):
// x and y as tagged vectors (tag.glsl) where the push constants say so. A
// tagged x is read plainly first (a line in L1 is as good as any once its
// tags match), then polled past the caches until its words carry this
// step's tag, at most TAG_SPINS times; a word that never does reads as
// TAG_LOST. A tagged y is written as tagged words.

layout(set = 0, binding = B_X) readonly buffer Xt { uvec4 xt4[]; };
layout(set = 0, binding = B_X) volatile coherent readonly buffer XtP { uvec4 xtp4[]; };
layout(set = 0, binding = B_X) volatile coherent readonly buffer XtPs { uint xtp1[]; };
layout(set = 0, binding = B_Y) writeonly buffer Yt { uint yt[]; };
#ifdef MV_YQT
layout(set = 0, binding = B_Y) writeonly buffer Yq { uvec4 yq4[]; };
#endif

// Words 8i to 8i + 8 of a tagged x (a and b: as read plainly), polled past
// the caches until every one carries this step's tag, at most TAG_SPINS
// times; false, with the fault word set, where they never do.
bool tag_poll(uint i, inout uvec4 a, inout uvec4 b)
{
    uint tag = tag_of(pc.tag_in);
    for (uint spins = 0u; !tags_ok(a, b, tag) && spins < TAG_SPINS; spins++) {
        a = xtp4[2u * i];
        b = xtp4[2u * i + 1u];
    }
    bool ok = tags_ok(a, b, tag);
    if (!ok)
        tag_give_up();
    return ok;
}

// Tagged quads (MV_YQT writes, MV_XQT reads): 16 elements as 16 int8 codes
// with scale d (x = d * code, d = max |x| / 127, quantize_chunk's
// operations) in 8 words, 32 bytes, every word carrying the tag in its low
// byte as a tagged word does: words 0-4 hold codes 3k to 3k + 2 in bytes 1
// to 3, word 5 code 15 in byte 1 and the codes' sum (16 bits, signed) in
// bytes 2 and 3, word 6 is d as a tagged word (tag_word: 15 bits of
// mantissa), word 7 the tag alone. A reader seeing all 8 tags has the quad
// whole; without a tag (tag_out 0) the bytes carry 0 there, which no
// step's tag is.
#ifdef MV_YQT
// Quad q of y, as quantize_quad made it, written tagged (tag_out 0: no tag).
void yqt_store(uint q, uvec4 codes, float d, int sum)
{
    uint tag = pc.tag_out != 0u ? tag_of(pc.tag_out) : 0u;
    uint w[8] = uint[8](tag, tag, tag, tag, tag, tag, tag_word(d, tag), tag);
    for (uint k = 0u; k < 16u; k++)
        w[k / 3u] |= ((codes[k / 4u] >> (8u * (k % 4u))) & 0xffu) << (8u * (k % 3u + 1u));
    w[5] |= (uint(sum) & 0xffffu) << 16u;
    yq4[2u * q] = uvec4(w[0], w[1], w[2], w[3]);
    yq4[2u * q + 1u] = uvec4(w[4], w[5], w[6], w[7]);
}
#endif
#ifdef MV_XQT
// Quad q of x: its codes as the integer dots take them (code k in byte k
// % 4 of word k / 4) and (d, d * their sum). Polled past the caches, at
// most TAG_SPINS times, where x is tagged this dispatch; a quad that never
// arrives reads as codes 0 and d NaN.
void xqt_quad(uint q, out uvec4 codes, out vec2 s)
{
    uvec4 a = xt4[2u * q], b = xt4[2u * q + 1u];
    if (pc.tag_in != 0u && !tag_poll(q, a, b)) {
        codes = uvec4(0u);
        s = vec2(TAG_LOST);
        return;
    }
    codes = uvec4((a.x >> 8u) | ((a.y >> 8u) << 24u), (a.y >> 16u) | ((a.z >> 8u) << 16u),
                  (a.z >> 24u) | (a.w & 0xffffff00u), (b.x >> 8u) | ((b.y >> 8u) << 24u));
    float d = tag_value(b.z);
    s = vec2(d, d * float(int(b.y) >> 16));
}
#endif

// Chunk c of a tagged x into xa, xb; false where x is not tagged this
// dispatch (the caller reads it plainly).
bool x_chunk_tag(uint c, out vec4 xa, out vec4 xb)
{
    xa = vec4(0.0);
    xb = vec4(0.0);
    if (pc.tag_in == 0u)
        return false;
    uvec4 a = xt4[2u * c], b = xt4[2u * c + 1u];
    bool ok = tag_poll(c, a, b);
    xa = ok ? tag_values(a) : vec4(TAG_LOST);
    xb = ok ? tag_values(b) : vec4(TAG_LOST);
    return true;
}

// Pair c of a tagged x (the scalar path) into xs; false where x is not
// tagged.
bool x_pair_tag(uint c, out vec2 xs)
{
    xs = vec2(0.0);
    if (pc.tag_in == 0u)
        return false;
    uint tag = tag_of(pc.tag_in), a = xtp1[2u * c], b = xtp1[2u * c + 1u];
    for (uint spins = 0u; !tags_ok2(a, b, tag) && spins < TAG_SPINS; spins++) {
        a = xtp1[2u * c];
        b = xtp1[2u * c + 1u];
    }
    bool ok = tags_ok2(a, b, tag);
    if (!ok)
        tag_give_up();
    xs = ok ? vec2(tag_value(a), tag_value(b)) : vec2(TAG_LOST);
    return true;
}

#ifdef MV_TAG_GATE
// With TAG_GATE in tag_in: the first subgroup's invocations each poll the
// last word of one of as many equal parts of x until every part carries
// this step's tag, and the workgroup waits for them before it loads
// anything. Light polling for a producer that runs beside the reader (the
// attention: its chain of loads slowed under 1024 workgroups' weight loads
// and polls); x_chunk still checks every word it reads.
void tag_gate()
{
    if ((pc.tag_in & TAG_GATE) == 0u)
        return;
    uint n = pc.cols, parts = min(gl_SubgroupSize, n);
    if (gl_SubgroupID == 0u && gl_SubgroupInvocationID < parts) {
        uint tag = tag_of(pc.tag_in), at = (gl_SubgroupInvocationID + 1u) * n / parts - 1u;
        for (uint spins = 0u; (xtp1[at] & 0xffu) != tag && spins < TAG_SPINS; spins++) {
        }
        if ((xtp1[at] & 0xffu) != tag)
            tag_give_up();
    }
    barrier();
}
#endif
