/* The CPU reference decoder: the same step as the GPU graph, op for op, on
 * the host, with its own KV cache. It uses the f16-rounded weights, so the
 * only differences from the GPU are summation order and transcendental
 * precision; the comparison tolerance is sized for that. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"

struct loom_llama_ref {
    const loom_llama_weights *w;
    float *kc, *vc;                 /* n_layers x max_seq x kv_dim */
    float *x, *xn, *q, *k, *v, *att, *o, *h, *g, *u, *act, *logits;
    uint32_t next_pos;
};

static void rms_norm_mul(const float *x, const float *w, float *y, uint32_t n, float eps)
{
    double ss = 0.0;
    for (uint32_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float r = 1.0f / sqrtf((float)(ss / n) + eps);
    for (uint32_t i = 0; i < n; i++)
        y[i] = x[i] * r * w[i];
}

static void matvec(const loom_llama_matrix *W, const float *x, float *y)
{
    for (uint32_t r = 0; r < W->rows; r++) {
        const float *row = W->f32 + (size_t)r * W->cols;
        double s = 0.0;
        for (uint32_t c = 0; c < W->cols; c++)
            s += (double)row[c] * x[c];
        y[r] = (float)s;
    }
}

/* Pairs (i, i + head_dim/2) of each head rotate by pos * theta^(-2i/head_dim). */
static void rope(float *x, uint32_t n_heads, uint32_t head_dim, float theta, uint32_t pos)
{
    uint32_t half = head_dim / 2;
    for (uint32_t h = 0; h < n_heads; h++) {
        float *p = x + (size_t)h * head_dim;
        for (uint32_t i = 0; i < half; i++) {
            double a = pos * pow(theta, -2.0 * i / head_dim);
            double c = cos(a), s = sin(a), x0 = p[i], x1 = p[i + half];
            p[i] = (float)(x0 * c - x1 * s);
            p[i + half] = (float)(x0 * s + x1 * c);
        }
    }
}

static void attention(const loom_llama_config *c, const float *q, const float *kc, const float *vc, uint32_t len,
                      float *out, float *scores)
{
    uint32_t kvd = c->n_kv_heads * c->head_dim, group = c->n_heads / c->n_kv_heads;
    double scale = 1.0 / sqrt((double)c->head_dim);
    for (uint32_t h = 0; h < c->n_heads; h++) {
        const float *qh = q + (size_t)h * c->head_dim;
        uint32_t kvh = h / group;
        double mx = -INFINITY, sum = 0.0;
        for (uint32_t t = 0; t < len; t++) {
            const float *kt = kc + (size_t)t * kvd + (size_t)kvh * c->head_dim;
            double s = 0.0;
            for (uint32_t d = 0; d < c->head_dim; d++)
                s += (double)qh[d] * kt[d];
            scores[t] = (float)(s * scale);
            if (scores[t] > mx)
                mx = scores[t];
        }
        for (uint32_t t = 0; t < len; t++) {
            scores[t] = (float)exp(scores[t] - mx);
            sum += scores[t];
        }
        for (uint32_t d = 0; d < c->head_dim; d++) {
            double acc = 0.0;
            for (uint32_t t = 0; t < len; t++)
                acc += scores[t] * (double)vc[(size_t)t * kvd + (size_t)kvh * c->head_dim + d];
            out[(size_t)h * c->head_dim + d] = (float)(acc / sum);
        }
    }
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
    if (!w)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama ref: weights are NULL");
    const loom_llama_config *c = &w->cfg;
    loom_llama_ref *r = calloc(1, sizeof *r);
    if (!r)
        return loom_fail(LOOM_OUT_OF_MEMORY, "llama ref");
    r->w = w;
    size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t kv = (size_t)c->n_layers * c->max_seq * kvd;
    size_t wide = c->max_seq > c->dim ? c->max_seq : c->dim;   /* xn doubles as the score row */
    r->kc = calloc(kv, sizeof(float));
    r->vc = calloc(kv, sizeof(float));
    r->x = calloc(c->dim, sizeof(float));
    r->xn = calloc(wide > qd ? wide : qd, sizeof(float));
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

    rms_norm_mul(r->x, L->attn_norm, r->xn, c->dim, c->eps);
    matvec(&L->wq, r->xn, r->q);
    matvec(&L->wk, r->xn, r->k);
    matvec(&L->wv, r->xn, r->v);
    rope(r->q, c->n_heads, c->head_dim, c->rope_theta, pos);
    rope(r->k, c->n_kv_heads, c->head_dim, c->rope_theta, pos);
    memcpy(kc + pos * kvd, r->k, kvd * sizeof(float));
    memcpy(vc + pos * kvd, r->v, kvd * sizeof(float));
    attention(c, r->q, kc, vc, pos + 1, r->att, r->xn);
    matvec(&L->wo, r->att, r->o);
    for (uint32_t i = 0; i < c->dim; i++)
        r->h[i] = r->x[i] + r->o[i];

    rms_norm_mul(r->h, L->ffn_norm, r->xn, c->dim, c->eps);
    matvec(&L->wg, r->xn, r->g);
    matvec(&L->wu, r->xn, r->u);
    for (uint32_t i = 0; i < c->ffn; i++)
        r->act[i] = r->g[i] / (1.0f + expf(-r->g[i])) * r->u[i];
    matvec(&L->wd, r->act, r->o);
    for (uint32_t i = 0; i < c->dim; i++)
        r->x[i] = r->h[i] + r->o[i];
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
    memcpy(r->x, E->f32 + (size_t)token * c->dim, c->dim * sizeof(float));
    for (uint32_t l = 0; l < c->n_layers; l++)
        ref_layer(r, l, pos);
    rms_norm_mul(r->x, r->w->final_norm, r->xn, c->dim, c->eps);
    matvec(&r->w->out, r->xn, r->logits);
    uint32_t best = 0;
    for (uint32_t i = 1; i < c->vocab; i++)
        if (r->logits[i] > r->logits[best])
            best = i;
    r->next_pos = pos + 1;
    if (logits)
        memcpy(logits, r->logits, c->vocab * sizeof(float));
    if (argmax)
        *argmax = best;
    return LOOM_OK;
}
