/* CPU reference for every op of the op library (the kernels in shaders/), fused forms
 * included: plain C, accumulating in double, so tests and the example model
 * can check GPU results. Semantics match the kernels exactly: same token
 * clamping, same kv_len clamping, same RoPE pairing, lowest index on argmax
 * ties. Pointers are caller-owned; in-place use (y == x, sum == a, y == r) is
 * allowed where the op builder allows it. No function fails. */
#ifndef LOOM_REF_H
#define LOOM_REF_H

#include <stdint.h>
#include "loom_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

void loom_ref_copy(const void *src, void *dst, uint64_t bytes);
/* out = table[token] (table vocab x dim of dtype f32|f16); a token >= vocab
 * gives zeros. */
void loom_ref_embed(loom_dtype dtype, const void *table, uint32_t vocab, uint32_t dim, uint32_t token, float *out);
/* y = x / sqrt(mean(x^2) + eps) [* w]; w may be NULL. */
void loom_ref_rms_norm(const float *x, const float *w, float *y, uint32_t n, float eps);
/* sum = a + b; y = rms_norm(sum) [* w]; w may be NULL. */
void loom_ref_add_rms_norm(const float *a, const float *b, const float *w, float *sum, float *y, uint32_t n,
                           float eps);
void loom_ref_mul(const float *a, const float *b, float *y, uint32_t n);
void loom_ref_add(const float *a, const float *b, float *y, uint32_t n);
/* y = silu(a) * b, silu(t) = t / (1 + e^-t). */
void loom_ref_silu_mul(const float *a, const float *b, float *y, uint32_t n);
/* y = W x [+ r]; W rows x cols of dtype f32|f16; r may be NULL. */
/* The x a block-typed matvec kernel in its integer form (a device with
 * integer dot products) multiplies: v = x (x * g where g is not NULL, the
 * norm forms' scaled input), per block of 32 d * round(v / d) with d = max
 * |v| / 127, in the kernels' float operations. n: a multiple of 32. The
 * tests give it to the references as their x to model the kernels. */
void loom_ref_quantize_x8(const float *x, const float *g, uint32_t n, float *out);
/* The same per block of `block` elements (n a multiple of it): 16 models a
 * staged t a block-typed producer stores quantized (matvec.glsl: MV_TQ, one
 * quad of 16 rows a workgroup). */
void loom_ref_quantize_blocks(const float *x, const float *g, uint32_t n, uint32_t block, float *out);
void loom_ref_matvec(loom_dtype dtype, const void *W, const float *x, const float *r, float *y, uint32_t rows,
                     uint32_t cols);
/* y = silu(Wg x) * (Wu x). */
void loom_ref_matvec_silu_mul(loom_dtype dtype, const void *Wg, const void *Wu, const float *x, float *y,
                              uint32_t rows, uint32_t cols);
/* y[t] = W x[t] [+ r[t]] for t < T: x T x cols, r and y T x rows (y may be
 * r); W rows x cols of any weight dtype (f32, f16, block types). */
void loom_ref_matmul(loom_dtype dtype, const void *W, const float *x, const float *r, float *y, uint32_t rows,
                     uint32_t cols, uint32_t T);
/* y[t] = silu(Wg x[t]) * (Wu x[t]) for t < T. */
void loom_ref_matmul_silu_mul(loom_dtype dtype, const void *Wg, const void *Wu, const float *x, float *y,
                              uint32_t rows, uint32_t cols, uint32_t T);
/* Rotates pairs (i, i + head_dim/2) of each head by pos * theta^(-2i/head_dim). */
void loom_ref_rope(const float *x, float *y, uint32_t n_heads, uint32_t head_dim, float theta, uint32_t pos);
/* kcache[pos] = k, vcache[pos] = v (rows of dim); nothing when pos >= max_seq. */
void loom_ref_kv_append(const float *k, const float *v, float *kcache, float *vcache, uint32_t dim,
                        uint32_t max_seq, uint32_t pos);
/* Decode attention of one query over cache rows [0, min(kv_len, max_seq));
 * head h reads kv head h / (n_heads / n_kv_heads). kv_len 0 gives zeros. */
void loom_ref_attention(const float *q, const float *kcache, const float *vcache, float *out, uint32_t n_heads,
                        uint32_t n_kv_heads, uint32_t head_dim, uint32_t max_seq, uint32_t kv_len, float scale);
