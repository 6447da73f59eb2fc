/* The CPU reference of the op library (see loom_ref.h). Straightforward
 * loops in double: the point is to be obviously right, not fast. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "loom_ref.h"

void loom_ref_copy(const void *src, void *dst, uint64_t bytes) { memmove(dst, src, bytes); }

/* Element i of W, row-major. A block type's rows are whole blocks, so its
 * rows run on as one sequence of blocks: element i lies in block i / block.
 * The last block decoded is kept (per thread), with its bytes, since the
 * loops read on through it and W's address may come back with other
 * contents. */
static double weight(loom_dtype dtype, const void *W, uint64_t i)
{
    if (dtype == LOOM_F16)
        return loom_f16_to_f32(((const uint16_t *)W)[i]);
    if (!loom_dtype_is_block(dtype))
        return ((const float *)W)[i];
    static _Thread_local struct {
        loom_dtype t;
        uint8_t raw[256];
        float v[256];
    } last = { LOOM_F32, { 0 }, { 0 } };
    uint32_t qk = loom_dtype_block(dtype), qb = loom_dtype_block_bytes(dtype);
    const uint8_t *b = (const uint8_t *)W + i / qk * qb;
    if (last.t != dtype || memcmp(last.raw, b, qb)) {
        if (loom_dequantize_row(dtype, b, qk, last.v))
            return NAN;
        last.t = dtype;
        memcpy(last.raw, b, qb);
    }
    return last.v[i % qk];
}

void loom_ref_embed(loom_dtype dtype, const void *table, uint32_t vocab, uint32_t dim, uint32_t token, float *out)
{
    for (uint32_t i = 0; i < dim; i++)
        out[i] = token < vocab ? (float)weight(dtype, table, (uint64_t)token * dim + i) : 0.0f;
}

static double inv_rms(const float *x, uint32_t n, float eps)
{
    double ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    return 1.0 / sqrt(ss / n + eps);
}

void loom_ref_rms_norm(const float *x, const float *w, float *y, uint32_t n, float eps)
{
    double r = inv_rms(x, n, eps);
    for (uint32_t i = 0; i < n; i++)
        y[i] = (float)(x[i] * r * (w ? w[i] : 1.0));
}

void loom_ref_add_rms_norm(const float *a, const float *b, const float *w, float *sum, float *y, uint32_t n,
                           float eps)
{
    for (uint32_t i = 0; i < n; i++)
        sum[i] = a[i] + b[i];  /* rounded to f32, as the kernel stores it */
    loom_ref_rms_norm(sum, w, y, n, eps);
}

void loom_ref_mul(const float *a, const float *b, float *y, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        y[i] = a[i] * b[i];
}

