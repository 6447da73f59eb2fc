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
#include <threads.h>
#include <unistd.h>
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

/* The dtypes a matrix may have: all but u32. */
static bool matrix_dtype(loom_dtype t) { return (unsigned)t < LOOM_DTYPE_COUNT && t != LOOM_U32; }

void loom_llama_mat_shape(const loom_llama_config *c, loom_llama_mat k, uint32_t *rows, uint32_t *cols)
{
    uint32_t qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    const uint32_t shape[LOOM_LLAMA_MAT_COUNT][2] = {
        [LOOM_LLAMA_EMBED] = { c->vocab, c->dim }, [LOOM_LLAMA_WQ] = { qd, c->dim },
        [LOOM_LLAMA_WK] = { kvd, c->dim },         [LOOM_LLAMA_WV] = { kvd, c->dim },
        [LOOM_LLAMA_WO] = { c->dim, qd },          [LOOM_LLAMA_WG] = { c->ffn, c->dim },
        [LOOM_LLAMA_WU] = { c->ffn, c->dim },      [LOOM_LLAMA_WD] = { c->dim, c->ffn },
        [LOOM_LLAMA_OUT] = { c->vocab, c->dim },
    };
    bool in = (unsigned)k < LOOM_LLAMA_MAT_COUNT;
    *rows = in ? shape[k][0] : 0;
    *cols = in ? shape[k][1] : 0;
}

/* llama.cpp's "use more bits" layers of its mixes: the first and last
 * eighth, and every third layer between. */
static bool more_bits(uint32_t i, uint32_t n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

loom_dtype loom_llama_matrix_type(const loom_llama_config *c, loom_llama_mat k, uint32_t layer)
{
    loom_dtype t = c->wtype;
    if (c->mix == LOOM_LLAMA_MIX_Q4_K_M) {
        bool v_or_down = k == LOOM_LLAMA_WV || k == LOOM_LLAMA_WD;
        t = k == LOOM_LLAMA_OUT || (v_or_down && more_bits(layer, c->n_layers)) ? LOOM_Q6_K : LOOM_Q4_K;
    }
    uint32_t rows, cols;
    loom_llama_mat_shape(c, k, &rows, &cols);
    /* llama.cpp falls back to Q5_0/Q8_0-class types for rows that are not
     * whole K-blocks; of those loom has q8_0, then f16 for any length. */
    if (loom_dtype_block(t) == 256 && cols % 256)
        t = LOOM_Q8_0;
    if (loom_dtype_is_block(t) && cols % loom_dtype_block(t))
        t = LOOM_F16;
    return t;
}

loom_result loom_llama_wtype_parse(const char *s, loom_llama_config *c)
{
    loom_dtype t;
    if (s && !strcmp(s, "q4_k_m")) {
        c->wtype = LOOM_Q4_K;
        c->mix = LOOM_LLAMA_MIX_Q4_K_M;
        return LOOM_OK;
    }
    if (!s || loom_dtype_parse(s, &t) || !matrix_dtype(t))
        return loom_fail(LOOM_NOT_FOUND, "llama: weight type '%s' is not one of f32, f16, q8_0, q4_0, q4_k, q6_k, "
                         "q4_k_m", s ? s : "");
    c->wtype = t;
    c->mix = LOOM_LLAMA_MIX_NONE;
    return LOOM_OK;
}

const char *loom_llama_wtype_name(const loom_llama_config *c)
{
    return c->mix == LOOM_LLAMA_MIX_Q4_K_M ? "q4_k_m" : loom_dtype_name(c->wtype);
}

static const char *const mat_names[LOOM_LLAMA_MAT_COUNT] = { "embed", "wq", "wk", "wv", "wo",
                                                              "wg",    "wu", "wd", "out" };

const char *loom_llama_mat_name(loom_llama_mat k) { return (unsigned)k < LOOM_LLAMA_MAT_COUNT ? mat_names[k] : "?"; }

/* Bytes of a rows x cols matrix of dtype t; 0 when a row is not whole blocks. */
static uint64_t matrix_bytes(loom_dtype t, uint32_t rows, uint32_t cols)
{
    return (uint64_t)rows * loom_dtype_row_bytes(t, cols);
}

/* Each matrix is one buffer of at most 4 GiB (allocations beyond are not
 * portable). One larger than a binding (maxStorageBufferRange: 128 MiB
 * guaranteed, 4 GiB on most desktop GPUs) is split into row blocks by the
 * compiler's split pass. Layers differ only under a mix. */
static loom_result check_matrix_sizes(const loom_llama_config *c)
{
    for (int k = 0; k < LOOM_LLAMA_MAT_COUNT; k++) {
        uint32_t layers = loom_llama_mat_per_layer((loom_llama_mat)k) && c->mix ? c->n_layers : 1, rows, cols;
        loom_llama_mat_shape(c, (loom_llama_mat)k, &rows, &cols);
        for (uint32_t l = 0; l < layers; l++)
            if (matrix_bytes(loom_llama_matrix_type(c, (loom_llama_mat)k, l), rows, cols) > UINT32_MAX)
                return loom_fail(LOOM_INVALID_ARGUMENT, "llama config: weight matrix %s (%ux%u) exceeds 4 GiB",
                                 mat_names[k], rows, cols);
    }
    return LOOM_OK;
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
    if (!matrix_dtype(c->wtype))
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama config: wtype %u is not a matrix dtype (f32, f16, q8_0, "
                         "q4_0, q4_k, q6_k)", c->wtype);
    if (c->mix != LOOM_LLAMA_MIX_NONE && (c->mix != LOOM_LLAMA_MIX_Q4_K_M || c->wtype != LOOM_Q4_K))
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama config: mix %u is not a loom_llama_mix, or wtype %s is not "
                         "the mix's q4_k", c->mix, loom_dtype_name(c->wtype));
    if (c->kvtype != LOOM_F32 && c->kvtype != LOOM_F16)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama config: kvtype %u is neither f32 nor f16", c->kvtype);
    if (!(c->eps > 0.0f) || !(c->rope_theta > 0.0f))
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama config: eps and rope_theta must be positive");
    return check_matrix_sizes(c);
}

/* ---- weights ------------------------------------------------------------ */

/* One stream of splitmix64 draws, in a fixed order over the matrices and
 * norms, makes the weights: the state advances by SPLITMIX_STEP a draw, so
 * draw i after state s comes from state s + (i + 1) * SPLITMIX_STEP and a
 * matrix can be filled from many places in the stream at once. */
#define SPLITMIX_STEP 0x9e3779b97f4a7c15ull
static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += SPLITMIX_STEP);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1), from the top 24 bits so every value is exact in f32. */
static float uniform(uint64_t *s) { return (float)(splitmix(s) >> 40) * (2.0f / 16777216.0f) - 1.0f; }

/* Rows [row0, row1) of a matrix whose first draw follows state seed: the
 * f32 draws, then, for a dtype other than f32, each row converted into raw
 * and read back into f32, so f32 holds what the GPU will compute with. */
typedef struct fill_range {
    loom_llama_matrix *mx;
    uint32_t row0, row1;
    uint64_t seed;
    float scale;
    loom_result rc;
} fill_range;

static int fill(void *arg)
{
    fill_range *r = arg;
    loom_llama_matrix *mx = r->mx;
    size_t cols = mx->cols, begin = (size_t)r->row0 * cols, end = (size_t)r->row1 * cols;
    uint64_t s = r->seed + (uint64_t)begin * SPLITMIX_STEP;
    for (size_t i = begin; i < end; i++)
        mx->f32[i] = uniform(&s) * r->scale;
    if (!mx->raw)
        return 0;
    size_t row_bytes = (size_t)loom_dtype_row_bytes(mx->type, cols);
    for (size_t row = r->row0; row < r->row1 && !r->rc; row++) {
        float *f = mx->f32 + row * cols;
        void *raw = (uint8_t *)mx->raw + row * row_bytes;
        r->rc = loom_quantize_row(mx->type, f, cols, raw);
        if (!r->rc)
            r->rc = loom_dequantize_row(mx->type, raw, cols, f);
    }
    return 0;
}

/* At least this many elements a thread: a 1b model's 2 GB of weights take
 * about 25 s on one core, which every benchmark process on the GPU machine
 * paid before its first step. Threads take whole rows, which quantize
 * alone. */
#define FILL_MIN_PER_THREAD (1u << 16)
#define FILL_MAX_THREADS 64

