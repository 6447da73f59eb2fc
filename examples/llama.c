/* The Llama-style decoder's configuration, deterministic weights and GPU
 * model: the step graph is captured through the op API each token, compiled
 * through the plan cache and replayed on the runtime. Norms and their
 * weight multiplies are captured unfused (RMS_NORM then MUL) so the fuse
 * pass has real chains to work on, and every intermediate gets its own
 * scratch buffer so the lifetimes pass has an arena to pack. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"
#include "loom_ref.h"

/* ---- configuration ------------------------------------------------------ */

void loom_llama_default_config(loom_llama_config *c)
{
    *c = (loom_llama_config){
        .dim = 256, .n_layers = 4, .n_heads = 8, .n_kv_heads = 4, .head_dim = 32, .ffn = 688,
        .vocab = 512, .max_seq = 64, .eps = 1e-5f, .rope_theta = 10000.0f, .wtype = LOOM_F32, .seed = 1234,
    };
}

loom_result loom_llama_config_check(const loom_llama_config *c)
{
    if (!c)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama config: NULL");
    const struct { const char *name; uint32_t v; } f[] = {
        { "dim", c->dim }, { "n_layers", c->n_layers }, { "n_heads", c->n_heads },
        { "n_kv_heads", c->n_kv_heads }, { "head_dim", c->head_dim }, { "ffn", c->ffn },
        { "vocab", c->vocab }, { "max_seq", c->max_seq },
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v == 0 || f[i].v > (1u << 20))
            return loom_fail(LOOM_INVALID_ARGUMENT, "llama config: field %s value %u out of range", f[i].name,
                             f[i].v);
    if (c->n_heads % c->n_kv_heads)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama config: n_heads %u not a multiple of n_kv_heads %u",
                         c->n_heads, c->n_kv_heads);
    if (c->head_dim % 2)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama config: head_dim %u is odd", c->head_dim);
    if (c->wtype != LOOM_F32 && c->wtype != LOOM_F16)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama config: wtype %u is neither f32 nor f16", c->wtype);
    if (!(c->eps > 0.0f) || !(c->rope_theta > 0.0f))
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama config: eps and rope_theta must be positive");
    /* Every matrix must fit one binding (Vulkan guarantees 128 MiB ranges). */
    uint64_t big = (uint64_t)c->vocab * c->dim;
    uint64_t mlp = (uint64_t)c->ffn * c->dim;
    if ((big > mlp ? big : mlp) * 4 > (128u << 20))
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama config: a weight matrix exceeds 128 MiB");
    return LOOM_OK;
}

/* ---- weights ------------------------------------------------------------ */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1), from the top 24 bits so every value is exact in f32. */
static float uniform(uint64_t *s) { return (float)(splitmix(s) >> 40) * (2.0f / 16777216.0f) - 1.0f; }

static loom_result matrix_init(loom_llama_matrix *mx, uint32_t rows, uint32_t cols, float scale, loom_dtype t,
                               uint64_t *seed)
{
    size_t n = (size_t)rows * cols;
    mx->rows = rows;
    mx->cols = cols;
    mx->f32 = malloc(n * sizeof(float));
    mx->f16 = t == LOOM_F16 ? malloc(n * sizeof(uint16_t)) : NULL;
    if (!mx->f32 || (t == LOOM_F16 && !mx->f16))
        return loom_fail(LOOM_OUT_OF_MEMORY, "llama weights: %ux%u matrix", rows, cols);
    for (size_t i = 0; i < n; i++) {
        float v = uniform(seed) * scale;
        if (mx->f16) {
            mx->f16[i] = loom_f32_to_f16(v);
            v = loom_f16_to_f32(mx->f16[i]);
        }
        mx->f32[i] = v;
    }
    return LOOM_OK;
}

static float *norm_init(uint32_t n, uint64_t *seed)
{
    float *v = malloc((size_t)n * sizeof(float));
    if (v)
        for (uint32_t i = 0; i < n; i++)
            v[i] = 1.0f + 0.25f * uniform(seed);
    return v;
}

