/* A small Llama-style decoder built on loom's op API, with a CPU reference.
 *
 * It exists to exercise the whole stack the way a real frontend would: every
 * token the step graph is captured anew (reset + rebuild), compiled through
 * the plan cache (a hit after the first token), and replayed; only the step
 * parameters change between tokens. Weights are random but deterministic
 * (from a seed), so GPU and CPU runs can be compared step by step; each
 * matrix has a dtype of its own (f32, f16 or a GGUF block type), so a
 * quantized model runs as it is stored.
 *
 * Ownership: loom_llama_weights is host memory owned by the caller and must
 * outlive every model and reference made from it. Threading: one thread per
 * object. Failure: loom_result + loom_last_error(); out-parameters NULL. */
#ifndef LOOM_LLAMA_H
#define LOOM_LLAMA_H

#include "loom_ir.h"
#include "loom_ops.h"
#include "loom_compiler.h"
#include "loom_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How synthetic weights choose a dtype per matrix (loom_llama_matrix_type). */
typedef enum loom_llama_mix {
    LOOM_LLAMA_MIX_NONE = 0,    /* every matrix wtype */
    LOOM_LLAMA_MIX_Q4_K_M = 1,  /* llama.cpp's Q4_K_M: wtype (q4_k) with q6_k for the LM head and for attn_v
                                   and ffn_down of the "more bits" layers */
} loom_llama_mix;

typedef struct loom_llama_config {
    uint32_t dim;          /* residual width */
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;   /* divides n_heads (grouped-query attention) */
    uint32_t head_dim;     /* even */
    uint32_t ffn;          /* hidden width of the SwiGLU block */
    uint32_t vocab;
    uint32_t max_seq;      /* KV-cache rows */
    float eps;             /* RMS-norm epsilon */
    float rope_theta;
    /* The matrices' and embedding's dtype: f32, f16 or a block type. It is
     * what synthetic weights are made of (with mix, per matrix); weights
     * loaded from a file keep each tensor's own dtype and say here the one
     * most of their matrices have. */
    loom_dtype wtype;
    loom_llama_mix mix;    /* NONE, or Q4_K_M (then wtype is q4_k) */
    loom_dtype kvtype;     /* KV caches: LOOM_F32 (0), or LOOM_F16 (k and v rounded to f16 as they
                              are appended, as the reference does; half the bytes the attention
                              loads) */
    uint64_t seed;
} loom_llama_config;

/* dim 256, 4 layers, 8 heads, 4 KV heads, head_dim 32, ffn 688, vocab 512,
 * max_seq 64, f32 weights: a few seconds on a CPU Vulkan device. */
void loom_llama_default_config(loom_llama_config *c);
/* LOOM_INVALID_ARGUMENT naming the first inconsistent field. */
loom_result loom_llama_config_check(const loom_llama_config *c);

/* ---- weights ------------------------------------------------------------ */

/* The weight matrices of a model; the per-layer ones are WQ to WD. */
typedef enum loom_llama_mat {
    LOOM_LLAMA_EMBED,      /* vocab x dim */
    LOOM_LLAMA_WQ,         /* n_heads * head_dim x dim */
    LOOM_LLAMA_WK,         /* n_kv_heads * head_dim x dim */
    LOOM_LLAMA_WV,         /* n_kv_heads * head_dim x dim */
    LOOM_LLAMA_WO,         /* dim x n_heads * head_dim */
    LOOM_LLAMA_WG,         /* ffn x dim */
    LOOM_LLAMA_WU,         /* ffn x dim */
    LOOM_LLAMA_WD,         /* dim x ffn */
    LOOM_LLAMA_OUT,        /* vocab x dim */
    LOOM_LLAMA_MAT_COUNT
} loom_llama_mat;

static inline bool loom_llama_mat_per_layer(loom_llama_mat k) { return k >= LOOM_LLAMA_WQ && k <= LOOM_LLAMA_WD; }

