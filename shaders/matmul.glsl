// MATMUL, MATMUL_ADD, MATMUL_SILU_MUL: y[t] = W x[t] for the T token rows
// of x (T x cols, f32) into y (T x rows, f32). Three forms (ir/loom_ops.h:
// LOOM_MATMUL_*, whose tile sizes the builder and the split pass count
// workgroups by):
//   (none)    the multi-column matvec, for small T: a workgroup of 256 takes
//             SR rows, each invocation 8-weight chunks i, i + 256, ... of
//             every one of them (decoded once) and the same chunk of TG token
//             rows of x at a time, as the decode's matvec does; the sums meet
//             through subgroupAdd, then shared memory. The gated FFN
//             (MM_SILU) and every form over block-typed weights take a
//             subgroup two rows instead, 16 rows a workgroup, its lanes
//             chunks c, c + subgroup size, ... (one a trip), the sums
//             through subgroupAdd alone; with MV_IDOT (block types, where
//             the device has integer dot products) x's token rows are
//             quantized into shared memory first and the lanes take units
//             of 32 weights. Past TG token rows the
//             workgroup goes round its rows again (the weights then come
//             from the caches), so the registers are sized for TG, not for
//             the largest T;
//   MM_TILED  tiles of BM rows by BN token rows: a BK-column slice of the
//             weights (decoded to f32) and of x staged in shared memory, each
//             invocation 4 x 4 outputs accumulated in f32. Portable GLSL 450;
//   MM_COOP   (with MM_TILED) tiles of CBM rows by CBN token rows multiplied
//             with GL_NV_cooperative_matrix (16 x 16 x 16, f16 inputs, f32
//             accumulators): weights (block types dequantized) and x are
//             staged in shared memory as f16, four subgroups of 32 taking
//             32 x 32 of the tile each; the next slice's global loads are in
//             flight while a slice is multiplied; workgroups numbered token
//             tile fastest. Only where the device has the extension with
//             that shape (the split pass swaps it in). MM_KS (with MM_COOP,
//             one matrix): two such groups a workgroup, splitting the K walk;
//             MM_L (with MM_COOP): tiles of 128 rows by MM_L token rows,
//             eight subgroups, two slices in shared memory; with MM_SILU
//             (MM_L=128 only) the 128 staged rows are 64 rows of each
//             matrix, so a tile is 64 rows of y by 128 token rows;
//   MM_NARROW (with MM_COOP, not MM_TILED; f16 weights) the few token rows
//             of the multi-column form (T <= 16, padded to 16) in
//             cooperative matrices: a workgroup 16 staged weight rows (with
//             MM_SILU 8 of each matrix) by every token row, eight subgroups
//             taking a segment's 16-column steps in turn (its section below);
//   MM_SK     (with MM_TILED, one matrix; the portable tiles or MM_L=128)
//             the K walk split between two workgroups a tile: workgroup
//             w < tiles walks the first half of the slices, w + tiles the
//             second; each writes its partial tile to part, and the second
//             to finish (a counter a tile, count) adds the two in a fixed
//             order (half 0's + half 1's), with r, into y and zeroes the
//             counter. For a matrix of few large tiles (passes/coopmat.c);
//   MM_QKV    (the multi-column form alone) RMS_NORM_QKV_ROPE_KV_ROWS: the
//             norm, q/k/v, RoPE and the KV append of a few token rows, a
//             workgroup a RoPE pair (with MV_IDOT a subgroup one; its
//             sections below);
//   MM_R2     (the multi-column form, f16 MATMUL) the gated form's layout
//             below, 2 rows a subgroup, for a matrix of many rows;
//   MM_ADD    y[t] = W x[t] + r[t]; r read by the invocation writing y, so y
//             may be r;
//   MM_SILU   y[t] = silu(Wg x[t]) * (Wu x[t]), two matrices side by side;
//   MM_Y16    (with MM_COOP, MM_SILU) y is stored as f16 pairs, for a reader
//             with MM_X16 (the split pass pairs them): rows even;
//   MM_X16    (with MM_COOP; MM_SILU only with MM_L) x is stored as f16 (a y of
//             MM_Y16, NORM_Y16 or ATT_O16): a chunk of x is one 16-byte
//             load, not two; cols a multiple of 8. The coopmat form rounds
//             x to f16 as it stages it either way, so the pair computes what
//             the f32 vector gave. (The gated form reading f16 x ran slower
//             on an H100, for a cause not found: it has no such form.)
// Weight types (forms.def's type defines, as matvec.glsl reads them): f32;
// MV_F16 f16 pairs packed in u32; MV_Q8_0, MV_Q4_0, MV_Q4_K, MV_Q6_K blocks
// decoded 8 weights at a time by quant.glsl's q*_chunk. Rows whose length is
// not a multiple of 8 (f32, f16) are read element by element; a weight
// past a row's end, a row past rows or a token row past T reads as 0 and is
// never written.
#if defined(MV_Q8_0) || defined(MV_Q4_0) || defined(MV_Q4_K) || defined(MV_Q6_K)
#define MM_Q
#endif
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#if (defined(MM_X16) || defined(MM_Y16)) && !defined(MM_COOP)
#error "MM_X16, MM_Y16: the cooperative-matrix form"
#endif
#if defined(MM_X16) && defined(MM_SILU) && !defined(MM_L)
#error "MM_X16: the forms of one matrix, or the gated large tiles"
#endif
#if defined(MM_Y16) && !defined(MM_SILU)
#error "MM_Y16: the gated form"
#endif
#if defined(MM_SK) && (!defined(MM_TILED) || defined(MM_SILU) || (defined(MM_COOP) && !defined(MM_L)) || (defined(MM_L) && MM_L != 128))
#error "MM_SK: one matrix, the portable tiles or MM_L=128"
#endif
#if defined(MV_IDOT) && (!defined(MM_Q) || defined(MM_TILED))
#error "MV_IDOT: the multi-column forms over block-typed weights"
#endif
#ifdef MV_IDOT
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
#ifdef MM_COOP
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "half.glsl"
#if !defined(MV_F16) && !defined(MM_Q)
#error "MM_COOP: f16 or block-typed weights"
#endif
#endif

#if defined(MM_COOP) && (defined(MM_KS) || defined(MM_L) || defined(MM_NARROW))
#define WG 256u   // MM_KS: two K halves of four subgroups each; MM_L: eight subgroups
layout(local_size_x = 256) in;
#elif defined(MM_COOP)
#define WG 128u
layout(local_size_x = 128) in;
#else
#define WG 256u
layout(local_size_x = 256) in;
#endif
#ifdef MM_QKV
#if defined(MM_TILED) || defined(MM_ADD) || defined(MM_SILU)
#error "MM_QKV: the multi-column form, alone"
#endif
#include "params.glsl"
#include "rope_angle.glsl"
layout(push_constant) uniform Pc {
    uint q_rows; uint kv_rows; uint cols; float eps; uint head_dim; uint max_seq; float theta; uint T;
} pc;
#define B_X 1
#define B_G 2
#define B_W0 3
#define B_W1 4
#define B_W2 5
#define B_Y 6
#define B_KC 7
#define B_VC 8
#else
layout(push_constant) uniform Pc { uint rows; uint cols; uint T; } pc;
#define B_W0 0
#define B_W1 1
#ifdef MM_SILU
#define NMAT 2u
#define B_X 2
#else
#define NMAT 1u
#define B_X 1
#endif
#ifdef MM_ADD
#define B_R (B_X + 1)
#define B_Y (B_X + 2)
#else
#define B_Y (B_X + 1)
#endif
#endif

// ---- weights: chunk c (weights 8c .. 8c + 7) of a row --------------------
#ifdef MM_Q
#if defined(MV_Q8_0)
#define QK 32u
#define QB 34u
#define QCHUNK q8_0_chunk
#define QRAW q8_0_raw
#define QDEC q8_0_dec
#define QCPB Q8_0_CHUNKS
#define QLOAD0 q8_0_load
#define QDOT0 q8_0_dot
#elif defined(MV_Q4_0)
#define QK 32u
#define QB 18u
#define QCHUNK q4_0_chunk
#define QRAW q4_0_raw
#define QDEC q4_0_dec
#define QCPB Q4_0_CHUNKS
#define QLOAD0 q4_0_load
#define QDOT0 q4_0_dot
#elif defined(MV_Q4_K)
#define QK 256u
#define QB 144u
#define QCHUNK q4_k_chunk
#define QRAW q4_k_raw
#define QDEC q4_k_dec
#define QCPB Q4_K_CHUNKS
#define QLOAD0 q4_k_load
#define QDOT0 q4_k_dot
#else
#define QK 256u
#define QB 210u
#define QCHUNK q6_k_chunk
#define QRAW q6_k_raw
#define QDEC q6_k_dec
#define QCPB Q6_K_CHUNKS
#define QLOAD0 q6_k_load
#define QDOT0 q6_k_dot
#endif
#define QBIND(k, b)                                                              \
    layout(set = 0, binding = b) readonly buffer W##k##q { uint w##k##q[]; };    \
    layout(set = 0, binding = b) readonly buffer W##k##q2 { uvec2 w##k##q2[]; }; \
    layout(set = 0, binding = b) readonly buffer W##k##q4 { uvec4 w##k##q4[]; };
