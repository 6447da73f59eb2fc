// MATVEC and its fused forms. One workgroup of 256 invocations computes
// MV_ROWS rows: every invocation takes 16-byte column chunks t, t + 256, ...
// and, for each chunk, loads x once and the chunk of every one of the
// workgroup's rows (MV_ROWS independent weight loads in flight per chunk),
// so a short row is spread over the whole workgroup instead of one
// subgroup, and a decode-sized matrix is read in one wave. Each row's
// partial sums meet through subgroupAdd, then shared memory. Rows whose
// length is not a multiple of the vector width take the scalar path.
// Variants (defines):
//   MV_F16    weights are f16 pairs packed in u32 (no 16-bit storage needed);
//   MV_Q8_0, MV_Q4_0, MV_Q4_K, MV_Q6_K
//             weights are blocks of that type (quant.glsl), streamed as
//             chunks of 8 weights as f16 is, so every form below that
//             takes MV_F16 takes them too (MV_VW8: chunks of 8); rows are
//             whole blocks, so only the vector path is compiled.
//             MV_W2_Q4_K, MV_W2_Q6_K (with MV_QKV) the third matrix (Wv) is
//             of that type instead (Q4_K_M files mix them so); with a
//             Q6_K Wv the row blocks are taken in reverse (main());
//   MV_IDOT   (with a block type) the integer form: x quantized to int8 per
//             block of 32 in shared memory, units of 32 weights dotted 4
//             at a time (quant.glsl); the runtime takes it where the device
//             has integer dot products;
//   MV_NORM   x is first RMS-normalised and scaled by g: each workgroup sums
//             x^2 over the chunks it reads anyway, so no separate pass;
//   MV_ADD    y = W x + r (residual), r read by the invocation writing y;
//   MV_STAGE  (with MV_ADD) also t = y * s (s: the next RMS norm's gain)
//             and y^2 added into acc by float atomics, so that norm (MV_PRE)
//             reads one vector, not x and g: two 16-byte loads fewer per
//             chunk in each of its invocations (the stage pass);
//   MV_COMB   (with MV_ADD) x is an ATTENTION's output still in its
//             shares (ATT_PART in attention.glsl): every chunk combines the
//             shares of its head (at most COMB_SHARES) as it loads them.
//             Only the vector path: the gather pass binds it where cols and
//             head_dim are multiples of the vector width;
//   MV_COMB_H (with MV_COMB and MV_F16) the shares are f16, each already
//             divided by its own sum (ATT_PART_H): a chunk of a share is
//             one 16-byte load, not two;
//   MV_T16    (with MV_STAGE, MV_F16) t is stored as f16 pairs: the
//             invocation of the workgroup's first row writes both rows';
//   MV_TQ     (with MV_STAGE, block types) t is stored quantized, as the
//             integer form reads x: the workgroup's 16 rows are one quad
//             of 16 int8 codes (bytes 16 b of the binding, b the row
//             block) with its own scale d = max |t| / 127 and d times the
//             codes' sum (two floats at byte rows + 8 b), so that no
//             reader quantizes x (the stage pass);
//   MV_PRE    (with MV_NORM or MV_QKV) x is already scaled by g (t above)
//             and slot g holds the sum of squares of the unscaled x;
//   MV_XQ     (with MV_PRE, block types) x is such a quantized t: the
//             integer form reads its quads where it would have quantized
//             x into shared memory, the float form decodes them;
//   MV_X16    (with MV_F16) x is stored as f16 (a t of MV_T16, or a y of
//             MV_Y16): a chunk of x is one 16-byte load, not two;
//   MV_Y16    (with MV_SILU, MV_F16) y is stored as f16 pairs, for a
//             consumer with MV_X16;
//   MV_SILU   y = silu(Wg x) * (Wu x), two matrices streamed side by side;
//   MV_QKV    q, k, v rows (three matrices) in one dispatch; rows are taken
//             in RoPE pairs (i, i + head_dim/2) so the epilogue rotates q and
//             k and writes k and v straight into the caches at the step's
//             position (RoPE + KV_APPEND fused; mv_qkv.glsl);
//   MV_KH     (with MV_QKV) the KV caches are f16: k and v are rounded to
//             f16 as they are stored (16-bit storage);
//   MV_EMBED  (with MV_QKV) x is row token_buf[token_index] of an embedding
//             table of the weights' dtype (zeros for a token past vocab),
//             and workgroup 0 also writes it out as f32 for later readers
//             (EMBED fused in front of the first layer's q/k/v);
//   MV_LONG   two chunks a trip (2 * MV_ROWS * NMAT weight loads in flight),
//             for rows of several chunks an invocation (a down projection);
//             a form of its own, so its registers cost no other shape.
//             Not with a norm the kernel computes itself (MV_NORM without
//             MV_PRE);
//   MV_LOG    (with MV_ARGMAX) the last workgroup also writes the index
//             into slot step % slots of a ring (STEP_LOG fused): the step
//             parameters take binding 0, the others move up one;
//   MV_TAG    (with MV_F16; not with MV_COMB, MV_X16, MV_Y16, MV_T16,
//             MV_LONG, MV_ARGMAX) x and y may each be a tagged
//             vector (tag.glsl), as the push constants say: a tagged x is
//             polled chunk by chunk until its words carry this step's tag,
//             so the dispatch may start while its producer still runs (the
//             down projection behind the gated FFN); a tagged y is written
//             as tagged words (mv_tag.glsl). With MV_QKV (any weights, x
//             never tagged) a tagged y holds q, then the step's k and v
//             rows as the caches get them (mv_qkv.glsl), for an attention
//             reading them so (ATT_QKVT in attention.glsl);
//   MV_YQT    (with MV_TAG, MV_SILU, block types) y is written as tagged
//             quads (mv_tag.glsl): the workgroup's 16 rows as 16 int8
//             codes with their scale and sum, every word carrying the tag;
//   MV_XQT    (with MV_TAG, block types, not MV_TAG_GATE) x is such a
//             vector: polled quad by quad (the integer form into shared
//             memory in place of quantizing x; the float form decodes);
//   MV_TAG_GATE (with MV_TAG) the workgroup waits for all of a tagged x
//             before it loads anything (tag_gate: the o-projection behind
//             the attention);
//   MV_ARGMAX the rows' values also go to a per-workgroup (max, index); the
//             last workgroup to finish (an atomic counter) reduces them. A
//             workgroup loops over row blocks; where a row is at most one
//             chunk per invocation (the LM head) short_blocks() keeps the
//             next block's weights in flight while a block's sums meet
//             (mv_argmax.glsl).
#if defined(MV_Q8_0) || defined(MV_Q4_0) || defined(MV_Q4_K) || defined(MV_Q6_K)
#define MV_Q
#endif
#if defined(MV_F16) || defined(MV_Q)
#define MV_VW8   // x in chunks of 8 elements (two vec4)
#endif
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#ifdef MV_IDOT
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#endif
#ifdef MV_KH
#extension GL_EXT_shader_16bit_storage : require
#endif