/* "embed", "wq", ..., "out"; "?" out of range. */
const char *loom_llama_mat_name(loom_llama_mat k);
/* The shape of matrix k under c. */
void loom_llama_mat_shape(const loom_llama_config *c, loom_llama_mat k, uint32_t *rows, uint32_t *cols);

/* The dtype synthetic weights give matrix k (of layer `layer` for the
 * per-layer ones): wtype; with LOOM_LLAMA_MIX_Q4_K_M q6_k for OUT, and for
 * WV and WD of layer i when i < n/8, i >= 7n/8 or (i - n/8) % 3 == 2 (n
 * layers), else q4_k. A row must be whole blocks: where cols is not, a
 * K-quant falls back to q8_0 (cols a multiple of 32), and any block type
 * then to f16. */
loom_dtype loom_llama_matrix_type(const loom_llama_config *c, loom_llama_mat k, uint32_t layer);

/* A weight-type option as the command lines spell it: a matrix dtype's name
 * (f32, f16, q8_0, q4_0, q4_k, q6_k) or q4_k_m; sets c->wtype and c->mix.
 * LOOM_NOT_FOUND naming the value otherwise. */
loom_result loom_llama_wtype_parse(const char *s, loom_llama_config *c);
/* "q4_k_m" for the mix, else wtype's name. */
const char *loom_llama_wtype_name(const loom_llama_config *c);

/* A matrix, row-major rows x cols, in its own dtype. f32 holds the values
 * the GPU computes with, widened to f32 (f16 exactly; a block type's rows
 * dequantized), which the CPU reference reads, so it sees what the GPU
 * sees. raw holds the rows as uploaded, loom_dtype_row_bytes(type, cols)
 * bytes each: f16 bits or GGUF blocks; NULL for f32, whose f32 is uploaded.
 * A shapes-only load (gguf.h) leaves both NULL, a raw-only load f32 (of
 * every dtype but f32): a GPU model needs only what it uploads. */
typedef struct loom_llama_matrix {
    uint32_t rows, cols;
    loom_dtype type;
    float *f32;
    void *raw;
} loom_llama_matrix;

/* The bytes a matrix uploads (rows x row bytes of its dtype), and where they
 * are (raw, or f32 for f32; NULL without values). */
uint64_t loom_llama_matrix_bytes(const loom_llama_matrix *mx);
const void *loom_llama_matrix_data(const loom_llama_matrix *mx);

typedef struct loom_llama_layer {
    float *attn_norm;      /* dim */
    loom_llama_matrix wq, wk, wv, wo;
    float *ffn_norm;       /* dim */
    loom_llama_matrix wg, wu, wd;
} loom_llama_layer;

typedef struct loom_llama_weights {
    loom_llama_config cfg;
    loom_llama_matrix embed;   /* vocab x dim */
    loom_llama_layer *layers;  /* n_layers */
    float *final_norm;         /* dim */
    loom_llama_matrix out;     /* vocab x dim */
    /* Token strings (gguf.h's loader; NULL and 0 otherwise): tokens[i]
     * points into token_text; loom_llama_weights_destroy frees both. */
    uint32_t n_tokens;
    char **tokens;
    char *token_text;
    /* Shapes and dtypes only (gguf.h's shapes-only load): no matrix or norm
     * values, good for a dry model and for describing, not for running. */
    bool no_values;
} loom_llama_weights;

/* Random weights of cfg's shape in the dtypes loom_llama_matrix_type gives,
 * quantized on the host (loom_quantize_row) from the same f32 draws. */
loom_result loom_llama_weights_create(const loom_llama_config *cfg, loom_llama_weights **out);
void loom_llama_weights_destroy(loom_llama_weights *w);   /* NULL is fine */

/* Matrix k (of layer `layer` for the per-layer ones); NULL out of range. */
const loom_llama_matrix *loom_llama_weights_matrix(const loom_llama_weights *w, loom_llama_mat k, uint32_t layer);