#ifdef MV_W2_Q6_K
#define QLOAD2 q6_k_load   // a q/k/v form's Q6_K Wv (quant.glsl's qload, qdot)
#define QDOT2 q6_k_dot
#endif
QBIND(0, B_W0)
#if defined(MM_QKV)
QBIND(1, B_W1)
QBIND(2, B_W2)
#define QSEL(m, v, i) ((m) == 0u ? w0##v[i] : (m) == 1u ? w1##v[i] : w2##v[i])
#elif defined(MM_SILU)
QBIND(1, B_W1)
#define QSEL(m, v, i) ((m) == 0u ? w0##v[i] : w1##v[i])
#else
#define QSEL(m, v, i) w0##v[i]
#endif
#define QWORD(m, i) QSEL(m, q, i)
#define QVEC2(m, i) QSEL(m, q2, i)
#define QVEC4(m, i) QSEL(m, q4, i)
#ifdef MV_IDOT
// The integer form's x (the gated form below): QX_TG token rows of it,
// QX_SEG elements of each at a time, quantized per block of 32 into shared
// memory (quant.glsl's quantize_chunk), token row j's quad i at j * QX_SEG
// / 16 + i; the dots read token row qx_row's (quant.glsl's QXV, QXS).
#define QX_TG 4u
#define QX_SEG 4096u
shared uvec4 qx_codes[QX_TG * QX_SEG / 16u];
shared vec2 qx_scale[QX_TG * QX_SEG / 16u];
uint qx_row = 0u;
#define QXV(i) qx_codes[qx_row * (QX_SEG / 16u) + (i)]
#define QXS(i) qx_scale[qx_row * (QX_SEG / 16u) + (i)]
#define QX_PUT(q, codes, s) { qx_codes[q] = codes; qx_scale[q] = s; }
#endif
#include "quant.glsl"

void wchunk(uint m, uint row, uint c, out vec4 a, out vec4 b)
{
#ifdef MV_W2_Q6_K
    // MM_QKV with a Q6_K Wv beside Q4_K (Q4_K_M's mix): its own decoder.
    if (m == 2u) {
        q_weights(q6_k_chunk(m, row * (pc.cols / 256u) * 210u, c / Q6_K_CHUNKS, c % Q6_K_CHUNKS), a, b);
        return;
    }
#endif
    QChunk q = QCHUNK(m, row * (pc.cols / QK) * QB, c / QCPB, c % QCPB);
    q_weights(q, a, b);
}
#elif defined(MV_F16)
layout(set = 0, binding = B_W0) readonly buffer W0v { uvec4 w0v[]; };
layout(set = 0, binding = B_W0) readonly buffer W0s { uint w0s[]; };
#ifdef MM_QKV
layout(set = 0, binding = B_W1) readonly buffer W1v { uvec4 w1v[]; };
layout(set = 0, binding = B_W1) readonly buffer W1s { uint w1s[]; };
layout(set = 0, binding = B_W2) readonly buffer W2v { uvec4 w2v[]; };
layout(set = 0, binding = B_W2) readonly buffer W2s { uint w2s[]; };
#define WV(m, i) ((m) == 0u ? w0v[i] : (m) == 1u ? w1v[i] : w2v[i])
#define WS(m, i) ((m) == 0u ? w0s[i] : (m) == 1u ? w1s[i] : w2s[i])
#elif defined(MM_SILU)
layout(set = 0, binding = B_W1) readonly buffer W1v { uvec4 w1v[]; };
layout(set = 0, binding = B_W1) readonly buffer W1s { uint w1s[]; };
#define WV(m, i) ((m) == 0u ? w0v[i] : w1v[i])
#define WS(m, i) ((m) == 0u ? w0s[i] : w1s[i])
#else
#define WV(m, i) w0v[i]
#define WS(m, i) w0s[i]
#endif
// The 8 halves of chunk c as they are stored (0 past the row's end).
uvec4 wchunk16(uint m, uint row, uint c)
{
    uint e = row * pc.cols + 8u * c;
    if (pc.cols % 8u == 0u)
        return WV(m, e >> 3u);
    uint h[8];
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint w = 8u * c + i < pc.cols ? WS(m, (e + i) >> 1u) : 0u;
        h[i] = ((e + i) & 1u) != 0u ? w >> 16u : w & 0xffffu;
    }
    return uvec4(h[0] | h[1] << 16u, h[2] | h[3] << 16u, h[4] | h[5] << 16u, h[6] | h[7] << 16u);
}
void wchunk(uint m, uint row, uint c, out vec4 a, out vec4 b)
{
    uvec4 w = wchunk16(m, row, c);
    a = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
    b = vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
}
#else
layout(set = 0, binding = B_W0) readonly buffer W0v { vec4 w0v[]; };
layout(set = 0, binding = B_W0) readonly buffer W0s { float w0s[]; };
#ifdef MM_QKV
layout(set = 0, binding = B_W1) readonly buffer W1v { vec4 w1v[]; };
layout(set = 0, binding = B_W1) readonly buffer W1s { float w1s[]; };
layout(set = 0, binding = B_W2) readonly buffer W2v { vec4 w2v[]; };
layout(set = 0, binding = B_W2) readonly buffer W2s { float w2s[]; };
#define WV(m, i) ((m) == 0u ? w0v[i] : (m) == 1u ? w1v[i] : w2v[i])
#define WS(m, i) ((m) == 0u ? w0s[i] : (m) == 1u ? w1s[i] : w2s[i])
#elif defined(MM_SILU)
layout(set = 0, binding = B_W1) readonly buffer W1v { vec4 w1v[]; };
layout(set = 0, binding = B_W1) readonly buffer W1s { float w1s[]; };
#define WV(m, i) ((m) == 0u ? w0v[i] : w1v[i])
#define WS(m, i) ((m) == 0u ? w0s[i] : w1s[i])
#else
#define WV(m, i) w0v[i]
#define WS(m, i) w0s[i]
#endif
void wchunk(uint m, uint row, uint c, out vec4 a, out vec4 b)
{
    uint e = row * pc.cols + 8u * c;
    if (pc.cols % 8u == 0u) {
        a = WV(m, e >> 2u);
        b = WV(m, (e >> 2u) + 1u);
        return;
    }
    float v[8];
    [[unroll]] for (uint i = 0u; i < 8u; i++)
        v[i] = 8u * c + i < pc.cols ? WS(m, e + i) : 0.0;
    a = vec4(v[0], v[1], v[2], v[3]);
    b = vec4(v[4], v[5], v[6], v[7]);
}
#endif

// ---- x, r, y -------------------------------------------------------------
#ifdef MM_X16
layout(set = 0, binding = B_X) readonly buffer Xh { uvec4 xh[]; };   // 8 halves a chunk
#else
layout(set = 0, binding = B_X) readonly buffer Xv { vec4 x4[]; };
layout(set = 0, binding = B_X) readonly buffer Xs { float x1[]; };
#endif
#ifdef MM_ADD
layout(set = 0, binding = B_R) readonly buffer R { float r[]; };
#endif
#ifdef MM_QKV
layout(set = 0, binding = B_G) readonly buffer Gv { vec4 g4[]; };
layout(set = 0, binding = B_G) readonly buffer Gs { float g1[]; };
#ifdef MM_KH
#extension GL_EXT_shader_16bit_storage : require
#define CACHE_T float16_t
#else
#define CACHE_T float
#endif
layout(set = 0, binding = B_KC) writeonly buffer KC { CACHE_T kcache[]; };
layout(set = 0, binding = B_VC) writeonly buffer VC { CACHE_T vcache[]; };
#endif
#ifdef MM_Y16
layout(set = 0, binding = B_Y) writeonly buffer Yh { uint yh[]; };   // f16 pairs
#else
layout(set = 0, binding = B_Y) writeonly buffer Y { float y[]; };
#endif
#ifdef MM_SK
// The two halves' partial tiles (tile w's half h at (2 w + h) SK_TILE) and
// a completion counter a tile (zero between dispatches).
layout(set = 0, binding = B_Y + 1) coherent buffer SkPart { float part[]; };
layout(set = 0, binding = B_Y + 2) coherent buffer SkCount { uint skcount[]; };
shared bool sk_last;

// Half h of the K walk's nk slices: [sk_from(h), sk_from(h + 1)).
uint sk_from(uint h, uint nk) { return h == 0u ? 0u : h == 1u ? nk / 2u : nk; }

// After this workgroup's partial tile is written: whether it finished
// second (then the other half's partial is visible to it). Every
// invocation calls it.
bool sk_second(uint tile)
{
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationID.x == 0u)
        sk_last = atomicAdd(skcount[tile], 1u) == 1u;
    memoryBarrierShared();
    barrier();
    bool last = sk_last;
    if (last) {
        memoryBarrierBuffer();
        if (gl_LocalInvocationID.x == 0u)
            skcount[tile] = 0u;   // ready for the next dispatch
    }
    return last;
}
#endif

#ifndef MM_X16
// Chunk c of token row t of x (0 past the row's end).
void xchunk(uint t, uint c, out vec4 a, out vec4 b)
{
    uint e = t * pc.cols + 8u * c;
    if (pc.cols % 8u == 0u) {
        a = x4[e >> 2u];
        b = x4[(e >> 2u) + 1u];
        return;
    }
    float v[8];
    [[unroll]] for (uint i = 0u; i < 8u; i++)
        v[i] = 8u * c + i < pc.cols ? x1[e + i] : 0.0;
    a = vec4(v[0], v[1], v[2], v[3]);
    b = vec4(v[4], v[5], v[6], v[7]);
}
#endif

