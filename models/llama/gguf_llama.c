/* Loads a llama-architecture GGUF model into the example decoder's weights
 * (gguf.h says what is read and how q/k rows are reordered for RoPE). The
 * whole model is checked first (metadata, then every tensor's presence and
 * shape) and only then allocated, so a file that names a huge model but
 * lacks its tensors costs nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gguf.h"
#include "llama.h"

/* ---- metadata ----------------------------------------------------------- */

/* An optional integer key: def when absent, an error when malformed. */
static loom_result opt_u32(const loom_gguf *g, const char *key, uint32_t def, uint32_t *out)
{
    *out = def;
    return loom_gguf_find_kv(g, key) ? loom_gguf_get_u32(g, key, out) : LOOM_OK;
}

static loom_result read_arch(const loom_gguf *g)
{
    loom_gguf_str arch;
    loom_result rc = loom_gguf_get_str(g, "general.architecture", &arch);
    if (rc)
        return rc;
    if (arch.len != 5 || memcmp(arch.data, "llama", 5) != 0)
        return loom_fail(LOOM_UNSUPPORTED, "gguf: general.architecture is '%.*s'; only 'llama' loads",
                         arch.len > 64 ? 64 : (int)arch.len, arch.data);
    return LOOM_OK;
}

/* The embedding's shape gives the vocabulary: [dim, vocab]. */
static loom_result read_vocab_size(const loom_gguf *g, uint32_t dim, uint32_t *vocab)
{
    const loom_gguf_tensor *t = loom_gguf_find_tensor(g, "token_embd.weight");
    if (!t)
        return loom_fail(LOOM_NOT_FOUND, "gguf: tensor 'token_embd.weight' is missing");
    if (t->n_dims != 2 || t->dims[0] != dim || t->dims[1] > UINT32_MAX)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf: tensor 'token_embd.weight' (info at byte %llu) has %u dims "
                                                "[%llu, %llu], expected [%u, vocab]",
                         (unsigned long long)t->info_offset, t->n_dims, (unsigned long long)t->dims[0],
                         (unsigned long long)t->dims[1], dim);
    *vocab = (uint32_t)t->dims[1];
    uint32_t declared;
    loom_result rc = opt_u32(g, "llama.vocab_size", *vocab, &declared);
    if (rc)
        return rc;
    if (declared != *vocab)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf: llama.vocab_size %u differs from token_embd.weight's %u rows",
                         declared, *vocab);
    return LOOM_OK;
}

/* Keys that change what the model computes in ways the decoder does not
 * implement: refused rather than silently ignored. */
static loom_result check_unsupported_keys(const loom_gguf *g)
{
    const loom_gguf_kv *kv = loom_gguf_find_kv(g, "llama.rope.scaling.type");
    if (kv && !(kv->value.type == LOOM_GGUF_STRING && kv->value.str.len == 4 && !memcmp(kv->value.str.data, "none", 4)))
        return loom_fail(LOOM_UNSUPPORTED, "gguf: llama.rope.scaling.type (byte %llu) is not 'none'; RoPE scaling "
                                           "is not implemented", (unsigned long long)kv->offset);
    float factor = 1.0f;
    if (loom_gguf_find_kv(g, "llama.rope.scaling.factor") &&
        (loom_gguf_get_f32(g, "llama.rope.scaling.factor", &factor) || (factor != 0.0f && factor != 1.0f)))
        return loom_fail(LOOM_UNSUPPORTED, "gguf: llama.rope.scaling.factor is not 1; RoPE scaling is not "
                                           "implemented");
    uint32_t experts = 0;
    loom_result rc = opt_u32(g, "llama.expert_count", 0, &experts);
    if (rc)
        return rc;
    if (experts)
        return loom_fail(LOOM_UNSUPPORTED, "gguf: llama.expert_count %u; mixture-of-experts models do not load",
                         experts);
    return LOOM_OK;
}

/* The shape and hyper-parameters. wtype is the embedding's dtype for the
 * config's checks (the 4 GiB a matrix, sized in it: a quantized model's
 * f32-sized LM head may exceed what its blocks do not), and the dtype most
 * matrices have once they are loaded. */
