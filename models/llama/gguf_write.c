/* The GGUF writer (gguf.h): keys and tensors kept in memory in the order
 * they were added, then laid out in one pass,
 *
 *   "GGUF" u32 3, u64 tensor count, u64 metadata count, metadata, tensor
 *   infos, padding to the alignment, tensor data (each tensor aligned)
 *
 * and the llama layout on top of it: llama.* keys, a vocabulary, and the
 * tensors under llama.cpp's names with q/k rows in adjacent-pair RoPE order.
 * Values are encoded to their little-endian bytes when they are set, so
 * writing the file is copying. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gguf.h"
#include "llama.h"

typedef struct wkv {
    char *key;
    uint32_t type;
    uint8_t *value;        /* encoded, after the type */
    size_t len;
} wkv;

typedef struct wtensor {
    char *name;
    uint32_t type, n_dims;
    uint64_t dims[LOOM_GGUF_MAX_DIMS];
    uint8_t *data;
    size_t bytes;
} wtensor;

struct loom_gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    uint64_t alignment;
};

/* ---- encoding ------------------------------------------------------------ */

static void le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t f32_bits(float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    return b;
}

/* ---- the writer ---------------------------------------------------------- */

loom_result loom_gguf_writer_create(loom_gguf_writer **out)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf writer: out is NULL");
    *out = calloc(1, sizeof **out);
    if (!*out)
        return loom_fail(LOOM_OUT_OF_MEMORY, "gguf writer");
    (*out)->alignment = LOOM_GGUF_DEFAULT_ALIGNMENT;
    return LOOM_OK;
}

void loom_gguf_writer_destroy(loom_gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].value);
    }
    for (size_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
        free(w->t[i].data);
    }
    free(w->kv);
    free(w->t);
    free(w);
}

static bool grow(void **p, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return true;
    size_t c = *cap ? 2 * *cap : 16;
    void *q = realloc(*p, c * size);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

static wkv *find_kv(const loom_gguf_writer *w, const char *key)
{
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key))
            return &w->kv[i];
    return NULL;
}

static wtensor *find_tensor(const loom_gguf_writer *w, const char *name)
{
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name))
            return &w->t[i];
    return NULL;
}

/* Takes value (malloc'ed, len bytes) whatever happens. */
static loom_result set_kv(loom_gguf_writer *w, const char *key, uint32_t type, uint8_t *value, size_t len)
{
    loom_result rc = LOOM_OK;
    size_t klen = key ? strlen(key) : 0;
    if (!w || klen == 0 || klen > LOOM_GGUF_MAX_KEY)
        rc = loom_fail(LOOM_INVALID_ARGUMENT, "gguf writer: a key must have 1 to %d bytes", LOOM_GGUF_MAX_KEY);
    else if (!value)
        rc = loom_fail(LOOM_OUT_OF_MEMORY, "gguf writer: value of %s", key);
    uint64_t align = 0;
    if (!rc && !strcmp(key, "general.alignment")) {
        align = type == LOOM_GGUF_UINT32 ? value[0] | (uint32_t)value[1] << 8 | (uint32_t)value[2] << 16 |
                                               (uint32_t)value[3] << 24
                                         : 0;
        if (align == 0 || (align & (align - 1)))
            rc = loom_fail(LOOM_INVALID_ARGUMENT, "gguf writer: general.alignment must be a uint32 power of two");
    }
    wkv *kv = rc ? NULL : find_kv(w, key);
    if (!rc && !kv) {
        char *k = grow((void **)&w->kv, &w->cap_kv, w->n_kv, sizeof *w->kv) ? malloc(klen + 1) : NULL;
        if (!k)
            rc = loom_fail(LOOM_OUT_OF_MEMORY, "gguf writer: key %s", key);
        else {
            memcpy(k, key, klen + 1);
            kv = &w->kv[w->n_kv++];
            *kv = (wkv){ .key = k };
        }
    }
    if (rc) {
        free(value);
        return rc;
    }
    free(kv->value);
    kv->type = type;
    kv->value = value;
    kv->len = len;
    if (align)
        w->alignment = align;
    return LOOM_OK;
}

loom_result loom_gguf_writer_set_u32(loom_gguf_writer *w, const char *key, uint32_t v)
{
    uint8_t *p = malloc(4);
    if (p)
        le(p, v, 4);
    return set_kv(w, key, LOOM_GGUF_UINT32, p, 4);
}

loom_result loom_gguf_writer_set_f32(loom_gguf_writer *w, const char *key, float v)
{
    uint8_t *p = malloc(4);
    if (p)
        le(p, f32_bits(v), 4);
    return set_kv(w, key, LOOM_GGUF_FLOAT32, p, 4);
}

/* A string's encoding: u64 length, then the bytes. */
static size_t put_str(uint8_t *p, const char *s)
{
    size_t n = strlen(s);
    le(p, n, 8);
    memcpy(p + 8, s, n);
    return 8 + n;
}