#ifndef MM_X16
// The float multi-column forms' step for token row t0 + J of chunk c: x's
// chunk loaded once and dotted with the n weight chunks in wa, wb, into
// acc[q TG + J]. Written out per J by the caller: a loop over J kept acc in
// memory, where the early return of xchunk stopped its unrolling.
#define TOKEN_DOTS(J, n)                                              \
    if (t0 + J < pc.T) {                                              \
        vec4 xa, xb;                                                  \
        xchunk(t0 + J, c, xa, xb);                                    \
        [[unroll]] for (uint q = 0u; q < (n); q++)                    \
            acc[q * TG + J] += dot(wa[q], xa) + dot(wb[q], xb);       \
    }
#endif

#ifdef MV_IDOT
// The integer forms' fill: elements e0 .. e0 + 8 nc of token rows t0 .. t0
// + QX_TG of x quantized into shared memory, chunk c of token row t0 + j
// by invocation j nc + c, j nc + c + WG, ... (4 neighbouring invocations a
// block: nc is a multiple of 4); rows past T are zeros. With MM_QKV each
// chunk is scaled by g first and its squares are added into ss[j].
void qx_fill(uint t0, uint e0, uint nc, inout vec4 ss)
{
    for (uint cc = gl_LocalInvocationID.x; cc < QX_TG * nc; cc += WG) {
        uint j = cc / nc, c = cc % nc, e = e0 / 8u + c;
        vec4 a = vec4(0.0), b = vec4(0.0);
        if (t0 + j < pc.T) {
            xchunk(t0 + j, e, a, b);
#ifdef MM_QKV
            ss[j] += dot(a, a) + dot(b, b);
            a *= g4[2u * e];
            b *= g4[2u * e + 1u];
#endif
        }
        quantize_chunk(j * (QX_SEG / 8u) + c, a, b, true);
    }
}
#endif

float silu(float v) { return v / (1.0 + exp(-v)); }

// y[t][row] from the row's products: g = Wg x[t] (or W x[t]), u = Wu x[t].
#if !defined(MM_Y16) && !defined(MM_QKV)
void store(uint t, uint row, float g, float u)
{
    uint i = t * pc.rows + row;
#if defined(MM_SILU)
    y[i] = silu(g) * u;
#elif defined(MM_ADD)
    y[i] = g + r[i];
#else
    y[i] = g;
#endif
}
#endif

#ifdef MM_COOP
// ---- staging of the cooperative-matrix forms -------------------------------
// Chunk c of row row of matrix m as loaded (WREG), and as the 8 halves
// it stages (WPACK); 0 past rows or cols. A block type's chunk is decoded
// only where it is staged, as x is packed below, so that its loads stay in
// flight while the slice before is multiplied.
#ifdef MV_F16
#define WREG uvec4
uvec4 wstage(uint m, uint row, uint c)
{
    if (row >= pc.rows || 8u * c >= pc.cols)
        return uvec4(0u);
    return wchunk16(m, row, c);
}
#define WPACK(v) (v)
#else
#define WREG QCRaw
QCRaw wstage(uint m, uint row, uint c)
{
    if (row >= pc.rows || 8u * c >= pc.cols)
        return QCRaw(uvec4(0u), uvec4(0u), Q_NONE);
    return QRAW(m, row * (pc.cols / QK) * QB, c / QCPB, c % QCPB);
}
uvec4 wpack(QCRaw r)
{
    if (r.s == Q_NONE)
        return uvec4(0u);
    vec4 a, b;
    q_weights(QDEC(r), a, b);
    return pack8(a, b);
}
#define WPACK(v) wpack(v)
#endif

// x as loaded: packed to f16 only where it is staged, so that the loads stay
// in flight while the slice before is multiplied; with MM_X16 a chunk is
// 8 halves as stored, one 16-byte load.
#ifdef MM_X16
#define XREG uvec4
XREG xstage(uint t, uint c)
{
    return t < pc.T && 8u * c < pc.cols ? xh[(t * pc.cols) / 8u + c] : uvec4(0u);
}
#define XPACK(v) (v)
#else
#define XREG vec4[2]
vec4[2] xstage(uint t, uint c)
{
    vec4 v[2] = vec4[2](vec4(0.0), vec4(0.0));
    if (t < pc.T && 8u * c < pc.cols)
        xchunk(t, c, v[0], v[1]);
    return v;
}
#define XPACK(v) pack8((v)[0], (v)[1])
#endif
#endif

#if defined(MM_QKV)
// The epilogue of RoPE pair (la, lb) of matrix m (0 q, 1 k, 2 v) at token
// row t, normalised: q and k rotated at position pos + t (as rope.glsl), q
// stored to its row of y, k and v to cache row pos + t for the step's real
// rows (t < real) inside the cache.
void qkv_store(uint m, uint la, uint lb, uint t, uint real, float va, float vb)
{
    uint pos = step_params.pos + t;
    if (m < 2u) {
        vec2 r = rope_rotate(vec2(va, vb), pos, la % pc.head_dim, pc.head_dim, pc.theta);
        va = r.x;
        vb = r.y;
    }
    if (m == 0u) {
        y[t * pc.q_rows + la] = va;
        y[t * pc.q_rows + lb] = vb;
    } else if (t < real && pos < pc.max_seq) {
        uint off = pos * pc.kv_rows;
        if (m == 1u) {
            kcache[off + la] = CACHE_T(va);
            kcache[off + lb] = CACHE_T(vb);
        } else {
            vcache[off + la] = CACHE_T(va);
            vcache[off + lb] = CACHE_T(vb);
        }
    }
}
#endif

#if defined(MM_QKV) && defined(MV_IDOT)
// ---- q/k/v over a few token rows, integer form (block types) ----------------
// A subgroup a RoPE pair (rows la and la + head_dim/2 of one matrix), a
// workgroup as many pairs as it has subgroups (8, as the builder counts
// for block types). The workgroup scales x's QX_TG token rows by g and
// quantizes them into shared memory a segment at a time (the gated form's
// way above), summing their squares as it loads them; the lanes dot units
// of 32 weights of both rows with every token row's codes, and the sums of
// squares meet once, through shared memory, for the epilogue (qkv_store).
#define TG QX_TG
shared float qkv_ss[TG][WG / 4u];   // each subgroup's part of a token row's sum of squares

void main()
{
    uint lane = gl_SubgroupInvocationID, sgs = gl_SubgroupSize, lid = gl_LocalInvocationID.x;
    uint half_hd = pc.head_dim / 2u, pairs = (pc.q_rows + 2u * pc.kv_rows) / 2u, npw = gl_NumSubgroups;
    uint real = clamp(step_params.rows, 1u, pc.T);   // the step's real rows (the reference's clamp)
    bool kept = false;   // x quantized once where it is one segment and one pass
    vec4 scale = vec4(0.0);
    for (uint p0 = gl_WorkGroupID.x * npw; p0 < pairs; p0 += gl_NumWorkGroups.x * npw) {
        uint p = min(p0 + gl_SubgroupID, pairs - 1u);
        bool live = p0 + gl_SubgroupID < pairs;
        uint ra = (p / half_hd) * pc.head_dim + p % half_hd;
        uint m = ra < pc.q_rows ? 0u : ra < pc.q_rows + pc.kv_rows ? 1u : 2u;
        uint la = ra - (m == 0u ? 0u : m == 1u ? pc.q_rows : pc.q_rows + pc.kv_rows), lb = la + half_hd;
        uint row_bytes = pc.cols / QK * QB;
#ifdef MV_W2_Q6_K
        if (m == 2u)
            row_bytes = pc.cols / 256u * 210u;
#endif
        for (uint t0 = 0u; t0 < pc.T; t0 += TG) {
            float acc[2u * TG];   // row la's at j, lb's at TG + j
            [[unroll]] for (uint s = 0u; s < 2u * TG; s++)
                acc[s] = 0.0;
            vec4 ss = vec4(0.0);   // this invocation's part of each token row's sum of squares
            for (uint e0 = 0u; e0 < pc.cols; e0 += QX_SEG) {
                uint len = min(pc.cols - e0, QX_SEG), nc = len / 8u, nu = len / 32u;
                if (!kept) {
                    barrier();   // the last segment's readers are done with it
                    qx_fill(t0, e0, nc, ss);
                    memoryBarrierShared();
                    barrier();
                }
                if (!live)
                    continue;
                for (uint xu = lane; xu < nu; xu += sgs) {
                    uint u = e0 / 32u + xu;
                    QRaw wa = qload(m, la * row_bytes, u), wb = qload(m, lb * row_bytes, u);
                    [[unroll]] for (uint j = 0u; j < TG; j++) {
                        qx_row = j;
                        acc[j] += qdot(m, wa, la * row_bytes, u, xu);
                        acc[TG + j] += qdot(m, wb, lb * row_bytes, u, xu);
                    }
                }
            }
            if (!kept) {
                // each token row's norm: the sums of squares meet
                [[unroll]] for (uint j = 0u; j < TG; j++) {
                    float v = subgroupAdd(ss[j]);
                    if (subgroupElect())
                        qkv_ss[j][gl_SubgroupID] = v;
                }
                memoryBarrierShared();
                barrier();
                [[unroll]] for (uint j = 0u; j < TG; j++) {
                    float t = 0.0;
                    for (uint i = 0u; i < gl_NumSubgroups; i++)
                        t += qkv_ss[j][i];
                    scale[j] = inversesqrt(t / float(pc.cols) + pc.eps);
                }
                barrier();   // qkv_ss is free again
                kept = pc.cols <= QX_SEG && pc.T <= TG;
            }
            [[unroll]] for (uint j = 0u; j < TG; j++) {
                float va = subgroupAdd(acc[j]), vb = subgroupAdd(acc[TG + j]);
                if (live && lane == j && t0 + j < pc.T)
                    qkv_store(m, la, lb, t0 + j, real, va * scale[j], vb * scale[j]);
            }
        }
    }
}