static loom_result read_config(const loom_gguf *g, uint32_t max_seq, loom_llama_config *c)
{
    uint32_t ctx, key_len, val_len, rot;
    loom_result rc;
    *c = (loom_llama_config){ .wtype = LOOM_F32, .rope_theta = 10000.0f };
    if ((rc = read_arch(g)) || (rc = check_unsupported_keys(g)) ||
        (rc = loom_gguf_get_u32(g, "llama.embedding_length", &c->dim)) ||
        (rc = loom_gguf_get_u32(g, "llama.block_count", &c->n_layers)) ||
        (rc = loom_gguf_get_u32(g, "llama.attention.head_count", &c->n_heads)) ||
        (rc = opt_u32(g, "llama.attention.head_count_kv", c->n_heads, &c->n_kv_heads)) ||
        (rc = loom_gguf_get_u32(g, "llama.feed_forward_length", &c->ffn)) ||
        (rc = loom_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &c->eps)) ||
        (rc = loom_gguf_get_u32(g, "llama.context_length", &ctx)))
        return rc;
    if (loom_gguf_find_kv(g, "llama.rope.freq_base") &&
        (rc = loom_gguf_get_f32(g, "llama.rope.freq_base", &c->rope_theta)))
        return rc;
    if (c->n_heads == 0 || c->dim % c->n_heads)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf: llama.embedding_length %u is not a multiple of "
                                                "llama.attention.head_count %u", c->dim, c->n_heads);
    if ((rc = opt_u32(g, "llama.attention.key_length", c->dim / c->n_heads, &key_len)) ||
        (rc = opt_u32(g, "llama.attention.value_length", key_len, &val_len)) ||
        (rc = opt_u32(g, "llama.rope.dimension_count", key_len, &rot)))
        return rc;
    /* The decoder has one head width and rotates all of it. */
    if (val_len != key_len || rot != key_len)
        return loom_fail(LOOM_UNSUPPORTED, "gguf: key_length %u, value_length %u and rope.dimension_count %u "
                                           "must agree", key_len, val_len, rot);
    c->head_dim = key_len;
    if (max_seq > ctx)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf: max_seq %u exceeds the model's context, llama.context_length "
                         "%u", max_seq, ctx);
    c->max_seq = max_seq ? max_seq : ctx < LOOM_LLAMA_GGUF_DEFAULT_MAX_SEQ ? ctx : LOOM_LLAMA_GGUF_DEFAULT_MAX_SEQ;
    if ((rc = read_vocab_size(g, c->dim, &c->vocab)))
        return rc;
    loom_gguf_tensor_dtype(loom_gguf_find_tensor(g, "token_embd.weight")->type, &c->wtype);
    return loom_llama_config_check(c);
}

/* ---- tensors ------------------------------------------------------------ */

enum { T_ATTN_NORM, T_Q, T_K, T_V, T_O, T_FFN_NORM, T_GATE, T_UP, T_DOWN, T_LAYER_COUNT };

static const char *const layer_names[T_LAYER_COUNT] = {
    "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down",
};

/* GGUF shape [cols, rows] of layer tensor i; rows 0 marks a vector. */
static void layer_shape(const loom_llama_config *c, int i, uint32_t *cols, uint32_t *rows)
{
    uint32_t qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    const uint32_t shape[T_LAYER_COUNT][2] = {
        [T_ATTN_NORM] = { c->dim, 0 }, [T_Q] = { c->dim, qd },       [T_K] = { c->dim, kvd },
        [T_V] = { c->dim, kvd },       [T_O] = { qd, c->dim },       [T_FFN_NORM] = { c->dim, 0 },
        [T_GATE] = { c->dim, c->ffn }, [T_UP] = { c->dim, c->ffn }, [T_DOWN] = { c->ffn, c->dim },
    };
    *cols = shape[i][0];
    *rows = shape[i][1];
}

/* The named tensor with exactly that shape (rows 0: a vector of cols). */
static loom_result find(const loom_gguf *g, const char *name, uint32_t cols, uint32_t rows,
                        const loom_gguf_tensor **out)
{
    const loom_gguf_tensor *t = loom_gguf_find_tensor(g, name);
    if (!t)
        return loom_fail(LOOM_NOT_FOUND, "gguf: tensor '%s' is missing", name);
    uint32_t nd = rows ? 2 : 1;
    if (t->n_dims != nd || t->dims[0] != cols || (rows && t->dims[1] != rows)) {
        char want[48];
        if (rows)
            snprintf(want, sizeof want, "[%u, %u]", cols, rows);
        else
            snprintf(want, sizeof want, "[%u]", cols);
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf: tensor '%s' (info at byte %llu) has shape [%llu, %llu, %llu, "
                                                "%llu] of %u dims; expected %s (fastest-varying first)",
                         name, (unsigned long long)t->info_offset, (unsigned long long)t->dims[0],
                         (unsigned long long)t->dims[1], (unsigned long long)t->dims[2],
                         (unsigned long long)t->dims[3], t->n_dims, want);
    }
    *out = t;
    return LOOM_OK;
}