#if defined(MV_T16) || defined(MV_Y16)
#include "half.glsl"
#endif
#ifdef MV_TAG
#ifdef MV_CNT
#define TAG_COUNTS   // counted edges too (tag.glsl): cnt_in, cnt_out at byte 112
#include "tag.glsl"
#define TAG_PC layout(offset = 112) uint cnt_in; uint cnt_out; uint tag_in; uint tag_out;
// Where a counted edge's reader takes the producer's outputs (the staged
// squares g, the residual r) they are read past the caches: no barrier
// cleaned them (tag.glsl, "Counted edges"). x (MV_XQ quads, read in the
// dot loop) is not: coherent there, the `1b` Q4_K_M step took 38% longer
// on an H200; the passes let no earlier node of the run read x's bytes.
#define TAG_COH coherent
#else
#include "tag.glsl"
#define TAG_PC layout(offset = 120) uint tag_in; uint tag_out;
#define TAG_COH
#endif
#if defined(MV_QKV)
#if defined(MV_TAG_GATE) || defined(MV_XQT) || defined(MV_YQT)
#error "MV_TAG with MV_QKV: y alone is tagged, as f32 words"
#endif
#elif defined(MV_COMB) || defined(MV_X16) || defined(MV_Y16) || defined(MV_T16) || defined(MV_LONG) || \
    defined(MV_ARGMAX) || !defined(MV_VW8)
#error "MV_TAG: the f16-weight forms that read x and write y as whole f32 words"
#endif
#if defined(MV_CNT) && (!defined(MV_Q) || !(defined(MV_PRE) || defined(MV_STAGE)))
#error "MV_CNT: a block-typed staging form or a reader of a staged norm"
#endif
#else
#define TAG_PC
#define TAG_COH
#endif
#if defined(MV_TQ) && (!defined(MV_STAGE) || defined(MV_T16) || !defined(MV_Q))
#error "MV_TQ: a staging form over block-typed weights (16 rows a workgroup: one quad)"
#endif
#if defined(MV_YQT) && (!defined(MV_TAG) || !defined(MV_SILU) || defined(MV_Y16) || !defined(MV_Q))
#error "MV_YQT: a tagged gated FFN over block-typed weights (16 rows a workgroup: one quad)"
#endif
#if defined(MV_XQT) && (!defined(MV_TAG) || defined(MV_TAG_GATE) || defined(MV_XQ) || !defined(MV_Q))
#error "MV_XQT: a tagged reader over block-typed weights"
#endif
#if defined(MV_XQ) && (!defined(MV_PRE) || defined(MV_X16) || !defined(MV_Q))
#error "MV_XQ: a staged norm's form over block-typed weights"
#endif
#if defined(MV_LONG) && defined(MV_NORM) && !defined(MV_PRE)
#error "MV_LONG does not sum x^2 for a norm"
#endif

// Invocations a workgroup: 256, and 512 in the integer forms of the
// residual projections (MV_ADD, 64 a row) and of q/k/v (MV_QKV, one row an
// invocation: QRPT below). A residual projection's workgroups fill shared
// memory with x before their first dot (quantizing it, or polling the
// tagged quads), work that twice the invocations halve, and they are few
// (dim / 16: 128 at 1b, 256 at 7b, under two an SM of an H100), so each
// holds more loads in flight. The gated FFN, which reads staged quads
// (MV_XQ), fills nothing and comes in more workgroups: it was slower so
// (docs/perf-log.md, "wider residual projections"). -DMV_WG=N overrides
// it for a probe.
#if !defined(MV_WG) && defined(MV_IDOT) && (defined(MV_ADD) || defined(MV_QKV))
#define MV_WG 512
#endif
#ifndef MV_WG
#define MV_WG 256
#endif
#define WG uint(MV_WG)
layout(local_size_x = MV_WG) in;
// Rows per workgroup (ir/ops.def: the per_group of each form): 2 by
// default, so a decode-sized matrix is many small workgroups whose last
// wave is short (docs/perf-log.md has what it cost). 4 where the .comp
// says so: the argmax forms, whose row blocks each also pay a fold into the
// workgroup's best, and RMS_NORM_MATVEC, whose every workgroup reads x and g
// (16000 workgroups for a 32000-row LM head read 256 MB of them).
// Block types (ir/ops.c: rows_per_group): 16 rows a workgroup (the integer
// form's quantized x serves them all), taken 2 rows an invocation by row
// groups of 32 invocations (block_sums_q below); the argmax forms too, whose
// wave of workgroups then loops over a quarter of the row blocks that 4 rows
// a workgroup gave it (the 1b Q4_K_M step 5% faster on an H100:
// docs/perf-log.md).
#ifdef MV_Q
#undef MV_ROWS
#define MV_ROWS 16u
// q/k/v's integer forms: one row an invocation at 512 invocations (40
// registers, from 59-64). On an H200 (docs/perf-log.md, "q/k/v at 512
// invocations"): the forms reading staged quads took the 1b Q4_K_M step
// 613.5 -> 598.7 us; the first layer's, which quantizes x itself (MV_EMBED),
// 586.6 -> 585.5 (and 7b with 8 layers 656.4 -> 654.3), where 512 with two
// rows an invocation took 590.4 and 658.1.
#if defined(MV_IDOT) && defined(MV_QKV)
#define QRPT 1u
#else
#define QRPT 2u
#endif
#endif
#ifndef MV_ROWS
#define MV_ROWS 2u
#endif

#ifdef MV_Q
// Bytes of a row of matrix m: its blocks (QK weights each) times their size.
#if defined(MV_Q8_0)
#define QK0 32u
#define QB0 34u
#define QCHUNK0 q8_0_chunk
#define QCPB0 Q8_0_CHUNKS
#define QLOAD0 q8_0_load
#define QDOT0 q8_0_dot
#elif defined(MV_Q4_0)
#define QK0 32u
#define QB0 18u
#define QCHUNK0 q4_0_chunk
#define QCPB0 Q4_0_CHUNKS
#define QLOAD0 q4_0_load
#define QDOT0 q4_0_dot
#elif defined(MV_Q4_K)
#define QK0 256u
#define QB0 144u
#define QCHUNK0 q4_k_chunk
#define QCPB0 Q4_K_CHUNKS
#define QLOAD0 q4_k_load
#define QDOT0 q4_k_dot
#else
#define QK0 256u
#define QB0 210u
#define QCHUNK0 q6_k_chunk
#define QCPB0 Q6_K_CHUNKS
#define QLOAD0 q6_k_load
#define QDOT0 q6_k_dot
#endif
#if defined(MV_W2_Q6_K)
#define QK2 256u
#define QB2 210u
#define QCHUNK2 q6_k_chunk
#define QCPB2 Q6_K_CHUNKS
#define QLOAD2 q6_k_load
#define QDOT2 q6_k_dot
#elif defined(MV_W2_Q4_K)
#define QK2 256u
#define QB2 144u
#define QCHUNK2 q4_k_chunk
#define QCPB2 Q4_K_CHUNKS
#define QLOAD2 q4_k_load
#define QDOT2 q4_k_dot
#else
#define QCPB2 QCPB0
#define QK2 QK0
#define QB2 QB0
#define QCHUNK2 QCHUNK0
#endif
#endif

#ifdef MV_Q
#define WVEC QChunk   // a chunk's 8 codes and its scale (quant.glsl)
#define WSCALAR uint
#define VW 8u
#define SW 2u
#elif defined(MV_F16)
#define WVEC uvec4
#define WSCALAR uint
#define VW 8u   // elements per 16-byte load
#define SW 2u   // elements per scalar load
#else
#define WVEC vec4
#define WSCALAR float
#define VW 4u
#define SW 1u
#endif