static loom_result matrix_init(loom_llama_matrix *mx, uint32_t rows, uint32_t cols, float scale, loom_dtype t,
                               uint64_t *seed)
{
    size_t n = (size_t)rows * cols;
    mx->rows = rows;
    mx->cols = cols;
    mx->type = t;
    mx->f32 = malloc(n * sizeof(float));
    mx->raw = t == LOOM_F32 ? NULL : malloc((size_t)matrix_bytes(t, rows, cols));
    if (!mx->f32 || (t != LOOM_F32 && !mx->raw))
        return loom_fail(LOOM_OUT_OF_MEMORY, "llama weights: %ux%u %s matrix", rows, cols, loom_dtype_name(t));
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    size_t cores = online > 0 ? (size_t)online : 1, k = n / FILL_MIN_PER_THREAD;
    if (k > cores)
        k = cores;
    if (k > FILL_MAX_THREADS)
        k = FILL_MAX_THREADS;
    if (k > rows)
        k = rows;
    if (k == 0)
        k = 1;
    fill_range r[FILL_MAX_THREADS];
    thrd_t th[FILL_MAX_THREADS];
    bool started[FILL_MAX_THREADS] = { false };
    for (size_t i = 0; i < k; i++)
        r[i] = (fill_range){ mx, (uint32_t)(rows * i / k), (uint32_t)(rows * (i + 1) / k), *seed, scale, LOOM_OK };
    /* Range 0 runs here; a thread that cannot start has its range run here
     * too, so the values never depend on how many threads ran. */
    for (size_t i = 1; i < k; i++)
        started[i] = thrd_create(&th[i], fill, &r[i]) == thrd_success;
    fill(&r[0]);
    for (size_t i = 1; i < k; i++) {
        if (started[i])
            thrd_join(th[i], NULL);
        else
            fill(&r[i]);
    }
    *seed += (uint64_t)n * SPLITMIX_STEP;
    for (size_t i = 0; i < k; i++)
        if (r[i].rc)
            return r[i].rc;
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

uint64_t loom_llama_matrix_bytes(const loom_llama_matrix *mx)
{
    return mx ? matrix_bytes(mx->type, mx->rows, mx->cols) : 0;
}

const void *loom_llama_matrix_data(const loom_llama_matrix *mx)
{
    return !mx ? NULL : mx->type == LOOM_F32 ? (const void *)mx->f32 : mx->raw;
}

static loom_llama_matrix *matrix_of(loom_llama_weights *w, loom_llama_mat k, uint32_t l)
{
    if (k == LOOM_LLAMA_EMBED)
        return &w->embed;
    if (k == LOOM_LLAMA_OUT)
        return &w->out;
    if (!loom_llama_mat_per_layer(k) || !w->layers || l >= w->cfg.n_layers)
        return NULL;
    loom_llama_layer *L = &w->layers[l];
    loom_llama_matrix *m[] = { [LOOM_LLAMA_WQ] = &L->wq, [LOOM_LLAMA_WK] = &L->wk, [LOOM_LLAMA_WV] = &L->wv,
                               [LOOM_LLAMA_WO] = &L->wo, [LOOM_LLAMA_WG] = &L->wg, [LOOM_LLAMA_WU] = &L->wu,
                               [LOOM_LLAMA_WD] = &L->wd };
    return m[k];
}

const loom_llama_matrix *loom_llama_weights_matrix(const loom_llama_weights *w, loom_llama_mat k, uint32_t layer)
{
    return w ? matrix_of((loom_llama_weights *)w, k, layer) : NULL;
}

/* Layers a matrix kind has: n_layers for the per-layer ones, else one. */
static uint32_t mat_layers(const loom_llama_config *c, loom_llama_mat k)
{
    return loom_llama_mat_per_layer(k) ? c->n_layers : 1;
}

char *loom_llama_describe_types(const loom_llama_config *c, const loom_llama_weights *w, char *buf, size_t n)
{
    if (!buf || !n)
        return buf;
    buf[0] = '\0';
    if (w)
        c = &w->cfg;
    if (!c)
        return buf;
    uint64_t count[LOOM_DTYPE_COUNT] = { 0 };
    for (int k = 0; k < LOOM_LLAMA_MAT_COUNT; k++)
        for (uint32_t l = 0; l < mat_layers(c, (loom_llama_mat)k); l++) {
            const loom_llama_matrix *mx = loom_llama_weights_matrix(w, (loom_llama_mat)k, l);
            loom_dtype t = mx ? mx->type : loom_llama_matrix_type(c, (loom_llama_mat)k, l);
            if ((unsigned)t < LOOM_DTYPE_COUNT)
                count[t]++;
        }
    size_t len = 0;
    for (;;) {
        int best = -1;
        for (int t = 0; t < (int)LOOM_DTYPE_COUNT; t++)
            if (count[t] && (best < 0 || count[t] > count[best]))
                best = t;
        if (best < 0)
            break;
        int m = snprintf(buf + len, n - len, "%s%s x %llu", len ? ", " : "", loom_dtype_name((loom_dtype)best),
                         (unsigned long long)count[best]);
        if (m < 0 || (size_t)m >= n - len)
            break;
        len += (size_t)m;
        count[best] = 0;
    }
    return buf;
}

static void matrix_free(loom_llama_matrix *mx)
{
    free(mx->f32);
    free(mx->raw);
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
            for (int k = LOOM_LLAMA_WQ; k <= LOOM_LLAMA_WD; k++)
                matrix_free(matrix_of(w, (loom_llama_mat)k, l));
        }
    free(w->layers);
    free(w->tokens);
    free(w->token_text);
    free(w);
}

/* A matrix of cfg's synthetic weights, drawn next from the stream. */
static loom_result draw_matrix(loom_llama_weights *w, loom_llama_mat k, uint32_t l, float scale, uint64_t *seed)
{
    uint32_t rows, cols;
    loom_llama_mat_shape(&w->cfg, k, &rows, &cols);
    return matrix_init(matrix_of(w, k, l), rows, cols, scale, loom_llama_matrix_type(&w->cfg, k, l), seed);
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
    uint32_t qd = c->n_heads * c->head_dim;
    /* Scales of 1/sqrt(fan-in) keep activations O(1) at every depth. */
    float sd = 1.0f / sqrtf((float)c->dim), sq = 1.0f / sqrtf((float)qd), sf = 1.0f / sqrtf((float)c->ffn);
    const float scale[LOOM_LLAMA_MAT_COUNT] = {
        [LOOM_LLAMA_EMBED] = 1.0f, [LOOM_LLAMA_WQ] = sd, [LOOM_LLAMA_WK] = sd, [LOOM_LLAMA_WV] = sd,
        [LOOM_LLAMA_WO] = sq,      [LOOM_LLAMA_WG] = sd, [LOOM_LLAMA_WU] = sd, [LOOM_LLAMA_WD] = sf,
        [LOOM_LLAMA_OUT] = sd,
    };
    w->layers = calloc(c->n_layers, sizeof *w->layers);
    if (!w->layers) {
        rc = loom_fail(LOOM_OUT_OF_MEMORY, "llama weights");
        goto fail;
    }
    if ((rc = draw_matrix(w, LOOM_LLAMA_EMBED, 0, scale[LOOM_LLAMA_EMBED], &seed)))
        goto fail;
    for (uint32_t l = 0; l < c->n_layers; l++) {
        loom_llama_layer *L = &w->layers[l];
        L->attn_norm = norm_init(c->dim, &seed);
        L->ffn_norm = norm_init(c->dim, &seed);
        if (!L->attn_norm || !L->ffn_norm) {
            rc = loom_fail(LOOM_OUT_OF_MEMORY, "llama weights");
            goto fail;
        }
        for (int k = LOOM_LLAMA_WQ; k <= LOOM_LLAMA_WD; k++)
            if ((rc = draw_matrix(w, (loom_llama_mat)k, l, scale[k], &seed)))
                goto fail;
    }
    w->final_norm = norm_init(c->dim, &seed);
    if (!w->final_norm) {
        rc = loom_fail(LOOM_OUT_OF_MEMORY, "llama weights");
        goto fail;
    }
    if ((rc = draw_matrix(w, LOOM_LLAMA_OUT, 0, scale[LOOM_LLAMA_OUT], &seed)))
        goto fail;
    *out = w;
    return LOOM_OK;
fail:
    loom_llama_weights_destroy(w);
    return rc;
}

/* Weights a model can describe: every matrix of the config's shape, in a
 * matrix dtype whose rows are whole blocks; and run (run): at most 4 GiB a
 * matrix (a device's limit), with the values it uploads (raw for every
 * dtype but f32; the f32 copy is the reference's) and every norm. */