static void matrix_free(loom_llama_matrix *mx)
{
    free(mx->f32);
    free(mx->f16);
}

void loom_llama_weights_destroy(loom_llama_weights *w)
{
    if (!w)
        return;
    matrix_free(&w->embed);
    matrix_free(&w->out);
    free(w->final_norm);
    if (w->layers)
        for (uint32_t l = 0; l < w->cfg.n_layers; l++) {
            loom_llama_layer *L = &w->layers[l];
            free(L->attn_norm);
            free(L->ffn_norm);
            loom_llama_matrix *m[] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->wg, &L->wu, &L->wd };
            for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
                matrix_free(m[i]);
        }
    free(w->layers);
    free(w->tokens);
    free(w->token_text);
    free(w);
}

loom_result loom_llama_weights_create(const loom_llama_config *cfg, loom_llama_weights **out)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama weights: out is NULL");
    *out = NULL;
    loom_result rc = loom_llama_config_check(cfg);
    if (rc)
        return rc;
    loom_llama_weights *w = calloc(1, sizeof *w);
    if (!w)
        return loom_fail(LOOM_OUT_OF_MEMORY, "llama weights");
    w->cfg = *cfg;
    const loom_llama_config *c = cfg;
    uint64_t seed = c->seed;
    uint32_t qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    /* Scales of 1/sqrt(fan-in) keep activations O(1) at every depth. */
    float sd = 1.0f / sqrtf((float)c->dim), sq = 1.0f / sqrtf((float)qd), sf = 1.0f / sqrtf((float)c->ffn);
    w->layers = calloc(c->n_layers, sizeof *w->layers);
    if (!w->layers) {
        rc = loom_fail(LOOM_OUT_OF_MEMORY, "llama weights");
        goto fail;
    }
    if ((rc = matrix_init(&w->embed, c->vocab, c->dim, 1.0f, c->wtype, &seed)))
        goto fail;
    for (uint32_t l = 0; l < c->n_layers; l++) {
        loom_llama_layer *L = &w->layers[l];
        L->attn_norm = norm_init(c->dim, &seed);
        L->ffn_norm = norm_init(c->dim, &seed);
        if (!L->attn_norm || !L->ffn_norm) {
            rc = loom_fail(LOOM_OUT_OF_MEMORY, "llama weights");
            goto fail;
        }
        if ((rc = matrix_init(&L->wq, qd, c->dim, sd, c->wtype, &seed)) ||
            (rc = matrix_init(&L->wk, kvd, c->dim, sd, c->wtype, &seed)) ||
            (rc = matrix_init(&L->wv, kvd, c->dim, sd, c->wtype, &seed)) ||
            (rc = matrix_init(&L->wo, c->dim, qd, sq, c->wtype, &seed)) ||
            (rc = matrix_init(&L->wg, c->ffn, c->dim, sd, c->wtype, &seed)) ||
            (rc = matrix_init(&L->wu, c->ffn, c->dim, sd, c->wtype, &seed)) ||
            (rc = matrix_init(&L->wd, c->dim, c->ffn, sf, c->wtype, &seed)))
            goto fail;
    }
    w->final_norm = norm_init(c->dim, &seed);
    if (!w->final_norm) {
        rc = loom_fail(LOOM_OUT_OF_MEMORY, "llama weights");
        goto fail;
    }
    if ((rc = matrix_init(&w->out, c->vocab, c->dim, sd, c->wtype, &seed)))
        goto fail;
    *out = w;
    return LOOM_OK;
fail:
    loom_llama_weights_destroy(w);
    return rc;
}

/* ---- comparison --------------------------------------------------------- */

