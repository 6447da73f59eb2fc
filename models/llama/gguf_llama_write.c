/* Writes the example decoder's weights as a llama-architecture GGUF model
 * (gguf.h): the keys and tensor names llama.cpp reads, a vocabulary, and the
 * q/k rows in the adjacent-pair RoPE order llama.cpp's converter writes,
 * which gguf_llama.c's loader undoes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gguf.h"
#include "llama.h"

/* Row r of the file's q or k is row src_row(r) of the decoder's matrix: in
 * each head, file rows (2i, 2i + 1) are the decoder's (i, i + head_dim/2).
 * The identity for heads 0 (every other matrix). */
static uint32_t src_row(uint32_t r, uint32_t heads, uint32_t head_dim)
{
    if (!heads)
        return r;
    uint32_t h = r / head_dim, k = r % head_dim;
    return h * head_dim + (k % 2) * (head_dim / 2) + k / 2;
}

static void put_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Round to nearest even; NaNs stay NaNs. */
static uint16_t to_bf16(uint32_t b)
{
    if ((b & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((b >> 16) | 0x40);
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1)) >> 16);
}

/* One value of a float type (f32, f16, bf16). */
static void put_value(uint8_t *p, loom_gguf_tensor_type type, float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    if (type == LOOM_GGUF_TENSOR_F32)
        put_le32(p, b);
    else if (type == LOOM_GGUF_TENSOR_F16)
        put_le16(p, loom_f32_to_f16(v));
    else
        put_le16(p, to_bf16(b));
}

/* The tensor type a loom dtype is stored as, byte for byte. */
static loom_gguf_tensor_type type_of(loom_dtype t)
{
#define X(name, code, dtype, str)  \
    if ((int)t == (int)(dtype))    \
        return LOOM_GGUF_TENSOR_##name;
    LOOM_GGUF_TENSOR_TYPES(X)
#undef X
    return LOOM_GGUF_TENSOR_F32;
}

/* Row r of the tensor in type: the matrix's own bytes where it has that
 * dtype and keeps them (f16 bits, blocks), else its f32 values converted
 * (a block type quantized). */
static loom_result put_row(uint8_t *out, const loom_llama_matrix *m, loom_gguf_tensor_type type, size_t row_bytes,
                           uint32_t src, bool copy)
{
    loom_dtype dt;
    if (copy) {
        memcpy(out, (const uint8_t *)m->raw + src * row_bytes, row_bytes);
        return LOOM_OK;
    }
    const float *v = m->f32 + (size_t)src * m->cols;
    if (loom_gguf_tensor_dtype(type, &dt) && loom_dtype_is_block(dt))
        return loom_quantize_row(dt, v, m->cols, out);
    size_t eb = row_bytes / m->cols;
    for (uint32_t c = 0; c < m->cols; c++)
        put_value(out + eb * c, type, v[c]);
    return LOOM_OK;
}

static loom_result put_matrix(loom_gguf_writer *w, const char *name, const loom_llama_matrix *m,
                              const loom_gguf_llama_desc *desc, uint32_t heads)
{
    loom_gguf_tensor_type type = desc->as_stored ? type_of(m->type) : desc->type;
    loom_dtype dt;
    bool copy = m->type != LOOM_F32 && m->raw && loom_gguf_tensor_dtype(type, &dt) && dt == m->type;
    if (!copy && !m->f32)
        return loom_fail(LOOM_UNSUPPORTED, "gguf writer: %s has no f32 values to write as %s", name,
                         loom_gguf_tensor_type_name(type));
    uint64_t row_bytes = loom_gguf_tensor_bytes(type, 1, (const uint64_t[]){ m->cols });
    if (!row_bytes)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf writer: tensor %s: rows of %u are not whole %s blocks", name,
                         m->cols, loom_gguf_tensor_type_name(type));
    uint8_t *d;
    loom_result rc = loom_gguf_writer_add_tensor(w, name, type, 2, (const uint64_t[]){ m->cols, m->rows }, NULL,
                                                 (void **)&d);
    uint32_t head_dim = heads ? m->rows / heads : 0;
    for (uint32_t r = 0; r < m->rows && !rc; r++)
        rc = put_row(d + r * row_bytes, m, type, (size_t)row_bytes, src_row(r, heads, head_dim), copy);
    return rc;
}