static loom_result check_weights(const loom_llama_weights *w, bool run)
{
    bool values = run;
    const loom_llama_config *c = &w->cfg;
    if (values && w->no_values)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama: the weights are shapes only (no values to upload)");
    for (int k = 0; k < LOOM_LLAMA_MAT_COUNT; k++)
        for (uint32_t l = 0; l < mat_layers(c, (loom_llama_mat)k); l++) {
            const loom_llama_matrix *mx = loom_llama_weights_matrix(w, (loom_llama_mat)k, l);
            uint32_t rows, cols;
            loom_llama_mat_shape(c, (loom_llama_mat)k, &rows, &cols);
            char name[32] = "";
            if (loom_llama_mat_per_layer((loom_llama_mat)k))
                snprintf(name, sizeof name, "l%u.", l);
            snprintf(name + strlen(name), sizeof name - strlen(name), "%s", mat_names[k]);
            if (!mx || mx->rows != rows || mx->cols != cols)
                return loom_fail(LOOM_INVALID_ARGUMENT, "llama: matrix %s is %ux%u, the config makes it %ux%u", name,
                                 mx ? mx->rows : 0, mx ? mx->cols : 0, rows, cols);
            uint64_t bytes = loom_llama_matrix_bytes(mx);
            if (!matrix_dtype(mx->type) || bytes == 0 || (run && bytes > UINT32_MAX))
                return loom_fail(LOOM_INVALID_ARGUMENT, "llama: matrix %s: dtype %s with rows of %u (%llu bytes): "
                                 "not a matrix dtype, rows not whole blocks, or over 4 GiB", name,
                                 loom_dtype_name(mx->type), cols, (unsigned long long)bytes);
            if (values && !loom_llama_matrix_data(mx))
                return loom_fail(LOOM_INVALID_ARGUMENT, "llama: matrix %s has no values to upload", name);
        }
    for (uint32_t l = 0; values && l < c->n_layers; l++)
        if (!w->layers[l].attn_norm || !w->layers[l].ffn_norm)
            return loom_fail(LOOM_INVALID_ARGUMENT, "llama: layer %u has no norm weights", l);
    if (values && !w->final_norm)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama: no final norm weights");
    return LOOM_OK;
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

float loom_llama_check_tol(loom_rt *rt, const loom_llama_weights *w, float tol)
{
    (void)rt;
    for (int k = 0; k < LOOM_LLAMA_MAT_COUNT; k++) {
        const loom_llama_matrix *mx = loom_llama_weights_matrix(w, (loom_llama_mat)k, 0);
        if (mx && loom_dtype_is_block(mx->type))
            return tol > LOOM_LLAMA_TOL_INT8_X ? tol : LOOM_LLAMA_TOL_INT8_X;
    }
    return tol;
}

/* ---- GPU model ---------------------------------------------------------- */

/* Runtime buffers: per layer, then the model-wide ones. TOKENS and
 * LOGITS_LOG are the rings the decode loop reads behind the GPU. */
enum { LB_ATTN_NORM, LB_WQ, LB_WK, LB_WV, LB_WO, LB_FFN_NORM, LB_WG, LB_WU, LB_WD, LB_KC, LB_VC, LB_COUNT };
enum { GB_EMBED, GB_FINAL_NORM, GB_OUT, GB_LOGITS, GB_ARGMAX, GB_TOKENS, GB_LOGITS_LOG, GB_PROMPT, GB_ROW_TOKENS,
       GB_COUNT };

/* The matrix a layer buffer holds; -1 for norms and caches. */
static const int8_t lb_mat[LB_COUNT] = {
    [LB_ATTN_NORM] = -1, [LB_WQ] = LOOM_LLAMA_WQ, [LB_WK] = LOOM_LLAMA_WK, [LB_WV] = LOOM_LLAMA_WV,
    [LB_WO] = LOOM_LLAMA_WO, [LB_FFN_NORM] = -1, [LB_WG] = LOOM_LLAMA_WG, [LB_WU] = LOOM_LLAMA_WU,
    [LB_WD] = LOOM_LLAMA_WD, [LB_KC] = -1, [LB_VC] = -1,
};
static const char *const lb_names[LB_COUNT] = { "attn_norm", "wq", "wk", "wv", "wo", "ffn_norm",
                                                "wg", "wu", "wd", "kcache", "vcache" };

/* Plans (and their programs) a model keeps: the decode step, the fed step
 * and the multi-token buckets a prompt's chunks use. */
#define LLAMA_KEPT 8

/* A dry model has no runtime: its buffer pointers point at these, cast, so
 * the capture code (which passes loom_rt_buffer pointers around) runs
 * unchanged; buf_id and buf_size read them back. Never dereferenced as a
 * loom_rt_buffer. */
typedef struct placeholder {
    uint64_t id, size;
} placeholder;

struct loom_llama {
    loom_rt *rt;                  /* NULL: a dry model */
    const loom_llama_weights *w;  /* NULL: a dry model */
    const loom_llama_weights *like;  /* a dry model's matrix dtypes (values unused); NULL: the config's */
    loom_llama_config cfg;
    bool chain, keep_logits, early_log;
    bool feeding;                 /* the step being captured takes its token from the host */
    loom_compile_options opts;
    loom_cache *cache;
    bool own_cache;
    loom_rt_buffer **lbuf;        /* n_layers * LB_COUNT */
    loom_rt_buffer *gbuf[GB_COUNT];
    placeholder *ph;              /* dry: n_layers * LB_COUNT + GB_COUNT */
    uint32_t rows_t;              /* the step being captured: a multi-token step of this bucket; 0 one token */
    bool verify;                  /* ... whose every row gets the LM head and an argmax */
    uint32_t *prompt;             /* host copy of the prompt buffer (max_seq ids by position) */
    loom_graph *graph;            /* recaptured every step */
    loom_plan *plan;              /* of the last step */
    loom_rt_program *program;     /* made from plan */
    /* Programs of the other plans the model switched away from (the decode
     * step, fed steps, each multi-token bucket), kept so that switching
     * back costs no new program. */
    struct {
        loom_plan *plan;
        loom_rt_program *program;
        uint64_t used;
    } kept[LLAMA_KEPT];
    uint64_t uses;
    uint32_t step;                /* steps submitted */
    uint64_t ids[LOOM_LLAMA_RING];/* runtime step id of model step s at s % RING */
    uint64_t hits, misses;
};

static uint64_t buf_id(const loom_llama *m, const loom_rt_buffer *b)
{
    return m->rt ? loom_rt_buffer_id(b) : ((const placeholder *)(const void *)b)->id;
}

static uint64_t buf_size(const loom_llama *m, const loom_rt_buffer *b)
{
    return m->rt ? loom_rt_buffer_size(b) : ((const placeholder *)(const void *)b)->size;
}

static loom_result rt_buffer(loom_llama *m, loom_rt_buffer **slot, const char *name, uint64_t size, loom_usage u,
                             const void *data)
{
    loom_rt_buffer_desc d = { .name = name, .size = size, .usage = u };
    loom_result rc = loom_rt_buffer_create(m->rt, &d, slot);
    if (rc == LOOM_OK && data)
        rc = loom_rt_buffer_write(m->rt, *slot, 0, data, size);
    return rc;
}

/* The dtype matrix k of layer l has on this model: the weights' own, else
 * (a dry model) the shapes-only weights' or the config's. */
static loom_dtype mat_type(const loom_llama *m, loom_llama_mat k, uint32_t l)
{
    const loom_llama_weights *w = m->w ? m->w : m->like;
    return w ? loom_llama_weights_matrix(w, k, l)->type : loom_llama_matrix_type(&m->cfg, k, l);
}

static uint64_t mat_buffer_bytes(const loom_llama *m, loom_llama_mat k, uint32_t l)
{
    uint32_t rows, cols;
    loom_llama_mat_shape(&m->cfg, k, &rows, &cols);
    loom_dtype t = mat_type(m, k, l);
    return loom_view_bytes(t, rows, cols);   /* a view of blocks binds its last word whole */
}

/* A matrix goes up as stored: f32 values, f16 bits or GGUF blocks. */
static loom_result upload_matrix(loom_llama *m, loom_rt_buffer **slot, const char *name,
                                 const loom_llama_matrix *mx)
{
    uint64_t bytes = loom_llama_matrix_bytes(mx);
    loom_result rc = rt_buffer(m, slot, name, loom_view_bytes(mx->type, mx->rows, mx->cols), LOOM_USAGE_WEIGHT, NULL);
    return rc ? rc : loom_rt_buffer_write(m->rt, *slot, 0, loom_llama_matrix_data(mx), bytes);
}

static loom_result upload(loom_llama *m)
{
    const loom_llama_weights *w = m->w;
    const loom_llama_config *c = &m->cfg;
    uint64_t kv_bytes = (uint64_t)c->max_seq * c->n_kv_heads * c->head_dim * loom_dtype_size(c->kvtype);
    char name[64];
    loom_result rc;
    for (uint32_t l = 0; l < c->n_layers; l++) {
        const loom_llama_layer *L = &w->layers[l];
        loom_rt_buffer **b = &m->lbuf[(size_t)l * LB_COUNT];
        for (int i = 0; i < LB_COUNT; i++) {
            snprintf(name, sizeof name, "l%u.%s", l, lb_names[i]);
            if (lb_mat[i] >= 0)
                rc = upload_matrix(m, &b[i], name, loom_llama_weights_matrix(w, (loom_llama_mat)lb_mat[i], l));
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
        (rc = rt_buffer(m, &m->gbuf[GB_ARGMAX], "argmax", 4, LOOM_USAGE_OUTPUT, NULL)) ||
        (rc = rt_buffer(m, &m->gbuf[GB_TOKENS], "tokens", LOOM_LLAMA_RING * 4, LOOM_USAGE_OUTPUT, NULL)) ||
        (rc = rt_buffer(m, &m->gbuf[GB_PROMPT], "prompt", (uint64_t)c->max_seq * 4, LOOM_USAGE_INPUT, NULL)) ||
        (rc = rt_buffer(m, &m->gbuf[GB_ROW_TOKENS], "row_tokens", LOOM_LLAMA_MAX_ROWS * 4, LOOM_USAGE_OUTPUT,
                        NULL)))
        return rc;
    if (m->keep_logits &&
        (rc = rt_buffer(m, &m->gbuf[GB_LOGITS_LOG], "logits_log", (uint64_t)LOOM_LLAMA_RING * c->vocab * 4,
                        LOOM_USAGE_OUTPUT, NULL)))
        return rc;
    return LOOM_OK;
}

/* ---- the step rings ----------------------------------------------------- */

/* The graph buffer capture declared for runtime buffer b (LOOM_NONE if
 * none): the log must name the same graph buffer, or the passes would not
 * see its hazard against the producer. */
static uint32_t graph_buffer_of(const loom_llama *m, const loom_graph *g, const loom_rt_buffer *b)
{
    uint64_t id = buf_id(m, b);
    for (uint32_t i = 0; i < loom_graph_buffer_count(g); i++)
        if (loom_graph_buffer(g, i)->external == id)
            return i;
    return LOOM_NONE;
}

/* Copies n words of src into slot (params.step - back) % LOOM_LLAMA_RING of
 * dst (STEP_LOG): a step's token (and, with keep_logits, its logits) kept
 * where a later step does not overwrite them, so the host can read them
 * behind the GPU. back 0 logs the step's own output at its end (the fuse
 * pass folds the token's log into the LM head); back 1 logs the step
 * before's at the start (step 0 has none before it and copies nothing). */
static loom_result add_log(loom_llama *m, loom_graph *g, loom_rt_buffer *src, loom_rt_buffer *dst,
                           const char *name, loom_dtype dtype, uint32_t n_words, uint32_t back)
{
    uint32_t s = graph_buffer_of(m, g, src), d;
    if (s == LOOM_NONE)
        return loom_fail(LOOM_NOT_FOUND, "llama step log: the step graph does not use buffer '%s'", name);
    char dname[48];
    snprintf(dname, sizeof dname, "%s_log", name);
    /* A step that logs twice (the step before's, then its own) names the
     * ring once. */
    d = graph_buffer_of(m, g, dst);
    loom_result rc = d != LOOM_NONE ? LOOM_OK
                                    : loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = dname,
                                                                                    .size = buf_size(m, dst),
                                                                                    .usage = LOOM_USAGE_OUTPUT,
                                                                                    .external = buf_id(m, dst) },
                                                            &d);
    if (rc)
        return rc;
    return loom_op_step_log(g, (loom_tensor){ s, dtype, 0, 1, n_words },
                            (loom_tensor){ d, dtype, 0, LOOM_LLAMA_RING, n_words }, back, NULL);
}