// ---- bindings ----------------------------------------------------------
#ifdef MV_QKV
#include "params.glsl"
layout(push_constant) uniform Pc {
    uint q_rows; uint kv_rows; uint cols; float eps; uint head_dim; uint max_seq; float theta;
#ifdef MV_EMBED
    uint vocab; uint token_index;
#endif
    TAG_PC
} pc;
#ifdef MV_EMBED
#define B_TAB 1
#define B_TOK 2
#define B_G 3
#define B_W0 4
#define B_W1 5
#define B_W2 6
#define B_Y 7
#define B_KC 8
#define B_VC 9
#define B_XOUT 10
#else
#define B_X 1
#define B_G 2
#define B_W0 3
#define B_W1 4
#define B_W2 5
#define B_Y 6
#define B_KC 7
#define B_VC 8
#endif
#else
#ifdef MV_LOG
#include "params.glsl"
layout(push_constant) uniform Pc { uint rows; uint cols; float eps; uint slots; } pc;
#define B_BASE 1
#elif defined(MV_NORM)
layout(push_constant) uniform Pc { uint rows; uint cols; float eps; TAG_PC } pc;
#elif defined(MV_COMB)
layout(push_constant) uniform Pc { uint rows; uint cols; uint head_dim; uint splits; } pc;
#else
layout(push_constant) uniform Pc { uint rows; uint cols; TAG_PC } pc;
#endif
#ifndef B_BASE
#define B_BASE 0
#endif
#define B_W0 B_BASE
#ifdef MV_SILU
#define B_W1 (B_BASE + 1)
#define B_X (B_BASE + 2)
#else
#define B_X (B_BASE + 1)
#endif
#ifdef MV_NORM
#define B_G (B_X + 1)
#define B_NEXT (B_X + 2)
#else
#define B_NEXT (B_X + 1)
#endif
#ifdef MV_ADD
#define B_R B_NEXT
#ifdef MV_STAGE
#define B_S (B_NEXT + 1)
#define B_Y (B_NEXT + 2)
#define B_T (B_NEXT + 3)
#define B_ACC (B_NEXT + 4)
#else
#define B_Y (B_NEXT + 1)
#endif
#else
#define B_Y B_NEXT
#endif
#ifdef MV_ARGMAX
#define B_OUT (B_Y + 1)
#define B_PART (B_Y + 2)
#define B_COUNT (B_Y + 3)
#define B_RING (B_Y + 4)
#endif
#endif

#ifdef MV_Q
// Blocks are read as words (quant.glsl); matrix 3 is MV_EMBED's table.
// Each binding as words, 8-byte pairs and 16-byte quads (QWORD, QVEC2,
// QVEC4 of quant.glsl).
#define QBIND(k, b)                                                      \
    layout(set = 0, binding = b) readonly buffer W##k##q { uint w##k##q[]; };   \
    layout(set = 0, binding = b) readonly buffer W##k##q2 { uvec2 w##k##q2[]; }; \
    layout(set = 0, binding = b) readonly buffer W##k##q4 { uvec4 w##k##q4[]; };
QBIND(0, B_W0)
#if defined(MV_SILU) || defined(MV_QKV)
QBIND(1, B_W1)
#endif
#ifdef MV_QKV
QBIND(2, B_W2)
#endif
#ifdef MV_EMBED
QBIND(3, B_TAB)
#endif
#if defined(MV_EMBED)
#define QSEL(m, v, i) ((m) == 0u ? w0##v[i] : (m) == 1u ? w1##v[i] : (m) == 2u ? w2##v[i] : w3##v[i])
#elif defined(MV_QKV)
#define QSEL(m, v, i) ((m) == 0u ? w0##v[i] : (m) == 1u ? w1##v[i] : w2##v[i])
#elif defined(MV_SILU)
#define QSEL(m, v, i) ((m) == 0u ? w0##v[i] : w1##v[i])
#else
#define QSEL(m, v, i) w0##v[i]
#endif
#define QWORD(m, i) QSEL(m, q, i)
#define QVEC2(m, i) QSEL(m, q2, i)
#define QVEC4(m, i) QSEL(m, q4, i)
#ifdef MV_IDOT
// x quantized per block of 32 (quant.glsl's integer units): QX_MAX
// elements at a time, a segment; a longer row takes several. 14336 (a 7b
// FFN) keeps the kernels within 32 KiB of shared memory (lavapipe's
// limit) beside the sums' arrays.
#define QX_MAX 14336u
shared uvec4 qx_codes[QX_MAX / 16u];
shared vec2 qx_scale[QX_MAX / 16u];
#ifdef MV_XQ
// x arrives quantized (MV_TQ's layout): quad i of the whole row, not of a
// segment.
#define QXV(i) xq4[i]
#define QXS(i) XQ_SCALE(i)
#define QX_UNIT(u0, xu) ((u0) + (xu))
#else
#define QX_UNIT(u0, xu) (xu)   // shared memory holds the segment from unit u0
#define QXV(i) qx_codes[i]
#define QXS(i) qx_scale[i]
#endif
#endif
#ifdef MV_XQ
layout(set = 0, binding = B_X) readonly buffer Xq { uvec4 xq4[]; };
layout(set = 0, binding = B_X) readonly buffer Xqs { vec2 xq2[]; };
#define XQ_SCALE(q) xq2[pc.cols / 8u + (q)]   // quad q's (d, d * sum): after the cols bytes of codes
#endif
#ifdef MV_IDOT
#define QX_PUT(q, codes, s) { qx_codes[q] = codes; qx_scale[q] = s; }
#endif
#include "quant.glsl"
#else
layout(set = 0, binding = B_W0) readonly buffer W0v { WVEC w0v[]; };
layout(set = 0, binding = B_W0) readonly buffer W0s { WSCALAR w0s[]; };
#if defined(MV_SILU) || defined(MV_QKV)
layout(set = 0, binding = B_W1) readonly buffer W1v { WVEC w1v[]; };
layout(set = 0, binding = B_W1) readonly buffer W1s { WSCALAR w1s[]; };
#endif
#ifdef MV_QKV
layout(set = 0, binding = B_W2) readonly buffer W2v { WVEC w2v[]; };
layout(set = 0, binding = B_W2) readonly buffer W2s { WSCALAR w2s[]; };
#endif
#endif
#ifdef MV_EMBED
#ifndef MV_Q
layout(set = 0, binding = B_TAB) readonly buffer TabV { WVEC tabv[]; };
layout(set = 0, binding = B_TAB) readonly buffer TabS { WSCALAR tabs[]; };
#endif
layout(set = 0, binding = B_TOK) readonly buffer Tok { uint tokens[]; };
layout(set = 0, binding = B_XOUT) writeonly buffer XOv { vec4 xo4[]; };
layout(set = 0, binding = B_XOUT) writeonly buffer XOs { float xo1[]; };
#elif defined(MV_COMB)
// Per head: the shares' (max, sum) pairs padded to 16 bytes, then their
// partial outputs (attention.glsl).
layout(set = 0, binding = B_X) readonly buffer Xv { vec4 part4[]; };
#ifdef MV_COMB_H
layout(set = 0, binding = B_X) readonly buffer Xh { uvec4 parth4[]; };
#endif
#define COMB_SHARES 4u   // passes/gather.c: GATHER_MAX_SHARES
#elif defined(MV_XQ)
// (declared before quant.glsl, which reads them)
#elif defined(MV_X16)
layout(set = 0, binding = B_X) readonly buffer Xv { uvec4 xh4[]; };
layout(set = 0, binding = B_X) readonly buffer Xs { uint xh1[]; };
#else
layout(set = 0, binding = B_X) readonly buffer Xv { vec4 x4[]; };
layout(set = 0, binding = B_X) readonly buffer Xs { float x1[]; };
#endif
#if defined(MV_NORM) || defined(MV_QKV)
layout(set = 0, binding = B_G) TAG_COH readonly buffer Gv { vec4 g4[]; };
layout(set = 0, binding = B_G) TAG_COH readonly buffer Gs { float g1[]; };
#endif
#ifdef MV_ADD
layout(set = 0, binding = B_R) TAG_COH readonly buffer R { float r[]; };
#endif
#ifdef MV_Y16
layout(set = 0, binding = B_Y) writeonly buffer Y { uint y16[]; };
#else
layout(set = 0, binding = B_Y) writeonly buffer Y { float y[]; };
#endif
#ifdef MV_STAGE
#extension GL_EXT_shader_atomic_float : require
layout(set = 0, binding = B_S) readonly buffer S { float stage_in[]; };
#ifdef MV_T16
layout(set = 0, binding = B_T) writeonly buffer T { uint stage_out16[]; };
#elif defined(MV_TQ)
layout(set = 0, binding = B_T) writeonly buffer T { uvec4 stage_q4[]; };
layout(set = 0, binding = B_T) writeonly buffer Ts { vec2 stage_q2[]; };
#else
layout(set = 0, binding = B_T) writeonly buffer T { float stage_out[]; };
#endif
layout(set = 0, binding = B_ACC) buffer Acc { float sum_sq[]; };
#endif