#elif defined(MM_NARROW)
// ---- the narrow cooperative-matrix form (a few token rows, f16 weights) -----
// For a step of T <= 16 token rows (verification), where the multi-column
// form spends its time on instructions (x's loads and f32 FMAs for every
// weight), not on memory. A workgroup stages NR weight rows (16 rows of y;
// with MM_SILU 8 of Wg then the same 8 of Wu, 8 rows of y) by NSEG columns
// and x's token rows, padded to 16 with zeros, in shared memory as f16, a
// 16-byte load an invocation a chunk; the next segment's loads are in
// flight while one is multiplied. Its eight subgroups take the segment's
// 16-column steps in turn (sg, sg + 8, ...) into one 16 x 16 result each,
// and the results meet in shared memory in a fixed order: invocation i
// stores (row i % NY, token row i / NY). The split pass takes it for f16
// weights from 8 token rows where rows and cols are multiples of 16
// (passes/coopmat.c); at 4 the multi-column form read faster on an H200,
// and so did it against a form that loaded the weight tiles straight from
// memory into cooperative matrices (docs/perf-log.md, "the narrow form").
#ifndef MV_F16
#error "MM_NARROW: f16 weights"
#endif
#define NR 16u                  // staged weight rows
#define NY (NR / NMAT)          // rows of y a workgroup: LOOM_MATMUL_NARROW_ROWS (MM_SILU: _GATED_)
#define NSEG 512u               // columns a segment
#define NQ (NSEG / 8u)          // chunks (uvec4 of 8 halves) a staged row
#define NXS (NQ + 1u)           // a staged row and one chunk of padding: ldmatrix rows in distinct banks
#define NP (NR * NQ / WG)       // chunks an invocation stages of W, and of x's 16 token rows
#define FA fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
shared uvec4 nws[NR * NXS];
shared uvec4 nxs[16u * NXS];
shared float npart[8u * 256u];   // each subgroup's 16 x 16 result, column-major

// The loads an invocation stages, into pw and px, of the segment whose
// chunk c it takes: staged row sr + (WG / NQ) p of the weights and of x's
// token rows. With MM_SILU passes p < NP / 2 stage Wg's rows, the rest
// Wu's (NY a multiple of WG / NQ), so each load's matrix is a constant. A
// macro: as a function with array out-parameters the SPIR-V kept copies.
#define NSTAGE(c)                                                                 \
    [[unroll]] for (uint p = 0u; p < NP; p++) {                                   \
        uint r = sr + (WG / NQ) * p;                                              \
        pw[p] = wstage(NMAT * p / NP, r0 + r - NY * (NMAT * p / NP), c);          \
        px[p] = xstage(r, c);                                                     \
    }

void main()
{
    uint lid = gl_LocalInvocationID.x, sg = gl_SubgroupID;
    uint sr = lid / NQ, sq = lid % NQ;   // staged rows sr + (WG / NQ) p, chunk sq
    for (uint r0 = gl_WorkGroupID.x * NY; r0 < pc.rows; r0 += gl_NumWorkGroups.x * NY) {
        FC acc = FC(0.0);
        uvec4 pw[NP];
        XREG px[NP];
        NSTAGE(sq)
        for (uint k0 = 0u; k0 < pc.cols; k0 += NSEG) {
            barrier();   // the segment before is multiplied
            [[unroll]] for (uint p = 0u; p < NP; p++) {
                uint r = sr + (WG / NQ) * p;
                nws[r * NXS + sq] = pw[p];
                nxs[r * NXS + sq] = XPACK(px[p]);
            }
            memoryBarrierShared();
            barrier();
            if (k0 + NSEG < pc.cols) {   // the next segment's loads in flight while this one is multiplied
                uint c = (k0 + NSEG) / 8u + sq;
                NSTAGE(c)
            }
            uint steps = min(pc.cols - k0, NSEG) / 16u;
            for (uint s = sg; s < steps; s += 8u) {
                FA fw, fb;
                coopMatLoadNV(fw, nws, 2u * s, NXS, false);
                coopMatLoadNV(fb, nxs, 2u * s, NXS, true);
                acc = coopMatMulAddNV(fw, fb, acc);
            }
        }
        coopMatStoreNV(acc, npart, sg * 256u, 16u, true);
        memoryBarrierShared();
        barrier();
        uint i = lid % NY, t = lid / NY;   // the result's (i, t) at 16 t + i; MM_SILU: Wu's at 16 t + 8 + i
        if (t < pc.T) {
            float g = 0.0, u = 0.0;
            [[unroll]] for (uint p = 0u; p < 8u; p++) {
                g += npart[p * 256u + 16u * t + i];
#ifdef MM_SILU
                u += npart[p * 256u + 16u * t + NY + i];
#endif
            }
            store(t, r0 + i, g, u);
        }
    }
}

#elif defined(MM_QKV)
// ---- q/k/v over a few token rows (RMS_NORM_QKV_ROPE_KV_ROWS) ---------------
// The multi-column matvec below, for the three matrices of q/k/v with the
// norm before them and RoPE and the KV append after: a workgroup takes one
// RoPE pair, rows a and a + head_dim/2 of one head of the stacked rows (q's,
// then k's, then v's), every invocation chunks i, i + 256, ... of both rows
// and the same chunk of TG token rows of x, which it scales by g as it sums
// x's squares. The sums meet through subgroupAdd, then shared memory; then
// invocation j scales token row t0 + j's pair by its norm, rotates it (q,
// k) at position pos + t0 + j and stores it: q to its row of y, k and v
// to cache row pos + t0 + j for the step's real rows alone.
#define TG 4u                // token rows a pass (QKV_TOKEN below: four)
#define NQ (3u * TG)         // sums an invocation keeps: row a, row b, x's squares
shared float red[NQ][WG / 4u];

void main()
{
    uint lid = gl_LocalInvocationID.x, chunks = (pc.cols + 7u) / 8u;
    uint half_hd = pc.head_dim / 2u, pairs = (pc.q_rows + 2u * pc.kv_rows) / 2u;
    uint real = clamp(step_params.rows, 1u, pc.T);   // the step's real rows (the reference's clamp)
    for (uint p = gl_WorkGroupID.x; p < pairs; p += gl_NumWorkGroups.x) {
        uint ra = (p / half_hd) * pc.head_dim + p % half_hd;
        uint m = ra < pc.q_rows ? 0u : ra < pc.q_rows + pc.kv_rows ? 1u : 2u;
        uint la = ra - (m == 0u ? 0u : m == 1u ? pc.q_rows : pc.q_rows + pc.kv_rows), lb = la + half_hd;
        for (uint t0 = 0u; t0 < pc.T; t0 += TG) {
            float acc[NQ];
            [[unroll]] for (uint s = 0u; s < NQ; s++)
                acc[s] = 0.0;
            for (uint c = lid; c < chunks; c += WG) {
                vec4 wa0, wb0, wa1, wb1, ga = vec4(0.0), gb = vec4(0.0);
                wchunk(m, la, c, wa0, wb0);
                wchunk(m, lb, c, wa1, wb1);
                uint e = 8u * c;
                if (pc.cols % 8u == 0u) {
                    ga = g4[e >> 2u];
                    gb = g4[(e >> 2u) + 1u];
                } else {
                    [[unroll]] for (uint i = 0u; i < 4u; i++) {
                        ga[i] = e + i < pc.cols ? g1[e + i] : 0.0;
                        gb[i] = e + 4u + i < pc.cols ? g1[e + 4u + i] : 0.0;
                    }
                }
#define QKV_TOKEN(J)                                               \
                if (t0 + J < pc.T) {                               \
                    vec4 xa, xb;                                   \
                    xchunk(t0 + J, c, xa, xb);                     \
                    acc[2u * TG + J] += dot(xa, xa) + dot(xb, xb); \
                    xa *= ga;                                      \
                    xb *= gb;                                      \
                    acc[J] += dot(wa0, xa) + dot(wb0, xb);         \
                    acc[TG + J] += dot(wa1, xa) + dot(wb1, xb);    \
                }
                QKV_TOKEN(0u)
                QKV_TOKEN(1u)
                QKV_TOKEN(2u)
                QKV_TOKEN(3u)
            }
            [[unroll]] for (uint s = 0u; s < NQ; s++) {
                float v = subgroupAdd(acc[s]);
                if (subgroupElect())
                    red[s][gl_SubgroupID] = v;
            }
            memoryBarrierShared();
            barrier();
            uint t = t0 + lid;
            if (lid < TG && t < pc.T) {
                float va = 0.0, vb = 0.0, ss = 0.0;
                for (uint i = 0u; i < gl_NumSubgroups; i++) {
                    va += red[lid][i];
                    vb += red[TG + lid][i];
                    ss += red[2u * TG + lid][i];
                }
                float scale = inversesqrt(ss / float(pc.cols) + pc.eps);
                qkv_store(m, la, lb, t, real, va * scale, vb * scale);
            }
            barrier();   // red is free again
        }
    }
}