/* The step's logs, back 0 (after the step's ops) or 1 (before them). */
static loom_result add_logs(loom_llama *m, loom_graph *g, uint32_t back)
{
    loom_result rc = add_log(m, g, m->gbuf[GB_ARGMAX], m->gbuf[GB_TOKENS], "tokens", LOOM_U32, 1, back);
    if (!rc && m->keep_logits)
        rc = add_log(m, g, m->gbuf[GB_LOGITS], m->gbuf[GB_LOGITS_LOG], "logits", LOOM_F32, m->cfg.vocab, back);
    return rc;
}

static loom_result capture_ops(loom_llama *m, loom_graph *g, bool logs_first);

loom_result loom_llama_capture_step(loom_llama *m, loom_graph *g)
{
    if (!m || !g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama capture: model and graph are required");
    /* Late: after the ops, so in capture order the log reads this step's
     * ARGMAX — one tiny dispatch behind one more barrier per token. Early:
     * first, reading what the step before left in ARGMAX and the logits
     * before this step's LM head writes them, in the first level. */
    if (m->early_log)
        return capture_ops(m, g, true);
    loom_result rc = capture_ops(m, g, false);
    return rc ? rc : add_logs(m, g, 0);
}

/* Releases the current plan and program and the kept ones. */
static void drop_plans(loom_llama *m)
{
    loom_rt_program_release(m->program);
    loom_plan_release(m->plan);
    m->program = NULL;
    m->plan = NULL;
    for (int i = 0; i < LLAMA_KEPT; i++) {
        loom_rt_program_release(m->kept[i].program);
        loom_plan_release(m->kept[i].plan);
        memset(&m->kept[i], 0, sizeof m->kept[i]);
    }
}

void loom_llama_destroy(loom_llama *m)
{
    if (!m)
        return;
    drop_plans(m);
    loom_graph_destroy(m->graph);
    free(m->prompt);
    if (m->own_cache)
        loom_cache_destroy(m->cache);
    if (m->lbuf && m->rt)
        for (size_t i = 0; i < (size_t)m->cfg.n_layers * LB_COUNT; i++)
            loom_rt_buffer_release(m->lbuf[i]);
    for (int i = 0; i < GB_COUNT && m->rt; i++)
        loom_rt_buffer_release(m->gbuf[i]);
    free(m->lbuf);
    free(m->ph);
    free(m);
}

/* Shared by both creations: options, the buffer table, the cache, the graph. */
static loom_result model_init(loom_llama *m, const loom_llama_desc *desc)
{
    if (desc) {
        m->chain = desc->chain;
        m->keep_logits = desc->keep_logits;
        m->early_log = desc->early_log;
        if (desc->compile)
            m->opts = *desc->compile;
        m->cache = desc->cache;
    }
    m->lbuf = calloc((size_t)m->cfg.n_layers * LB_COUNT, sizeof *m->lbuf);
    m->prompt = calloc(m->cfg.max_seq, sizeof *m->prompt);
    if (!m->lbuf || !m->prompt)
        return loom_fail(LOOM_OUT_OF_MEMORY, "llama model");
    loom_result rc;
    if (!m->cache) {
        if ((rc = loom_cache_create(&(loom_cache_desc){ .capacity = LLAMA_KEPT }, &m->cache)))
            return rc;
        m->own_cache = true;
    }
    return loom_graph_create(&(loom_graph_desc){ .name = "llama_step" }, &m->graph);
}

/* The size limit on a matrix in loom_llama_config_check is a property of a
 * device's memory; a dry run has no device, so it checks everything else:
 * the same config with the two widths that size the largest matrices made
 * small (a zero stays zero and is still refused). */
static loom_result dry_config_check(const loom_llama_config *cfg)
{
    if (!cfg)
        return loom_llama_config_check(cfg);
    loom_llama_config probe = *cfg;
    if (probe.vocab > 0 && probe.vocab <= (1u << 20))
        probe.vocab = 1;
    if (probe.ffn > 0 && probe.ffn <= (1u << 20))
        probe.ffn = 1;
    return loom_llama_config_check(&probe);
}

/* A dry model of cfg, its matrix dtypes from like when not NULL. */
static loom_result create_dry(const loom_llama_config *cfg, const loom_llama_weights *like,
                              const loom_llama_desc *desc, loom_llama **out)
{
    loom_llama *m = calloc(1, sizeof *m);
    if (!m)
        return loom_fail(LOOM_OUT_OF_MEMORY, "llama dry model");
    m->cfg = *cfg;
    m->like = like;
    size_t n_layer_bufs = (size_t)cfg->n_layers * LB_COUNT;
    loom_result rc = model_init(m, desc);
    if (rc)
        goto fail;
    if (!(m->ph = calloc(n_layer_bufs + GB_COUNT, sizeof *m->ph))) {
        rc = loom_fail(LOOM_OUT_OF_MEMORY, "llama dry model");
        goto fail;
    }
    const loom_llama_config *c = cfg;
    uint64_t kv = (uint64_t)c->max_seq * c->n_kv_heads * c->head_dim * loom_dtype_size(c->kvtype);
    /* Sizes as upload() makes them, so the plan is the one a device gets.
     * Placeholder ids count from 1 like runtime serials (0 means
     * plan-owned). */
    for (size_t i = 0; i < n_layer_bufs; i++) {
        int b = (int)(i % LB_COUNT);
        uint64_t size = lb_mat[b] >= 0 ? mat_buffer_bytes(m, (loom_llama_mat)lb_mat[b], (uint32_t)(i / LB_COUNT))
                        : b == LB_KC || b == LB_VC ? kv
                                                   : c->dim * 4ull;
        m->ph[i] = (placeholder){ i + 1, size };
        m->lbuf[i] = (loom_rt_buffer *)(void *)&m->ph[i];
    }
    uint64_t global_bytes[GB_COUNT] = {
        [GB_EMBED] = mat_buffer_bytes(m, LOOM_LLAMA_EMBED, 0), [GB_FINAL_NORM] = c->dim * 4ull,
        [GB_OUT] = mat_buffer_bytes(m, LOOM_LLAMA_OUT, 0), [GB_LOGITS] = c->vocab * 4ull, [GB_ARGMAX] = 4,
        [GB_TOKENS] = LOOM_LLAMA_RING * 4, [GB_LOGITS_LOG] = (uint64_t)LOOM_LLAMA_RING * c->vocab * 4,
        [GB_PROMPT] = c->max_seq * 4ull, [GB_ROW_TOKENS] = LOOM_LLAMA_MAX_ROWS * 4,
    };
    for (int i = 0; i < GB_COUNT; i++) {
        m->ph[n_layer_bufs + i] = (placeholder){ n_layer_bufs + i + 1, global_bytes[i] };
        m->gbuf[i] = (loom_rt_buffer *)(void *)&m->ph[n_layer_bufs + i];
    }
    *out = m;
    return LOOM_OK;
fail:
    loom_llama_destroy(m);
    return rc;
}

loom_result loom_llama_create_dry(const loom_llama_config *cfg, const loom_llama_desc *desc, loom_llama **out)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama dry model: out is NULL");
    *out = NULL;
    loom_result rc = dry_config_check(cfg);
    return rc ? rc : create_dry(cfg, NULL, desc, out);
}

