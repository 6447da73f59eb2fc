/* The CPU reference decoder: the same step as the GPU graph, op for op,
 * through the op library's CPU reference (loom_ref), with its own KV cache.
 * Both sides read the same weights (a block type's as the values its
 * blocks decode to), so the only differences from the GPU are summation
 * order, where a block's scale is applied, and transcendental precision;
 * the comparison tolerance is sized for that. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "llama.h"
#include "loom_ref.h"

struct loom_llama_ref {
    const loom_llama_weights *w;
    float *kc, *vc;                 /* n_layers x max_seq x kv_dim */
    float *x, *xn, *q, *k, *v, *att, *o, *h, *g, *u, *act, *logits;
    uint32_t next_pos;
};

/* A share of a matrix's rows, for one thread. */
typedef struct mv_part {
    loom_dtype type;
    const uint8_t *W;
    const float *x;
    float *y;
    uint32_t rows, cols;
} mv_part;

static void *mv_run(void *arg)
{
    const mv_part *p = arg;
    loom_ref_matvec(p->type, p->W, p->x, NULL, p->y, p->rows, p->cols);
    return NULL;
}

#define MV_THREADS 32
#define MV_PARALLEL_FROM (1u << 20)   /* weights from which a matrix is shared out */

static uint32_t mv_n_threads;
static pthread_once_t mv_once = PTHREAD_ONCE_INIT;

static void mv_count_threads(void)
{
    long p = sysconf(_SC_NPROCESSORS_ONLN);
    mv_n_threads = p < 1 ? 1u : p > MV_THREADS ? MV_THREADS : (uint32_t)p;
}

/* Threads for the reference's matrices: the host's processors, at most
 * MV_THREADS; read once (reference decoders may run on several threads). */
static uint32_t mv_threads(void)
{
    pthread_once(&mv_once, mv_count_threads);
    return mv_n_threads;
}

/* The reference ops read f16 matrices in their stored bits, like the
 * kernels; f32 and block-typed ones as the f32 values the GPU computes
 * with (a block type's rows dequantized). A large matrix's rows are shared
 * among the host's processors: each row is summed by one thread, in the
 * order one thread would, so the result is the same bits (a `7b` layer is
 * about 0.2 G multiply-adds a token: --check of a 512-id prompt took
 * minutes on one thread). */
static void matvec(const loom_llama_matrix *W, const float *x, float *y)
{
    loom_dtype t = W->type == LOOM_F16 ? LOOM_F16 : LOOM_F32;
    const uint8_t *base = t == LOOM_F16 ? (const uint8_t *)W->raw : (const uint8_t *)W->f32;
    size_t row_bytes = (size_t)W->cols * (t == LOOM_F16 ? 2 : 4);
    if (W->rows == 0)
        return;
    uint32_t n = (uint64_t)W->rows * W->cols < MV_PARALLEL_FROM ? 1 : mv_threads();
    /* shares of per rows, the last one shorter: n such that none is empty */
    uint32_t per = (W->rows + n - 1) / n;
    n = (W->rows + per - 1) / per;
    mv_part part[MV_THREADS];
    pthread_t th[MV_THREADS];
    bool started[MV_THREADS] = { false };
    for (uint32_t i = 0; i < n; i++) {
        uint32_t r0 = i * per, r1 = r0 + per < W->rows ? r0 + per : W->rows;
        part[i] = (mv_part){ t, base + r0 * row_bytes, x, y + r0, r1 - r0, W->cols };
        /* the last share on this thread, and any share a thread could not take */
        started[i] = i + 1 < n && !pthread_create(&th[i], NULL, mv_run, &part[i]);
    }
    for (uint32_t i = 0; i < n; i++)
        if (!started[i])
            mv_run(&part[i]);
    for (uint32_t i = 0; i < n; i++)
        if (started[i])
            pthread_join(th[i], NULL);
}

void loom_llama_ref_destroy(loom_llama_ref *r)
{
    if (!r)
        return;
    float *p[] = { r->kc, r->vc, r->x, r->xn, r->q, r->k, r->v, r->att, r->o, r->h, r->g, r->u, r->act, r->logits };
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(p[i]);
    free(r);
}

loom_result loom_llama_ref_create(const loom_llama_weights *w, loom_llama_ref **out)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama ref: out is NULL");
    *out = NULL;
    if (!w || w->no_values)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama ref: weights are NULL or shapes only");
    for (int k = 0; k < LOOM_LLAMA_MAT_COUNT; k++)
        for (uint32_t l = 0; l < (loom_llama_mat_per_layer((loom_llama_mat)k) ? w->cfg.n_layers : 1); l++) {
            const loom_llama_matrix *mx = loom_llama_weights_matrix(w, (loom_llama_mat)k, l);
            if (!mx || !mx->f32 || (mx->type == LOOM_F16 && !mx->raw))
                return loom_fail(LOOM_INVALID_ARGUMENT, "llama ref: matrix %s of layer %u has no f32 values (weights "
                                 "loaded raw only?)", loom_llama_mat_name((loom_llama_mat)k), l);
        }
    const loom_llama_config *c = &w->cfg;
    loom_llama_ref *r = calloc(1, sizeof *r);
    if (!r)
        return loom_fail(LOOM_OUT_OF_MEMORY, "llama ref");
    r->w = w;
    size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t kv = (size_t)c->n_layers * c->max_seq * kvd;
    r->kc = calloc(kv, sizeof(float));
    r->vc = calloc(kv, sizeof(float));
    r->x = calloc(c->dim, sizeof(float));
    r->xn = calloc(c->dim, sizeof(float));
    r->q = calloc(qd, sizeof(float));
    r->k = calloc(kvd, sizeof(float));
    r->v = calloc(kvd, sizeof(float));
    r->att = calloc(qd, sizeof(float));
    r->o = calloc(c->dim, sizeof(float));
    r->h = calloc(c->dim, sizeof(float));
    r->g = calloc(c->ffn, sizeof(float));
    r->u = calloc(c->ffn, sizeof(float));
    r->act = calloc(c->ffn, sizeof(float));
    r->logits = calloc(c->vocab, sizeof(float));
    if (!r->kc || !r->vc || !r->x || !r->xn || !r->q || !r->k || !r->v || !r->att || !r->o || !r->h || !r->g ||
        !r->u || !r->act || !r->logits) {
        loom_llama_ref_destroy(r);
        return loom_fail(LOOM_OUT_OF_MEMORY, "llama ref");
    }
    *out = r;
    return LOOM_OK;
}