bool loom_llama_compare(const float *gpu, uint32_t gpu_arg, const float *ref, uint32_t ref_arg, uint32_t n,
                        float tol, loom_llama_diff *out)
{
    loom_llama_diff d = { 0 };
    for (uint32_t i = 0; i < n; i++) {
        float e = fabsf(gpu[i] - ref[i]), a = fabsf(ref[i]);
        if (!(e <= d.max_abs))   /* NaN counts as the worst error */
            d.max_abs = isnan(e) ? INFINITY : e;
        if (a > d.ref_max_abs)
            d.ref_max_abs = a;
    }
    float lim = tol * (d.ref_max_abs > 1.0f ? d.ref_max_abs : 1.0f);
    /* Rounding may flip a near tie; the GPU's pick must then be within
     * tolerance of the reference maximum. */
    d.argmax_ok = gpu_arg == ref_arg || (gpu_arg < n && ref_arg < n && ref[ref_arg] - ref[gpu_arg] <= lim);
    if (out)
        *out = d;
    return d.max_abs <= lim && d.argmax_ok;
}

/* ---- GPU model ---------------------------------------------------------- */

/* Runtime buffers: per layer, then the model-wide ones. */
enum { LB_ATTN_NORM, LB_WQ, LB_WK, LB_WV, LB_WO, LB_FFN_NORM, LB_WG, LB_WU, LB_WD, LB_KC, LB_VC, LB_COUNT };
enum { GB_EMBED, GB_FINAL_NORM, GB_OUT, GB_LOGITS, GB_ARGMAX, GB_COUNT };

struct loom_llama {
    loom_rt *rt;
    const loom_llama_weights *w;
    loom_llama_config cfg;
    bool chain;
    loom_compile_options opts;
    loom_cache *cache;
    bool own_cache;
    loom_rt_buffer **lbuf;        /* n_layers * LB_COUNT */
    loom_rt_buffer *gbuf[GB_COUNT];
    loom_graph *graph;            /* recaptured every step */
    loom_plan *plan;              /* of the last step */
    loom_rt_program *program;     /* made from plan */
    uint32_t step;
    uint64_t hits, misses;
};

static loom_result rt_buffer(loom_llama *m, loom_rt_buffer **slot, const char *name, uint64_t size, loom_usage u,
                             const void *data)
{
    loom_rt_buffer_desc d = { .name = name, .size = size, .usage = u };
    loom_result rc = loom_rt_buffer_create(m->rt, &d, slot);
    if (rc == LOOM_OK && data)
        rc = loom_rt_buffer_write(m->rt, *slot, 0, data, size);
    return rc;
}

static loom_result upload_matrix(loom_llama *m, loom_rt_buffer **slot, const char *name,
                                 const loom_llama_matrix *mx)
{
    uint64_t n = (uint64_t)mx->rows * mx->cols;
    if (mx->f16)
        return rt_buffer(m, slot, name, n * 2, LOOM_USAGE_WEIGHT, mx->f16);
    return rt_buffer(m, slot, name, n * 4, LOOM_USAGE_WEIGHT, mx->f32);
}