loom_result loom_llama_create_dry_like(const loom_llama_weights *w, const loom_llama_desc *desc, loom_llama **out)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama dry model: out is NULL");
    *out = NULL;
    if (!w)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama dry model: weights are NULL");
    loom_result rc = dry_config_check(&w->cfg);
    if (!rc)
        rc = check_weights(w, false);
    return rc ? rc : create_dry(&w->cfg, w, desc, out);
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
    if (!rc)
        rc = check_weights(w, true);
    if (rc)
        return rc;
    loom_llama *m = calloc(1, sizeof *m);
    if (!m)
        return loom_fail(LOOM_OUT_OF_MEMORY, "llama model");
    m->rt = rt;
    m->w = w;
    m->cfg = w->cfg;
    if (loom_rt_in_flight(rt) >= LOOM_LLAMA_RING) {
        rc = loom_fail(LOOM_INVALID_ARGUMENT, "llama: %u steps in flight, the token ring holds %u",
                       loom_rt_in_flight(rt), LOOM_LLAMA_RING);
        goto fail;
    }
    if ((rc = model_init(m, desc)) || (rc = upload(m)))
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
            c->g, &(loom_buffer_desc){ .name = name, .size = buf_size(c->m, b), .usage = u,
                                       .external = buf_id(c->m, b) },
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

/* Matrix k of layer l (0 for the model-wide ones), bound in its dtype. */
static loom_tensor weight_mat(cap *c, const loom_rt_buffer *b, const char *name, loom_llama_mat k, uint32_t l)
{
    uint32_t rows, cols;
    loom_llama_mat_shape(&c->m->cfg, k, &rows, &cols);
    return loom_mat(ext(c, b, name, LOOM_USAGE_WEIGHT), mat_type(c->m, k, l), rows, cols);
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
    for (int i = 0; i < LB_COUNT; i++)
        snprintf(nm[i], sizeof nm[i], "l%u.%s", l, lb_names[i]);

    char pre[24];
    snprintf(pre, sizeof pre, "l%u.attn", l);
    loom_tensor xn = norm(c, x, b[LB_ATTN_NORM], nm[LB_ATTN_NORM], pre);
    loom_tensor q = scratch(c, "l%u.q", l, qd), k = scratch(c, "l%u.k", l, kvd), v = scratch(c, "l%u.v", l, kvd);
    OP(c, loom_op_matvec(c->g, weight_mat(c, b[LB_WQ], nm[LB_WQ], LOOM_LLAMA_WQ, l), xn, q, NULL));
    OP(c, loom_op_matvec(c->g, weight_mat(c, b[LB_WK], nm[LB_WK], LOOM_LLAMA_WK, l), xn, k, NULL));
    OP(c, loom_op_matvec(c->g, weight_mat(c, b[LB_WV], nm[LB_WV], LOOM_LLAMA_WV, l), xn, v, NULL));
    loom_tensor qr = scratch(c, "l%u.q_rope", l, qd), kr = scratch(c, "l%u.k_rope", l, kvd);
    OP(c, loom_op_rope(c->g, q, qr, cfg->n_heads, cfg->head_dim, cfg->rope_theta, NULL));
    OP(c, loom_op_rope(c->g, k, kr, cfg->n_kv_heads, cfg->head_dim, cfg->rope_theta, NULL));
    loom_dtype kt = (loom_dtype)cfg->kvtype;
    loom_tensor kc = loom_mat(ext(c, b[LB_KC], nm[LB_KC], LOOM_USAGE_KV_CACHE), kt, cfg->max_seq, kvd);
    loom_tensor vc = loom_mat(ext(c, b[LB_VC], nm[LB_VC], LOOM_USAGE_KV_CACHE), kt, cfg->max_seq, kvd);
    OP(c, loom_op_kv_append(c->g, kr, v, kc, vc, NULL));
    loom_tensor att = scratch(c, "l%u.attn", l, qd);
    OP(c, loom_op_attention(c->g, qr, kc, vc, att, cfg->n_heads, cfg->n_kv_heads, cfg->head_dim, NULL));
    loom_tensor o = scratch(c, "l%u.attn_out", l, cfg->dim), h = scratch(c, "l%u.h", l, cfg->dim);
    OP(c, loom_op_matvec(c->g, weight_mat(c, b[LB_WO], nm[LB_WO], LOOM_LLAMA_WO, l), att, o, NULL));
    OP(c, loom_op_add(c->g, x, o, h, NULL));

    snprintf(pre, sizeof pre, "l%u.ffn", l);
    loom_tensor hn = norm(c, h, b[LB_FFN_NORM], nm[LB_FFN_NORM], pre);
    loom_tensor gt = scratch(c, "l%u.gate", l, cfg->ffn), up = scratch(c, "l%u.up", l, cfg->ffn);
    OP(c, loom_op_matvec(c->g, weight_mat(c, b[LB_WG], nm[LB_WG], LOOM_LLAMA_WG, l), hn, gt, NULL));
    OP(c, loom_op_matvec(c->g, weight_mat(c, b[LB_WU], nm[LB_WU], LOOM_LLAMA_WU, l), hn, up, NULL));
    loom_tensor act = scratch(c, "l%u.act", l, cfg->ffn);
    OP(c, loom_op_silu_mul(c->g, gt, up, act, NULL));
    loom_tensor d = scratch(c, "l%u.down", l, cfg->dim), y = scratch(c, "l%u.out", l, cfg->dim);
    OP(c, loom_op_matvec(c->g, weight_mat(c, b[LB_WD], nm[LB_WD], LOOM_LLAMA_WD, l), act, d, NULL));
    OP(c, loom_op_add(c->g, h, d, y, NULL));
    return y;
}

/* ---- multi-token steps --------------------------------------------------- */

/* A T x n f32 scratch matrix: one row per token of the step. */
static loom_tensor rows_named(cap *c, const char *name, uint32_t n)
{
    loom_tensor v = scratch_named(c, name, c->m->rows_t * n);
    return loom_mat(v.buffer, LOOM_F32, c->m->rows_t, n);
}

static loom_tensor scratch_rows(cap *c, const char *fmt, uint32_t layer, uint32_t n)
{
    char name[48];
    snprintf(name, sizeof name, fmt, layer);
    return rows_named(c, name, n);
}