#if defined(MV_NORM) || defined(MV_QKV)
#define HAS_NORM 1
#endif
// The staged sum of squares (MV_STAGE writes, MV_PRE reads): SS_SLOTS
// partial sums SS_STRIDE words apart (ir/loom_ops.h: LOOM_STAGE_SUM_WORDS
// = SS_SLOTS * SS_STRIDE), so that concurrent atomic adds spread over
// SS_SLOTS sectors instead of queueing on one word.
#define SS_SLOTS 32u
#define SS_STRIDE 8u

// ---- which matrix and row each of the workgroup's rows is ---------------
// NMAT matrices are streamed per row slot: MV_SILU reads Wg and Wu for the
// same row; the others read one matrix per row.
#ifdef MV_SILU
#define NMAT 2u
#else
#define NMAT 1u
#endif

uint wg_block;             // the block of MV_ROWS rows being computed
uint row_of(uint k);       // global row of the workgroup's k-th row
uint mat_of(uint k);       // which binding (0, 1, 2) it reads
uint local_row(uint k);    // row within that matrix
uint total_rows();

#ifndef MV_QKV   // MV_QKV: mv_qkv.glsl
uint total_rows() { return pc.rows; }
uint row_of(uint k) { return wg_block * MV_ROWS + k; }
uint mat_of(uint k) { return 0u; }
uint local_row(uint k) { return row_of(k); }
#endif

#ifdef MV_Q
// Matrix m's row lrow starts at byte row_base(m, lrow); loadw decodes its
// chunk c. The third matrix may be of another type (MV_W2_*); m is the
// same for a workgroup's rows but in MV_SILU, where both are one type.
uint row_base(uint m, uint lrow)
{
    return m == 2u ? lrow * (pc.cols / QK2) * QB2 : lrow * (pc.cols / QK0) * QB0;
}
// Chunk c lies in block c / QCPB at chunk c % QCPB, which is the
// invocation's index modulo QCPB (quant.glsl: the same on every trip).
WVEC loadw(uint m, uint rb, uint c)
{
    uint t = gl_LocalInvocationID.x;
    if (m == 2u)
        return QCHUNK2(m, rb, c / QCPB2, t % QCPB2);
    return QCHUNK0(m, rb, c / QCPB0, t % QCPB0);
}
// The chunk's offset meets the sum of x once (the compiler shares that sum
// between the rows reading the same chunk of x).
float vdot(QChunk w, vec4 xa, vec4 xb)
{
    return w.s.x * (dot(w.a, xa) + dot(w.b, xb)) - w.s.y * (dot(xa, vec4(1.0)) + dot(xb, vec4(1.0)));
}
#else
WVEC loadv(uint m, uint idx)
{
#if defined(MV_QKV)
    return m == 0u ? w0v[idx] : m == 1u ? w1v[idx] : w2v[idx];
#elif defined(MV_SILU)
    return m == 0u ? w0v[idx] : w1v[idx];
#else
    return w0v[idx];
#endif
}

WSCALAR loads(uint m, uint idx)
{
#if defined(MV_QKV)
    return m == 0u ? w0s[idx] : m == 1u ? w1s[idx] : w2s[idx];
#elif defined(MV_SILU)
    return m == 0u ? w0s[idx] : w1s[idx];
#else
    return w0s[idx];
#endif
}

// Dot of one vector load with the (already scaled) x chunk.
#ifdef MV_F16
float vdot(uvec4 w, vec4 xa, vec4 xb)
{
    return dot(vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)), xa) +
           dot(vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w)), xb);
}
float sdot(uint w, vec2 xs) { vec2 h = unpackHalf2x16(w); return h.x * xs.x + h.y * xs.y; }
#else
float vdot(vec4 w, vec4 xa, vec4 xb) { return dot(w, xa); }
float sdot(float w, vec2 xs) { return w * xs.x; }
#endif
uint row_base(uint m, uint lrow) { return lrow * (pc.cols / VW); }
WVEC loadw(uint m, uint rb, uint c) { return loadv(m, rb + c); }
#endif

// ---- cross-invocation sums ---------------------------------------------
// Room for the partial sums of every subgroup: at least 4 lanes each, 8
// with block types (loom_form_subgroup_ok), whose 16 rows of 512
// invocations would not fit lavapipe's 32 KiB beside a segment of x at 4.
#ifdef MV_Q
shared float red[MV_ROWS * NMAT + 1u][WG / 8u];
#else
shared float red[MV_ROWS * NMAT + 1u][WG / 4u];
#endif
shared float total[MV_ROWS * NMAT + 1u];

// Sums v over the workgroup for every accumulator slot; total[s] holds the
// result for all invocations afterwards.
void wg_sum(inout float v[MV_ROWS * NMAT + 1u])
{
    const uint NS = MV_ROWS * NMAT + 1u;
    for (uint s = 0u; s < NS; s++) {
        float t = subgroupAdd(v[s]);
        if (subgroupElect())
            red[s][gl_SubgroupID] = t;
    }
    memoryBarrierShared();
    barrier();
    uint t = gl_LocalInvocationID.x;
    if (t < NS) {
        float acc = 0.0;
        for (uint i = 0u; i < gl_NumSubgroups; i++)
            acc += red[t][i];
        total[t] = acc;
    }
    memoryBarrierShared();
    barrier();
}



#ifdef MV_ARGMAX
void fold_row(uint row, float v);   // mv_argmax.glsl
#endif

#if defined(MV_TQ) || defined(MV_YQT)
shared float tq_val[MV_ROWS];   // the row block's values, quantized by one invocation
// tq_val as 16 int8 codes (code k in byte k % 4 of word k / 4), with scale d
// = max |v| / 127 and the codes' sum, in quantize_chunk's operations.
uvec4 quantize_quad(out float d, out int sum)
{
    float amax = 0.0;
    for (uint k = 0u; k < MV_ROWS; k++)
        amax = max(amax, abs(tq_val[k]));
    float id = amax > 1e-30 ? 127.0 * (1.0 / amax) : 0.0;
    d = id > 0.0 ? amax * (1.0 / 127.0) : 0.0;
    uint wq[4] = uint[4](0u, 0u, 0u, 0u);
    sum = 0;
    for (uint k = 0u; k < MV_ROWS; k++) {
        precise float p = tq_val[k] * id;
        precise float rq = p + 12582912.0;
        uint code = floatBitsToUint(rq) & 0xffu;
        sum += int(code << 24u) >> 24;
        wq[k / 4u] |= code << (8u * (k % 4u));
    }
    return uvec4(wq[0], wq[1], wq[2], wq[3]);
}
#endif
#if defined(MV_XQ) || defined(MV_XQT)
// 4 int8 codes of a quad (one word) as floats, times the quad's d.
vec4 xq_decode(uint w, float d)
{
    int v = int(w);
    return vec4(bitfieldExtract(v, 0, 8), bitfieldExtract(v, 8, 8), bitfieldExtract(v, 16, 8),
                bitfieldExtract(v, 24, 8)) * d;
}
#endif