static loom_result put_vector(loom_gguf_writer *w, const char *name, const float *v, uint32_t n)
{
    uint8_t *d;
    loom_result rc = loom_gguf_writer_add_tensor(w, name, LOOM_GGUF_TENSOR_F32, 1, (const uint64_t[]){ n }, NULL,
                                                 (void **)&d);
    for (uint32_t i = 0; i < n && !rc; i++)
        put_value(d + 4 * (size_t)i, LOOM_GGUF_TENSOR_F32, v[i]);
    return rc;
}

/* ---- vocabulary ---------------------------------------------------------- */

/* llama.cpp's token types (llama_token_type's values in GGUF files). */
enum { TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_BYTE = 6 };

/* The made-up SentencePiece vocabulary of gguf.h: ids 0-2 the unknown,
 * begin and end tokens, then the 256 byte tokens, then "tok<id>". */
static loom_result put_made_up_vocab(loom_gguf_writer *w, uint32_t vocab)
{
    char(*text)[16] = malloc((size_t)vocab * sizeof *text);
    const char **tokens = malloc((size_t)vocab * sizeof *tokens);
    int32_t *types = malloc((size_t)vocab * sizeof *types);
    loom_result rc = text && tokens && types ? LOOM_OK : loom_fail(LOOM_OUT_OF_MEMORY, "gguf writer: vocabulary");
    static const char *const special[3] = { "<unk>", "<s>", "</s>" };
    for (uint32_t i = 0; i < vocab && !rc; i++) {
        uint8_t b[4];
        if (i < 3)
            snprintf(text[i], sizeof text[i], "%s", special[i]);
        else if (i < 3 + 256)
            snprintf(text[i], sizeof text[i], "<0x%02X>", i - 3);
        else
            snprintf(text[i], sizeof text[i], "tok%u", i);
        tokens[i] = text[i];
        put_le32(b, i == 0 ? TOKEN_UNKNOWN : i < 3 ? TOKEN_CONTROL : i < 3 + 256 ? TOKEN_BYTE : TOKEN_NORMAL);
        memcpy(&types[i], b, 4);
    }
    if (!rc)
        rc = loom_gguf_writer_set_strs(w, "tokenizer.ggml.tokens", tokens, vocab);
    if (!rc)
        rc = loom_gguf_writer_set_array(w, "tokenizer.ggml.token_type", LOOM_GGUF_INT32, types, vocab);
    free(text);
    free(tokens);
    free(types);
    return rc;
}

static loom_result put_vocab(loom_gguf_writer *w, const loom_gguf_llama_desc *d, uint32_t vocab)
{
    if (d->no_vocab)
        return LOOM_OK;
    loom_result rc = loom_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    if (!rc)
        rc = d->tokens ? loom_gguf_writer_set_strs(w, "tokenizer.ggml.tokens", d->tokens, vocab)
                       : put_made_up_vocab(w, vocab);
    return rc;
}

/* ---- the model ----------------------------------------------------------- */

static loom_result put_keys(loom_gguf_writer *w, const loom_llama_config *c, const loom_gguf_llama_desc *d)
{
    const struct { const char *key; uint32_t v; } u32s[] = {
        { "llama.context_length", d->context ? d->context : c->max_seq },
        { "llama.embedding_length", c->dim },
        { "llama.block_count", c->n_layers },
        { "llama.feed_forward_length", c->ffn },
        { "llama.rope.dimension_count", c->head_dim },
        { "llama.attention.head_count", c->n_heads },
        { "llama.attention.head_count_kv", c->n_kv_heads },
    };
    loom_result rc = loom_gguf_writer_set_str(w, "general.architecture", "llama");
    if (!rc)
        rc = loom_gguf_writer_set_str(w, "general.name", d->name ? d->name : "loom");
    for (size_t i = 0; i < sizeof u32s / sizeof u32s[0] && !rc; i++)
        rc = loom_gguf_writer_set_u32(w, u32s[i].key, u32s[i].v);
    if (!rc)
        rc = loom_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", c->eps);
    if (!rc)
        rc = loom_gguf_writer_set_f32(w, "llama.rope.freq_base", c->rope_theta);
    return rc ? rc : put_vocab(w, d, c->vocab);
}