/* The weights of an RMS norm, bound as a 1 x dim vector. */
static loom_tensor norm_weight(cap *c, const loom_rt_buffer *wb, const char *wname)
{
    return loom_vec(ext(c, wb, wname, LOOM_USAGE_WEIGHT), c->m->cfg.dim);
}

/* One layer over the step's T token rows: the decode layer's ops as their
 * row forms, for the fuse pass to fold as it folds a decode step's (the
 * residual adds into MATMUL_ADD, the gate into MATMUL_SILU_MUL); the norm
 * and its scaling are captured as one RMS_NORM_MUL_ROWS, which has no
 * unfused T-row pair. */
static loom_tensor layer_rows(cap *c, uint32_t l, loom_tensor x)
{
    const loom_llama_config *cfg = &c->m->cfg;
    loom_rt_buffer **b = &c->m->lbuf[(size_t)l * LB_COUNT];
    uint32_t qd = cfg->n_heads * cfg->head_dim, kvd = cfg->n_kv_heads * cfg->head_dim;
    char nm[LB_COUNT][24];
    for (int i = 0; i < LB_COUNT; i++)
        snprintf(nm[i], sizeof nm[i], "l%u.%s", l, lb_names[i]);

    loom_tensor xn = scratch_rows(c, "l%u.attn.in", l, cfg->dim);
    OP(c, loom_op_rms_norm_mul_rows(c->g, x, norm_weight(c, b[LB_ATTN_NORM], nm[LB_ATTN_NORM]), xn, cfg->eps,
                                     NULL));
    loom_tensor q = scratch_rows(c, "l%u.q", l, qd), k = scratch_rows(c, "l%u.k", l, kvd);
    loom_tensor v = scratch_rows(c, "l%u.v", l, kvd);
    OP(c, loom_op_matmul(c->g, weight_mat(c, b[LB_WQ], nm[LB_WQ], LOOM_LLAMA_WQ, l), xn, q, NULL));
    OP(c, loom_op_matmul(c->g, weight_mat(c, b[LB_WK], nm[LB_WK], LOOM_LLAMA_WK, l), xn, k, NULL));
    OP(c, loom_op_matmul(c->g, weight_mat(c, b[LB_WV], nm[LB_WV], LOOM_LLAMA_WV, l), xn, v, NULL));
    OP(c, loom_op_rope_rows(c->g, q, q, cfg->n_heads, cfg->head_dim, cfg->rope_theta, NULL));
    OP(c, loom_op_rope_rows(c->g, k, k, cfg->n_kv_heads, cfg->head_dim, cfg->rope_theta, NULL));
    loom_dtype kt = (loom_dtype)cfg->kvtype;
    loom_tensor kc = loom_mat(ext(c, b[LB_KC], nm[LB_KC], LOOM_USAGE_KV_CACHE), kt, cfg->max_seq, kvd);
    loom_tensor vc = loom_mat(ext(c, b[LB_VC], nm[LB_VC], LOOM_USAGE_KV_CACHE), kt, cfg->max_seq, kvd);
    OP(c, loom_op_kv_append_rows(c->g, k, v, kc, vc, NULL));
    loom_tensor att = scratch_rows(c, "l%u.attn", l, qd);
    OP(c, loom_op_attention_rows(c->g, q, kc, vc, att, cfg->n_heads, cfg->n_kv_heads, cfg->head_dim, NULL));
    loom_tensor o = scratch_rows(c, "l%u.attn_out", l, cfg->dim), h = scratch_rows(c, "l%u.h", l, cfg->dim);
    OP(c, loom_op_matmul(c->g, weight_mat(c, b[LB_WO], nm[LB_WO], LOOM_LLAMA_WO, l), att, o, NULL));
    OP(c, loom_op_add(c->g, x, o, h, NULL));

    loom_tensor hn = scratch_rows(c, "l%u.ffn.in", l, cfg->dim);
    OP(c, loom_op_rms_norm_mul_rows(c->g, h, norm_weight(c, b[LB_FFN_NORM], nm[LB_FFN_NORM]), hn, cfg->eps,
                                     NULL));
    loom_tensor gt = scratch_rows(c, "l%u.gate", l, cfg->ffn), up = scratch_rows(c, "l%u.up", l, cfg->ffn);
    OP(c, loom_op_matmul(c->g, weight_mat(c, b[LB_WG], nm[LB_WG], LOOM_LLAMA_WG, l), hn, gt, NULL));
    OP(c, loom_op_matmul(c->g, weight_mat(c, b[LB_WU], nm[LB_WU], LOOM_LLAMA_WU, l), hn, up, NULL));
    loom_tensor act = scratch_rows(c, "l%u.act", l, cfg->ffn);
    OP(c, loom_op_silu_mul(c->g, gt, up, act, NULL));
    loom_tensor d = scratch_rows(c, "l%u.down", l, cfg->dim), y = scratch_rows(c, "l%u.out", l, cfg->dim);
    OP(c, loom_op_matmul(c->g, weight_mat(c, b[LB_WD], nm[LB_WD], LOOM_LLAMA_WD, l), act, d, NULL));
    OP(c, loom_op_add(c->g, h, d, y, NULL));
    return y;
}

/* The graph of a step over T token rows (bucket T): the prompt ids from
 * the prompt buffer (row t at position pos + t), every layer over the rows,
 * then the LM head and argmax of the last real row (params.rows - 1), as a
 * decode step's, with the step's log. A verifying step (m->verify) puts
 * every row through the final norm and the LM head, writes each row's
 * argmax into row_tokens, and picks the last real row's logits for the
 * argmax and log. */
static loom_result capture_rows(loom_llama *m, loom_graph *g, uint32_t T)
{
    loom_graph_reset(g);
    const loom_llama_config *cfg = &m->cfg;
    cap c = { .g = g, .m = m, .rc = LOOM_OK };
    m->rows_t = T;
    uint32_t argmax = ext(&c, m->gbuf[GB_ARGMAX], "argmax", LOOM_USAGE_OUTPUT);
    uint32_t logits_buf = ext(&c, m->gbuf[GB_LOGITS], "logits", LOOM_USAGE_OUTPUT);
    /* With early logs, a decode step's token reaches its slot when the
     * next step starts: this step logs the one before it first (as an
     * early-log decode step does), and its own at its end. */
    if (m->early_log && c.rc == LOOM_OK)
        c.rc = add_logs(m, g, 1);
    uint32_t prompt = ext(&c, m->gbuf[GB_PROMPT], "prompt", LOOM_USAGE_INPUT);
    loom_tensor table = weight_mat(&c, m->gbuf[GB_EMBED], "embed", LOOM_LLAMA_EMBED, 0);
    loom_tensor x = rows_named(&c, "embed.out", cfg->dim);
    OP(&c, loom_op_embed_rows(g, table, (loom_tensor){ prompt, LOOM_U32, 0, 1, cfg->max_seq }, x, NULL));
    for (uint32_t l = 0; l < cfg->n_layers && c.rc == LOOM_OK; l++)
        x = layer_rows(&c, l, x);
    loom_tensor logits = loom_vec(logits_buf, cfg->vocab);
    loom_tensor out = weight_mat(&c, m->gbuf[GB_OUT], "out", LOOM_LLAMA_OUT, 0);
    if (m->verify) {
        loom_tensor xn = rows_named(&c, "final.in", cfg->dim), lr = rows_named(&c, "logits_rows", cfg->vocab);
        uint32_t rt = ext(&c, m->gbuf[GB_ROW_TOKENS], "row_tokens", LOOM_USAGE_OUTPUT);
        OP(&c, loom_op_rms_norm_mul_rows(g, x, norm_weight(&c, m->gbuf[GB_FINAL_NORM], "final_norm"), xn, cfg->eps,
                                         NULL));
        OP(&c, loom_op_matmul(g, out, xn, lr, NULL));
        OP(&c, loom_op_argmax_rows(g, lr, (loom_tensor){ rt, LOOM_U32, 0, 1, T }, NULL));
        OP(&c, loom_op_row_pick(g, lr, logits, NULL));
    } else {
        loom_tensor last = scratch_named(&c, "last", cfg->dim);
        OP(&c, loom_op_row_pick(g, x, last, NULL));
        loom_tensor xw = norm(&c, last, m->gbuf[GB_FINAL_NORM], "final_norm", "final");
        OP(&c, loom_op_matvec(g, out, xw, logits, NULL));
    }
    loom_tensor am = { argmax, LOOM_U32, 0, 1, 1 };
    OP(&c, loom_op_argmax(g, logits, am, NULL));
    m->rows_t = 0;
    if (c.rc == LOOM_OK)
        c.rc = add_logs(m, g, 0);
    return c.rc;
}

/* The bucket of a step over rows tokens: the smallest power of two, at
 * least 2, that holds them. */