#if defined(MV_TAG) && !defined(MV_QKV)
#include "mv_tag.glsl"
#endif

// x: chunk c of the vector path (VW elements in xa, xb) and pair c of the
// scalar path (SW elements).
#ifdef MV_EMBED
uint emb_token;   // the step's token; x is zeros past the vocabulary
bool x_writer = true;   // block types: one row group of workgroup 0 writes x
void x_chunk(uint c, out vec4 xa, out vec4 xb)
{
    xa = vec4(0.0);
    xb = vec4(0.0);
    if (emb_token < pc.vocab) {
#ifdef MV_Q
        // The table is of Wq's type (the builder's rule).
        q_weights(QCHUNK0(3u, row_base(0u, emb_token), c / QCPB0, c % QCPB0), xa, xb);
#else
        WVEC v = tabv[emb_token * (pc.cols / VW) + c];
#ifdef MV_F16
        xa = vec4(unpackHalf2x16(v.x), unpackHalf2x16(v.y));
        xb = vec4(unpackHalf2x16(v.z), unpackHalf2x16(v.w));
#else
        xa = v;
#endif
#endif
    }
    if (gl_WorkGroupID.x == 0u && x_writer) {
#ifdef MV_VW8
        xo4[2u * c] = xa;
        xo4[2u * c + 1u] = xb;
#else
        xo4[c] = xa;
#endif
    }
}
vec2 x_pair(uint c)
{
    vec2 xs = vec2(0.0);
#ifndef MV_Q   // rows of whole blocks take the vector path only
    if (emb_token < pc.vocab) {
#ifdef MV_F16
        xs = unpackHalf2x16(tabs[emb_token * (pc.cols / 2u) + c]);
#else
        xs.x = tabs[emb_token * pc.cols + c];
#endif
    }
#endif
    if (gl_WorkGroupID.x == 0u) {
#ifdef MV_VW8
        xo1[2u * c] = xs.x;
        xo1[2u * c + 1u] = xs.y;
#else
        xo1[c] = xs.x;
#endif
    }
    return xs;
}
#elif defined(MV_COMB)
const float NEG_BIG = -3.402823466e38;

// A head's (max, sum) pairs p, loaded two shares to a vector, into arrays
// m and l, and mx the largest max of the S shares. A macro, not a function:
// the arrays stay the caller's, as the kernels were measured with them.
#define COMB_HEADER(p, S, m, l, mx)                                          \
    float m[COMB_SHARES], l[COMB_SHARES];                                    \
    for (uint i = 0u; i < COMB_SHARES / 2u; i++) {                           \
        m[2u * i] = p[i].x; l[2u * i] = p[i].y;                              \
        m[2u * i + 1u] = p[i].z; l[2u * i + 1u] = p[i].w;                    \
    }                                                                        \
    float mx = NEG_BIG;                                                      \
    for (uint s = 0u; s < COMB_SHARES; s++)                                  \
        mx = s < S ? max(mx, m[s]) : mx; /* a pair's second share may lie past the last */

#ifdef MV_COMB_H
// As the f32 form below, with ATT_PART_H's layout: per head the (max, sum)
// pairs padded to 16 bytes, then each share's output divided by its own
// sum, as f16 pairs (head_dim / 2 words a share). A share's weight is
// exp(its max - the head's max) times its sum.
void x_chunk(uint c, out vec4 xa, out vec4 xb)
{
    uint hd = pc.head_dim, S = pc.splits, e = c * VW;
    uint hdr = (2u * S + 3u) & ~3u, base = (e / hd) * (hdr + S * hd / 2u);
    uint at = (base + hdr + (e % hd) / 2u) / 4u, stride = hd / 8u;
    vec4 p[COMB_SHARES / 2u];
    uvec4 o[COMB_SHARES];
    for (uint i = 0u; i < COMB_SHARES / 2u; i++)
        p[i] = 2u * i < S ? part4[base / 4u + i] : vec4(NEG_BIG, 0.0, NEG_BIG, 0.0);
    for (uint s = 0u; s < COMB_SHARES; s++)
        o[s] = s < S ? parth4[at + s * stride] : uvec4(0u);
    COMB_HEADER(p, S, m, l, mx)
    float lt = 0.0;
    xa = vec4(0.0);
    xb = vec4(0.0);
    for (uint s = 0u; s < COMB_SHARES; s++) {
        float w = s < S ? exp(m[s] - mx) * l[s] : 0.0;
        lt += w;
        xa += vec4(unpackHalf2x16(o[s].x), unpackHalf2x16(o[s].y)) * w;
        xb += vec4(unpackHalf2x16(o[s].z), unpackHalf2x16(o[s].w)) * w;
    }
    float inv = lt > 0.0 ? 1.0 / lt : 0.0;
    xa *= inv;
    xb *= inv;
}
#else
// Chunk c lies in one head (head_dim is a multiple of VW): load the head's
// (max, sum) pairs and the chunk of every share at once, then weight each
// share by exp(its max - the head's max) and divide by the weighted sum.
void x_chunk(uint c, out vec4 xa, out vec4 xb)
{
    uint hd = pc.head_dim, S = pc.splits, e = c * VW;
    uint hdr = (2u * S + 3u) & ~3u, head = (e / hd) * (hdr + S * hd) / 4u;
    uint at = head + (hdr + e % hd) / 4u, stride = hd / 4u;
    vec4 p[COMB_SHARES / 2u], oa[COMB_SHARES], ob[COMB_SHARES];
    for (uint i = 0u; i < COMB_SHARES / 2u; i++)
        p[i] = 2u * i < S ? part4[head + i] : vec4(NEG_BIG, 0.0, NEG_BIG, 0.0);
    for (uint s = 0u; s < COMB_SHARES; s++) {
        oa[s] = s < S ? part4[at + s * stride] : vec4(0.0);
#ifdef MV_VW8
        ob[s] = s < S ? part4[at + s * stride + 1u] : vec4(0.0);
#else
        ob[s] = vec4(0.0);
#endif
    }
    COMB_HEADER(p, S, m, l, mx)
    float lt = 0.0;
    xa = vec4(0.0);
    xb = vec4(0.0);
    for (uint s = 0u; s < COMB_SHARES; s++) {
        float w = s < S ? exp(m[s] - mx) : 0.0;
        lt += l[s] * w;
        xa += oa[s] * w;
        xb += ob[s] * w;
    }
    float inv = lt > 0.0 ? 1.0 / lt : 0.0;
    xa *= inv;
    xb *= inv;
}
#endif
vec2 x_pair(uint c) { return vec2(0.0); }   // not bound (see MV_COMB above)
#elif defined(MV_XQ) || defined(MV_XQT)
// Quad q of a quantized x: its codes and (d, d * their sum).
void x_quad(uint q, out uvec4 codes, out vec2 qs)
{
#ifdef MV_XQT
    xqt_quad(q, codes, qs);   // tagged (mv_tag.glsl)
#else
    codes = xq4[q];
    qs = XQ_SCALE(q);
#endif
}
// Chunk c (half of quad c / 2) decoded: code times the quad's d.
void x_chunk(uint c, out vec4 xa, out vec4 xb)
{
    uvec4 q;
    vec2 qs;
    x_quad(c / 2u, q, qs);
    uvec2 w = (c & 1u) != 0u ? q.zw : q.xy;
    xa = xq_decode(w.x, qs.x);
    xb = xq_decode(w.y, qs.x);
}
vec2 x_pair(uint c)
{
    vec4 a, b;
    x_chunk(c / 4u, a, b);
    uint k = c % 4u;
    return k == 0u ? a.xy : k == 1u ? a.zw : k == 2u ? b.xy : b.zw;
}
#elif defined(MV_X16)
// Eight f16 values a 16-byte chunk; a pair of them a word.
void x_chunk(uint c, out vec4 xa, out vec4 xb)
{
    uvec4 u = xh4[c];
    xa = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
    xb = vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w));
}
vec2 x_pair(uint c) { return unpackHalf2x16(xh1[c]); }
#else
void x_chunk(uint c, out vec4 xa, out vec4 xb)
{
#if defined(MV_TAG) && !defined(MV_QKV)
    if (x_chunk_tag(c, xa, xb))
        return;
#endif
#ifdef MV_VW8
    xa = x4[2u * c];
    xb = x4[2u * c + 1u];
#else
    xa = x4[c];
    xb = vec4(0.0);
#endif
}
vec2 x_pair(uint c)
{
#if defined(MV_TAG) && !defined(MV_QKV)
    vec2 xs;
    if (x_pair_tag(c, xs))
        return xs;
#endif
#ifdef MV_VW8
    return vec2(x1[2u * c], x1[2u * c + 1u]);
#else
    return vec2(x1[c], 0.0);
#endif
}
#endif