#elif !defined(MM_TILED) && defined(MV_IDOT)
// ---- the multi-column forms over block types, integer form --------------------
// As the float form below, a subgroup GR rows of each matrix, but x's
// token rows are quantized into shared memory (QX_TG of them, a segment of
// QX_SEG elements of each at a time) by the whole workgroup, and a lane
// takes units of 32 weights (u = lane, lane + subgroup size, ...: the 8
// units of a K-quant block are neighbouring lanes, as quant.glsl's loads
// want), loads them once and dots them with every token row's codes. A
// workgroup takes GR rows a subgroup (16 with 8 subgroups, as the builder
// counts); with more subgroups the workgroups past the rows end at once.
#define GR 2u
#define TG QX_TG

void main()
{
    uint sgs = gl_SubgroupSize, lane = gl_SubgroupInvocationID, lid = gl_LocalInvocationID.x;
    uint srw = GR * gl_NumSubgroups, row_bytes = pc.cols / QK * QB;
    bool kept = false;   // x quantized once where it is one segment and one pass
    for (uint r0 = gl_WorkGroupID.x * srw; r0 < pc.rows; r0 += gl_NumWorkGroups.x * srw) {
        uint row = r0 + GR * gl_SubgroupID;
        for (uint t0 = 0u; t0 < pc.T; t0 += TG) {
            float acc[NMAT * GR * TG];   // (row r, matrix m) at (NMAT r + m) TG
            [[unroll]] for (uint s = 0u; s < NMAT * GR * TG; s++)
                acc[s] = 0.0;
            for (uint e0 = 0u; e0 < pc.cols; e0 += QX_SEG) {
                uint len = min(pc.cols - e0, QX_SEG), nc = len / 8u, nu = len / 32u;
                if (!kept) {
                    barrier();   // the last segment's readers are done with it
                    vec4 unused = vec4(0.0);
                    qx_fill(t0, e0, nc, unused);
                    memoryBarrierShared();
                    barrier();
                    kept = pc.cols <= QX_SEG && pc.T <= TG;
                }
                if (row >= pc.rows)
                    continue;
                for (uint xu = lane; xu < nu; xu += sgs) {
                    uint u = e0 / 32u + xu;
                    QRaw w[NMAT * GR];   // a row past the end reads the last row
                    [[unroll]] for (uint r = 0u; r < GR; r++)
                        [[unroll]] for (uint m = 0u; m < NMAT; m++)
                            w[r * NMAT + m] = qload(m, min(row + r, pc.rows - 1u) * row_bytes, u);
                    [[unroll]] for (uint j = 0u; j < TG; j++) {
                        qx_row = j;
                        [[unroll]] for (uint q = 0u; q < NMAT * GR; q++)
                            acc[q * TG + j] += qdot(q % NMAT, w[q], min(row + q / NMAT, pc.rows - 1u) * row_bytes, u, xu);
                    }
                }
            }
            [[unroll]] for (uint r = 0u; r < GR; r++)
                [[unroll]] for (uint j = 0u; j < TG; j++) {
                    float g = subgroupAdd(acc[(NMAT * r) * TG + j]);
                    float u = NMAT == 2u ? subgroupAdd(acc[(NMAT * r + NMAT - 1u) * TG + j]) : 0.0;
                    if (subgroupElect() && t0 + j < pc.T && row + r < pc.rows)
                        store(t0 + j, row + r, g, u);
                }
        }
    }
}

#elif !defined(MM_TILED) && (defined(MM_SILU) || defined(MM_Q) || defined(MM_R2))
// ---- the multi-column matvec (small T), the gated FFN and block types -------
// The gated FFN, and over block-typed weights (where the device lacks
// integer dot products: the integer form above) MATMUL and MATMUL_ADD too,
// whose NMAT is one matrix; with MM_R2 (f16) a MATMUL of many rows, the LM
// head of a verification step (passes/coopmat.c).
#define GR 2u             // rows a subgroup
#define SR (8u * GR)      // rows a workgroup: LOOM_MATMUL_SMALL_GATED_ROWS
#define TG 4u             // token rows a pass (four TOKEN_DOTS below)

void main()
{
    uint sgs = gl_SubgroupSize, lane = gl_SubgroupInvocationID;
    uint chunks = (pc.cols + 7u) / 8u;
    // A subgroup GR rows of each matrix (rows GR sg, ... of the block):
    // its lanes take chunks lane, lane + sgs, ..., one a trip, each chunk of
    // x loaded once for the GR rows, and the sums meet in one subgroupAdd
    // each, with no shared memory and no barrier. On an H200 two rows a
    // subgroup took the gated FFN of a 4-row verification step 133.6 ->
    // 109.3 us a node at `7b` Q4_K and 36.4 -> 33.3 at `1b` f16, where one
    // row took a subgroup (two chunks a trip), and four rows lost
    // (docs/perf-log.md, "the T-row q/k/v form"). Row blocks past the
    // workgroups (the builder caps them at 65535) loop.
    for (uint r0 = gl_WorkGroupID.x * SR; r0 < pc.rows; r0 += gl_NumWorkGroups.x * SR) {
        for (uint k = GR * gl_SubgroupID; k < SR; k += GR * gl_NumSubgroups) {
            uint row = r0 + k;
            if (row >= pc.rows)
                break;
            for (uint t0 = 0u; t0 < pc.T; t0 += TG) {
                float acc[NMAT * GR * TG];   // (row r, matrix m) at (NMAT r + m) TG
                [[unroll]] for (uint s = 0u; s < NMAT * GR * TG; s++)
                    acc[s] = 0.0;
                for (uint c = lane; c < chunks; c += sgs) {
                    vec4 wa[NMAT * GR], wb[NMAT * GR];
                    [[unroll]] for (uint r = 0u; r < GR; r++)
                        [[unroll]] for (uint m = 0u; m < NMAT; m++) {
                            wa[r * NMAT + m] = vec4(0.0);
                            wb[r * NMAT + m] = vec4(0.0);
                            if (row + r < pc.rows)
                                wchunk(m, row + r, c, wa[r * NMAT + m], wb[r * NMAT + m]);
                        }
                    TOKEN_DOTS(0u, NMAT * GR)
                    TOKEN_DOTS(1u, NMAT * GR)
                    TOKEN_DOTS(2u, NMAT * GR)
                    TOKEN_DOTS(3u, NMAT * GR)
                }
                [[unroll]] for (uint r = 0u; r < GR; r++)
                    [[unroll]] for (uint j = 0u; j < TG; j++) {
                        float g = subgroupAdd(acc[(NMAT * r) * TG + j]);
                        float u = NMAT == 2u ? subgroupAdd(acc[(NMAT * r + NMAT - 1u) * TG + j]) : 0.0;
                        if (subgroupElect() && t0 + j < pc.T && row + r < pc.rows)
                            store(t0 + j, row + r, g, u);
                    }
            }
        }
    }
}

#elif !defined(MM_TILED)
// ---- the multi-column matvec (small T) ------------------------------------
#define SR 2u                   // rows a workgroup: LOOM_MATMUL_SMALL_ROWS
#define TG 4u                   // token rows a pass (four TOKEN_DOTS below)
#define NA (SR * NMAT * TG)     // sums an invocation keeps
shared float red[NA][WG / 4u];  // a subgroup's sums (subgroups of 4 lanes or more)

void main()
{
    uint lid = gl_LocalInvocationID.x, chunks = (pc.cols + 7u) / 8u;
    // As the decode's matvec: invocation i takes chunks i, i + WG, ...; for
    // each it loads the chunk of every row of the block (SR x NMAT weight
    // loads in flight) and of each of TG token rows of x once, so x is read
    // once a workgroup, not once a row. The sums meet through subgroupAdd,
    // then shared memory. Past TG token rows the pass goes round its rows
    // again (the weights then come from the caches), so the registers are
    // sized for TG, not for the largest T.
    // Row blocks of SR: workgroup w takes w, w + workgroups, ... (the
    // builder caps the workgroups at 65535, Vulkan's minimum limit).
    for (uint r0 = gl_WorkGroupID.x * SR; r0 < pc.rows; r0 += gl_NumWorkGroups.x * SR) {
        for (uint t0 = 0u; t0 < pc.T; t0 += TG) {
            float acc[NA];
            [[unroll]] for (uint s = 0u; s < NA; s++)
                acc[s] = 0.0;
            for (uint c = lid; c < chunks; c += WG) {
                vec4 wa[SR * NMAT], wb[SR * NMAT];
                [[unroll]] for (uint r = 0u; r < SR; r++)
                    [[unroll]] for (uint m = 0u; m < NMAT; m++) {
                        wa[r * NMAT + m] = vec4(0.0);
                        wb[r * NMAT + m] = vec4(0.0);
                        if (r0 + r < pc.rows)
                            wchunk(m, r0 + r, c, wa[r * NMAT + m], wb[r * NMAT + m]);
                    }
                TOKEN_DOTS(0u, SR * NMAT)
                TOKEN_DOTS(1u, SR * NMAT)
                TOKEN_DOTS(2u, SR * NMAT)
                TOKEN_DOTS(3u, SR * NMAT)
            }
            [[unroll]] for (uint s = 0u; s < NA; s++) {
                float v = subgroupAdd(acc[s]);
                if (subgroupElect())
                    red[s][gl_SubgroupID] = v;
            }
            memoryBarrierShared();
            barrier();
            if (lid < SR * TG) {   // invocation (r, j): row r0 + r of token row t0 + j
                uint r = lid / TG, j = lid % TG;
                float g = 0.0, u = 0.0;
                for (uint i = 0u; i < gl_NumSubgroups; i++) {
                    g += red[(r * NMAT) * TG + j][i];
                    u += red[(r * NMAT + NMAT - 1u) * TG + j][i];
                }
                if (r0 + r < pc.rows && t0 + j < pc.T)
                    store(t0 + j, r0 + r, g, u);
            }
            barrier();   // red is free again
        }
    }
}