void loom_ref_softmax(const float *x, float *y, uint32_t n);
/* Index of the largest element, lowest index on ties. */
uint32_t loom_ref_argmax(const float *x, uint32_t n);
/* y = W (x / rms(x) * g). */
void loom_ref_rms_norm_matvec(loom_dtype dtype, const void *W, const float *x, const float *g, float *y,
                              uint32_t rows, uint32_t cols, float eps);
/* n = x / rms(x) * g; y = silu(Wg n) * (Wu n). */
void loom_ref_rms_norm_matvec_silu_mul(loom_dtype dtype, const void *Wg, const void *Wu, const float *x,
                                       const float *g, float *y, uint32_t rows, uint32_t cols, float eps);
/* n = x / rms(x) * g; q = rope(Wq n); kcache[pos] = rope(Wk n); vcache[pos]
 * = Wv n (caches untouched when pos >= max_seq). */
void loom_ref_rms_norm_qkv_rope_kv(loom_dtype dtype, const float *x, const float *g, const void *Wq, const void *Wk,
                                   const void *Wv, float *q, float *kcache, float *vcache, uint32_t q_rows,
                                   uint32_t kv_rows, uint32_t cols, uint32_t head_dim, uint32_t max_seq, float theta,
                                   float eps, uint32_t pos);

/* ---- T-row ops: row t of a T-token step at position pos + t; rows t >=
 * rows are padding (the kernels' clamps: rows taken in [1, T]). ---- */
/* out[t] = table[tokens[pos + t]] for t < rows; zeros for padding rows, a
 * position >= n_tokens or a token >= vocab. out T x dim. */
void loom_ref_embed_rows(loom_dtype dtype, const void *table, uint32_t vocab, uint32_t dim, const uint32_t *tokens,
                         uint32_t n_tokens, uint32_t pos, uint32_t rows, uint32_t T, float *out);
/* y[t] = x[t] / rms(x[t]) * w for every t < T (x, y T x n). */
void loom_ref_rms_norm_mul_rows(const float *x, const float *w, float *y, uint32_t n, uint32_t T, float eps);
/* Row t of x (T x n_heads*head_dim) rotated at pos + t. */
void loom_ref_rope_rows(const float *x, float *y, uint32_t n_heads, uint32_t head_dim, float theta, uint32_t pos,
                        uint32_t T);
/* loom_ref_rms_norm_qkv_rope_kv of each row t < T of x (T x cols) at
 * position pos + t into row t of q (T x q_rows); the caches only for
 * t < rows. Wv of vdtype (Q6_K beside Q4_K, as Q4_K_M files have it). */
void loom_ref_rms_norm_qkv_rope_kv_rows(loom_dtype dtype, loom_dtype vdtype, const float *x, const float *g,
                                        const void *Wq, const void *Wk, const void *Wv, float *q, float *kcache,
                                        float *vcache, uint32_t q_rows, uint32_t kv_rows, uint32_t cols,
                                        uint32_t head_dim, uint32_t max_seq, float theta, float eps, uint32_t pos,
                                        uint32_t rows, uint32_t T);
/* Cache row pos + t = k[t], v[t] for t < rows (nothing past max_seq). */
void loom_ref_kv_append_rows(const float *k, const float *v, float *kcache, float *vcache, uint32_t dim,
                             uint32_t max_seq, uint32_t pos, uint32_t rows);
/* Row t: loom_ref_attention of q[t] with kv_len pos + min(t, rows - 1) + 1. */
void loom_ref_attention_rows(const float *q, const float *kcache, const float *vcache, float *out, uint32_t n_heads,
                             uint32_t n_kv_heads, uint32_t head_dim, uint32_t max_seq, uint32_t pos, uint32_t rows,
                             uint32_t T, float scale);
/* y = x[rows - 1] (x T x n). */
void loom_ref_row_pick(const float *x, float *y, uint32_t n, uint32_t rows, uint32_t T);
/* out[t] = argmax of row t (x T x n), lowest index on ties. */
void loom_ref_argmax_rows(const float *x, uint32_t *out, uint32_t n, uint32_t T);

#ifdef __cplusplus
}
#endif
#endif