static uint32_t rows_bucket(uint32_t rows)
{
    uint32_t t = 2;
    while (t < rows)
        t *= 2;
    return t;
}

loom_result loom_llama_capture_rows(loom_llama *m, loom_graph *g, uint32_t rows)
{
    if (!m || !g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama capture_rows: model and graph are required");
    if (rows < 2 || rows > LOOM_LLAMA_MAX_ROWS)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama capture_rows: rows %u is not in [2, %u]", rows,
                         LOOM_LLAMA_MAX_ROWS);
    return capture_rows(m, g, rows_bucket(rows));
}

loom_result loom_llama_capture(loom_llama *m, loom_graph *g)
{
    if (!m || !g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama capture: model and graph are required");
    return capture_ops(m, g, false);
}

/* The model's ops; logs_first: the step logs (back 1) before them, once the
 * buffers they copy are declared. */
static loom_result capture_ops(loom_llama *m, loom_graph *g, bool logs_first)
{
    loom_graph_reset(g);
    const loom_llama_config *cfg = &m->cfg;
    cap c = { .g = g, .m = m, .rc = LOOM_OK };

    /* The argmax buffer is declared first so chain mode can read it. */
    uint32_t argmax = ext(&c, m->gbuf[GB_ARGMAX], "argmax", LOOM_USAGE_OUTPUT);
    uint32_t logits_buf = logs_first ? ext(&c, m->gbuf[GB_LOGITS], "logits", LOOM_USAGE_OUTPUT) : LOOM_NONE;
    if (logs_first && c.rc == LOOM_OK)
        c.rc = add_logs(m, g, 1);
    uint32_t token_buf = argmax, token_index = 0;
    if (!m->chain || m->feeding) {
        OP(&c, loom_graph_params(g, &token_buf));
        token_index = 1;   /* loom_step_params.token */
    }
    loom_tensor table = weight_mat(&c, m->gbuf[GB_EMBED], "embed", LOOM_LLAMA_EMBED, 0);
    loom_tensor x = scratch_named(&c, "embed.out", cfg->dim);
    OP(&c, loom_op_embed(g, table, token_buf, token_index, x, NULL));
    for (uint32_t l = 0; l < cfg->n_layers && c.rc == LOOM_OK; l++)
        x = layer(&c, l, x);
    loom_tensor xw = norm(&c, x, m->gbuf[GB_FINAL_NORM], "final_norm", "final");
    if (!logs_first)
        logits_buf = ext(&c, m->gbuf[GB_LOGITS], "logits", LOOM_USAGE_OUTPUT);
    loom_tensor logits = loom_vec(logits_buf, cfg->vocab);
    OP(&c, loom_op_matvec(g, weight_mat(&c, m->gbuf[GB_OUT], "out", LOOM_LLAMA_OUT, 0), xw, logits, NULL));
    loom_tensor am = { argmax, LOOM_U32, 0, 1, 1 };
    OP(&c, loom_op_argmax(g, logits, am, NULL));
    return c.rc;
}

/* ---- stepping ----------------------------------------------------------- */

/* Makes plan the model's current one, with its program: the kept program
 * of that plan when the model used it before, else a new one. The plan
 * switched away from is kept (the least recently used kept one makes
 * room). Takes the caller's reference to plan. */
static loom_result use_plan(loom_llama *m, loom_plan *plan)
{
    if (plan == m->plan && m->program) {
        loom_plan_release(plan);
        return LOOM_OK;
    }
    int found = -1, room = 0;
    for (int i = 0; i < LLAMA_KEPT; i++) {
        if (m->kept[i].plan == plan && m->kept[i].program)
            found = i;
        if (m->kept[i].used < m->kept[room].used)
            room = i;
    }
    loom_rt_program *prog = NULL;
    if (found >= 0) {
        prog = m->kept[found].program;
        loom_plan_release(m->kept[found].plan);   /* the caller's reference stands for it */
        memset(&m->kept[found], 0, sizeof m->kept[found]);
        room = found;
    } else {
        loom_result rc = loom_rt_program_create(m->rt, loom_plan_graph(plan), &prog);
        if (rc) {
            loom_plan_release(plan);
            return rc;
        }
    }
    if (m->plan && m->program) {
        loom_rt_program_release(m->kept[room].program);
        loom_plan_release(m->kept[room].plan);
        m->kept[room].plan = m->plan;
        m->kept[room].program = m->program;
        m->kept[room].used = ++m->uses;
    } else {
        loom_rt_program_release(m->program);
        loom_plan_release(m->plan);
    }
    m->program = prog;
    m->plan = plan;
    return LOOM_OK;
}

/* The plan for this step's graph; a new plan (a cache miss, or an eviction)
 * gets a new program, an unchanged one keeps its recorded command buffers. */
static loom_result prepare(loom_llama *m)
{
    loom_plan *plan = NULL;
    bool hit = false;
    /* For the device, as loom_rt_compile does: a matrix or table larger
     * than one binding is split into row blocks, and so on. */
    loom_compile_options o = m->opts;
    loom_rt_device_options(m->rt, &o);
    uint64_t t0 = loom_rt_tracing(m->rt) ? loom_rt_trace_clock() : 0;
    loom_result rc = loom_cache_compile(m->cache, m->graph, &o, &plan, &hit);
    if (t0)
        loom_rt_trace_span(m->rt, "compile", t0, 0, "cache", rc ? "failed" : hit ? "hit" : "miss");
    if (rc)
        return rc;
    if (hit)
        m->hits++;
    else
        m->misses++;
    return use_plan(m, plan);
}

/* The step just captured into m->graph: its plan and program, a replay
 * with params (and the model's step count), and its runtime step id in
 * the ring. */
static loom_result replay_step(loom_llama *m, loom_step_params *params, uint32_t *out_index)
{
    loom_result rc = prepare(m);
    if (rc)
        return rc;
    params->step = m->step;
    uint64_t id = 0;
    if ((rc = loom_rt_replay(m->rt, m->program, params, &id)))
        return rc;
    m->ids[m->step % LOOM_LLAMA_RING] = id;
    if (out_index)
        *out_index = m->step;
    m->step++;
    return LOOM_OK;
}

/* A fed step's graph reads the token from the step parameters, so it is a
 * plan of its own: a prompt costs one more compile and program, once. */
static loom_result submit(loom_llama *m, uint32_t token, uint32_t pos, bool feed, uint32_t *out_index)
{
    if (!m)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama submit: model is NULL");
    if (!m->rt)
        return loom_fail(LOOM_UNSUPPORTED, "llama submit: a dry model has no device");
    if (pos >= m->cfg.max_seq)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama submit: pos %u beyond max_seq %u", pos, m->cfg.max_seq);
    if (token >= m->cfg.vocab)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama submit: token %u beyond vocab %u", token, m->cfg.vocab);
    loom_result rc;
    if (m->chain && !feed && m->step == 0 &&
        (rc = loom_rt_buffer_write(m->rt, m->gbuf[GB_ARGMAX], 0, &token, sizeof token)))
        return rc;
    /* The trace shows the host's share of a step: capture, then compile. */
    uint64_t t0 = loom_rt_tracing(m->rt) ? loom_rt_trace_clock() : 0;
    m->feeding = feed;
    rc = loom_llama_capture_step(m, m->graph);
    m->feeding = false;
    if (rc)
        return rc;
    if (t0)
        loom_rt_trace_span(m->rt, "capture", t0, 0, NULL, NULL);
    return replay_step(m, &(loom_step_params){ .pos = pos, .token = token, .kv_len = pos + 1, .rows = 1 },
                       out_index);
}

loom_result loom_llama_submit(loom_llama *m, uint32_t token, uint32_t pos, uint32_t *out_index)
{
    return submit(m, token, pos, false, out_index);
}

loom_result loom_llama_feed(loom_llama *m, uint32_t token, uint32_t pos, uint32_t *out_index)
{
    return submit(m, token, pos, true, out_index);
}

loom_result loom_llama_set_prompt(loom_llama *m, const uint32_t *ids, uint32_t n, uint32_t pos)
{
    if (!m || (!ids && n))
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama set_prompt: model or ids NULL");
    const loom_llama_config *c = &m->cfg;
    if (pos > c->max_seq || n > c->max_seq - pos)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama set_prompt: positions [%u, %u) beyond max_seq %u", pos,
                         pos + n, c->max_seq);
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] >= c->vocab)
            return loom_fail(LOOM_INVALID_ARGUMENT, "llama set_prompt: id %u at position %u is not below vocab %u",
                             ids[i], pos + i, c->vocab);
    /* Only what changed goes up: a write waits for the steps reading the
     * buffer, and a benchmark sets the same prompt again and again. */
    uint32_t lo = 0, hi = n;
    while (lo < n && m->prompt[pos + lo] == ids[lo])
        lo++;
    while (hi > lo && m->prompt[pos + hi - 1] == ids[hi - 1])
        hi--;
    if (lo == hi)
        return LOOM_OK;
    memcpy(m->prompt + pos + lo, ids + lo, (size_t)(hi - lo) * sizeof *ids);
    if (!m->rt)
        return LOOM_OK;
    return loom_rt_buffer_write(m->rt, m->gbuf[GB_PROMPT], (uint64_t)(pos + lo) * 4, ids + lo,
                                (uint64_t)(hi - lo) * 4);
}