static loom_result upload(loom_llama *m)
{
    const loom_llama_weights *w = m->w;
    const loom_llama_config *c = &m->cfg;
    uint64_t kv_bytes = (uint64_t)c->max_seq * c->n_kv_heads * c->head_dim * 4;
    char name[64];
    loom_result rc;
    for (uint32_t l = 0; l < c->n_layers; l++) {
        const loom_llama_layer *L = &w->layers[l];
        loom_rt_buffer **b = &m->lbuf[(size_t)l * LB_COUNT];
        const loom_llama_matrix *mats[LB_COUNT] = {
            [LB_WQ] = &L->wq, [LB_WK] = &L->wk, [LB_WV] = &L->wv, [LB_WO] = &L->wo,
            [LB_WG] = &L->wg, [LB_WU] = &L->wu, [LB_WD] = &L->wd,
        };
        static const char *const names[LB_COUNT] = { "attn_norm", "wq", "wk", "wv", "wo", "ffn_norm",
                                                     "wg", "wu", "wd", "kcache", "vcache" };
        for (int i = 0; i < LB_COUNT; i++) {
            snprintf(name, sizeof name, "l%u.%s", l, names[i]);
            if (mats[i])
                rc = upload_matrix(m, &b[i], name, mats[i]);
            else if (i == LB_ATTN_NORM || i == LB_FFN_NORM)
                rc = rt_buffer(m, &b[i], name, (uint64_t)c->dim * 4, LOOM_USAGE_WEIGHT,
                               i == LB_ATTN_NORM ? L->attn_norm : L->ffn_norm);
            else
                rc = rt_buffer(m, &b[i], name, kv_bytes, LOOM_USAGE_KV_CACHE, NULL);
            if (rc)
                return rc;
        }
    }
    if ((rc = upload_matrix(m, &m->gbuf[GB_EMBED], "embed", &w->embed)) ||
        (rc = rt_buffer(m, &m->gbuf[GB_FINAL_NORM], "final_norm", (uint64_t)c->dim * 4, LOOM_USAGE_WEIGHT,
                        w->final_norm)) ||
        (rc = upload_matrix(m, &m->gbuf[GB_OUT], "out", &w->out)) ||
        (rc = rt_buffer(m, &m->gbuf[GB_LOGITS], "logits", (uint64_t)c->vocab * 4, LOOM_USAGE_OUTPUT, NULL)) ||
        (rc = rt_buffer(m, &m->gbuf[GB_ARGMAX], "argmax", 4, LOOM_USAGE_OUTPUT, NULL)))
        return rc;
    return LOOM_OK;
}

void loom_llama_destroy(loom_llama *m)
{
    if (!m)
        return;
    loom_rt_program_release(m->program);
    loom_plan_release(m->plan);
    loom_graph_destroy(m->graph);
    if (m->own_cache)
        loom_cache_destroy(m->cache);
    if (m->lbuf)
        for (size_t i = 0; i < (size_t)m->cfg.n_layers * LB_COUNT; i++)
            loom_rt_buffer_release(m->lbuf[i]);
    for (int i = 0; i < GB_COUNT; i++)
        loom_rt_buffer_release(m->gbuf[i]);
    free(m->lbuf);
    free(m);
}

loom_result loom_llama_create(loom_rt *rt, const loom_llama_weights *w, const loom_llama_desc *desc,
                              loom_llama **out)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama: out is NULL");
    *out = NULL;
    if (!rt || !w)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama: runtime and weights are required");
    loom_result rc = loom_llama_config_check(&w->cfg);
    if (rc)
        return rc;
    loom_llama *m = calloc(1, sizeof *m);
    if (!m)
        return loom_fail(LOOM_OUT_OF_MEMORY, "llama model");
    m->rt = rt;
    m->w = w;
    m->cfg = w->cfg;
    if (desc) {
        m->chain = desc->chain;
        if (desc->compile)
            m->opts = *desc->compile;
        m->cache = desc->cache;
    }
    m->lbuf = calloc((size_t)m->cfg.n_layers * LB_COUNT, sizeof *m->lbuf);
    if (!m->lbuf) {
        rc = loom_fail(LOOM_OUT_OF_MEMORY, "llama model");
        goto fail;
    }
    if (!m->cache) {
        if ((rc = loom_cache_create(&(loom_cache_desc){ .capacity = 4 }, &m->cache)))
            goto fail;
        m->own_cache = true;
    }
    if ((rc = loom_graph_create(&(loom_graph_desc){ .name = "llama_step" }, &m->graph)) || (rc = upload(m)))
        goto fail;
    *out = m;
    return LOOM_OK;
fail:
    loom_llama_destroy(m);
    return rc;
}

/* ---- capture ------------------------------------------------------------ */

typedef struct cap {
    loom_graph *g;
    loom_llama *m;
    loom_result rc;   /* first failure; later calls do nothing */
} cap;