static void ref_layer(loom_llama_ref *r, uint32_t l, uint32_t pos)
{
    const loom_llama_config *c = &r->w->cfg;
    const loom_llama_layer *L = &r->w->layers[l];
    size_t kvd = (size_t)c->n_kv_heads * c->head_dim;
    float *kc = r->kc + (size_t)l * c->max_seq * kvd, *vc = r->vc + (size_t)l * c->max_seq * kvd;

    loom_ref_rms_norm(r->x, NULL, r->xn, c->dim, c->eps);
    loom_ref_mul(r->xn, L->attn_norm, r->xn, c->dim);
    matvec(&L->wq, r->xn, r->q);
    matvec(&L->wk, r->xn, r->k);
    matvec(&L->wv, r->xn, r->v);
    loom_ref_rope(r->q, r->q, c->n_heads, c->head_dim, c->rope_theta, pos);
    loom_ref_rope(r->k, r->k, c->n_kv_heads, c->head_dim, c->rope_theta, pos);
    if (c->kvtype == LOOM_F16)   /* what an f16 cache keeps */
        for (size_t i = 0; i < kvd; i++) {
            r->k[i] = loom_f16_to_f32(loom_f32_to_f16(r->k[i]));
            r->v[i] = loom_f16_to_f32(loom_f32_to_f16(r->v[i]));
        }
    loom_ref_kv_append(r->k, r->v, kc, vc, (uint32_t)kvd, c->max_seq, pos);
    loom_ref_attention(r->q, kc, vc, r->att, c->n_heads, c->n_kv_heads, c->head_dim, c->max_seq, pos + 1,
                       1.0f / sqrtf((float)c->head_dim));
    matvec(&L->wo, r->att, r->o);
    loom_ref_add(r->x, r->o, r->h, c->dim);

    loom_ref_rms_norm(r->h, NULL, r->xn, c->dim, c->eps);
    loom_ref_mul(r->xn, L->ffn_norm, r->xn, c->dim);
    matvec(&L->wg, r->xn, r->g);
    matvec(&L->wu, r->xn, r->u);
    loom_ref_silu_mul(r->g, r->u, r->act, c->ffn);
    matvec(&L->wd, r->act, r->o);
    loom_ref_add(r->h, r->o, r->x, c->dim);
}

loom_result loom_llama_ref_step(loom_llama_ref *r, uint32_t token, uint32_t pos, float *logits, uint32_t *argmax)
{
    if (!r)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama ref: NULL");
    const loom_llama_config *c = &r->w->cfg;
    if (token >= c->vocab || pos >= c->max_seq || pos > r->next_pos)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama ref: token %u pos %u (vocab %u, max_seq %u, next pos %u)",
                         token, pos, c->vocab, c->max_seq, r->next_pos);
    const loom_llama_matrix *E = &r->w->embed;
    if (E->type == LOOM_F16)
        loom_ref_embed(LOOM_F16, E->raw, c->vocab, c->dim, token, r->x);
    else
        loom_ref_embed(LOOM_F32, E->f32, c->vocab, c->dim, token, r->x);
    for (uint32_t l = 0; l < c->n_layers; l++)
        ref_layer(r, l, pos);
    loom_ref_rms_norm(r->x, NULL, r->xn, c->dim, c->eps);
    loom_ref_mul(r->xn, r->w->final_norm, r->xn, c->dim);
    matvec(&r->w->out, r->xn, r->logits);
    uint32_t best = loom_ref_argmax(r->logits, c->vocab);
    r->next_pos = pos + 1;
    if (logits)
        memcpy(logits, r->logits, c->vocab * sizeof(float));
    if (argmax)
        *argmax = best;
    return LOOM_OK;
}

static const float *ref_cache(const loom_llama_ref *r, const float *base, uint32_t layer)
{
    if (!r || layer >= r->w->cfg.n_layers)
        return NULL;
    const loom_llama_config *c = &r->w->cfg;
    return base + (size_t)layer * c->max_seq * c->n_kv_heads * c->head_dim;
}

const float *loom_llama_ref_kcache(const loom_llama_ref *r, uint32_t layer)
{
    return r ? ref_cache(r, r->kc, layer) : NULL;
}

const float *loom_llama_ref_vcache(const loom_llama_ref *r, uint32_t layer)
{
    return r ? ref_cache(r, r->vc, layer) : NULL;
}