static loom_result submit_rows(loom_llama *m, uint32_t pos, uint32_t rows, bool verify, uint32_t *out_index)
{
    if (!m)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama submit_rows: model is NULL");
    if (!m->rt)
        return loom_fail(LOOM_UNSUPPORTED, "llama submit_rows: a dry model has no device");
    if (rows == 0 || rows > LOOM_LLAMA_MAX_ROWS)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama submit_rows: rows %u is not in [1, %u]", rows,
                         LOOM_LLAMA_MAX_ROWS);
    if (pos >= m->cfg.max_seq || rows > m->cfg.max_seq - pos)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama submit_rows: rows %u at pos %u: the KV cache holds %u "
                         "positions (max_seq), %u left", rows, pos, m->cfg.max_seq, m->cfg.max_seq - pos);
    if (rows == 1 && !verify)   /* the decode step is the bucket of one */
        return submit(m, m->prompt[pos], pos, true, out_index);
    uint64_t t0 = loom_rt_tracing(m->rt) ? loom_rt_trace_clock() : 0;
    m->verify = verify;
    loom_result rc = capture_rows(m, m->graph, rows_bucket(rows));
    m->verify = false;
    if (rc)
        return rc;
    if (t0)
        loom_rt_trace_span(m->rt, "capture", t0, 0, NULL, NULL);
    return replay_step(m, &(loom_step_params){ .pos = pos, .kv_len = pos + rows, .rows = rows }, out_index);
}

loom_result loom_llama_submit_rows(loom_llama *m, uint32_t pos, uint32_t rows, uint32_t *out_index)
{
    return submit_rows(m, pos, rows, false, out_index);
}

loom_result loom_llama_submit_verify(loom_llama *m, uint32_t pos, uint32_t rows, uint32_t *out_index)
{
    return submit_rows(m, pos, rows, true, out_index);
}

loom_result loom_llama_read_row_tokens(loom_llama *m, uint32_t *tokens, uint32_t rows)
{
    if (!m || !m->rt || !tokens || rows == 0 || rows > LOOM_LLAMA_MAX_ROWS)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama read_row_tokens: NULL or dry model, or rows %u not in "
                         "[1, %u]", rows, LOOM_LLAMA_MAX_ROWS);
    return loom_rt_buffer_read(m->rt, m->gbuf[GB_ROW_TOKENS], 0, tokens, (uint64_t)rows * 4);
}

loom_result loom_llama_read_kv(loom_llama *m, uint32_t layer, uint32_t pos, uint32_t rows, float *k, float *v)
{
    if (!m || !m->rt || (!k && !v))
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama read_kv: NULL or dry model, or nothing to read into");
    const loom_llama_config *c = &m->cfg;
    if (layer >= c->n_layers || pos > c->max_seq || rows > c->max_seq - pos)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama read_kv: layer %u rows [%u, %u) (layers %u, max_seq %u)",
                         layer, pos, pos + rows, c->n_layers, c->max_seq);
    uint64_t n = (uint64_t)rows * c->n_kv_heads * c->head_dim, es = loom_dtype_size(c->kvtype);
    uint64_t off = (uint64_t)pos * c->n_kv_heads * c->head_dim * es;
    loom_rt_buffer **b = &m->lbuf[(size_t)layer * LB_COUNT];
    float *dst[2] = { k, v };
    loom_rt_buffer *src[2] = { b[LB_KC], b[LB_VC] };
    uint16_t *half = es == 2 ? malloc(n * 2) : NULL;
    if (es == 2 && !half)
        return loom_fail(LOOM_OUT_OF_MEMORY, "llama read_kv");
    loom_result rc = LOOM_OK;
    for (int i = 0; i < 2 && !rc; i++) {
        if (!dst[i])
            continue;
        rc = loom_rt_buffer_read(m->rt, src[i], off, half ? (void *)half : (void *)dst[i], n * es);
        for (uint64_t j = 0; half && !rc && j < n; j++)
            dst[i][j] = loom_f16_to_f32(half[j]);
    }
    free(half);
    return rc;
}

loom_result loom_llama_collect(loom_llama *m, uint32_t index, uint32_t *token, float *logits)
{
    if (!m || !m->rt)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama collect: NULL or dry model");
    if (index >= m->step)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama collect: step %u was not submitted (%u so far)", index,
                         m->step);
    if (m->step - index > LOOM_LLAMA_RING)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama collect: step %u is more than %u steps behind the newest "
                         "(%u); its ring slot was reused", index, LOOM_LLAMA_RING, m->step - 1);
    if (logits && !m->keep_logits && index + 1 != m->step)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama collect: the logits of an older step need keep_logits");
    uint32_t slot = index % LOOM_LLAMA_RING;
    uint64_t id = m->ids[slot], n = (uint64_t)m->cfg.vocab * 4;
    loom_result rc = LOOM_OK;
    /* Early logs put a step in its slot when the next step starts: the
     * newest step is read where it wrote, an older one once the step after
     * it is done (the slot is the same, the writer one step later). */
    if (m->early_log && index + 1 == m->step) {
        if (token)
            rc = loom_rt_buffer_read_behind(m->rt, m->gbuf[GB_ARGMAX], id, 0, token, 4);
        if (!rc && logits)
            rc = loom_rt_buffer_read_behind(m->rt, m->gbuf[GB_LOGITS], id, 0, logits, n);
        return rc;
    }
    if (m->early_log)
        id = m->ids[(index + 1) % LOOM_LLAMA_RING];
    if (token)
        rc = loom_rt_buffer_read_behind(m->rt, m->gbuf[GB_TOKENS], id, (uint64_t)slot * 4, token, 4);
    if (!rc && logits)
        rc = m->keep_logits ? loom_rt_buffer_read_behind(m->rt, m->gbuf[GB_LOGITS_LOG], id, slot * n, logits, n)
                            : loom_rt_buffer_read(m->rt, m->gbuf[GB_LOGITS], 0, logits, n);
    return rc;
}

loom_result loom_llama_step(loom_llama *m, uint32_t token, uint32_t pos, float *logits, uint32_t *argmax)
{
    uint32_t index = 0;
    loom_result rc = loom_llama_submit(m, token, pos, &index);
    if (rc)
        return rc;
    /* Wait for this step even when nothing is read, as callers expect. */
    if ((rc = loom_rt_wait(m->rt, m->ids[index % LOOM_LLAMA_RING])))
        return rc;
    if (logits &&
        (rc = loom_rt_buffer_read(m->rt, m->gbuf[GB_LOGITS], 0, logits, (uint64_t)m->cfg.vocab * sizeof(float))))
        return rc;
    if (argmax && (rc = loom_rt_buffer_read(m->rt, m->gbuf[GB_ARGMAX], 0, argmax, sizeof *argmax)))
        return rc;
    return LOOM_OK;
}

loom_result loom_llama_set_compile(loom_llama *m, const loom_compile_options *opts)
{
    if (!m)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama set_compile: model is NULL");
    m->opts = opts ? *opts : (loom_compile_options){ 0 };
    /* Drop the plans so the next step compiles with the new options; a
     * program lives on until its submissions complete. */
    drop_plans(m);
    return LOOM_OK;
}

uint32_t loom_llama_steps(const loom_llama *m) { return m ? m->step : 0; }
uint64_t loom_llama_step_id(const loom_llama *m, uint32_t index)
{
    return m && index < m->step && m->step - index <= LOOM_LLAMA_RING ? m->ids[index % LOOM_LLAMA_RING] : 0;
}

const loom_llama_config *loom_llama_get_config(const loom_llama *m) { return m ? &m->cfg : NULL; }
const loom_plan *loom_llama_plan(const loom_llama *m) { return m ? m->plan : NULL; }
loom_rt_program *loom_llama_program(const loom_llama *m) { return m ? m->program : NULL; }

void loom_llama_cache_counts(const loom_llama *m, uint64_t *hits, uint64_t *misses)
{
    if (hits)
        *hits = m ? m->hits : 0;
    if (misses)
        *misses = m ? m->misses : 0;
}