static uint32_t ext(cap *c, const loom_rt_buffer *b, const char *name, loom_usage u)
{
    uint32_t id = LOOM_NONE;
    if (c->rc == LOOM_OK)
        c->rc = loom_graph_add_buffer(
            c->g, &(loom_buffer_desc){ .name = name, .size = loom_rt_buffer_size(b), .usage = u,
                                       .external = loom_rt_buffer_id(b) },
            &id);
    return id;
}

/* A fresh f32 scratch vector: plan-owned, packed by the lifetimes pass. */
static loom_tensor scratch_named(cap *c, const char *name, uint32_t n)
{
    uint32_t id = LOOM_NONE;
    if (c->rc == LOOM_OK)
        c->rc = loom_graph_add_buffer(
            c->g, &(loom_buffer_desc){ .name = name, .size = (uint64_t)n * 4, .usage = LOOM_USAGE_SCRATCH }, &id);
    return loom_vec(id, n);
}

/* The same, named from a format taking the layer index. */
static loom_tensor scratch(cap *c, const char *fmt, uint32_t layer, uint32_t n)
{
    char name[48];
    snprintf(name, sizeof name, fmt, layer);
    return scratch_named(c, name, n);
}

#define OP(c, call)             \
    do {                        \
        if ((c)->rc == LOOM_OK) \
            (c)->rc = (call);   \
    } while (0)

static loom_tensor weight_mat(cap *c, const loom_rt_buffer *b, const char *name, uint32_t rows, uint32_t cols)
{
    return loom_mat(ext(c, b, name, LOOM_USAGE_WEIGHT), (loom_dtype)c->m->cfg.wtype, rows, cols);
}

/* RMS_NORM then MUL by the weight, captured apart for the fuse pass.
 * Scratch names are "<prefix>.rms" and "<prefix>.in" (the matvecs' input). */
static loom_tensor norm(cap *c, loom_tensor x, const loom_rt_buffer *wb, const char *wname, const char *prefix)
{
    const loom_llama_config *cfg = &c->m->cfg;
    char name[48];
    snprintf(name, sizeof name, "%s.rms", prefix);
    loom_tensor n = scratch_named(c, name, cfg->dim);
    snprintf(name, sizeof name, "%s.in", prefix);
    loom_tensor y = scratch_named(c, name, cfg->dim);
    loom_tensor w = loom_vec(ext(c, wb, wname, LOOM_USAGE_WEIGHT), cfg->dim);
    OP(c, loom_op_rms_norm(c->g, x, n, cfg->eps, NULL));
    OP(c, loom_op_mul(c->g, n, w, y, NULL));
    return y;
}

