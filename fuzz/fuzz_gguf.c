/* libFuzzer target for the GGUF reader and, when built with the model
 * library (LOOM_FUZZ_GGUF_LLAMA), the llama loader. Besides "never crash,
 * never leak" it checks the reader's promises: a failure has one of the
 * documented codes and leaves the out-parameter NULL; on success every key
 * and tensor is found again by its name, every getter answers with a
 * documented code, and every tensor lies aligned inside the input with the
 * size its shape and type give, rows of whole blocks (each byte is read, so
 * ASan sees it); a loaded model's matrices have their config's shapes, in
 * their own dtypes, with values unless loaded for shapes only. */
#include <stdlib.h>
#include <string.h>
#include "gguf.h"
#ifdef LOOM_FUZZ_GGUF_LLAMA
#include "llama.h"
#endif

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

static void check_kv(const loom_gguf *g, const loom_gguf_kv *kv)
{
    char *key = malloc(kv->key.len + 1);
    check(key != NULL);
    memcpy(key, kv->key.data, kv->key.len);
    key[kv->key.len] = '\0';
    check(loom_gguf_find_kv(g, key) == kv);
    uint32_t u;
    float f;
    loom_gguf_str s;
    loom_result rc = loom_gguf_get_u32(g, key, &u);
    check(rc == LOOM_OK || rc == LOOM_INVALID_ARGUMENT);
    rc = loom_gguf_get_f32(g, key, &f);
    check(rc == (kv->value.type == LOOM_GGUF_FLOAT32 || kv->value.type == LOOM_GGUF_FLOAT64 ? LOOM_OK
                                                                                          : LOOM_INVALID_ARGUMENT));
    rc = loom_gguf_get_str(g, key, &s);
    check(rc == (kv->value.type == LOOM_GGUF_STRING ? LOOM_OK : LOOM_INVALID_ARGUMENT));
    if (rc == LOOM_OK && s.len) {
        volatile char first = s.data[0], last = s.data[s.len - 1];
        (void)first;
        (void)last;
    }
    free(key);
    const loom_gguf_value *v = &kv->value;
    if (v->type == LOOM_GGUF_ARRAY && v->elem_type == LOOM_GGUF_STRING) {
        loom_gguf_str *items = malloc((size_t)v->count * sizeof *items + 1);
        check(items != NULL);
        check(loom_gguf_array_strings(v, items) == LOOM_OK);
        size_t total = 0;
        for (uint64_t i = 0; i < v->count; i++) {
            check((const uint8_t *)items[i].data >= v->elems);
            total += 8 + items[i].len;
        }
        check(total == v->elems_bytes);
        free(items);
    }
}

static void check_tensor(const loom_gguf *g, const loom_gguf_tensor *t, const uint8_t *data, size_t size)
{
    char name[LOOM_GGUF_MAX_NAME + 1];
    check(t->name.len >= 1 && t->name.len <= LOOM_GGUF_MAX_NAME);
    memcpy(name, t->name.data, t->name.len);
    name[t->name.len] = '\0';
    check(loom_gguf_find_tensor(g, name) == t);
    uint64_t n = 1;
    for (uint32_t d = 0; d < LOOM_GGUF_MAX_DIMS; d++)
        n *= t->dims[d];
    check(n == t->n_elems);
    loom_dtype dt;
    uint64_t row = loom_gguf_tensor_dtype(t->type, &dt) ? loom_dtype_row_bytes(dt, t->dims[0]) : 0;
    if (row)
        check(t->bytes == n / t->dims[0] * row);
    else   /* bf16, the one type taken that is no dtype */
        check(t->type == LOOM_GGUF_TENSOR_BF16 && t->bytes == n * 2);
    const uint8_t *p = t->data;
    check(p >= data && t->bytes <= size && (size_t)(p - data) <= size - t->bytes);
    check((uint64_t)(p - data) == loom_gguf_data_offset(g) + t->offset && t->offset % loom_gguf_alignment(g) == 0);
    volatile uint8_t sum = 0;
    for (uint64_t i = 0; i < t->bytes; i++)
        sum += p[i];
    (void)sum;
}

#ifdef LOOM_FUZZ_GGUF_LLAMA
static void check_model(const uint8_t *data, size_t size)
{
    loom_llama_weights *w = NULL;
    bool shapes_only = size % 2, raw_only = size % 4 == 2;
    loom_result rc = loom_llama_weights_from_gguf_memory(data, size, &(loom_llama_gguf_desc){
                                                             .shapes_only = shapes_only, .raw_only = raw_only }, &w);
    check(rc == LOOM_OK || rc == LOOM_PARSE || rc == LOOM_UNSUPPORTED || rc == LOOM_NOT_FOUND ||
          rc == LOOM_INVALID_ARGUMENT);
    check((rc == LOOM_OK) == (w != NULL));
    if (rc)
        return;
    const loom_llama_config *c = &w->cfg;
    check(loom_llama_config_check(c) == LOOM_OK && c->max_seq <= LOOM_LLAMA_GGUF_DEFAULT_MAX_SEQ &&
          w->no_values == shapes_only);
    for (uint32_t i = 0; i < w->n_tokens; i++)
        check(loom_llama_token_str(w, i) != NULL);
    check(loom_llama_token_str(w, w->n_tokens) == NULL);
    volatile float sum = 0;
    for (int k = 0; k < LOOM_LLAMA_MAT_COUNT; k++) {
        const loom_llama_matrix *mx = loom_llama_weights_matrix(w, (loom_llama_mat)k, c->n_layers - 1);
        uint32_t rows, cols;
        loom_llama_mat_shape(c, (loom_llama_mat)k, &rows, &cols);
        check(mx->rows == rows && mx->cols == cols && loom_llama_matrix_bytes(mx) > 0);
        check(shapes_only ? !mx->f32 && !mx->raw
                          : (mx->type == LOOM_F32) == !mx->raw && !mx->f32 == (raw_only && mx->type != LOOM_F32));
        for (size_t i = 0; mx->f32 && i < (size_t)rows * cols; i++)
            sum += mx->f32[i];
        const uint8_t *raw = mx->raw;
        for (uint64_t i = 0; raw && i < loom_llama_matrix_bytes(mx); i++)
            sum += raw[i];
    }
    (void)sum;
    loom_llama_weights_destroy(w);
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    loom_gguf *g = NULL;
    loom_result rc = loom_gguf_open_memory(data, size, &g);
    check(rc == LOOM_OK || rc == LOOM_PARSE || rc == LOOM_UNSUPPORTED);
    check((rc == LOOM_OK) == (g != NULL));
    if (rc == LOOM_OK) {
        check(loom_gguf_version(g) == 2 || loom_gguf_version(g) == 3);
        check(loom_gguf_data_offset(g) <= size);
        for (uint64_t i = 0; i < loom_gguf_kv_count(g); i++)
            check_kv(g, loom_gguf_kv_at(g, i));
        for (uint64_t i = 0; i < loom_gguf_tensor_count(g); i++)
            check_tensor(g, loom_gguf_tensor_at(g, i), data, size);
        loom_gguf_close(g);
    }
#ifdef LOOM_FUZZ_GGUF_LLAMA
    check_model(data, size);
#endif
    return 0;
}