static loom_result find_layer(const loom_gguf *g, const loom_llama_config *c, uint32_t l, int i,
                              const loom_gguf_tensor **out)
{
    char name[LOOM_GGUF_MAX_NAME + 16];
    uint32_t cols, rows;
    snprintf(name, sizeof name, "blk.%u.%s.weight", l, layer_names[i]);
    layer_shape(c, i, &cols, &rows);
    return find(g, name, cols, rows, out);
}

/* output.weight, or token_embd.weight when the output is tied to it. */
static loom_result find_output(const loom_gguf *g, const loom_llama_config *c, const loom_gguf_tensor **out)
{
    const char *name = loom_gguf_find_tensor(g, "output.weight") ? "output.weight" : "token_embd.weight";
    return find(g, name, c->dim, c->vocab, out);
}

/* Whether the loader reads a tensor of this name. */
static bool known_tensor(loom_gguf_str name, uint32_t n_layers)
{
    char s[LOOM_GGUF_MAX_NAME + 1];
    snprintf(s, sizeof s, "%.*s", (int)name.len, name.data);
    if (!strcmp(s, "token_embd.weight") || !strcmp(s, "output_norm.weight") || !strcmp(s, "output.weight"))
        return true;
    if (strncmp(s, "blk.", 4) != 0 || s[4] < '0' || s[4] > '9' || (s[4] == '0' && s[5] != '.'))
        return false;
    char *end;
    unsigned long l = strtoul(s + 4, &end, 10);
    if (l >= n_layers || *end != '.')
        return false;
    for (int i = 0; i < T_LAYER_COUNT; i++) {
        size_t n = strlen(layer_names[i]);
        if (!strncmp(end + 1, layer_names[i], n) && !strcmp(end + 1 + n, ".weight"))
            return true;
    }
    return false;
}

/* Every tensor the model needs, present with its shape, and no other (one
 * the decoder would ignore, say biases or RoPE frequency factors, means the
 * file's model is not the one it would compute); nothing allocated. */
static loom_result check_tensors(const loom_gguf *g, const loom_llama_config *c)
{
    const loom_gguf_tensor *t;
    loom_result rc;
    for (uint64_t i = 0; i < loom_gguf_tensor_count(g); i++) {
        t = loom_gguf_tensor_at(g, i);
        if (!known_tensor(t->name, c->n_layers))
            return loom_fail(LOOM_UNSUPPORTED, "gguf: tensor '%.*s' (info at byte %llu) is not part of a llama "
                                               "model this decoder computes", (int)t->name.len, t->name.data,
                             (unsigned long long)t->info_offset);
    }
    if ((rc = find(g, "token_embd.weight", c->dim, c->vocab, &t)) ||
        (rc = find(g, "output_norm.weight", c->dim, 0, &t)) || (rc = find_output(g, c, &t)))
        return rc;
    for (uint32_t l = 0; l < c->n_layers; l++)
        for (int i = 0; i < T_LAYER_COUNT; i++)
            if ((rc = find_layer(g, c, l, i, &t)))
                return rc;
    return LOOM_OK;
}