#elif !defined(MM_COOP)
// ---- the tiled form -------------------------------------------------------
#define BM 64u   // rows a tile: LOOM_MATMUL_TILE_ROWS
#define BN 64u   // token rows a tile: LOOM_MATMUL_TILE_T
#define BK 32u   // columns a slice: one block of 32, four chunks of 8
#define PAD (BK + 1u)
shared float ws[NMAT][BM * PAD];
shared float xs[BN * PAD];

void main()
{
    uint lid = gl_LocalInvocationID.x;
    uint tiles = (pc.rows + BM - 1u) / BM;
#ifdef MM_SK
    uint ntile = tiles * ((pc.T + BN - 1u) / BN), wgi = gl_WorkGroupID.x % ntile, half_k = gl_WorkGroupID.x / ntile;
    uint nk = (pc.cols + BK - 1u) / BK, kbeg = sk_from(half_k, nk) * BK, kend = sk_from(half_k + 1u, nk) * BK;
#else
    uint wgi = gl_WorkGroupID.x, kbeg = 0u, kend = pc.cols;
#endif
    uint row0 = (wgi % tiles) * BM, t0 = (wgi / tiles) * BN;
    // Outputs: rows tx + 16 i, token rows ty + 16 j of the tile (a warp's
    // lanes take consecutive rows: y's writes are contiguous, and the
    // shared reads of a row stride PAD apart, in distinct banks).
    uint tx = lid % 16u, ty = lid / 16u;
    // Staging: invocation lid fills chunk lid % 4 of tile row lid / 4.
    uint sr = lid / 4u, sq = lid % 4u;
    float acc[NMAT][4][4];
    for (uint m = 0u; m < NMAT; m++)
        for (uint i = 0u; i < 4u; i++)
            for (uint j = 0u; j < 4u; j++)
                acc[m][i][j] = 0.0;
    for (uint k0 = kbeg; k0 < kend; k0 += BK) {
        uint c = k0 / 8u + sq;
        bool in_cols = 8u * c < pc.cols;
        for (uint m = 0u; m < NMAT; m++) {
            vec4 a = vec4(0.0), b = vec4(0.0);
            if (row0 + sr < pc.rows && in_cols)
                wchunk(m, row0 + sr, c, a, b);
            for (uint e = 0u; e < 4u; e++) {
                ws[m][sr * PAD + 8u * sq + e] = a[e];
                ws[m][sr * PAD + 8u * sq + 4u + e] = b[e];
            }
        }
        {
            vec4 a = vec4(0.0), b = vec4(0.0);
            if (t0 + sr < pc.T && in_cols)
                xchunk(t0 + sr, c, a, b);
            for (uint e = 0u; e < 4u; e++) {
                xs[sr * PAD + 8u * sq + e] = a[e];
                xs[sr * PAD + 8u * sq + 4u + e] = b[e];
            }
        }
        memoryBarrierShared();
        barrier();
        for (uint kk = 0u; kk < BK; kk++) {
            float xv[4];
            for (uint j = 0u; j < 4u; j++)
                xv[j] = xs[(ty + 16u * j) * PAD + kk];
            for (uint m = 0u; m < NMAT; m++)
                for (uint i = 0u; i < 4u; i++) {
                    float w = ws[m][(tx + 16u * i) * PAD + kk];
                    for (uint j = 0u; j < 4u; j++)
                        acc[m][i][j] += w * xv[j];
                }
        }
        barrier();
    }
#ifdef MM_SK
    // Element (token row ty + 16 j, row tx + 16 i) of the tile at
    // (ty + 16 j) BM + tx + 16 i of its half's partial.
    uint pb = 2u * wgi * (BM * BN);
    for (uint j = 0u; j < 4u; j++)
        for (uint i = 0u; i < 4u; i++)
            part[pb + half_k * (BM * BN) + (ty + 16u * j) * BM + tx + 16u * i] = acc[0][i][j];
    if (!sk_second(wgi))
        return;
    for (uint j = 0u; j < 4u; j++)
        for (uint i = 0u; i < 4u; i++) {
            uint e = (ty + 16u * j) * BM + tx + 16u * i;
            acc[0][i][j] = part[pb + e] + part[pb + BM * BN + e];
        }
#endif
    for (uint j = 0u; j < 4u; j++)
        for (uint i = 0u; i < 4u; i++) {
            uint row = row0 + tx + 16u * i, t = t0 + ty + 16u * j;
            if (row < pc.rows && t < pc.T)
                store(t, row, acc[0][i][j], acc[NMAT - 1u][i][j]);
        }
}

#elif !defined(MM_L)
// ---- the cooperative-matrix form ------------------------------------------
// Four subgroups, two down the rows by two across the token rows, each
// taking 32 rows by 32 token rows of the tile: small tiles, so that a
// matrix is many workgroups and an SM holds several (the form waits on its
// loads more than it multiplies; docs/perf-log.md has the tile shapes
// measured). With MM_KS (the forms of one matrix: MATMUL, MATMUL_ADD) a
// workgroup is KS = 2 such groups of four: group h takes the K slices h,
// h + 2, ..., each staged in its own shared memory, and at the end group
// 1's results are added to group 0's in a fixed order, so a workgroup has
// twice the loads in flight with as many workgroups. The split pass takes
// it where a matrix is few tiles (passes/coopmat.c): the residual
// projections of `1b` at T = 128 are 64 workgroups, and there it took 27%
// less time; at T = 512 (256 workgroups) 2% more (docs/perf-log.md).
#define CBM 64u   // rows a tile: LOOM_MATMUL_COOP_ROWS
#define CBN 64u   // token rows a tile: LOOM_MATMUL_COOP_T
#if defined(MM_KS)
#ifdef MM_SILU
#error "MM_KS: the forms of one matrix"
#endif
#define KS 2u
#define CBK 32u   // columns a slice of each group (KS groups: shared memory within 48 KB)
#else
#define KS 1u
#ifdef MM_SILU
#define CBK 32u   // columns a slice (two weight tiles: shared memory within 48 KB)
#else
#define CBK 64u
#endif
#endif
#define GW (WG / KS)         // invocations a group
#define CQ (CBK / 8u)        // chunks (uvec4 of 8 halves) a staged row
#define CS (CQ + 1u)         // a staged row with one chunk of padding: ldmatrix rows in distinct banks
#define RP (GW / CQ)         // staged rows a pass of the group
#define APASS (CBM / RP)
#define BPASS (CBN / RP)
#define FA fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
shared uvec4 as0[KS * CBM * CS];
#ifdef MM_SILU
shared uvec4 as1[CBM * CS];
#endif
shared uvec4 bs[KS * CBN * CS];
shared float cs[(WG / 32u) * 256u];   // a 16 x 16 result of each subgroup, column-major

#ifdef MM_KS
// Element idx (column-major) of the other half's result at rb of as0 (q
// 0) or bs (q 1): f32 words, 4 a uvec4.
float other_half(uint q, uint rb, uint idx)
{
    uint f = 4u * rb + idx;
    uvec4 v = q == 0u ? as0[f >> 2u] : bs[f >> 2u];
    return uintBitsToFloat(v[f & 3u]);
}
#endif

// Each 16 x 16 result through the subgroup's staging, column-major (a
// column is a token row: lanes write 16 consecutive rows of y); with KS 2,
// plus the other half's result at (q, rb).
void emit(FC g16, FC u16, uint row0, uint t0, uint q, uint rb)
{
    uint base = gl_SubgroupID * 256u, lane = gl_SubgroupInvocationID;
    float g[8], u[8];
    coopMatStoreNV(g16, cs, base, 16u, true);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    for (uint e = 0u; e < 8u; e++)
        g[e] = cs[base + lane + 32u * e];
#ifdef MM_KS
    for (uint e = 0u; e < 8u; e++)
        g[e] += other_half(q, rb, lane + 32u * e);
#endif
#ifdef MM_SILU
    subgroupBarrier();
    coopMatStoreNV(u16, cs, base, 16u, true);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    for (uint e = 0u; e < 8u; e++)
        u[e] = cs[base + lane + 32u * e];
#else
    u = g;
#endif
    subgroupBarrier();
    for (uint e = 0u; e < 8u; e++) {
        uint idx = lane + 32u * e, row = row0 + idx % 16u, t = t0 + idx / 16u;
#ifdef MM_Y16
        // Lanes 2k and 2k + 1 hold rows row and row + 1 of one token row:
        // the even lane stores the pair (rows even: a pair never straddles
        // the end).
        uint pair = pair_half(silu(g[e]) * u[e]);
        if ((lane & 1u) == 0u && row < pc.rows && t < pc.T)
            yh[(t * pc.rows + row) >> 1u] = pair;
#else
        if (row < pc.rows && t < pc.T)
            store(t, row, g[e], u[e]);
#endif
    }
}