loom_result loom_gguf_writer_set_str(loom_gguf_writer *w, const char *key, const char *v)
{
    if (!v)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf writer: %s: string is NULL", key ? key : "(null)");
    uint8_t *p = malloc(8 + strlen(v));
    size_t len = p ? put_str(p, v) : 0;
    return set_kv(w, key, LOOM_GGUF_STRING, p, len);
}

loom_result loom_gguf_writer_set_strs(loom_gguf_writer *w, const char *key, const char *const *v, uint64_t n)
{
    size_t len = 12;
    for (uint64_t i = 0; i < n; i++) {
        if (!v[i])
            return loom_fail(LOOM_INVALID_ARGUMENT, "gguf writer: %s: string %llu is NULL", key ? key : "(null)",
                             (unsigned long long)i);
        len += 8 + strlen(v[i]);
    }
    uint8_t *p = malloc(len);
    if (p) {
        le(p, LOOM_GGUF_STRING, 4);
        le(p + 4, n, 8);
        for (size_t i = 0, at = 12; i < n; i++)
            at += put_str(p + at, v[i]);
    }
    return set_kv(w, key, LOOM_GGUF_ARRAY, p, len);
}

loom_result loom_gguf_writer_set_array(loom_gguf_writer *w, const char *key, loom_gguf_type elem, const void *elems,
                                       uint64_t n)
{
    size_t eb = loom_gguf_value_bytes(elem);
    if (eb == 0 || (n && !elems) || n > (SIZE_MAX - 12) / eb)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf writer: %s: an array needs a fixed-size element type and its "
                                                "elements", key ? key : "(null)");
    uint8_t *p = malloc(12 + n * eb);
    if (p) {
        le(p, elem, 4);
        le(p + 4, n, 8);
        if (n)
            memcpy(p + 12, elems, n * eb);
    }
    return set_kv(w, key, LOOM_GGUF_ARRAY, p, 12 + n * eb);
}

loom_result loom_gguf_writer_remove_key(loom_gguf_writer *w, const char *key)
{
    wkv *kv = w && key ? find_kv(w, key) : NULL;
    if (!kv)
        return loom_fail(LOOM_NOT_FOUND, "gguf writer: no key %s", key ? key : "(null)");
    if (!strcmp(key, "general.alignment"))
        w->alignment = LOOM_GGUF_DEFAULT_ALIGNMENT;
    free(kv->key);
    free(kv->value);
    memmove(kv, kv + 1, (size_t)(w->kv + w->n_kv - (kv + 1)) * sizeof *kv);
    w->n_kv--;
    return LOOM_OK;
}

/* Bytes of a tensor, 0 when the shape or type is not one to write (the
 * reader's rule: a type it takes, rows of whole blocks) or past size_t. */
static size_t tensor_bytes(uint32_t type, uint32_t n_dims, const uint64_t *dims)
{
    uint64_t n = loom_gguf_tensor_bytes(type, n_dims, dims);
    return n <= SIZE_MAX ? (size_t)n : 0;
}

loom_result loom_gguf_writer_add_tensor(loom_gguf_writer *w, const char *name, loom_gguf_tensor_type type,
                                        uint32_t n_dims, const uint64_t *dims, const void *data, void **out_data)
{
    if (out_data)
        *out_data = NULL;
    size_t nlen = name ? strlen(name) : 0, bytes = tensor_bytes(type, n_dims, dims);
    if (!w || nlen == 0 || nlen > LOOM_GGUF_MAX_NAME)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf writer: a tensor name must have 1 to %d bytes",
                         LOOM_GGUF_MAX_NAME);
    if (find_tensor(w, name))
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf writer: tensor %s added twice", name);
    if (bytes == 0)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf writer: tensor %s: type %u with %u dims is not one to write",
                         name, (unsigned)type, n_dims);
    if (!grow((void **)&w->t, &w->cap_t, w->n_t, sizeof *w->t))
        return loom_fail(LOOM_OUT_OF_MEMORY, "gguf writer: tensor %s", name);
    wtensor t = { .name = malloc(nlen + 1), .type = type, .n_dims = n_dims, .bytes = bytes };
    t.data = data ? malloc(bytes) : calloc(1, bytes);
    if (!t.name || !t.data) {
        free(t.name);
        free(t.data);
        return loom_fail(LOOM_OUT_OF_MEMORY, "gguf writer: tensor %s (%zu bytes)", name, bytes);
    }
    memcpy(t.name, name, nlen + 1);
    memcpy(t.dims, dims, n_dims * sizeof *dims);
    if (data)
        memcpy(t.data, data, bytes);
    w->t[w->n_t++] = t;
    if (out_data)
        *out_data = t.data;
    return LOOM_OK;
}