static uint32_t le_u32(const uint8_t *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint16_t le_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static float bits_f32(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* n elements of a tensor's data from src as f32: f32 and bf16 (f32's top
 * half) exactly, the rest through their dtype's decoder (f16 exactly, a
 * block type's rows as the kernels decode them). */
static loom_result decode(const loom_gguf_tensor *t, const uint8_t *src, uint64_t n, float *dst)
{
    loom_dtype dt;
    if (t->type == LOOM_GGUF_TENSOR_BF16 || t->type == LOOM_GGUF_TENSOR_F32) {
        for (uint64_t i = 0; i < n; i++)
            dst[i] = t->type == LOOM_GGUF_TENSOR_F32 ? bits_f32(le_u32(src + 4 * i))
                                                     : bits_f32((uint32_t)le_u16(src + 2 * i) << 16);
        return LOOM_OK;
    }
    if (!loom_gguf_tensor_dtype(t->type, &dt))
        return loom_fail(LOOM_UNSUPPORTED, "gguf: tensor '%.*s': type %s", (int)t->name.len, t->name.data,
                         loom_gguf_tensor_type_name(t->type));
    return loom_dequantize_row(dt, src, n, dst);
}

static loom_result load_vector(const loom_gguf_tensor *t, float **out)
{
    if (!(*out = malloc((size_t)t->n_elems * sizeof **out)))
        return loom_fail(LOOM_OUT_OF_MEMORY, "gguf: tensor '%.*s'", (int)t->name.len, t->name.data);
    return decode(t, t->data, t->n_elems, *out);
}

/* Row r of the matrix is row src_row(r) of the tensor: the identity, or for
 * q and k (heads > 0) the RoPE pair layout change described in gguf.h. */
static uint64_t src_row(uint64_t r, uint32_t heads, uint32_t head_dim)
{
    if (!heads)
        return r;
    uint64_t h = r / head_dim, k = r % head_dim, half = head_dim / 2;
    return h * head_dim + (k < half ? 2 * k : 2 * (k - half) + 1);
}

/* The matrix in the tensor's own dtype (bf16: f32), whole rows moved by
 * src_row: raw rows copied as stored (the GPU's little-endian layout), f32
 * decoded from them unless raw_only. values false: the shape and dtype
 * alone. */
static loom_result load_matrix(const loom_gguf_tensor *t, uint32_t heads, uint32_t head_dim, bool values,
                               bool raw_only, loom_llama_matrix *mx)
{
    uint32_t rows = (uint32_t)t->dims[1], cols = (uint32_t)t->dims[0];
    mx->rows = rows;
    mx->cols = cols;
    if (!loom_gguf_tensor_dtype(t->type, &mx->type))
        mx->type = LOOM_F32;
    if (!values)
        return LOOM_OK;
    size_t n = (size_t)t->n_elems, src_bytes = (size_t)(t->bytes / rows);
    size_t raw_bytes = (size_t)loom_dtype_row_bytes(mx->type, cols);
    bool f32 = mx->type == LOOM_F32 || !raw_only;
    mx->f32 = f32 ? malloc(n * sizeof *mx->f32) : NULL;
    mx->raw = mx->type == LOOM_F32 ? NULL : malloc(raw_bytes * rows);
    if ((f32 && !mx->f32) || (mx->type != LOOM_F32 && !mx->raw))
        return loom_fail(LOOM_OUT_OF_MEMORY, "gguf: tensor '%.*s' (%ux%u)", (int)t->name.len, t->name.data, rows,
                         cols);
    loom_result rc = LOOM_OK;
    for (uint32_t r = 0; r < rows && !rc; r++) {
        const uint8_t *src = (const uint8_t *)t->data + src_row(r, heads, head_dim) * src_bytes;
        if (mx->raw) {
            memcpy((uint8_t *)mx->raw + (size_t)r * raw_bytes, src, raw_bytes);
            src = (const uint8_t *)mx->raw + (size_t)r * raw_bytes;
        }
        if (f32)
            rc = decode(t, src, cols, mx->f32 + (size_t)r * cols);
    }
    return rc;
}

static loom_result load_layer(const loom_gguf *g, loom_llama_weights *w, uint32_t l, const loom_llama_gguf_desc *d)
{
    const loom_llama_config *c = &w->cfg;
    loom_llama_layer *L = &w->layers[l];
    loom_llama_matrix *mats[T_LAYER_COUNT] = {
        [T_Q] = &L->wq, [T_K] = &L->wk, [T_V] = &L->wv, [T_O] = &L->wo,
        [T_GATE] = &L->wg, [T_UP] = &L->wu, [T_DOWN] = &L->wd,
    };
    const uint32_t heads[T_LAYER_COUNT] = { [T_Q] = c->n_heads, [T_K] = c->n_kv_heads };
    for (int i = 0; i < T_LAYER_COUNT; i++) {
        const loom_gguf_tensor *t;
        loom_result rc = find_layer(g, c, l, i, &t);
        if (!rc && mats[i])
            rc = load_matrix(t, heads[i], c->head_dim, !d->shapes_only, d->raw_only, mats[i]);
        else if (!rc && !d->shapes_only)
            rc = load_vector(t, i == T_ATTN_NORM ? &L->attn_norm : &L->ffn_norm);
        if (rc)
            return rc;
    }
    return LOOM_OK;
}

/* tokenizer.ggml.tokens, when present, as NUL-terminated copies. */
static loom_result load_tokens(const loom_gguf *g, loom_llama_weights *w)
{
    const loom_gguf_kv *kv = loom_gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (!kv)
        return LOOM_OK;
    const loom_gguf_value *v = &kv->value;
    if (v->type != LOOM_GGUF_ARRAY || v->elem_type != LOOM_GGUF_STRING || v->count > UINT32_MAX)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf: tokenizer.ggml.tokens (byte %llu) is not an array of at "
                                                "most 2^32-1 strings", (unsigned long long)kv->offset);
    /* count <= elems_bytes / 8, and the text is at most elems_bytes. */
    size_t n = (size_t)v->count;
    loom_gguf_str *items = malloc((n + 1) * sizeof *items);
    w->tokens = malloc((n + 1) * sizeof *w->tokens);
    w->token_text = malloc(v->elems_bytes + 1);
    if (!items || !w->tokens || !w->token_text) {
        free(items);
        return loom_fail(LOOM_OUT_OF_MEMORY, "gguf: %zu token strings", n);
    }
    loom_gguf_array_strings(v, items);
    char *p = w->token_text;
    for (size_t i = 0; i < n; i++) {
        memcpy(p, items[i].data, items[i].len);
        p[items[i].len] = '\0';
        w->tokens[i] = p;
        p += items[i].len + 1;
    }
    w->n_tokens = (uint32_t)n;
    free(items);
    return LOOM_OK;
}