/* The matrices' dtypes, most common first, as "q4_k x 26, q6_k x 6, f16 x 4"
 * (every matrix, the LM head and embedding included): w's when w is not
 * NULL, else those c's synthetic weights get. Writes at most n bytes,
 * NUL-terminated; returns buf. */
char *loom_llama_describe_types(const loom_llama_config *c, const loom_llama_weights *w, char *buf, size_t n);

/* ---- CPU reference ------------------------------------------------------ */

typedef struct loom_llama_ref loom_llama_ref;

/* Reads every matrix's f32 values (f16 ones their bits): LOOM_INVALID_
 * ARGUMENT, naming the matrix, for weights without them (shapes only, or a
 * raw-only load). */
loom_result loom_llama_ref_create(const loom_llama_weights *w, loom_llama_ref **out);
void loom_llama_ref_destroy(loom_llama_ref *r);
/* Decodes token at position pos (pos < max_seq, positions in order from 0);
 * writes vocab logits (may be NULL) and the argmax (may be NULL). */
loom_result loom_llama_ref_step(loom_llama_ref *r, uint32_t token, uint32_t pos, float *logits, uint32_t *argmax);
/* The reference's K and V caches of a layer: max_seq rows of
 * n_kv_heads * head_dim floats; NULL for a bad layer. */
const float *loom_llama_ref_kcache(const loom_llama_ref *r, uint32_t layer);
const float *loom_llama_ref_vcache(const loom_llama_ref *r, uint32_t layer);

/* ---- GPU model ---------------------------------------------------------- */

typedef struct loom_llama loom_llama;

/* Slots of the rings the decode loop reads behind the GPU: a step's token
 * (and logits, with keep_logits) can be collected until this many later
 * steps have been submitted. Steps in flight must stay below it. */
#define LOOM_LLAMA_RING 32u

typedef struct loom_llama_desc {
    /* Take each step's token from the previous step's ARGMAX output on the
     * GPU instead of the step parameters: no host round trip between steps.
     * The first step's token is written into that buffer by the host. */
    bool chain;
    /* Compile options (pipeline, window, LOOM_DISABLE_*, max_binding_range);
     * NULL: defaults. A model on a runtime compiles for the runtime's
     * binding limit where max_binding_range is 0 or larger. */
    const loom_compile_options *compile;
    /* Shared plan cache; NULL: the model makes its own. */
    loom_cache *cache;
    /* Copy every step's logits into a ring too, so loom_llama_collect can
     * return them for steps behind the newest (a vocab-sized copy per step;
     * for checking, not for benchmarks). */
    bool keep_logits;
    /* Log each step's token (and logits) at the start of the next step, in
     * its first level, instead of at the end of the step behind one more
     * barrier. loom_llama_collect then reads the newest step from the
     * outputs and an older one once the step after it is done. */
    bool early_log;
} loom_llama_desc;

/* Uploads the weights into runtime buffers, each matrix in its own dtype
 * (bound to the ops with it), and allocates the KV caches. LOOM_INVALID_
 * ARGUMENT naming the matrix whose shape, dtype or values do not fit. */
loom_result loom_llama_create(loom_rt *rt, const loom_llama_weights *w, const loom_llama_desc *desc,
                              loom_llama **out);
void loom_llama_destroy(loom_llama *m);

/* A model with no device and no weights: buffers are placeholders of the
 * sizes real weights would have, so the step graph can be captured and
 * compiled (ir, passes, compiler only) to see its plan. The config is
 * checked except for the matrix-size limit, a device property; the binding
 * limit comes from desc->compile (max_binding_range; 0: none).
 * Capture, compile and the plan figures work on it; submit does not. */
loom_result loom_llama_create_dry(const loom_llama_config *cfg, const loom_llama_desc *desc, loom_llama **out);
/* The same with w's shape and per-matrix dtypes (its values are not read:
 * a shapes-only load will do); w must outlive the model. */