#ifdef MV_IDOT
// x elements e0 to e0 + n (n a multiple of 32) quantized into qx_codes and
// qx_scale, 8 elements (a chunk) an invocation, a block of 32 by 4
// neighbouring invocations (a subgroup holds whole blocks: its size is a
// multiple of 4, as WG is): scale d = the block's largest magnitude / 127,
// codes round(x / d) (|code| <= 127). A code is rounded by adding 1.5 *
// 2^23 (its low byte is then the code's) rather than converted. QXU chunks
// a trip, all loaded first (a chunk past the end loads the last one and
// stores nothing): 4 were slower than 1 (docs/perf-log.md), the registers
// of 4 chunks costing more than their round trips.
// With a norm of its own the kernel quantizes x * g and returns the
// invocation's part of the sum of x^2 (the norm's scale meets the sums at
// the end).
#define QXU 1u
float quantize_x(uint e0, uint n)
{
    float x2 = 0.0;
    uint nc = n / 8u, c0 = e0 / 8u;
    for (uint c = gl_LocalInvocationID.x; c < nc; c += QXU * WG) {
        vec4 a[QXU], b[QXU];
        for (uint k = 0u; k < QXU; k++) {
            uint ck = c0 + min(c + k * WG, nc - 1u);
            x_chunk(ck, a[k], b[k]);
#if defined(HAS_NORM) && !defined(MV_PRE)
            x2 += c + k * WG < nc ? dot(a[k], a[k]) + dot(b[k], b[k]) : 0.0;
            a[k] *= g4[2u * ck];
            b[k] *= g4[2u * ck + 1u];
#endif
        }
        for (uint k = 0u; k < QXU; k++)
            quantize_chunk(c + k * WG, a[k], b[k], c + k * WG < nc);
    }
    return x2;
}

// What the workgroup's invocations keep across the blocks of rows of an
// argmax form: x quantized once where it is one segment, and each
// invocation's part of the sum of x^2.
bool qx_kept = false;
float qx_x2 = 0.0;
#endif

#if defined(MV_ADD) && defined(MV_CNT)
float mv_rv;   // the residual of invocation t's row (t < MV_ROWS)
#endif
#ifdef MV_CNT
// A counted edge's wait, where the push constants name one (cnt_in): the
// workgroup waits for every workgroup of its producer, then reads what it
// takes from it, past the caches: the residual (MV_ADD, into mv_rv) or the
// staged squares (MV_PRE: the invocation's part is returned). A wait that
// gave up reads them as NaN. Uniform control flow, once a workgroup.
float cnt_take()
{
    if (pc.cnt_in == 0u)
        return 0.0;
    bool ok = cnt_wait(pc.cnt_in);
    uint t = gl_LocalInvocationID.x;
    float ss = 0.0;
#ifdef MV_ADD
    mv_rv = !ok ? TAG_LOST : t < MV_ROWS && row_of(t) < total_rows() ? r[row_of(t)] : 0.0;
#endif
#ifdef MV_PRE
    ss = !ok ? TAG_LOST : t < SS_SLOTS ? g1[t * SS_STRIDE] : 0.0;
#endif
    return ss;
}
#endif