// Results: named, not arrays, so that no compiler keeps them in memory.
#ifdef MM_SILU
#define MMA2(i, fa1, fa0)                                  \
    a##i##0 = coopMatMulAddNV(fa0, fb0, a##i##0);          \
    a##i##1 = coopMatMulAddNV(fa0, fb1, a##i##1);          \
    u##i##0 = coopMatMulAddNV(fa1, fb0, u##i##0);          \
    u##i##1 = coopMatMulAddNV(fa1, fb1, u##i##1);
#else
#define MMA2(i, fa1, fa0)                                  \
    a##i##0 = coopMatMulAddNV(fa0, fb0, a##i##0);          \
    a##i##1 = coopMatMulAddNV(fa0, fb1, a##i##1);
#endif

void main()
{
    // grp: the K half a subgroup multiplies; stg: the one an invocation
    // stages (its index's half), so each (stg, lid) is one invocation
    // whatever the mapping of invocations to subgroups.
    uint sg = gl_SubgroupID % 4u, grp = gl_SubgroupID / 4u;
    uint stg = gl_LocalInvocationID.x / GW, lid = gl_LocalInvocationID.x % GW;
    // Token tiles fastest: the workgroups running at once share weight rows,
    // so each weight tile comes from memory about once.
    uint tiles = (pc.T + CBN - 1u) / CBN;
    uint row0 = (gl_WorkGroupID.x / tiles) * CBM, t0 = (gl_WorkGroupID.x % tiles) * CBN;
    uint wm = 32u * (sg % 2u), wn = 32u * (sg / 2u);
    // Staging: chunk lid % CQ of staged rows lid / CQ + RP p, into half
    // stg's tiles (at so, to); the multiplication reads half grp's (ao, bo).
    uint sr = lid / CQ, sq = lid % CQ, so = stg * CBM * CS, to = stg * CBN * CS;
    uint ao = grp * CBM * CS, bo = grp * CBN * CS;
    FC a00 = FC(0.0), a01 = FC(0.0), a10 = FC(0.0), a11 = FC(0.0);
#ifdef MM_SILU
    FC u00 = FC(0.0), u01 = FC(0.0), u10 = FC(0.0), u11 = FC(0.0);
    WREG pu[APASS];
#endif
    WREG pa[APASS];
    XREG px[BPASS];
    // Half h's slices: columns k0 + h CBK for k0 = 0, KS CBK, ...; a slice
    // past the end stages zeros, so both halves meet every barrier.
    uint c0 = stg * CQ + sq;
    for (uint p = 0u; p < APASS; p++) {
        pa[p] = wstage(0u, row0 + sr + RP * p, c0);
#ifdef MM_SILU
        pu[p] = wstage(1u, row0 + sr + RP * p, c0);
#endif
    }
    for (uint p = 0u; p < BPASS; p++)
        px[p] = xstage(t0 + sr + RP * p, c0);
    for (uint k0 = 0u; k0 < pc.cols; k0 += KS * CBK) {
        barrier();   // the slice before is multiplied
        for (uint p = 0u; p < APASS; p++) {
            as0[so + (sr + RP * p) * CS + sq] = WPACK(pa[p]);
#ifdef MM_SILU
            as1[(sr + RP * p) * CS + sq] = WPACK(pu[p]);
#endif
        }
        for (uint p = 0u; p < BPASS; p++)
            bs[to + (sr + RP * p) * CS + sq] = XPACK(px[p]);
        memoryBarrierShared();
        barrier();
        if (k0 + KS * CBK < pc.cols) {   // the next slice's loads in flight while this one is multiplied
            uint c = (k0 + KS * CBK) / 8u + c0;
            for (uint p = 0u; p < APASS; p++) {
                pa[p] = wstage(0u, row0 + sr + RP * p, c);
#ifdef MM_SILU
                pu[p] = wstage(1u, row0 + sr + RP * p, c);
#endif
            }
            for (uint p = 0u; p < BPASS; p++)
                px[p] = xstage(t0 + sr + RP * p, c);
        }
        for (uint kk = 0u; kk < CQ; kk += 2u) {
            FA fb0, fb1, fw0, fw1;
            coopMatLoadNV(fb0, bs, bo + wn * CS + kk, CS, true);
            coopMatLoadNV(fb1, bs, bo + (wn + 16u) * CS + kk, CS, true);
            coopMatLoadNV(fw0, as0, ao + wm * CS + kk, CS, false);
#ifdef MM_SILU
            coopMatLoadNV(fw1, as1, wm * CS + kk, CS, false);
#endif
            MMA2(0, fw1, fw0)
            coopMatLoadNV(fw0, as0, ao + (wm + 16u) * CS + kk, CS, false);
#ifdef MM_SILU
            coopMatLoadNV(fw1, as1, (wm + 16u) * CS + kk, CS, false);
#endif
            MMA2(1, fw1, fw0)
        }
    }
#ifdef MM_KS
    // Half 1's results to half 0 through the staging (f32, column-major as
    // emit reads its own: a subgroup's first two in as0, its last two in bs,
    // 64 uvec4 each), added by emit, always in this order.
    barrier();   // every slice is multiplied: the staging is free
    uint rb = sg * 128u;
    if (grp == 1u) {
        coopMatStoreNV(a00, as0, rb, 4u, true);
        coopMatStoreNV(a01, as0, rb + 64u, 4u, true);
        coopMatStoreNV(a10, bs, rb, 4u, true);
        coopMatStoreNV(a11, bs, rb + 64u, 4u, true);
    }
    memoryBarrierShared();
    barrier();
    if (grp == 1u)
        return;
#else
    uint rb = 0u;
#endif
#ifndef MM_SILU
#define u00 a00
#define u01 a01
#define u10 a10
#define u11 a11
#endif
    emit(a00, u00, row0 + wm, t0 + wn, 0u, rb);
    emit(a01, u01, row0 + wm, t0 + wn + 16u, 0u, rb + 64u);
    emit(a10, u10, row0 + wm + 16u, t0 + wn, 1u, rb);
    emit(a11, u11, row0 + wm + 16u, t0 + wn + 16u, 1u, rb + 64u);
}
#else
// ---- the large-tile cooperative-matrix form (MM_L) -------------------------
// For a matrix with many tiles and a long K: eight subgroups take a tile of
// LBM rows by LBN token rows, each subgroup SGM weight fragments by two
// token fragments (16 x 16 each). The gated FFN (MM_SILU, MM_L=128): the
// LBM staged rows are 64 rows of Wg and the same 64 of Wu, and subgroup
// (rg, tg) takes rows 32 rg .. 32 rg + 31 of both, so silu(g) u meets in
// its own accumulators: on an H200 `7b`'s gated FFN at 512 token rows took
// 35% less time than in the small tiles (docs/perf-log.md). Shared memory
// holds two slices: the next slice is stored while no one reads it, one
// barrier a slice, and its global loads are in flight while this one is
// multiplied. MM_L=64: 64 token rows a tile, twice the workgroups. On an
// H100 at 512 token rows the residual projections of `7b` took 43% less
// time than in the small tiles, `1b`'s down projection (MM_L=64) about 25%
// less; on an H200, with the gated FFN in these tiles, K 2048 (`1b`'s q/k/v,
// o and gated FFN) took 15% less for the step (docs/perf-log.md).
#if defined(MM_SILU) && MM_L != 128
#error "MM_L with MM_SILU: 128 token rows"
#endif
#define LBM 128u   // rows a tile: LOOM_MATMUL_COOP_L_ROWS (MM_SILU: 64 of each matrix, LOOM_MATMUL_COOP_LS_ROWS)
#if MM_L == 64
#define LBN 64u    // token rows a tile: LOOM_MATMUL_COOP_L_T64
#define SGM 2u
#define RGS 4u     // subgroups down the rows (RGS x 8 / RGS)
#else
#define LBN 128u   // LOOM_MATMUL_COOP_L_T
#define SGM 4u
#define RGS 2u
#endif
#define LBK 32u             // columns a slice
#define LCQ (LBK / 8u)      // chunks (uvec4 of 8 halves) a staged row
#define LCS (LCQ + 1u)      // one chunk of padding: ldmatrix rows in distinct banks
#define LRP (WG / LCQ)      // staged rows a pass: 64
#define LAP (LBM / LRP)     // weight passes
#define LBP (LBN / LRP)     // x passes
#define LSTAGE ((LBM + LBN) * LCS)
#define FA fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
shared uvec4 st[2u * LSTAGE];   // two slices, each LBM weight rows then LBN token rows

#ifndef MM_SILU
// A 16 x 16 result through the subgroup's 64 uvec4 of the staging,
// column-major: a column is a token row, so lanes write 16 consecutive
// rows of y.
void emit(FC g16, uint row0, uint t0)
{
    uint base = gl_SubgroupID * 64u, lane = gl_SubgroupInvocationID;
    float g[8];
    coopMatStoreNV(g16, st, base, 4u, true);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    for (uint e = 0u; e < 8u; e++) {
        uint f = lane + 32u * e;
        g[e] = uintBitsToFloat(st[base + (f >> 2u)][f & 3u]);
    }
    subgroupBarrier();
    for (uint e = 0u; e < 8u; e++) {
        uint idx = lane + 32u * e, row = row0 + idx % 16u, t = t0 + idx / 16u;
        if (row < pc.rows && t < pc.T)
            store(t, row, g[e], g[e]);
    }
}
#endif