static loom_result load(const loom_gguf *g, loom_llama_weights *w, const loom_llama_gguf_desc *d)
{
    const loom_llama_config *c = &w->cfg;
    const loom_gguf_tensor *t;
    bool values = !d->shapes_only;
    loom_result rc;
    if ((rc = find(g, "token_embd.weight", c->dim, c->vocab, &t)) ||
        (rc = load_matrix(t, 0, 0, values, d->raw_only, &w->embed)) || (rc = find_output(g, c, &t)) ||
        (rc = load_matrix(t, 0, 0, values, d->raw_only, &w->out)) ||
        (rc = find(g, "output_norm.weight", c->dim, 0, &t)))
        return rc;
    if (values && (rc = load_vector(t, &w->final_norm)))
        return rc;
    for (uint32_t l = 0; l < c->n_layers; l++)
        if ((rc = load_layer(g, w, l, d)))
            return rc;
    return load_tokens(g, w);
}

/* The dtype most matrices have (the first in dtype order on a tie). */
static loom_dtype common_type(const loom_llama_weights *w)
{
    uint64_t count[LOOM_DTYPE_COUNT] = { 0 };
    for (int k = 0; k < LOOM_LLAMA_MAT_COUNT; k++)
        for (uint32_t l = 0; l < (loom_llama_mat_per_layer((loom_llama_mat)k) ? w->cfg.n_layers : 1); l++)
            count[loom_llama_weights_matrix(w, (loom_llama_mat)k, l)->type]++;
    loom_dtype best = LOOM_F32;
    for (int d = 0; d < (int)LOOM_DTYPE_COUNT; d++)
        if (count[d] > count[best])
            best = (loom_dtype)d;
    return best;
}

/* ---- entry points ------------------------------------------------------- */

loom_result loom_llama_weights_from_gguf_reader(const loom_gguf *g, const loom_llama_gguf_desc *desc,
                                                loom_llama_weights **out)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf llama: out is NULL");
    *out = NULL;
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf llama: reader is NULL");
    loom_llama_gguf_desc d = desc ? *desc : (loom_llama_gguf_desc){ 0 };
    loom_llama_config cfg;
    loom_result rc;
    if ((rc = read_config(g, d.max_seq, &cfg)) || (rc = check_tensors(g, &cfg)))
        return rc;
    loom_llama_weights *w = calloc(1, sizeof *w);
    if (!w || !(w->layers = calloc(cfg.n_layers, sizeof *w->layers))) {
        free(w);
        return loom_fail(LOOM_OUT_OF_MEMORY, "gguf llama: %u layers", cfg.n_layers);
    }
    w->cfg = cfg;
    w->no_values = d.shapes_only;
    if ((rc = load(g, w, &d))) {
        loom_llama_weights_destroy(w);
        return rc;
    }
    w->cfg.wtype = common_type(w);
    *out = w;
    return LOOM_OK;
}

loom_result loom_llama_weights_from_gguf_memory(const void *data, size_t size, const loom_llama_gguf_desc *desc,
                                                loom_llama_weights **out)
{
    if (out)
        *out = NULL;
    loom_gguf *g = NULL;
    loom_result rc = loom_gguf_open_memory(data, size, &g);
    if (rc == LOOM_OK)
        rc = loom_llama_weights_from_gguf_reader(g, desc, out);
    loom_gguf_close(g);
    return rc;
}

loom_result loom_llama_weights_from_gguf(const char *path, const loom_llama_gguf_desc *desc,
                                         loom_llama_weights **out)
{
    if (out)
        *out = NULL;
    loom_gguf *g = NULL;
    loom_result rc = loom_gguf_open_file(path, &g);
    if (rc == LOOM_OK)
        rc = loom_llama_weights_from_gguf_reader(g, desc, out);
    loom_gguf_close(g);
    return rc;
}

const char *loom_llama_token_str(const loom_llama_weights *w, uint32_t id)
{
    return w && w->tokens && id < w->n_tokens ? w->tokens[id] : NULL;
}