void loom_ref_add(const float *a, const float *b, float *y, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

static double silu(double t) { return t / (1.0 + exp(-t)); }

void loom_ref_silu_mul(const float *a, const float *b, float *y, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        y[i] = (float)(silu(a[i]) * b[i]);
}

static double row_dot(loom_dtype dtype, const void *W, const float *x, uint32_t row, uint32_t cols)
{
    double acc = 0;
    for (uint32_t c = 0; c < cols; c++)
        acc += weight(dtype, W, (uint64_t)row * cols + c) * x[c];
    return acc;
}

void loom_ref_quantize_blocks(const float *x, const float *g, uint32_t n, uint32_t block, float *out)
{
    for (uint32_t b = 0; block && block <= 32 && b + block <= n; b += block) {
        float v[32], amax = 0.0f;
        for (uint32_t i = 0; i < block; i++) {
            v[i] = g ? x[b + i] * g[b + i] : x[b + i];
            amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
        }
        float id = amax > 1e-30f ? 127.0f * (1.0f / amax) : 0.0f, d = id > 0.0f ? amax * (1.0f / 127.0f) : 0.0f;
        for (uint32_t i = 0; i < block; i++)
            out[b + i] = d * rintf(v[i] * id);
    }
}

void loom_ref_quantize_x8(const float *x, const float *g, uint32_t n, float *out)
{
    loom_ref_quantize_blocks(x, g, n, 32, out);
}

void loom_ref_matvec(loom_dtype dtype, const void *W, const float *x, const float *r, float *y, uint32_t rows,
                     uint32_t cols)
{
    for (uint32_t i = 0; i < rows; i++)
        y[i] = (float)(row_dot(dtype, W, x, i, cols) + (r ? r[i] : 0.0));
}

void loom_ref_matvec_silu_mul(loom_dtype dtype, const void *Wg, const void *Wu, const float *x, float *y,
                              uint32_t rows, uint32_t cols)
{
    for (uint32_t i = 0; i < rows; i++)
        y[i] = (float)(silu(row_dot(dtype, Wg, x, i, cols)) * row_dot(dtype, Wu, x, i, cols));
}

void loom_ref_matmul(loom_dtype dtype, const void *W, const float *x, const float *r, float *y, uint32_t rows,
                     uint32_t cols, uint32_t T)
{
    for (uint32_t t = 0; t < T; t++)
        loom_ref_matvec(dtype, W, x + (uint64_t)t * cols, r ? r + (uint64_t)t * rows : NULL, y + (uint64_t)t * rows,
                        rows, cols);
}

void loom_ref_matmul_silu_mul(loom_dtype dtype, const void *Wg, const void *Wu, const float *x, float *y,
                              uint32_t rows, uint32_t cols, uint32_t T)
{
    for (uint32_t t = 0; t < T; t++)
        loom_ref_matvec_silu_mul(dtype, Wg, Wu, x + (uint64_t)t * cols, y + (uint64_t)t * rows, rows, cols);
}

void loom_ref_rope(const float *x, float *y, uint32_t n_heads, uint32_t head_dim, float theta, uint32_t pos)
{
    uint32_t half = head_dim / 2;
    for (uint32_t h = 0; h < n_heads; h++)
        for (uint32_t i = 0; i < half; i++) {
            double ang = pos * pow(theta, -2.0 * i / head_dim);
            double c = cos(ang), s = sin(ang);
            uint32_t a = h * head_dim + i, b = a + half;
            double x0 = x[a], x1 = x[b];
            y[a] = (float)(x0 * c - x1 * s);
            y[b] = (float)(x0 * s + x1 * c);
        }
}

void loom_ref_kv_append(const float *k, const float *v, float *kcache, float *vcache, uint32_t dim,
                        uint32_t max_seq, uint32_t pos)
{
    if (pos >= max_seq)
        return;
    memcpy(kcache + (uint64_t)pos * dim, k, (size_t)dim * sizeof(float));
    memcpy(vcache + (uint64_t)pos * dim, v, (size_t)dim * sizeof(float));
}

void loom_ref_attention(const float *q, const float *kcache, const float *vcache, float *out, uint32_t n_heads,
                        uint32_t n_kv_heads, uint32_t head_dim, uint32_t max_seq, uint32_t kv_len, float scale)
{
    uint32_t len = kv_len < max_seq ? kv_len : max_seq, dim = n_kv_heads * head_dim;
    uint32_t group = n_heads / n_kv_heads;
    double *p = malloc((len ? len : 1) * sizeof *p);
    double *acc = malloc(head_dim * sizeof *acc);
    if (!p || !acc) {
        free(p);
        free(acc);
        return;
    }
    for (uint32_t h = 0; h < n_heads; h++) {
        const float *qh = q + (uint64_t)h * head_dim;
        uint64_t kvo = (uint64_t)(h / group) * head_dim;
        double m = -INFINITY, l = 0;
        for (uint32_t j = 0; j < len; j++) {
            double s = 0;
            for (uint32_t d = 0; d < head_dim; d++)
                s += (double)qh[d] * kcache[(uint64_t)j * dim + kvo + d];
            p[j] = s * scale;
            m = p[j] > m ? p[j] : m;
        }
        for (uint32_t j = 0; j < len; j++) {
            p[j] = exp(p[j] - m);
            l += p[j];
        }
        for (uint32_t d = 0; d < head_dim; d++)
            acc[d] = 0;
        for (uint32_t j = 0; j < len; j++)
            for (uint32_t d = 0; d < head_dim; d++)
                acc[d] += p[j] * vcache[(uint64_t)j * dim + kvo + d];
        for (uint32_t d = 0; d < head_dim; d++)
            out[(uint64_t)h * head_dim + d] = len ? (float)(acc[d] / l) : 0.0f;
    }
    free(p);
    free(acc);
}

void loom_ref_softmax(const float *x, float *y, uint32_t n)
{
    double m = -INFINITY, l = 0;
    for (uint32_t i = 0; i < n; i++)
        m = x[i] > m ? x[i] : m;
    for (uint32_t i = 0; i < n; i++)
        l += exp(x[i] - m);
    for (uint32_t i = 0; i < n; i++)
        y[i] = (float)(exp(x[i] - m) / l);
}

uint32_t loom_ref_argmax(const float *x, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* ---- fused matvec forms: the chains they replace, without the rounding of
 * the eliminated intermediates (the kernels keep them in registers) ---- */

static double norm_row_dot(loom_dtype dtype, const void *W, const float *x, const float *g, double r, uint32_t row,
                           uint32_t cols)
{
    double acc = 0;
    for (uint32_t c = 0; c < cols; c++)
        acc += weight(dtype, W, (uint64_t)row * cols + c) * (x[c] * r * g[c]);
    return acc;
}

void loom_ref_rms_norm_matvec(loom_dtype dtype, const void *W, const float *x, const float *g, float *y,
                              uint32_t rows, uint32_t cols, float eps)
{
    double r = inv_rms(x, cols, eps);
    for (uint32_t i = 0; i < rows; i++)
        y[i] = (float)norm_row_dot(dtype, W, x, g, r, i, cols);
}

void loom_ref_rms_norm_matvec_silu_mul(loom_dtype dtype, const void *Wg, const void *Wu, const float *x,
                                       const float *g, float *y, uint32_t rows, uint32_t cols, float eps)
{
    double r = inv_rms(x, cols, eps);
    for (uint32_t i = 0; i < rows; i++)
        y[i] = (float)(silu(norm_row_dot(dtype, Wg, x, g, r, i, cols)) * norm_row_dot(dtype, Wu, x, g, r, i, cols));
}

/* RoPE of one pair at pos, in double, as loom_ref_rope does it. */
static void rope_pair(double *a, double *b, uint32_t i, uint32_t head_dim, float theta, uint32_t pos)
{
    double ang = pos * pow(theta, -2.0 * i / head_dim);
    double c = cos(ang), s = sin(ang), x0 = *a, x1 = *b;
    *a = x0 * c - x1 * s;
    *b = x0 * s + x1 * c;
}

/* One row of q/k/v: q at q; k and v into cache row pos where cache is true
 * and pos < max_seq. Wv of its own dtype (Q6_K beside Q4_K). */
static void qkv_row(loom_dtype dtype, loom_dtype vdtype, const float *x, const float *g, const void *Wq,
                    const void *Wk, const void *Wv, float *q, float *kcache, float *vcache, uint32_t q_rows,
                    uint32_t kv_rows, uint32_t cols, uint32_t head_dim, uint32_t max_seq, float theta, float eps,
                    uint32_t pos, bool cache)
{
    double r = inv_rms(x, cols, eps);
    uint32_t half = head_dim / 2;
    for (int m = 0; m < 3; m++) {
        const void *W = m == 0 ? Wq : m == 1 ? Wk : Wv;
        loom_dtype dt = m == 2 ? vdtype : dtype;
        uint32_t rows = m == 0 ? q_rows : kv_rows;
        float *out = m == 0 ? q : cache && pos < max_seq ? (m == 1 ? kcache : vcache) + (uint64_t)pos * kv_rows : NULL;
        if (!out)
            continue;
        for (uint32_t h = 0; h < rows / head_dim; h++)
            for (uint32_t i = 0; i < half; i++) {
                uint32_t a = h * head_dim + i, b = a + half;
                double va = norm_row_dot(dt, W, x, g, r, a, cols), vb = norm_row_dot(dt, W, x, g, r, b, cols);
                if (m < 2)
                    rope_pair(&va, &vb, i, head_dim, theta, pos);
                out[a] = (float)va;
                out[b] = (float)vb;
            }
    }
}

void loom_ref_rms_norm_qkv_rope_kv(loom_dtype dtype, const float *x, const float *g, const void *Wq, const void *Wk,
                                   const void *Wv, float *q, float *kcache, float *vcache, uint32_t q_rows,
                                   uint32_t kv_rows, uint32_t cols, uint32_t head_dim, uint32_t max_seq, float theta,
                                   float eps, uint32_t pos)
{
    qkv_row(dtype, dtype, x, g, Wq, Wk, Wv, q, kcache, vcache, q_rows, kv_rows, cols, head_dim, max_seq, theta, eps,
            pos, true);
}

/* ---- T-row ops ---- */

/* The kernels take rows in [1, T]. */
static uint32_t clamp_rows(uint32_t rows, uint32_t T) { return rows < 1 ? 1 : rows > T ? T : rows; }

void loom_ref_rms_norm_qkv_rope_kv_rows(loom_dtype dtype, loom_dtype vdtype, const float *x, const float *g,
                                        const void *Wq, const void *Wk, const void *Wv, float *q, float *kcache,
                                        float *vcache, uint32_t q_rows, uint32_t kv_rows, uint32_t cols,
                                        uint32_t head_dim, uint32_t max_seq, float theta, float eps, uint32_t pos,
                                        uint32_t rows, uint32_t T)
{
    uint32_t real = clamp_rows(rows, T);
    for (uint32_t t = 0; t < T; t++)
        qkv_row(dtype, vdtype, x + (uint64_t)t * cols, g, Wq, Wk, Wv, q + (uint64_t)t * q_rows, kcache, vcache, q_rows,
                kv_rows, cols, head_dim, max_seq, theta, eps, pos + t, t < real);
}

void loom_ref_embed_rows(loom_dtype dtype, const void *table, uint32_t vocab, uint32_t dim, const uint32_t *tokens,
                         uint32_t n_tokens, uint32_t pos, uint32_t rows, uint32_t T, float *out)
{
    for (uint32_t t = 0; t < T; t++) {
        uint64_t at = (uint64_t)pos + t;
        uint32_t token = t < rows && at < n_tokens ? tokens[at] : UINT32_MAX;
        loom_ref_embed(dtype, table, vocab, dim, token, out + (uint64_t)t * dim);
    }
}

void loom_ref_rms_norm_mul_rows(const float *x, const float *w, float *y, uint32_t n, uint32_t T, float eps)
{
    for (uint32_t t = 0; t < T; t++)
        loom_ref_rms_norm(x + (uint64_t)t * n, w, y + (uint64_t)t * n, n, eps);
}

void loom_ref_rope_rows(const float *x, float *y, uint32_t n_heads, uint32_t head_dim, float theta, uint32_t pos,
                        uint32_t T)
{
    uint64_t n = (uint64_t)n_heads * head_dim;
    for (uint32_t t = 0; t < T; t++)
        loom_ref_rope(x + t * n, y + t * n, n_heads, head_dim, theta, pos + t);
}

void loom_ref_kv_append_rows(const float *k, const float *v, float *kcache, float *vcache, uint32_t dim,
                             uint32_t max_seq, uint32_t pos, uint32_t rows)
{
    for (uint32_t t = 0; t < rows; t++)
        loom_ref_kv_append(k + (uint64_t)t * dim, v + (uint64_t)t * dim, kcache, vcache, dim, max_seq, pos + t);
}

void loom_ref_attention_rows(const float *q, const float *kcache, const float *vcache, float *out, uint32_t n_heads,
                             uint32_t n_kv_heads, uint32_t head_dim, uint32_t max_seq, uint32_t pos, uint32_t rows,
                             uint32_t T, float scale)
{
    uint64_t nq = (uint64_t)n_heads * head_dim;
    rows = clamp_rows(rows, T);
    for (uint32_t t = 0; t < T; t++) {
        uint32_t last = t < rows ? t : rows - 1;
        loom_ref_attention(q + t * nq, kcache, vcache, out + t * nq, n_heads, n_kv_heads, head_dim, max_seq,
                           pos + last + 1, scale);
    }
}

void loom_ref_row_pick(const float *x, float *y, uint32_t n, uint32_t rows, uint32_t T)
{
    memmove(y, x + (uint64_t)(clamp_rows(rows, T) - 1) * n, (size_t)n * sizeof *y);
}

void loom_ref_argmax_rows(const float *x, uint32_t *out, uint32_t n, uint32_t T)
{
    for (uint32_t t = 0; t < T; t++)
        out[t] = loom_ref_argmax(x + (uint64_t)t * n, n);
}