static loom_tensor layer(cap *c, uint32_t l, loom_tensor x)
{
    const loom_llama_config *cfg = &c->m->cfg;
    loom_rt_buffer **b = &c->m->lbuf[(size_t)l * LB_COUNT];
    uint32_t qd = cfg->n_heads * cfg->head_dim, kvd = cfg->n_kv_heads * cfg->head_dim;
    char nm[LB_COUNT][24];
    static const char *const names[LB_COUNT] = { "attn_norm", "wq", "wk", "wv", "wo", "ffn_norm",
                                                 "wg", "wu", "wd", "kcache", "vcache" };
    for (int i = 0; i < LB_COUNT; i++)
        snprintf(nm[i], sizeof nm[i], "l%u.%s", l, names[i]);

    char pre[24];
    snprintf(pre, sizeof pre, "l%u.attn", l);
    loom_tensor xn = norm(c, x, b[LB_ATTN_NORM], nm[LB_ATTN_NORM], pre);
    loom_tensor q = scratch(c, "l%u.q", l, qd), k = scratch(c, "l%u.k", l, kvd), v = scratch(c, "l%u.v", l, kvd);
    OP(c, loom_op_matvec(c->g, weight_mat(c, b[LB_WQ], nm[LB_WQ], qd, cfg->dim), xn, q, NULL));
    OP(c, loom_op_matvec(c->g, weight_mat(c, b[LB_WK], nm[LB_WK], kvd, cfg->dim), xn, k, NULL));
    OP(c, loom_op_matvec(c->g, weight_mat(c, b[LB_WV], nm[LB_WV], kvd, cfg->dim), xn, v, NULL));
    loom_tensor qr = scratch(c, "l%u.q_rope", l, qd), kr = scratch(c, "l%u.k_rope", l, kvd);
    OP(c, loom_op_rope(c->g, q, qr, cfg->n_heads, cfg->head_dim, cfg->rope_theta, NULL));
    OP(c, loom_op_rope(c->g, k, kr, cfg->n_kv_heads, cfg->head_dim, cfg->rope_theta, NULL));
    loom_tensor kc = loom_mat(ext(c, b[LB_KC], nm[LB_KC], LOOM_USAGE_KV_CACHE), LOOM_F32, cfg->max_seq, kvd);
    loom_tensor vc = loom_mat(ext(c, b[LB_VC], nm[LB_VC], LOOM_USAGE_KV_CACHE), LOOM_F32, cfg->max_seq, kvd);
    OP(c, loom_op_kv_append(c->g, kr, v, kc, vc, NULL));
    loom_tensor att = scratch(c, "l%u.attn", l, qd);
    OP(c, loom_op_attention(c->g, qr, kc, vc, att, cfg->n_heads, cfg->n_kv_heads, cfg->head_dim, NULL));
    loom_tensor o = scratch(c, "l%u.attn_out", l, cfg->dim), h = scratch(c, "l%u.h", l, cfg->dim);
    OP(c, loom_op_matvec(c->g, weight_mat(c, b[LB_WO], nm[LB_WO], cfg->dim, qd), att, o, NULL));
    OP(c, loom_op_add(c->g, x, o, h, NULL));

    snprintf(pre, sizeof pre, "l%u.ffn", l);
    loom_tensor hn = norm(c, h, b[LB_FFN_NORM], nm[LB_FFN_NORM], pre);
    loom_tensor gt = scratch(c, "l%u.gate", l, cfg->ffn), up = scratch(c, "l%u.up", l, cfg->ffn);
    OP(c, loom_op_matvec(c->g, weight_mat(c, b[LB_WG], nm[LB_WG], cfg->ffn, cfg->dim), hn, gt, NULL));
    OP(c, loom_op_matvec(c->g, weight_mat(c, b[LB_WU], nm[LB_WU], cfg->ffn, cfg->dim), hn, up, NULL));
    loom_tensor act = scratch(c, "l%u.act", l, cfg->ffn);
    OP(c, loom_op_silu_mul(c->g, gt, up, act, NULL));
    loom_tensor d = scratch(c, "l%u.down", l, cfg->dim), y = scratch(c, "l%u.out", l, cfg->dim);
    OP(c, loom_op_matvec(c->g, weight_mat(c, b[LB_WD], nm[LB_WD], cfg->dim, cfg->ffn), act, d, NULL));
    OP(c, loom_op_add(c->g, h, d, y, NULL));
    return y;
}