#ifdef MV_Q
// The sums of block wg_block over block-typed weights, into total[] as
// wg_sum leaves them. A chunk of blocks is a few bytes (4.5 for Q4_K), so
// a workgroup of f16's shape would hold few bytes in flight and spend its
// life in one round trip and its reduction: here the workgroup takes
// MV_ROWS rows, in row groups of WG / RG invocations, each invocation QRPT
// rows of its group and every RG-th chunk of them. Its registers are those
// of a 2-row f16 invocation; the workgroup streams 4 times the bytes. A
// chunk of x is read by RG invocations (from the caches). Only group 0
// sums x^2; the staged parts (MV_PRE) count once, whoever holds them.
void block_sums_q(inout float x2)
{
    const uint RG = MV_ROWS / QRPT, GL = WG / RG, NA = QRPT * NMAT;
    uint t = gl_LocalInvocationID.x, rg = t / GL, lane = t % GL;
    uint cols = pc.cols, rows = total_rows(), n = cols / VW;
    bool live[QRPT];
    uint base[QRPT], mat[QRPT];
    for (uint i = 0u; i < QRPT; i++) {
        uint k = rg * QRPT + i;
        live[i] = row_of(k) < rows;
        mat[i] = mat_of(k);
        base[i] = row_base(mat[i], local_row(k));
    }
#ifdef MV_EMBED
    x_writer = rg == 0u;
#endif
    float acc[NA];
    for (uint s = 0u; s < NA; s++)
        acc[s] = 0.0;
#if defined(MV_CNT) && !defined(MV_IDOT)
    x2 += cnt_take();
#endif
#ifdef MV_IDOT
    // x quantized into shared memory a segment at a time (every invocation
    // a block of 32 of it), then each invocation takes units u = lane, lane
    // + GL, ... of its rows: all their loads, then integer dot products
    // against the quantized x. A row past the end reads row 0's weights
    // (its sums are never written), so no load waits on a branch.
#ifdef MV_EMBED
    x_writer = true;   // every chunk of x is read once
#endif
    uint qbase[QRPT], qmat[QRPT];
    [[unroll]] for (uint i = 0u; i < QRPT; i++) {
        uint k = live[i] ? rg * QRPT + i : 0u;
        qmat[i] = mat_of(k);
        qbase[i] = row_base(qmat[i], local_row(k));
    }
    // The first trip's weights are loaded before x is quantized, so the
    // weight stream starts with the workgroup; then each trip loads the
    // next trip's (a unit past the end reads the last: no branch).
    if (!qx_kept)
        qx_x2 = 0.0;
    for (uint e0 = 0u; e0 < cols; e0 += QX_MAX) {
        uint len = min(cols - e0, QX_MAX), nu = len / 32u, u0 = e0 / 32u;
        QRaw w[NA];
        [[unroll]] for (uint i = 0u; i < QRPT; i++)
            [[unroll]] for (uint j = 0u; j < NMAT; j++)
                w[i * NMAT + j] = qload(NMAT == 1u ? qmat[i] : j, qbase[i], u0 + min(lane, nu - 1u));
#ifdef MV_CNT
        if (e0 == 0u)   // a counted edge's wait, the first trip's weights in flight
            x2 += cnt_take();
#endif
#ifndef MV_XQ
        if (!qx_kept) {
            if (e0 > 0u)
                barrier();   // the last segment's readers are done with it
#ifdef MV_XQT
            // x arrives quantized and tagged: its quads polled into
            // shared memory, nothing to quantize.
            for (uint q = gl_LocalInvocationID.x; q < len / 16u; q += WG) {
                uvec4 codes;
                vec2 qs;
                xqt_quad(e0 / 16u + q, codes, qs);
                qx_codes[q] = codes;
                qx_scale[q] = qs;
            }
#else
            qx_x2 += quantize_x(e0, len);
#endif
            memoryBarrierShared();
            barrier();
        }
#endif
        for (uint xu = lane; xu < nu; xu += GL) {
            QRaw nw[NA];
            uint un = u0 + min(xu + GL, nu - 1u);
            [[unroll]] for (uint i = 0u; i < QRPT; i++)
                [[unroll]] for (uint j = 0u; j < NMAT; j++)
                    nw[i * NMAT + j] = qload(NMAT == 1u ? qmat[i] : j, qbase[i], un);
            [[unroll]] for (uint i = 0u; i < QRPT; i++)
                [[unroll]] for (uint j = 0u; j < NMAT; j++)
                    acc[i * NMAT + j] += qdot(NMAT == 1u ? qmat[i] : j, w[i * NMAT + j], qbase[i], u0 + xu, QX_UNIT(u0, xu));
            w = nw;
        }
    }
    x2 += qx_x2;
    qx_kept = cols <= QX_MAX;
#elif defined(MV_Q4_K) && !defined(MV_W2_Q6_K)
    // Q4_K: units of 32 weights (quant.glsl: q4_k_unit_dot), a 16-byte load
    // of codes and one of the header each; unit u's place in its block (u
    // modulo 8) is lane's, the same on every trip.
    for (uint u = lane; u < cols / 32u; u += GL) {
        uint blk = u >> 3u, ui = u & 7u, c0 = blk * 32u + 8u * (ui >> 1u) + 2u * (ui & 1u);
        uvec4 hd[NA], qs[NA];
        for (uint i = 0u; i < QRPT; i++)
            for (uint j = 0u; j < NMAT; j++)
                if (live[i]) {
                    uint mm = NMAT == 1u ? mat[i] : j, o = base[i] + blk * 144u;
                    hd[i * NMAT + j] = QVEC4(mm, o >> 4u);
                    qs[i * NMAT + j] = QVEC4(mm, (o + 16u + 32u * (ui >> 1u) + 16u * (ui & 1u)) >> 4u);
                }
        vec4 xa[4], xb[4];
        for (uint k = 0u; k < 4u; k++) {
            uint c = c0 + (k & 1u) + 4u * (k >> 1u);
            x_chunk(c, xa[k], xb[k]);
#if defined(HAS_NORM) && !defined(MV_PRE)
            if (rg == 0u)
                x2 += dot(xa[k], xa[k]) + dot(xb[k], xb[k]);
            xa[k] *= g4[2u * c];
            xb[k] *= g4[2u * c + 1u];
#endif
        }
        vec2 sx = vec2(dot(xa[0] + xb[0] + xa[1] + xb[1], vec4(1.0)), dot(xa[2] + xb[2] + xa[3] + xb[3], vec4(1.0)));
        for (uint i = 0u; i < QRPT; i++)
            for (uint j = 0u; j < NMAT; j++)
                if (live[i])
                    acc[i * NMAT + j] += q4_k_unit_dot(hd[i * NMAT + j], qs[i * NMAT + j], ui, xa, xb, sx);
    }
#else
    for (uint c = lane; c < n; c += GL) {
        WVEC w[NA];
        for (uint i = 0u; i < QRPT; i++)
            for (uint j = 0u; j < NMAT; j++)
                if (live[i])
                    w[i * NMAT + j] = loadw(NMAT == 1u ? mat[i] : j, base[i], c);
        vec4 xa, xb;
        x_chunk(c, xa, xb);
#if defined(HAS_NORM) && !defined(MV_PRE)
        vec4 ga = g4[2u * c], gb = g4[2u * c + 1u];
        if (rg == 0u)
            x2 += dot(xa, xa) + dot(xb, xb);
        xa *= ga;
        xb *= gb;
#endif
        for (uint i = 0u; i < QRPT; i++)
            for (uint j = 0u; j < NMAT; j++)
                if (live[i])
                    acc[i * NMAT + j] += vdot(w[i * NMAT + j], xa, xb);
    }
#endif
    // Each group's subgroups, then the groups' slots: a subgroup lies in one
    // group (GL is a multiple of any subgroup size up to 64).
    uint sg_per = max(GL / gl_SubgroupSize, 1u), sg = gl_SubgroupID % sg_per;
    for (uint s = 0u; s < NA; s++) {
        float v = subgroupAdd(acc[s]);
        if (subgroupElect())
            red[rg * NA + s][sg] = v;
    }
    float v2 = subgroupAdd(x2);
    if (subgroupElect())
        red[MV_ROWS * NMAT][gl_SubgroupID] = v2;
    memoryBarrierShared();
    barrier();
    if (t <= MV_ROWS * NMAT) {
        float a = 0.0;
        uint cnt = t == MV_ROWS * NMAT ? gl_NumSubgroups : sg_per;
        for (uint i = 0u; i < cnt; i++)
            a += red[t][i];
        total[t] = a;
    }
    memoryBarrierShared();
    barrier();
}
#endif

#ifdef MV_QKV
#include "mv_qkv.glsl"
#endif