/* In the order llama.cpp's loader lists a block's tensors; vectors have no
 * matrix. */
static loom_result put_layer(loom_gguf_writer *w, const loom_llama_config *c, const loom_llama_layer *L, uint32_t l,
                             const loom_gguf_llama_desc *d)
{
    const struct { const char *part; const float *v; const loom_llama_matrix *m; uint32_t heads; } parts[] = {
        { "attn_norm", L->attn_norm, NULL, 0 }, { "attn_q", NULL, &L->wq, c->n_heads },
        { "attn_k", NULL, &L->wk, c->n_kv_heads }, { "attn_v", NULL, &L->wv, 0 },
        { "attn_output", NULL, &L->wo, 0 },     { "ffn_norm", L->ffn_norm, NULL, 0 },
        { "ffn_gate", NULL, &L->wg, 0 },        { "ffn_up", NULL, &L->wu, 0 },
        { "ffn_down", NULL, &L->wd, 0 },
    };
    loom_result rc = LOOM_OK;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0] && !rc; i++) {
        char name[LOOM_GGUF_MAX_NAME + 1];
        snprintf(name, sizeof name, "blk.%u.%s.weight", l, parts[i].part);
        rc = parts[i].m ? put_matrix(w, name, parts[i].m, d, parts[i].heads)
                        : put_vector(w, name, parts[i].v, c->dim);
    }
    return rc;
}

loom_result loom_gguf_writer_add_llama(loom_gguf_writer *w, const loom_llama_weights *weights,
                                       const loom_gguf_llama_desc *desc)
{
    loom_gguf_llama_desc d = desc ? *desc : (loom_gguf_llama_desc){ 0 };
    if (!w || !weights)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf writer: NULL argument");
    /* 256 is whole blocks of every type taken. */
    if (!d.as_stored && !loom_gguf_tensor_bytes(d.type, 1, (const uint64_t[]){ 256 }))
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf writer: llama matrices are of a type the reader takes (f32, "
                         "f16, bf16, q8_0, q4_0, q4_k, q6_k), not type %u (%s)", (unsigned)d.type,
                         loom_gguf_tensor_type_name(d.type));
    if (weights->no_values)
        return loom_fail(LOOM_UNSUPPORTED, "gguf writer: the weights are shapes only");
    const loom_llama_config *c = &weights->cfg;
    loom_result rc = put_keys(w, c, &d);
    if (!rc)
        rc = put_matrix(w, "token_embd.weight", &weights->embed, &d, 0);
    for (uint32_t l = 0; l < c->n_layers && !rc; l++)
        rc = put_layer(w, c, &weights->layers[l], l, &d);
    if (!rc)
        rc = put_vector(w, "output_norm.weight", weights->final_norm, c->dim);
    if (!rc && !d.tied)
        rc = put_matrix(w, "output.weight", &weights->out, &d, 0);
    return rc;
}

loom_result loom_llama_weights_to_gguf(const loom_llama_weights *weights, const loom_gguf_llama_desc *desc,
                                       const char *path)
{
    loom_gguf_writer *w = NULL;
    loom_result rc = loom_gguf_writer_create(&w);
    if (!rc)
        rc = loom_gguf_writer_add_llama(w, weights, desc);
    if (!rc)
        rc = loom_gguf_writer_to_file(w, path);
    loom_gguf_writer_destroy(w);
    return rc;
}