loom_result loom_llama_capture(loom_llama *m, loom_graph *g)
{
    if (!m || !g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama capture: model and graph are required");
    loom_graph_reset(g);
    const loom_llama_config *cfg = &m->cfg;
    cap c = { .g = g, .m = m, .rc = LOOM_OK };

    /* The argmax buffer is declared first so chain mode can read it. */
    uint32_t argmax = ext(&c, m->gbuf[GB_ARGMAX], "argmax", LOOM_USAGE_OUTPUT);
    uint32_t token_buf = argmax, token_index = 0;
    if (!m->chain) {
        OP(&c, loom_graph_params(g, &token_buf));
        token_index = 1;   /* loom_step_params.token */
    }
    loom_tensor table = weight_mat(&c, m->gbuf[GB_EMBED], "embed", cfg->vocab, cfg->dim);
    loom_tensor x = scratch_named(&c, "embed.out", cfg->dim);
    OP(&c, loom_op_embed(g, table, token_buf, token_index, x, NULL));
    for (uint32_t l = 0; l < cfg->n_layers && c.rc == LOOM_OK; l++)
        x = layer(&c, l, x);
    loom_tensor xw = norm(&c, x, m->gbuf[GB_FINAL_NORM], "final_norm", "final");
    loom_tensor logits = loom_vec(ext(&c, m->gbuf[GB_LOGITS], "logits", LOOM_USAGE_OUTPUT), cfg->vocab);
    OP(&c, loom_op_matvec(g, weight_mat(&c, m->gbuf[GB_OUT], "out", cfg->vocab, cfg->dim), xw, logits, NULL));
    loom_tensor am = { argmax, LOOM_U32, 0, 1, 1 };
    OP(&c, loom_op_argmax(g, logits, am, NULL));
    return c.rc;
}

/* ---- stepping ----------------------------------------------------------- */

/* The plan for this step's graph; a new plan (a cache miss, or an eviction)
 * gets a new program, an unchanged one keeps its recorded command buffer. */
static loom_result prepare(loom_llama *m)
{
    loom_plan *plan = NULL;
    bool hit = false;
    loom_result rc = loom_cache_compile(m->cache, m->graph, &m->opts, &plan, &hit);
    if (rc)
        return rc;
    if (hit)
        m->hits++;
    else
        m->misses++;
    if (plan == m->plan && m->program) {
        loom_plan_release(plan);
        return LOOM_OK;
    }
    loom_rt_program *prog = NULL;
    if ((rc = loom_rt_program_create(m->rt, loom_plan_graph(plan), &prog))) {
        loom_plan_release(plan);
        return rc;
    }
    loom_rt_program_release(m->program);
    loom_plan_release(m->plan);
    m->program = prog;
    m->plan = plan;
    return LOOM_OK;
}

loom_result loom_llama_step(loom_llama *m, uint32_t token, uint32_t pos, float *logits, uint32_t *argmax)
{
    if (!m)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama step: model is NULL");
    if (pos >= m->cfg.max_seq)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama step: pos %u beyond max_seq %u", pos, m->cfg.max_seq);
    if (token >= m->cfg.vocab)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama step: token %u beyond vocab %u", token, m->cfg.vocab);
    loom_result rc;
    if (m->chain && m->step == 0 &&
        (rc = loom_rt_buffer_write(m->rt, m->gbuf[GB_ARGMAX], 0, &token, sizeof token)))
        return rc;
    if ((rc = loom_llama_capture(m, m->graph)) || (rc = prepare(m)))
        return rc;
    loom_step_params params = { .pos = pos, .token = token, .kv_len = pos + 1, .step = m->step };
    uint64_t id = 0;
    if ((rc = loom_rt_replay(m->rt, m->program, &params, &id)) || (rc = loom_rt_wait(m->rt, id)))
        return rc;
    m->step++;
    if (logits &&
        (rc = loom_rt_buffer_read(m->rt, m->gbuf[GB_LOGITS], 0, logits, (uint64_t)m->cfg.vocab * sizeof(float))))
        return rc;
    if (argmax && (rc = loom_rt_buffer_read(m->rt, m->gbuf[GB_ARGMAX], 0, argmax, sizeof *argmax)))
        return rc;
    return LOOM_OK;
}

const loom_plan *loom_llama_plan(const loom_llama *m) { return m ? m->plan : NULL; }
loom_rt_program *loom_llama_program(const loom_llama *m) { return m ? m->program : NULL; }

void loom_llama_cache_counts(const loom_llama *m, uint64_t *hits, uint64_t *misses)
{
    if (hits)
        *hits = m ? m->hits : 0;
    if (misses)
        *misses = m ? m->misses : 0;
}