// The rows of block wg_block: y written, and with MV_ARGMAX folded into
// invocation 0's best.
void block()
{
    const uint NS = MV_ROWS * NMAT + 1u;   // the last slot sums x^2
    uint t = gl_LocalInvocationID.x;
    uint cols = pc.cols, rows = total_rows();
    bool live[MV_ROWS];
    uint base[MV_ROWS], mat[MV_ROWS];
    for (uint k = 0u; k < MV_ROWS; k++) {
        live[k] = row_of(k) < rows;
        mat[k] = mat_of(k);
    }
    float acc[NS];
    for (uint s = 0u; s < NS; s++)
        acc[s] = 0.0;
#ifdef MV_TAG_GATE
    tag_gate();
#endif
#ifdef MV_PRE
    // x^2 arrives summed in SS_SLOTS parts; the sums below add them up
    // (behind a counted edge, cnt_take reads them after its wait).
#ifdef MV_CNT
    if (pc.cnt_in == 0u)
#endif
        acc[NS - 1u] = t < SS_SLOTS ? g1[t * SS_STRIDE] : 0.0;
#endif
    // What the epilogue reads besides the sums is loaded now, beside the
    // weights: loaded there, it would cost the workgroup one more memory
    // round trip after its sums meet.
#ifdef MV_QKV
    uint pos = step_params.pos;
#endif
    // Row t's liveness as a value of its own, not live[t]: an array indexed
    // by t went to local memory (docs/perf-log.md), where live[k] in the
    // unrolled loops is a register.
    bool live_t = row_of(t) < rows;
#if defined(MV_ADD) && defined(MV_CNT)
    if (pc.cnt_in == 0u)   // else cnt_take reads it
        mv_rv = t < MV_ROWS && live_t ? r[row_of(t)] : 0.0;
#define RV mv_rv
#elif defined(MV_ADD)
    float rv = t < MV_ROWS && live_t ? r[row_of(t)] : 0.0;
#define RV rv
#endif
#ifdef MV_STAGE
    float sv = t < MV_ROWS && live_t ? stage_in[row_of(t)] : 0.0;
#endif
#ifdef MV_EMBED
    emb_token = tokens[pc.token_index];
#endif

#ifdef MV_Q
    block_sums_q(acc[NS - 1u]);
#else
    if (cols % VW == 0u) {
        uint n = cols / VW;
        for (uint k = 0u; k < MV_ROWS; k++)
            base[k] = row_base(mat[k], local_row(k));
#ifdef MV_LONG
        // Chunks c and c + WG a trip: twice the weight loads in flight in
        // an invocation whose row spans several chunks; the loop below
        // takes a last odd chunk.
        uint c = t;
        for (; c + WG < n; c += 2u * WG) {
            WVEC w2[2u * MV_ROWS * NMAT];
            for (uint h = 0u; h < 2u; h++)
                for (uint k = 0u; k < MV_ROWS; k++)
                    for (uint j = 0u; j < NMAT; j++)
                        if (live[k])
                            w2[(h * MV_ROWS + k) * NMAT + j] = loadw(NMAT == 1u ? mat[k] : j, base[k], c + h * WG);
            vec4 xa0, xb0, xa1, xb1;
            x_chunk(c, xa0, xb0);
            x_chunk(c + WG, xa1, xb1);
            for (uint k = 0u; k < MV_ROWS; k++)
                for (uint j = 0u; j < NMAT; j++)
                    if (live[k])
                        acc[k * NMAT + j] += vdot(w2[k * NMAT + j], xa0, xb0) +
                                             vdot(w2[(MV_ROWS + k) * NMAT + j], xa1, xb1);
        }
        for (; c < n; c += WG) {
#else
        for (uint c = t; c < n; c += WG) {
#endif
            // All loads first, weights leading, then the arithmetic:
            // MV_ROWS * NMAT independent 16-byte weight loads in flight per
            // invocation, none of them waiting for x (or g) to arrive.
            WVEC w[MV_ROWS * NMAT];
            for (uint k = 0u; k < MV_ROWS; k++)
                for (uint j = 0u; j < NMAT; j++)
                    if (live[k])
                        w[k * NMAT + j] = loadw(NMAT == 1u ? mat[k] : j, base[k], c);
            vec4 xa, xb;
            x_chunk(c, xa, xb);
#if defined(HAS_NORM) && !defined(MV_PRE)
#ifdef MV_VW8
            vec4 ga = g4[2u * c], gb = g4[2u * c + 1u];
#else
            vec4 ga = g4[c], gb = vec4(0.0);
#endif
            acc[NS - 1u] += dot(xa, xa) + dot(xb, xb);
            xa *= ga;
            xb *= gb;
#endif
            for (uint k = 0u; k < MV_ROWS; k++)
                for (uint j = 0u; j < NMAT; j++)
                    if (live[k])
                        acc[k * NMAT + j] += vdot(w[k * NMAT + j], xa, xb);
        }
    }
    else {
        uint n = cols / SW;
        for (uint k = 0u; k < MV_ROWS; k++)
            base[k] = local_row(k) * n;
        for (uint c = t; c < n; c += WG) {
            vec2 xs = x_pair(c);
#if defined(HAS_NORM) && !defined(MV_PRE)
            acc[NS - 1u] += dot(xs, xs);
#ifdef MV_VW8
            xs *= vec2(g1[2u * c], g1[2u * c + 1u]);
#else
            xs.x *= g1[c];
#endif
#endif
            for (uint k = 0u; k < MV_ROWS; k++)
                for (uint j = 0u; j < NMAT; j++)
                    if (live[k])
                        acc[k * NMAT + j] += sdot(loads(NMAT == 1u ? mat[k] : j, base[k] + c), xs);
        }
    }
    wg_sum(acc);
#endif

    float scale = 1.0;
#ifdef HAS_NORM
    scale = inversesqrt(total[NS - 1u] / float(cols) + pc.eps);
#endif

#ifdef MV_QKV
    qkv_store(t, rows, scale, pos);
#else
    float val = 0.0;
    if (t < MV_ROWS && live_t) {
#ifdef MV_SILU
        float gt = total[t * 2u] * scale, up = total[t * 2u + 1u] * scale;
        val = gt / (1.0 + exp(-gt)) * up;
#else
        val = total[t] * scale;
#endif
#ifdef MV_ADD
        val += RV;
#endif
#if defined(MV_YQT)
        // (the quad below)
#elif defined(MV_TAG)
        if (pc.tag_out != 0u)
            yt[row_of(t)] = tag_word(val, tag_of(pc.tag_out));
        else
            y[row_of(t)] = val;
#elif !defined(MV_Y16)
        y[row_of(t)] = val;
#endif
#if defined(MV_STAGE) && !defined(MV_T16) && !defined(MV_TQ)
        stage_out[row_of(t)] = val * sv;
#endif
    }
#if defined(MV_TQ) || defined(MV_YQT)
    // The row block's 16 values as one quad (a row past the end is 0), by
    // one invocation: MV_TQ's t, MV_YQT's tagged y.
#ifdef MV_TQ
    float qv = val * sv;
#else
    float qv = val;
#endif
    if (t < MV_ROWS)
        tq_val[t] = qv;
    memoryBarrierShared();
    barrier();
    if (t == 0u) {
        float d;
        int sum;
        uvec4 codes = quantize_quad(d, sum);
#ifdef MV_TQ
        stage_q4[wg_block] = codes;
        stage_q2[pc.rows / 8u + wg_block] = vec2(d, d * float(sum));
#else
        yqt_store(wg_block, codes, d, sum);
#endif
    }
#endif
#ifdef MV_Y16
    // As MV_T16 below: rows 2k and 2k + 1 as one word.
    uint yw = pair_half(val);
    if (t < MV_ROWS && (t & 1u) == 0u && live_t)
        y16[row_of(t) / 2u] = yw;
#endif
#ifdef MV_T16
    // Rows 2k and 2k + 1 (MV_ROWS is even, and a block starts on an even
    // row) as one word, written by the first row's invocation; a row past
    // the end is 0 (val and sv are 0 there).
    uint tw = pair_half(val * sv);
    if (t < MV_ROWS && (t & 1u) == 0u && live_t)
        stage_out16[row_of(t) / 2u] = tw;
#endif
#ifdef MV_STAGE
    // The rows' squares, summed within the subgroup holding their
    // invocations, added into one of SS_SLOTS partial sums: one add a
    // workgroup to one word (2048 a node for 1b) was measurably slower
    // (docs/perf-log.md).
    if (subgroupMax(t < MV_ROWS ? 1u : 0u) == 1u) {
        float q = subgroupAdd(t < MV_ROWS ? val * val : 0.0);
        if (subgroupElect())
            atomicAdd(sum_sq[(gl_WorkGroupID.x % SS_SLOTS) * SS_STRIDE], q);
    }
#endif
#ifdef MV_ARGMAX
    if (t < MV_ROWS && live_t)
        fold_row(row_of(t), val);
#endif
#endif
}


#ifdef MV_ARGMAX
#include "mv_argmax.glsl"
#endif

void main()
{
#ifdef MV_ARGMAX
    argmax_main();
#else
#if defined(MV_QKV) && defined(MV_W2_Q6_K)
    // A Q6_K Wv's row blocks are the last and the slowest: taken in
    // reverse, they launch first and the Q4_K rows fill the tail (the `7b`
    // Q4_K_M step with 8 layers 664.1 -> 656.2 us on an H200,
    // docs/perf-log.md, "the o-projection not gated").
    wg_block = gl_NumWorkGroups.x - 1u - gl_WorkGroupID.x;
#else
    wg_block = gl_WorkGroupID.x;
#endif
    block();
#ifdef MV_CNT
    cnt_signal(pc.cnt_out);   // a counted edge's producer: every write above done
#endif
#endif
}