loom_result loom_llama_create_dry_like(const loom_llama_weights *w, const loom_llama_desc *desc, loom_llama **out);

/* Captures the model's ops into g (which is reset first). Exposed so tests
 * and tools can compile or dump it without running it. */
loom_result loom_llama_capture(loom_llama *m, loom_graph *g);
/* The graph a step replays: loom_llama_capture, then a tiny dispatch that
 * copies the step's ARGMAX (and, with keep_logits, the logits) into slot
 * step % LOOM_LLAMA_RING of a ring the host reads behind the GPU. With
 * early_log the dispatch comes first and copies what the step before left
 * there into slot (step - 1) % LOOM_LLAMA_RING (nothing on step 0). */
loom_result loom_llama_capture_step(loom_llama *m, loom_graph *g);

/* Submits one step without waiting for it: capture, compile (cache hit
 * after the first step), replay with {pos, token, kv_len = pos + 1, step}.
 * The replay waits only when every recorded copy of the program is in
 * flight (loom_rt_desc.in_flight), and then for the oldest alone. In chain
 * mode token is used only on the model's first step. *out_index (may be
 * NULL) is the step's index, counted from 0 over the model's life. */
loom_result loom_llama_submit(loom_llama *m, uint32_t token, uint32_t pos, uint32_t *out_index);
/* Submits one step whose input is token, from the host through the step
 * parameters, whatever .chain says: how a prompt is prefilled, one token
 * per step. In chain mode the next loom_llama_submit goes on from this
 * step's ARGMAX. The fed graph is a plan of its own (one more compile, and
 * a program made when the model switches between the two). LOOM_INVALID_
 * ARGUMENT for token >= vocab or pos >= max_seq. */
loom_result loom_llama_feed(loom_llama *m, uint32_t token, uint32_t pos, uint32_t *out_index);
/* ---- multi-token steps ---- */

/* The most token rows one step takes: its largest bucket. */
#define LOOM_LLAMA_MAX_ROWS 512u

/* Writes prompt ids into the model's prompt buffer at positions pos to
 * pos + n - 1 (ids by position; multi-token steps read their rows' tokens
 * there). Only ids that differ from what the buffer holds go up; such a
 * write waits until no submitted step reads the buffer. LOOM_INVALID_
 * ARGUMENT for an id >= vocab or positions past max_seq. */
loom_result loom_llama_set_prompt(loom_llama *m, const uint32_t *ids, uint32_t n, uint32_t pos);
/* Submits one step over the rows prompt tokens at positions pos to
 * pos + rows - 1 (set by loom_llama_set_prompt), without waiting for it:
 * the graph of bucket T (the smallest power of two >= rows, >= 2; rows 1 is
 * a fed decode step), compiled once per bucket and replayed with
 * {pos, kv_len = pos + rows, step, rows}. Every row's k and v go into the
 * KV caches; the step's token (loom_llama_collect) and logits are the last
 * row's, and the next loom_llama_submit in chain mode goes on from that
 * token. LOOM_INVALID_ARGUMENT naming the field for rows outside
 * [1, LOOM_LLAMA_MAX_ROWS] or past the cache (pos + rows > max_seq). */
loom_result loom_llama_submit_rows(loom_llama *m, uint32_t pos, uint32_t rows, uint32_t *out_index);
/* The same, verifying: every row goes through the LM head, and each row's
 * argmax (the token the model predicts after that row's id) lands where
 * loom_llama_read_row_tokens reads it; the step's token is still the last
 * row's. A graph of its own per bucket (rows 1 included). */
loom_result loom_llama_submit_verify(loom_llama *m, uint32_t pos, uint32_t rows, uint32_t *out_index);
/* The row tokens of the newest verifying step (rows of them), waiting for
 * the steps that write them. */
