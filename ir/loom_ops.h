/* Op builders: the frontend API on top of capture. Each builder checks
 * shapes, then appends one dispatch with its op kind, kernel, bindings,
 * push constants, workgroup counts and exact read/write ranges.
 *
 * The push-constant structs below are the contract between builders, the
 * passes (which read shapes back through loom_op_args_read) and the GLSL
 * kernels in shaders/ (which declare the same layouts). All fields are 4
 * bytes. Each op kind's push layout is a column of ops.def, which the
 * build checks against the kernels.
 *
 * Data: vectors are f32; MATVEC weights are f32, f16 or one of GGUF's block
 * types (Q8_0, Q4_0, Q4_K, Q6_K, byte for byte as GGUF stores them: a row is
 * cols / block whole blocks), row-major rows x cols; EMBED tables likewise;
 * token ids and ARGMAX results are u32.
 * Views bound to a kernel must start at a multiple of LOOM_BIND_ALIGN bytes
 * (the largest minStorageBufferOffsetAlignment Vulkan allows). */
#ifndef LOOM_OPS_H
#define LOOM_OPS_H

#include "loom_ir.h"

#ifdef __cplusplus
extern "C" {
#endif
/* The library is built with hidden visibility; what is declared here is its
 * public API, exported from the shared library. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define LOOM_BIND_ALIGN 256u

/* Element types. The block types store a row as whole blocks of
 * loom_dtype_block(t) weights, loom_dtype_block_bytes(t) bytes each, laid out
 * as GGML's block_q8_0 (f16 d, 32 int8), block_q4_0 (f16 d, 16 bytes of
 * nibbles), block_q4_K (f16 d, f16 dmin, 12 bytes of 6-bit scales and mins,
 * 128 bytes of nibbles) and block_q6_K (128 bytes of low nibbles, 64 of high
 * bit pairs, 16 int8 scales, f16 d). */
typedef enum loom_dtype {
    LOOM_F32 = 0,
    LOOM_F16 = 1,
    LOOM_U32 = 2,
    LOOM_Q8_0 = 3,   /* 34 bytes per 32 weights */
    LOOM_Q4_0 = 4,   /* 18 bytes per 32 weights */
    LOOM_Q4_K = 5,   /* 144 bytes per 256 weights */
    LOOM_Q6_K = 6,   /* 210 bytes per 256 weights */
} loom_dtype;
#define LOOM_DTYPE_COUNT 7u

/* "f32", "q4_k", ...; "?" out of range. */
const char *loom_dtype_name(loom_dtype t);
/* The dtype named s (as loom_dtype_name writes it); LOOM_NOT_FOUND otherwise. */
loom_result loom_dtype_parse(const char *s, loom_dtype *out);
/* Bytes per element; 0 for a block type, whose elements have no size of
 * their own (loom_dtype_row_bytes), and out of range. */
uint32_t loom_dtype_size(loom_dtype t);
/* Elements per block (1 for f32, f16, u32) and bytes per block; 0 out of
 * range. */
uint32_t loom_dtype_block(loom_dtype t);
uint32_t loom_dtype_block_bytes(loom_dtype t);
static inline bool loom_dtype_is_block(loom_dtype t) { return t >= LOOM_Q8_0 && t < LOOM_DTYPE_COUNT; }
/* Bytes of a row of cols elements; 0 when cols is not a whole number of
 * blocks or t is out of range. */
uint64_t loom_dtype_row_bytes(loom_dtype t, uint64_t cols);
/* Bytes a view of rows x cols elements of t binds: its rows' bytes, and for
 * a block type on to the end of its last 32-bit word (Q8_0, Q4_0 and Q6_K
 * blocks are not whole words, and the kernels read words), which the
 * buffer must hold. 0 when cols is not whole blocks or t is out of range. */
uint64_t loom_view_bytes(loom_dtype t, uint64_t rows, uint64_t cols);

/* IEEE binary16 <-> binary32 (ir/quant.c). f16 -> f32 is exact; f32 -> f16
 * rounds to nearest even, keeps subnormals, saturates to infinity past the
 * largest half and keeps NaN a (quiet) NaN of the same sign. No failure. */
float loom_f16_to_f32(uint16_t h);
uint16_t loom_f32_to_f16(float f);

/* Host-side conversion between f32 and a dtype's rows (ir/quant.c), for
 * frontends that quantize weights themselves and for CPU references. n is
 * the element count, a whole number of blocks; dst holds
 * loom_dtype_row_bytes(t, n) bytes (quantize) or n floats (dequantize).
 * Quantizing rounds to nearest as GGML's reference quantizers do (f16:
 * round to nearest even): Q8_0 and Q4_0 as quantize_row_q8_0/q4_0_ref,
 * Q4_K and Q6_K with a scale search of their own (bytes may differ from
 * llama.cpp's; decoding never does, it is GGML's arithmetic). A block of
 * zeros stores d = 0 and decodes to +0; a block holding NaN or infinity
 * stores NaN scales, so it decodes to NaN, as does any block whose stored
 * d is NaN; weights past what an f16 scale reaches clip. Thread-safe;
 * LOOM_INVALID_ARGUMENT naming the argument on a bad dtype (u32 included),
 * a count not a whole number of blocks or a NULL pointer, nothing written. */
loom_result loom_quantize_row(loom_dtype t, const float *src, uint64_t n, void *dst);
loom_result loom_dequantize_row(loom_dtype t, const void *src, uint64_t n, float *dst);

/* Kernel forms (shaders/forms.def, ir/forms.c): the built-in kernels made
 * from one source by flags, once per weight type. Names returned are static
 * storage; NULL (or false) where the table has no such kernel. Thread-safe.
 * loom_form_kernel: form (a row's name, e.g. "rms_norm_matvec_pre") for
 * weights w, and v for the third matrix of a q/k/v form (else v = w).
 * loom_form_variant: the kernel of the same source and weight types whose
 * flags are kernel's, plus add, minus drop (space-separated forms.def
 * flags: "MV_PRE MV_X16"). loom_form_has: kernel is a form with all of
 * flags. loom_form_row: the form (row name) of a kernel. loom_form_weights:
 * a form's weight types. loom_form_subgroup_ok: whether kernel computes
 * right with subgroups subgroup_size wide (every kernel not in the table
 * is taken to). loom_form_count and loom_form_name list every kernel of
 * the table. */
const char *loom_form_kernel(const char *form, loom_dtype w, loom_dtype v);
const char *loom_form_variant(const char *kernel, const char *add, const char *drop);
const char *loom_form_row(const char *kernel);
bool loom_form_has(const char *kernel, const char *flags);
bool loom_form_weights(const char *kernel, loom_dtype *w, loom_dtype *v);
bool loom_form_subgroup_ok(const char *kernel, uint32_t subgroup_size);
size_t loom_form_count(void);
const char *loom_form_name(size_t i);

/* A view of a buffer: rows x cols elements from a byte offset, row-major. A
 * vector is 1 x n. */
typedef struct loom_tensor {
    uint32_t buffer;
    uint32_t dtype;       /* loom_dtype */
    uint64_t offset;      /* bytes */
    uint32_t rows, cols;
} loom_tensor;

static inline loom_tensor loom_vec(uint32_t buffer, uint32_t n)
{
    loom_tensor t = { buffer, LOOM_F32, 0, 1, n };
    return t;
}
static inline loom_tensor loom_vec_at(uint32_t buffer, uint64_t offset, uint32_t n)
{
    loom_tensor t = { buffer, LOOM_F32, offset, 1, n };
    return t;
}
static inline loom_tensor loom_mat(uint32_t buffer, loom_dtype dtype, uint32_t rows, uint32_t cols)
{
    loom_tensor t = { buffer, (uint32_t)dtype, 0, rows, cols };
    return t;
}

/* ---- push-constant layouts (std430-compatible, shared with shaders/) ---- */

typedef struct loom_pc_n        { uint32_t n; } loom_pc_n;              /* COPY (n words), MUL, ADD, SILU_MUL, SOFTMAX, ARGMAX */
typedef struct loom_pc_norm     { uint32_t n; float eps; } loom_pc_norm; /* RMS_NORM and its fused forms */
typedef struct loom_pc_matvec   { uint32_t rows, cols; } loom_pc_matvec; /* MATVEC, MATVEC_ADD, MATVEC_SILU_MUL */
typedef struct loom_pc_embed    { uint32_t dim, vocab, token_index; } loom_pc_embed;
/* EMBED_BLOCKS: the node covers tokens [first, first + vocab) of a table of
 * total rows, block_rows to a bound block (the last may hold fewer). */
typedef struct loom_pc_embed_blocks {
    uint32_t dim, vocab, token_index, block_rows, first, total;
} loom_pc_embed_blocks;
typedef struct loom_pc_rope     { uint32_t n_heads, head_dim; float theta; } loom_pc_rope;
typedef struct loom_pc_kv       { uint32_t dim, max_seq; } loom_pc_kv;  /* dim = n_kv_heads * head_dim */
/* ATTENTION: splits shares of the cache rows, combined in the same dispatch. */
typedef struct loom_pc_attn     { uint32_t n_heads, n_kv_heads, head_dim, max_seq; float scale; uint32_t splits; } loom_pc_attn;
/* RMS_NORM_MATVEC, RMS_NORM_MATVEC_SILU_MUL, RMS_NORM_MATVEC_ARGMAX. */
typedef struct loom_pc_norm_matvec { uint32_t rows, cols; float eps; } loom_pc_norm_matvec;
/* RMS_NORM_MATVEC_ARGMAX_LOG: the ring's slots after the norm form's. */
typedef struct loom_pc_norm_matvec_log { uint32_t rows, cols; float eps; uint32_t slots; } loom_pc_norm_matvec_log;
/* STEP_LOG: n words a row, slots rows, from step back on. */
typedef struct loom_pc_step_log { uint32_t n, slots, back; } loom_pc_step_log;
/* RMS_NORM_QKV_ROPE_KV: q_rows = n_heads * head_dim, kv_rows = n_kv_heads * head_dim. */
typedef struct loom_pc_qkv {
    uint32_t q_rows, kv_rows, cols;
    float eps;
    uint32_t head_dim, max_seq;
    float theta;
} loom_pc_qkv;
/* EMBED_RMS_NORM_QKV_ROPE_KV: the q/k/v form's, then the table's vocab and
 * the token's index in token_buf. */
typedef struct loom_pc_embed_qkv {
    loom_pc_qkv qkv;
    uint32_t vocab, token_index;
} loom_pc_embed_qkv;

/* ---- multi-token (T-row) steps ------------------------------------------ *
 * Activations of a T-token step are T x n f32 matrices, row t the token at
 * position params.pos + t; rows t >= params.rows are padding. T is the
 * tensors' row count, sent to the kernels as the last field. */
typedef struct loom_pc_embed_rows { uint32_t cols, T; } loom_pc_embed_rows;           /* EMBED_ROWS */
typedef struct loom_pc_norm_rows  { uint32_t n; float eps; uint32_t T; } loom_pc_norm_rows; /* RMS_NORM_MUL_ROWS */
typedef struct loom_pc_rope_rows  { uint32_t n_heads, head_dim; float theta; uint32_t T; } loom_pc_rope_rows;
typedef struct loom_pc_kv_rows    { uint32_t kvd, max_seq, T; } loom_pc_kv_rows;      /* KV_APPEND_ROWS */
/* ATTENTION_ROWS: splits shares of the cache rows a query tile's
 * workgroups take, combined in the same dispatch (attention_rows.glsl). */
typedef struct loom_pc_attn_rows {
    uint32_t n_heads, n_kv_heads, head_dim, max_seq;
    float scale;
    uint32_t splits, T;
} loom_pc_attn_rows;
typedef struct loom_pc_rows_n     { uint32_t n, T; } loom_pc_rows_n;                  /* ROW_PICK, ARGMAX_ROWS */
/* MATMUL, MATMUL_ADD, MATMUL_SILU_MUL: W rows x cols; x T x cols; y (and r)
 * T x rows. */
typedef struct loom_pc_matmul   { uint32_t rows, cols, T; } loom_pc_matmul;
/* RMS_NORM_QKV_ROPE_KV_ROWS: the q/k/v form's, then T. */
typedef struct loom_pc_qkv_rows { loom_pc_qkv qkv; uint32_t T; } loom_pc_qkv_rows;
/* The matmul kinds' forms (shaders/matmul.glsl): T up to LOOM_MATMUL_SMALL_T
 * takes the multi-column matvec form, LOOM_MATMUL_SMALL_ROWS rows a
 * workgroup (MATMUL_SILU_MUL and block types: LOOM_MATMUL_SMALL_GATED_ROWS;
 * past 65535 workgroups they loop), every weight read once for all T token rows; above it the
 * tiled form, a workgroup per tile of LOOM_MATMUL_TILE_ROWS rows by
 * LOOM_MATMUL_TILE_T token rows, or on devices with cooperative matrices
 * (loom_compile_options.coopmat) the cooperative-matrix form, tiles of
 * LOOM_MATMUL_COOP_ROWS by LOOM_MATMUL_COOP_T. Workgroups are numbered row
 * tile fastest, but the cooperative-matrix form's token tile fastest. */
#define LOOM_MATMUL_SMALL_T     16u
#define LOOM_MATMUL_SMALL_ROWS  2u
#define LOOM_MATMUL_SMALL_GATED_ROWS 16u  /* MATMUL_SILU_MUL's, and block-typed MATMUL's and
                                             MATMUL_ADD's: 2 a subgroup */
/* The fuse pass folds a T-row norm, q/k/v, RoPE and KV append into
 * RMS_NORM_QKV_ROPE_KV_ROWS up to this T: on an H200 at 4 rows the step
 * took 5-6% less time at `1b` and 0.4% less at `7b`; at 8 rows 2% less at
 * `1b` but 2% more at `7b` (docs/perf-log.md, "the T-row q/k/v form"). */
#define LOOM_QKV_ROWS_FUSE_T    4u
/* An f16 MATMUL of at least this many rows on the multi-column form takes
 * it at 2 rows a subgroup, LOOM_MATMUL_SMALL_GATED_ROWS a workgroup (MM_R2;
 * passes/coopmat.c): the LM head of a verification step. On an H200 the
 * `1b` f16 LM head of 4 rows (2,000 workgroups) took 90.6 -> 62.8 us in
 * that layout and the step 1,842 -> 1,816, where the residual projections
 * (128 workgroups) took 19.6 -> 41.5 (docs/perf-log.md, "the few-query
 * attention", "the narrow form"). */
#define LOOM_MATMUL_SMALL_R2_ROWS 16384u
#define LOOM_MATMUL_TILE_ROWS   64u
#define LOOM_MATMUL_TILE_T      64u
/* Workgroups of a form that takes rows in blocks of per: one a block, at
 * most 65535 (Vulkan's minimum maxComputeWorkGroupCount); the workgroups
 * loop over the blocks left (shaders/matmul.glsl). */
static inline uint32_t loom_matmul_row_groups(uint32_t rows, uint32_t per)
{
    uint32_t n = rows / per + (rows % per != 0);
    return n < 65535u ? n : 65535u;
}
/* Workgroups of op's multi-column form over rows of weights of dtype w: a
 * block of LOOM_MATMUL_SMALL_ROWS rows each (MATMUL_SILU_MUL, and every op
 * over block types: _GATED_ROWS; RMS_NORM_QKV_ROPE_KV_ROWS over f32 and
 * f16: a RoPE pair, 2). */
static inline uint32_t loom_matmul_small_groups(loom_op op, uint32_t rows, loom_dtype w)
{
    uint32_t per = op == LOOM_OP_RMS_NORM_QKV_ROPE_KV_ROWS && !loom_dtype_is_block(w) ? 2u
                   : op == LOOM_OP_MATMUL_SILU_MUL || loom_dtype_is_block(w)           ? LOOM_MATMUL_SMALL_GATED_ROWS
                                                                                     : LOOM_MATMUL_SMALL_ROWS;
    return loom_matmul_row_groups(rows, per);
}
/* The narrow cooperative-matrix form of the matmul kinds (shaders/matmul.glsl,
 * MM_NARROW; f16 weights, T from LOOM_MATMUL_NARROW_FROM_T up to
 * LOOM_MATMUL_SMALL_T, rows and cols multiples of 16), on devices with
 * cooperative matrices: a workgroup LOOM_MATMUL_NARROW_ROWS rows of y
 * (MATMUL_SILU_MUL: _GATED_ROWS, as many of each matrix) and every token row
 * (passes/coopmat.c). On an H200 it took a `1b` f16 verification step of 16
 * rows 5,557 -> 2,904 us and of 8 rows 3,244 -> 2,690, `7b` with 8 layers of
 * 16 rows 8,174 -> 3,981; of 4 rows it lost (`1b` 1,842 -> 2,293): the
 * multi-column form keeps T below 8 (docs/perf-log.md, "the narrow form"). */
#define LOOM_MATMUL_NARROW_FROM_T     8u
#define LOOM_MATMUL_NARROW_ROWS       16u
#define LOOM_MATMUL_NARROW_GATED_ROWS 8u
#define LOOM_MATMUL_COOP_ROWS   64u
#define LOOM_MATMUL_COOP_T      64u
/* A matrix of one weight (MATMUL, MATMUL_ADD) of fewer cooperative-matrix
 * tiles than this takes the form that splits each tile's K walk between two
 * halves of a workgroup (passes/coopmat.c; matmul.glsl: MM_KS). */
#define LOOM_MATMUL_COOP_KS_BELOW 256u
/* The large-tile cooperative-matrix forms of a matrix of one weight
 * (MATMUL, MATMUL_ADD; matmul.glsl: MM_L): tiles of LOOM_MATMUL_COOP_L_ROWS
 * rows by LOOM_MATMUL_COOP_L_T token rows (MM_L=64: _T64), token tile
 * fastest. A node whose K is at least LOOM_MATMUL_COOP_L_COLS takes
 * MM_L=128 where those tiles number at least LOOM_MATMUL_COOP_L_FROM, else
 * MM_L=64 where its tiles do (passes/coopmat.c; docs/perf-log.md has the
 * measurements: K 2048 took the large tiles 15% less time for `1b` pp512
 * on an H200 once the gated FFN had them). */
#define LOOM_MATMUL_COOP_L_ROWS 128u
#define LOOM_MATMUL_COOP_L_T    128u
#define LOOM_MATMUL_COOP_L_T64  64u
#define LOOM_MATMUL_COOP_L_FROM 128u
#define LOOM_MATMUL_COOP_L_COLS 2048u
/* The gated FFN's large tiles (MATMUL_SILU_MUL, MM_L=128 with MM_SILU):
 * LOOM_MATMUL_COOP_LS_ROWS rows of y (as many of each matrix: 128 staged
 * rows) by LOOM_MATMUL_COOP_L_T token rows, taken where K reaches
 * LOOM_MATMUL_COOP_L_COLS and the tiles number LOOM_MATMUL_COOP_L_FROM. */
#define LOOM_MATMUL_COOP_LS_ROWS 64u
/* ATTENTION_ROWS's cooperative-matrix form (shaders/attention_rows.glsl,
 * ATT_COOP; f16 caches, head_dim 64 or 128): a workgroup per
 * LOOM_ATTN_ROWS_COOP_Q query vectors of one kv head (T x the heads a kv
 * head serves of them), kv head slowest. The split pass swaps it in where
 * a kv head has at least that many. */
#define LOOM_ATTN_ROWS_COOP_Q   64u
/* ATTENTION_ROWS of at most LOOM_ATTN_ROWS_FEW_T token rows (a verification
 * step) takes the decode ATTENTION's kernel over its T x n_heads query
 * vectors (attention.glsl, ATT_ROWS: forms attention_few...), a workgroup a
 * vector and share of the cache, not the tiled form's workgroup a kv head
 * walking its tiles in turn. On an H200 the step of 4 rows at position 512
 * took 27% less time at `1b` f16 and 12% less at `7b` Q4_K_M (8 layers), of
 * 8 rows 15% and 6% less; at 16 rows `1b` lost 7% at position 0 and `7b`
 * 1% at 512 (docs/perf-log.md, "the few-query attention"). */
#define LOOM_ATTN_ROWS_FEW_T    8u

/* ---- reading push constants back ---------------------------------------- *
 * What a node's push constants hold, decoded by its op kind's push layout
 * (ops.def's push column): the one reading of the loom_pc_* structs for
 * passes and frontends. A field the layout lacks is 0. EMBED's and
 * EMBED_BLOCKS' dim is cols (the table's row); KV_APPEND's dim and
 * KV_APPEND_ROWS' kvd are n. */
typedef struct loom_op_args {
    uint32_t n;                           /* elements: loom_pc_n, _norm, _norm_rows, _rows_n, _step_log, _kv(_rows) */
    uint32_t rows, cols;                  /* matrices: _matvec, _norm_matvec(_log), _matmul; cols: _embed*, _qkv */
    float eps, theta, scale;
    uint32_t heads, kv_heads, head_dim, max_seq, splits;   /* _rope, _attn, _kv, _qkv (and their _rows) */
    uint32_t q_rows, kv_rows;             /* _qkv */
    uint32_t vocab, token_index;          /* _embed, _embed_blocks, _embed_qkv */
    uint32_t block_rows, first, total;    /* _embed_blocks */
    uint32_t slots, back;                 /* _step_log (back), _step_log and _norm_matvec_log (slots) */
    uint32_t T;                           /* the T-row layouts and _matmul */
} loom_op_args;

/* Decodes size bytes of push constants of op into *out (zeroed first).
 * LOOM_INVALID_ARGUMENT when op is out of range, size is not its layout's
 * size (a node some pass gave push constants of its own) or an argument is
 * NULL; *out is then all zeros. Sets no error message: passes ask it of
 * any node, as a question. Thread-safe. */
loom_result loom_op_args_read(loom_op op, const void *push, uint32_t size, loom_op_args *out);
/* The same for node id of g, a dispatch; LOOM_INVALID_ARGUMENT also for a
 * node out of range or a barrier. */
loom_result loom_op_args_of(const loom_graph *g, uint32_t node, loom_op_args *out);

/* ---- builders ----------------------------------------------------------- *
 * Each builder's kernel, binding slots (in order; (w) written), push bytes
 * and workgroup shape are its op kind's row of ops.def (loom_op_info_get).
 * Builders that need per-token values bind the step-parameter buffer
 * (loom_graph_params) at slot 0 themselves. out_node may be NULL. */

/* dst = src; both same byte size, a multiple of 4. */
loom_result loom_op_copy(loom_graph *g, loom_tensor src, loom_tensor dst, uint32_t *out_node);
/* dst row (params.step - back) % dst.rows = src, once params.step >= back:
 * src's n words (any 32-bit dtype) into a dst of n words a row, of src's
 * dtype. A step's output is kept there until the ring comes round, so the
 * host can read it steps behind the GPU; back 1 copies the step before's
 * output, before this step writes it. */
loom_result loom_op_step_log(loom_graph *g, loom_tensor src, loom_tensor dst, uint32_t back, uint32_t *out_node);
/* out = table[token_buf[token_index]]; table vocab x dim (f32|f16); out 1 x dim. */
loom_result loom_op_embed(loom_graph *g, loom_tensor table, uint32_t token_buf, uint32_t token_index,
                          loom_tensor out, uint32_t *out_node);
/* EMBED_BLOCKS: the same over a table kept as row blocks, each bound on its
 * own (the split pass makes these when a table exceeds one binding):
 * tables[0..n_tables), n_tables <= LOOM_EMBED_MAX_BLOCKS, are consecutive
 * rows of one table, all of one dtype and dim, every block but the last
 * with the rows of the first. They stand for rows [first, first + their
 * rows) of a table of total rows: the node writes out only for a token in
 * that range, and zeros for a token >= total when it holds the table's last
 * rows, so nodes over disjoint ranges (first 0 up to total) together make
 * one EMBED. Slots past n_tables bind the last block again (the kernel
 * reads only the block the token falls in); the node's reads name each
 * distinct block once, so it has at most LOOM_MAX_RANGES of them. */
#define LOOM_EMBED_MAX_BLOCKS 7u
loom_result loom_op_embed_blocks(loom_graph *g, const loom_tensor *tables, uint32_t n_tables, uint32_t first,
                                 uint32_t total, uint32_t token_buf, uint32_t token_index, loom_tensor out,
                                 uint32_t *out_node);
loom_result loom_op_rms_norm(loom_graph *g, loom_tensor x, loom_tensor y, float eps, uint32_t *out_node);
loom_result loom_op_rms_norm_mul(loom_graph *g, loom_tensor x, loom_tensor w, loom_tensor y, float eps,
                                 uint32_t *out_node);
loom_result loom_op_mul(loom_graph *g, loom_tensor a, loom_tensor b, loom_tensor y, uint32_t *out_node);
loom_result loom_op_add(loom_graph *g, loom_tensor a, loom_tensor b, loom_tensor y, uint32_t *out_node);
loom_result loom_op_add_rms_norm(loom_graph *g, loom_tensor a, loom_tensor b, loom_tensor sum,
                                 loom_tensor y, float eps, uint32_t *out_node);
loom_result loom_op_add_rms_norm_mul(loom_graph *g, loom_tensor a, loom_tensor b, loom_tensor w,
                                     loom_tensor sum, loom_tensor y, float eps, uint32_t *out_node);
/* y = W x. */
loom_result loom_op_matvec(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor y, uint32_t *out_node);
/* y = W x + r. */
loom_result loom_op_matvec_add(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor r, loom_tensor y,
                               uint32_t *out_node);
/* y = W x + r; t = y * s (elementwise; s, t one element per row of W);
 * the sum of y^2 added with float atomics into acc (1 x
 * LOOM_STAGE_SUM_WORDS f32), which must hold zeros or sums to add to (a
 * ZERO node): in parts, 32 words each 8 apart, whose total is the sum. What the stage pass makes: the
 * next RMS norm then reads t and acc instead of x and its gain s. */
#define LOOM_STAGE_SUM_WORDS 256u
loom_result loom_op_matvec_add_stage(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor r, loom_tensor s,
                                     loom_tensor y, loom_tensor t, loom_tensor acc, uint32_t *out_node);
/* y = 0, every 32-bit word of the view. */
loom_result loom_op_zero(loom_graph *g, loom_tensor y, uint32_t *out_node);
loom_result loom_op_silu_mul(loom_graph *g, loom_tensor a, loom_tensor b, loom_tensor y, uint32_t *out_node);
/* y = silu(Wg x) * (Wu x). */
loom_result loom_op_matvec_silu_mul(loom_graph *g, loom_tensor Wg, loom_tensor Wu, loom_tensor x,
                                    loom_tensor y, uint32_t *out_node);
/* Rotary embedding (pairs (i, i + head_dim/2) of each head) at params.pos.
 * x, y are 1 x n_heads*head_dim. */
loom_result loom_op_rope(loom_graph *g, loom_tensor x, loom_tensor y, uint32_t n_heads, uint32_t head_dim,
                         float theta, uint32_t *out_node);
/* kcache[pos] = k, vcache[pos] = v; caches are max_seq x dim, both f32 or
 * both f16 (k and v then rounded to f16, to nearest even; the kernels need
 * the device's storageBuffer16BitAccess). The write ranges cover the whole
 * caches: the position is a per-step value. Every op with KV caches takes
 * either dtype. */
loom_result loom_op_kv_append(loom_graph *g, loom_tensor k, loom_tensor v, loom_tensor kcache,
                              loom_tensor vcache, uint32_t *out_node);
/* One query, grouped-query heads, over cache rows [0, params.kv_len), split
 * over the cache length so that the dispatch fills the GPU. Slots part and
 * count are workspace buffers the builder declares itself (plan-owned
 * STATE, zeroed once by the runtime; the kernel leaves count zeroed). */
loom_result loom_op_attention(loom_graph *g, loom_tensor q, loom_tensor kcache, loom_tensor vcache,
                              loom_tensor out, uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim,
                              uint32_t *out_node);
loom_result loom_op_softmax(loom_graph *g, loom_tensor x, loom_tensor y, uint32_t *out_node);
/* out[0] = argmax x (lowest index on ties), u32. */
loom_result loom_op_argmax(loom_graph *g, loom_tensor x, loom_tensor out, uint32_t *out_node);

/* ---- T-row ops: row t of a T-token step at position params.pos + t, rows
 * t >= params.rows padding (see the loom_pc_*_rows layouts above). Shapes:
 * x, y, q, k, v, out T x n f32, caches max_seq x kvd (f32 or f16, as
 * loom_op_kv_append). LOOM_INVALID_ARGUMENT naming the field on a bad
 * shape, nothing appended. */

/* out[t] = table[tokens[pos + t]] for t < rows, zeros for padding rows and
 * for a token past the table or a position past tokens. table vocab x cols
 * (f32, f16 or a block type, as EMBED); tokens a u32 vector indexed by
 * position (the whole prompt); out T x cols. */
loom_result loom_op_embed_rows(loom_graph *g, loom_tensor table, loom_tensor tokens, loom_tensor out,
                               uint32_t *out_node);
/* y[t] = x[t] / rms(x[t]) * w for every t < T; w 1 x n; y may be x. */
loom_result loom_op_rms_norm_mul_rows(loom_graph *g, loom_tensor x, loom_tensor w, loom_tensor y, float eps,
                                      uint32_t *out_node);
/* Row t rotated at position pos + t, ROPE's pairing; x, y T x
 * n_heads*head_dim; y may be x. */
loom_result loom_op_rope_rows(loom_graph *g, loom_tensor x, loom_tensor y, uint32_t n_heads, uint32_t head_dim,
                              float theta, uint32_t *out_node);
/* Cache row pos + t = k[t], v[t] for t < rows (rows past max_seq: nothing);
 * k, v T x kvd. Nothing is written for padding rows; the write ranges cover
 * the whole caches. */
loom_result loom_op_kv_append_rows(loom_graph *g, loom_tensor k, loom_tensor v, loom_tensor kcache,
                                   loom_tensor vcache, uint32_t *out_node);
/* out[t] head h = softmax(q[t, h] . K[0 .. pos + t] * scale) V, over cache
 * rows [0, min(pos + t + 1, max_seq)) of kv head h / (n_heads / n_kv_heads)
 * (causal; the step's rows already appended). Padding rows get the last
 * real row's keys: finite. q, out T x n_heads*head_dim; head_dim <= 256. */
loom_result loom_op_attention_rows(loom_graph *g, loom_tensor q, loom_tensor kcache, loom_tensor vcache,
                                   loom_tensor out, uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim,
                                   uint32_t *out_node);
/* y = x[rows - 1] (1 x n): the last real row. */
loom_result loom_op_row_pick(loom_graph *g, loom_tensor x, loom_tensor y, uint32_t *out_node);
/* out[t] = argmax x[t] (lowest index on ties), out a u32 vector of T. */
loom_result loom_op_argmax_rows(loom_graph *g, loom_tensor x, loom_tensor out, uint32_t *out_node);

/* ---- fused matvec forms (what the fuse pass makes; frontends may call them) */

/* y = W (x / rms(x) * g). */
loom_result loom_op_rms_norm_matvec(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor gw, loom_tensor y,
                                    float eps, uint32_t *out_node);
/* n = x / rms(x) * g; y = silu(Wg n) * (Wu n). */
loom_result loom_op_rms_norm_matvec_silu_mul(loom_graph *g, loom_tensor Wg, loom_tensor Wu, loom_tensor x,
                                             loom_tensor gw, loom_tensor y, float eps, uint32_t *out_node);
/* y = W x; out[0] = argmax y (u32, lowest index on ties). Slots part and
 * count are workspace buffers the builder declares (see attention). */
loom_result loom_op_matvec_argmax(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor y, loom_tensor out,
                                  uint32_t *out_node);
/* The same over x / rms(x) * g. */
loom_result loom_op_rms_norm_matvec_argmax(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor gw,
                                           loom_tensor y, loom_tensor out, float eps, uint32_t *out_node);
/* The same, and the index also into row params.step % ring.rows of ring (u32,
 * one column): STEP_LOG of out with back 0, by the workgroup that finds
 * the index, so the log needs no level of its own. */
loom_result loom_op_rms_norm_matvec_argmax_log(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor gw,
                                               loom_tensor y, loom_tensor out, loom_tensor ring, float eps,
                                               uint32_t *out_node);
/* n = x / rms(x) * g; q = rope(Wq n); kcache[pos] = rope(Wk n); vcache[pos]
 * = Wv n, at params.pos (nothing written to the caches past max_seq). Wq is
 * (n_heads * head_dim) x cols, Wk and Wv (n_kv_heads * head_dim) x cols;
 * head_dim a multiple of 4. */
loom_result loom_op_rms_norm_qkv_rope_kv(loom_graph *g, loom_tensor x, loom_tensor gw, loom_tensor Wq,
                                         loom_tensor Wk, loom_tensor Wv, loom_tensor q, loom_tensor kcache,
                                         loom_tensor vcache, uint32_t head_dim, float theta, float eps,
                                         uint32_t *out_node);
/* x = table[token_buf[token_index]] (zeros for a token past the table, as
 * EMBED), written to x, and the q/k/v form above of that x in the same
 * dispatch. table is vocab x cols of Wq's dtype. */
loom_result loom_op_embed_rms_norm_qkv_rope_kv(loom_graph *g, loom_tensor table, uint32_t token_buf,
                                               uint32_t token_index, loom_tensor gw, loom_tensor Wq, loom_tensor Wk,
                                               loom_tensor Wv, loom_tensor x, loom_tensor q, loom_tensor kcache,
                                               loom_tensor vcache, uint32_t head_dim, float theta, float eps,
                                               uint32_t *out_node);

/* ---- matrix products over T token rows (prefill, verification) ----------- */

/* y[t] = W x[t] for t < T = x.rows: W rows x cols (f32, f16 with even cols,
 * or a block type); x T x cols f32; y T x rows f32, overlapping nothing
 * read. The kernel form follows T (LOOM_MATMUL_SMALL_T); any T, rows and
 * cols. LOOM_INVALID_ARGUMENT naming the field on a shape or dtype
 * mismatch. */
loom_result loom_op_matmul(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor y, uint32_t *out_node);
/* y[t] = W x[t] + r[t]; r T x rows; y may be r (the same view), never x. */
loom_result loom_op_matmul_add(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor r, loom_tensor y,
                               uint32_t *out_node);
/* y[t] = silu(Wg x[t]) * (Wu x[t]); Wu of Wg's dtype and shape. */
loom_result loom_op_matmul_silu_mul(loom_graph *g, loom_tensor Wg, loom_tensor Wu, loom_tensor x, loom_tensor y,
                                    uint32_t *out_node);
/* The q/k/v form over T = x.rows token rows, T <= LOOM_MATMUL_SMALL_T (a
 * verification step's, or a short prompt's): n[t] = x[t] / rms(x[t]) * g;
 * q[t] = rope(Wq n[t]) at position params.pos + t; cache row pos + t =
 * rope(Wk n[t]) and Wv n[t] for t < params.rows (padding rows and rows past
 * max_seq write no cache row). x T x cols f32, q T x (n_heads * head_dim)
 * f32; the weights and caches as loom_op_rms_norm_qkv_rope_kv's. A larger T
 * is LOOM_INVALID_ARGUMENT naming x.rows: the matrices are streamed once
 * a pass of 4 token rows, which only a small T pays for. */
loom_result loom_op_rms_norm_qkv_rope_kv_rows(loom_graph *g, loom_tensor x, loom_tensor gw, loom_tensor Wq,
                                              loom_tensor Wk, loom_tensor Wv, loom_tensor q, loom_tensor kcache,
                                              loom_tensor vcache, uint32_t head_dim, float theta, float eps,
                                              uint32_t *out_node);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif
#endif