#ifdef MM_SILU
// The gated tile's 16 x 16 results g16 (Wg x) and u16 (Wu x) through the
// subgroup's staging, as emit: silu(g) u, stored as f32 or, with MM_Y16,
// as f16 pairs (lanes 2k and 2k + 1 hold rows row and row + 1 of one token
// row; rows even, so a pair never straddles the end).
void emit_gated(FC g16, FC u16, uint row0, uint t0)
{
    uint base = gl_SubgroupID * 64u, lane = gl_SubgroupInvocationID;
    float g[8], u[8];
    coopMatStoreNV(g16, st, base, 4u, true);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    for (uint e = 0u; e < 8u; e++) {
        uint f = lane + 32u * e;
        g[e] = uintBitsToFloat(st[base + (f >> 2u)][f & 3u]);
    }
    subgroupBarrier();
    coopMatStoreNV(u16, st, base, 4u, true);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    for (uint e = 0u; e < 8u; e++) {
        uint f = lane + 32u * e;
        u[e] = uintBitsToFloat(st[base + (f >> 2u)][f & 3u]);
    }
    subgroupBarrier();
    for (uint e = 0u; e < 8u; e++) {
        uint idx = lane + 32u * e, row = row0 + idx % 16u, t = t0 + idx / 16u;
#ifdef MM_Y16
        uint pair = pair_half(silu(g[e]) * u[e]);
        if ((lane & 1u) == 0u && row < pc.rows && t < pc.T)
            yh[(t * pc.rows + row) >> 1u] = pair;
#else
        if (row < pc.rows && t < pc.T)
            store(t, row, g[e], u[e]);
#endif
    }
}
#endif

#define LMMA(i, w)                                 \
    a##i##0 = coopMatMulAddNV(w, fb0, a##i##0);    \
    a##i##1 = coopMatMulAddNV(w, fb1, a##i##1);

void main()
{
    // Subgroup (rg, tg): rows 16 SGM rg .. of the tile, token rows 32 tg ..
    uint sg = gl_SubgroupID, rg = sg % RGS, tg = sg / RGS, lid = gl_LocalInvocationID.x;
    uint tiles = (pc.T + LBN - 1u) / LBN;   // token tiles fastest: workgroups at once share weight rows
#ifdef MM_SILU
    // Staged rows p LRP + sr: row row0 + sr of matrix p (LAP = 2 passes of
    // 64 rows). Subgroup rg takes rows 32 rg .. of y: its fragments 0, 1 are
    // Wg's rows, 2, 3 Wu's same rows.
    uint row0 = (gl_WorkGroupID.x / tiles) * (LBM / 2u), t0 = (gl_WorkGroupID.x % tiles) * LBN;
#define WROW(p) (row0 + sr)
#define WMAT(p) (p)
    uint fo0 = 32u * rg, fo1 = fo0 + 16u, fo2 = 64u + fo0, fo3 = fo2 + 16u;
#else
#ifdef MM_SK
    uint ntile = ((pc.rows + LBM - 1u) / LBM) * tiles, wgi = gl_WorkGroupID.x % ntile;
    uint half_k = gl_WorkGroupID.x / ntile;
#else
    uint wgi = gl_WorkGroupID.x;
#endif
    uint row0 = (wgi / tiles) * LBM, t0 = (wgi % tiles) * LBN;
#define WROW(p) (row0 + sr + LRP * (p))
#define WMAT(p) 0u
    uint fo0 = rg * 16u * SGM, fo1 = fo0 + 16u, fo2 = fo0 + 32u, fo3 = fo0 + 48u;
#endif
    // Staging: chunk sq of staged rows sr + LRP p.
    uint sr = lid / LCQ, sq = lid % LCQ, bt = LBM * LCS + (32u * tg) * LCS;
    FC a00 = FC(0.0), a01 = FC(0.0), a10 = FC(0.0), a11 = FC(0.0);
#if MM_L != 64
    FC a20 = FC(0.0), a21 = FC(0.0), a30 = FC(0.0), a31 = FC(0.0);
#endif
    WREG pa[LAP];
    XREG px[LBP];
    uint nk = (pc.cols + LBK - 1u) / LBK;
#ifdef MM_SK
    uint kbeg = sk_from(half_k, nk), kend = sk_from(half_k + 1u, nk);
#else
    uint kbeg = 0u, kend = nk;
#endif
    for (uint p = 0u; p < LAP; p++)
        pa[p] = wstage(WMAT(p), WROW(p), kbeg * LCQ + sq);
    for (uint p = 0u; p < LBP; p++)
        px[p] = xstage(t0 + sr + LRP * p, kbeg * LCQ + sq);
    for (uint p = 0u; p < LAP; p++)
        st[(sr + LRP * p) * LCS + sq] = WPACK(pa[p]);
    for (uint p = 0u; p < LBP; p++)
        st[LBM * LCS + (sr + LRP * p) * LCS + sq] = XPACK(px[p]);
    memoryBarrierShared();
    barrier();
    for (uint k = kbeg; k < kend; k++) {
        uint cur = ((k - kbeg) & 1u) * LSTAGE, nxt = LSTAGE - cur;
        bool more = k + 1u < kend;
        if (more) {   // the next slice's loads in flight while this one is multiplied
            uint c = (k + 1u) * LCQ + sq;
            for (uint p = 0u; p < LAP; p++)
                pa[p] = wstage(WMAT(p), WROW(p), c);
            for (uint p = 0u; p < LBP; p++)
                px[p] = xstage(t0 + sr + LRP * p, c);
        }
        // Not unrolled: on an H200 `1b` f16 pp512 took 1.0% less time,
        // `7b` with 8 layers 0.7% less (docs/perf-log.md, "block-typed
        // tiles decoded where they are staged").
        [[dont_unroll]] for (uint kk = 0u; kk < LCQ; kk += 2u) {
            FA fb0, fb1, w0, w1;
            coopMatLoadNV(fb0, st, cur + bt + kk, LCS, true);
            coopMatLoadNV(fb1, st, cur + bt + 16u * LCS + kk, LCS, true);
            coopMatLoadNV(w0, st, cur + fo0 * LCS + kk, LCS, false);
            coopMatLoadNV(w1, st, cur + fo1 * LCS + kk, LCS, false);
            LMMA(0, w0)
            LMMA(1, w1)
#if MM_L != 64
            FA w2, w3;
            coopMatLoadNV(w2, st, cur + fo2 * LCS + kk, LCS, false);
            coopMatLoadNV(w3, st, cur + fo3 * LCS + kk, LCS, false);
            LMMA(2, w2)
            LMMA(3, w3)
#endif
        }
        if (more) {   // the other slice: everyone has passed the last barrier, so no one reads it
            for (uint p = 0u; p < LAP; p++)
                st[nxt + (sr + LRP * p) * LCS + sq] = WPACK(pa[p]);
            for (uint p = 0u; p < LBP; p++)
                st[nxt + LBM * LCS + (sr + LRP * p) * LCS + sq] = XPACK(px[p]);
        }
        memoryBarrierShared();
        barrier();
    }
    // Every slice is multiplied (the loop's last barrier): the staging is free.
    uint tr = t0 + 32u * tg;
#ifdef MM_SILU
    uint r0 = row0 + fo0;
    emit_gated(a00, a20, r0, tr);
    emit_gated(a01, a21, r0, tr + 16u);
    emit_gated(a10, a30, r0 + 16u, tr);
    emit_gated(a11, a31, r0 + 16u, tr + 16u);
#elif defined(MM_SK)
    // Each fragment into this half's partial tile, column-major (element
    // (row r, token row t) of the tile at t LBM + r); the second half to
    // finish adds both into y.
    uint pb = 2u * wgi * (LBM * LBN), ph = pb + half_k * (LBM * LBN), lt = 32u * tg;
    coopMatStoreNV(a00, part, ph + lt * LBM + fo0, LBM, true);
    coopMatStoreNV(a01, part, ph + (lt + 16u) * LBM + fo0, LBM, true);
    coopMatStoreNV(a10, part, ph + lt * LBM + fo1, LBM, true);
    coopMatStoreNV(a11, part, ph + (lt + 16u) * LBM + fo1, LBM, true);
    coopMatStoreNV(a20, part, ph + lt * LBM + fo2, LBM, true);
    coopMatStoreNV(a21, part, ph + (lt + 16u) * LBM + fo2, LBM, true);
    coopMatStoreNV(a30, part, ph + lt * LBM + fo3, LBM, true);
    coopMatStoreNV(a31, part, ph + (lt + 16u) * LBM + fo3, LBM, true);
    if (!sk_second(wgi))
        return;
    for (uint e = lid; e < LBM * LBN; e += WG) {
        uint row = row0 + e % LBM, t = t0 + e / LBM;
        float v = part[pb + e] + part[pb + LBM * LBN + e];
        if (row < pc.rows && t < pc.T)
            store(t, row, v, v);
    }
#else
    uint r0 = row0 + fo0;
    emit(a00, r0, tr);
    emit(a01, r0, tr + 16u);
    emit(a10, r0 + 16u, tr);
    emit(a11, r0 + 16u, tr + 16u);
#if MM_L != 64
    emit(a20, r0 + 32u, tr);
    emit(a21, r0 + 32u, tr + 16u);
    emit(a30, r0 + 48u, tr);
    emit(a31, r0 + 48u, tr + 16u);
#endif
#endif
}
#endif