loom_result loom_llama_read_row_tokens(loom_llama *m, uint32_t *tokens, uint32_t rows);
/* Captures the graph of a step over rows tokens (rows 2 to
 * LOOM_LLAMA_MAX_ROWS; the bucket rows falls in) into g, reset first. */
loom_result loom_llama_capture_rows(loom_llama *m, loom_graph *g, uint32_t rows);
/* Reads the K and V cache rows pos to pos + rows - 1 of a layer as f32
 * (either may be NULL), rows x n_kv_heads * head_dim each; waits for the
 * steps that write the caches. */
loom_result loom_llama_read_kv(loom_llama *m, uint32_t layer, uint32_t pos, uint32_t rows, float *k, float *v);

/* Reads the token (may be NULL) and logits (may be NULL) of submitted step
 * index, waiting for that step only (with early_log, for the step after it
 * when there is one): later steps may still run. Possible
 * until LOOM_LLAMA_RING later steps were submitted; the logits of any step
 * but the newest need keep_logits. */
loom_result loom_llama_collect(loom_llama *m, uint32_t index, uint32_t *token, float *logits);
/* Steps submitted so far; the runtime step id of index (0 once its slot was
 * reused), e.g. to loom_rt_wait for it. */
uint32_t loom_llama_steps(const loom_llama *m);
uint64_t loom_llama_step_id(const loom_llama *m, uint32_t index);

/* One decode step, synchronous: submit, wait for it, read back. In chain
 * mode token is used only on the first step. logits and argmax may be NULL. */
loom_result loom_llama_step(loom_llama *m, uint32_t token, uint32_t pos, float *logits, uint32_t *argmax);

/* Replaces the compile options (ablations between runs on one upload); the
 * next step compiles anew. NULL: defaults. */
loom_result loom_llama_set_compile(loom_llama *m, const loom_compile_options *opts);

/* The model's shape; owned by the model. */
const loom_llama_config *loom_llama_get_config(const loom_llama *m);
/* The plan of the last step (NULL before the first); owned by the model. */
const loom_plan *loom_llama_plan(const loom_llama *m);
/* The program the last step replayed (NULL before the first step). */
loom_rt_program *loom_llama_program(const loom_llama *m);
/* Cache hits and misses seen by this model's steps. */
void loom_llama_cache_counts(const loom_llama *m, uint64_t *hits, uint64_t *misses);

/* ---- comparison --------------------------------------------------------- */

typedef struct loom_llama_diff {
    float max_abs;         /* max |gpu - ref| over the logits */
    float ref_max_abs;     /* max |ref| (scale of the logits) */
    bool argmax_ok;        /* same argmax, or a tie within tolerance */
} loom_llama_diff;

/* Compares logits; tol is relative to max(1, max|ref|). Returns true when
 * max_abs is within tolerance and the argmaxes agree. */
bool loom_llama_compare(const float *gpu, uint32_t gpu_arg, const float *ref, uint32_t ref_arg, uint32_t n,
                        float tol, loom_llama_diff *out);

/* Block-typed weights on a device with integer dot products: the matvec
 * kernels quantize their input to int8 per block of 32 (as llama.cpp's q8_1
 * activations), which the f32 reference does not. The logits then differ by
 * up to 0.0184 (tiny config, 48 steps of q4_k_m, q4_0, q8_0, q4_k, q6_k on
 * lavapipe; the reference's logits within 1 in magnitude) and 0.0108
 * relative in test_gguf's quantized files. */
#define LOOM_LLAMA_TOL_INT8_X 3e-2f
/* tol, or LOOM_LLAMA_TOL_INT8_X where a matrix of w's first layer or a
 * model-wide one is block-typed: rt's kernels take x as int8 where it has
 * integer dot products (loom_rt_info.int_dot), and on every device a staged
 * norm input between block-typed forms is stored as int8 quads of 16
 * (passes/stage.c). */
float loom_llama_check_tol(loom_rt *rt, const loom_llama_weights *w, float tol);

#ifdef __cplusplus
}
#endif
#endif