loom_result loom_gguf_writer_remove_tensor(loom_gguf_writer *w, const char *name)
{
    wtensor *t = w && name ? find_tensor(w, name) : NULL;
    if (!t)
        return loom_fail(LOOM_NOT_FOUND, "gguf writer: no tensor %s", name ? name : "(null)");
    free(t->name);
    free(t->data);
    memmove(t, t + 1, (size_t)(w->t + w->n_t - (t + 1)) * sizeof *t);
    w->n_t--;
    return LOOM_OK;
}

loom_result loom_gguf_writer_tensor_dims(const loom_gguf_writer *w, const char *name, uint32_t *n_dims,
                                         uint64_t dims[LOOM_GGUF_MAX_DIMS])
{
    const wtensor *t = w && name ? find_tensor(w, name) : NULL;
    if (!t)
        return loom_fail(LOOM_NOT_FOUND, "gguf writer: no tensor %s", name ? name : "(null)");
    *n_dims = t->n_dims;
    memcpy(dims, t->dims, t->n_dims * sizeof *dims);
    return LOOM_OK;
}

/* ---- layout -------------------------------------------------------------- */

/* Where the bytes go: a file, or a buffer sized beforehand. */
typedef struct sink {
    FILE *f;
    uint8_t *p;
    size_t at;
    bool failed;
} sink;

static void out(sink *s, const void *d, size_t n)
{
    if (s->f)
        s->failed |= n && fwrite(d, 1, n, s->f) != n;
    else if (n)
        memcpy(s->p + s->at, d, n);
    s->at += n;
}

static void out_le(sink *s, uint64_t v, int n)
{
    uint8_t b[8];
    le(b, v, n);
    out(s, b, (size_t)n);
}

static void out_pad(sink *s, uint64_t align)
{
    static const uint8_t zeros[256];
    size_t n = (size_t)((align - s->at % align) % align);
    for (size_t k; n; n -= k) {
        k = n < sizeof zeros ? n : sizeof zeros;
        out(s, zeros, k);
    }
}

static uint64_t padded(uint64_t at, uint64_t align) { return (at + align - 1) / align * align; }

static size_t header_bytes(const loom_gguf_writer *w)
{
    size_t n = 24;
    for (size_t i = 0; i < w->n_kv; i++)
        n += 8 + strlen(w->kv[i].key) + 4 + w->kv[i].len;
    for (size_t i = 0; i < w->n_t; i++)
        n += 8 + strlen(w->t[i].name) + 4 + 8 * (size_t)w->t[i].n_dims + 4 + 8;
    return n;
}

static void emit(const loom_gguf_writer *w, sink *s)
{
    out(s, "GGUF", 4);
    out_le(s, 3, 4);
    out_le(s, w->n_t, 8);
    out_le(s, w->n_kv, 8);
    for (size_t i = 0; i < w->n_kv; i++) {
        out_le(s, strlen(w->kv[i].key), 8);
        out(s, w->kv[i].key, strlen(w->kv[i].key));
        out_le(s, w->kv[i].type, 4);
        out(s, w->kv[i].value, w->kv[i].len);
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        offset = padded(offset, w->alignment);
        out_le(s, strlen(t->name), 8);
        out(s, t->name, strlen(t->name));
        out_le(s, t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++)
            out_le(s, t->dims[d], 8);
        out_le(s, t->type, 4);
        out_le(s, offset, 8);
        offset += t->bytes;
    }
    /* The data section starts aligned, so aligning file positions aligns
     * the offsets above. */
    for (size_t i = 0; i < w->n_t; i++) {
        out_pad(s, w->alignment);
        out(s, w->t[i].data, w->t[i].bytes);
    }
}

loom_result loom_gguf_writer_to_memory(const loom_gguf_writer *w, void **data, size_t *size)
{
    if (data)
        *data = NULL;
    if (size)
        *size = 0;
    if (!w || !data || !size)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf writer: NULL argument");
    size_t n = header_bytes(w) + (size_t)w->n_t * (size_t)w->alignment;
    for (size_t i = 0; i < w->n_t; i++)
        n += w->t[i].bytes;
    sink s = { .p = malloc(n ? n : 1) };
    if (!s.p)
        return loom_fail(LOOM_OUT_OF_MEMORY, "gguf writer: %zu bytes", n);
    emit(w, &s);
    *data = s.p;
    *size = s.at;
    return LOOM_OK;
}

loom_result loom_gguf_writer_to_file(const loom_gguf_writer *w, const char *path)
{
    if (!w || !path)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf writer: NULL argument");
    sink s = { .f = fopen(path, "wb") };
    if (!s.f)
        return loom_fail(LOOM_IO, "gguf writer: cannot create %s: %s", path, strerror(errno));
    setvbuf(s.f, NULL, _IOFBF, 1 << 20);
    emit(w, &s);
    bool closed = fclose(s.f) == 0;
    if (s.failed || !closed)
        return loom_fail(LOOM_IO, "gguf writer: cannot write %s: %s", path, strerror(errno));
    return LOOM_OK;
}
