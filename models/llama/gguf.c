/* The strict GGUF reader: one pass over the file at open validates every
 * byte the accessors can later reach (see gguf.h). The layout read here:
 *
 *   "GGUF" u32 version, u64 tensor count, u64 metadata count
 *   metadata: { string key, u32 type, value }*
 *   tensor infos: { string name, u32 n_dims, u64 dims[n_dims], u32 type, u64 offset }*
 *   padding to the alignment, then the tensor data section
 *
 * with strings as u64 length + bytes and arrays as u32 element type + u64
 * count + elements, all little-endian. Positions are size_t offsets checked
 * against the bytes left before every read, so no length from the file can
 * move a pointer past the end or overflow an addition. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "gguf.h"

struct loom_gguf {
    const uint8_t *data;
    size_t size;
    void *map;                       /* non-NULL when opened from a path */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;
    uint64_t n_kv, n_tensors;
    loom_gguf_kv *kv;                /* file order */
    loom_gguf_tensor *tensors;       /* file order */
    const loom_gguf_kv **kv_by_key;  /* sorted for lookups and duplicates */
    const loom_gguf_tensor **t_by_name;
};

/* ---- names -------------------------------------------------------------- */

const char *loom_gguf_type_name(uint32_t type)
{
    switch (type) {
#define X(name, code, bytes, str) \
    case code:                    \
        return str;
        LOOM_GGUF_VALUE_TYPES(X)
#undef X
    }
    return "?";
}

/* ggml's tensor types by code, retired ones included, for naming the ones
 * this reader refuses. */
static const char *const ggml_type_names[] = {
    "f32",     "f16",      "q4_0",     "q4_1",       "q4_2",       "q4_3",       "q5_0",  "q5_1",
    "q8_0",    "q8_1",     "q2_k",     "q3_k",       "q4_k",       "q5_k",       "q6_k",  "q8_k",
    "iq2_xxs", "iq2_xs",   "iq3_xxs",  "iq1_s",      "iq4_nl",     "iq3_s",      "iq2_s", "iq4_xs",
    "i8",      "i16",      "i32",      "i64",        "f64",        "iq1_m",      "bf16",  "q4_0_4_4",
    "q4_0_4_8", "q4_0_8_8", "tq1_0",   "tq2_0",      "iq4_nl_4_4", "iq4_nl_4_8", "iq4_nl_8_8", "mxfp4",
};

const char *loom_gguf_tensor_type_name(uint32_t type)
{
    return type < sizeof ggml_type_names / sizeof ggml_type_names[0] ? ggml_type_names[type] : "?";
}

/* The loom dtype of a type taken, or -1 (bf16); -2 for a type not taken. */
static int tensor_dtype(uint32_t type)
{
    switch (type) {
#define X(name, code, dtype, str) \
    case code:                    \
        return dtype;
        LOOM_GGUF_TENSOR_TYPES(X)
#undef X
    }
    return -2;
}

bool loom_gguf_tensor_dtype(uint32_t type, loom_dtype *out)
{
    int t = tensor_dtype(type);
    if (t < 0)
        return false;
    if (out)
        *out = (loom_dtype)t;
    return true;
}

size_t loom_gguf_value_bytes(uint32_t type)
{
    switch (type) {
#define X(name, code, bytes, str) \
    case code:                    \
        return bytes;
        LOOM_GGUF_VALUE_TYPES(X)
#undef X
    }
    return 0;
}

static bool value_type_known(uint32_t type) { return type <= LOOM_GGUF_FLOAT64; }

/* Elements and bytes a block of a type taken has (1 and 2 for bf16): the
 * dtype table's facts (ir/ops.c), not a copy of them. False for the rest. */
static bool tensor_blocks(uint32_t type, uint32_t *block, uint32_t *bytes)
{
    int t = tensor_dtype(type);
    if (t == -2)
        return false;
    *block = t < 0 ? 1 : loom_dtype_block((loom_dtype)t);
    *bytes = t < 0 ? 2 : loom_dtype_block_bytes((loom_dtype)t);
    return true;
}

uint64_t loom_gguf_tensor_bytes(uint32_t type, uint32_t n_dims, const uint64_t *dims)
{
    uint32_t block, block_bytes;
    if (!tensor_blocks(type, &block, &block_bytes) || n_dims == 0 || n_dims > LOOM_GGUF_MAX_DIMS || !dims ||
        dims[0] % block)
        return 0;
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (dims[d] == 0 || dims[d] > (UINT64_C(1) << 60) / n)
            return 0;
        n *= dims[d];
    }
    return n / block * block_bytes;
}

/* ---- cursor ------------------------------------------------------------- */

typedef struct rd {
    const uint8_t *p;
    size_t size, pos;
} rd;

static loom_result need(const rd *r, uint64_t n, const char *what)
{
    if (n > r->size - r->pos)
        return loom_fail(LOOM_PARSE, "gguf: truncated at byte %zu reading %s (%llu bytes needed, %zu left)",
                         r->pos, what, (unsigned long long)n, r->size - r->pos);
    return LOOM_OK;
}

static uint64_t le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static loom_result rd_u32(rd *r, uint32_t *v, const char *what)
{
    loom_result rc = need(r, 4, what);
    if (rc == LOOM_OK) {
        *v = (uint32_t)le(r->p + r->pos, 4);
        r->pos += 4;
    }
    return rc;
}

static loom_result rd_u64(rd *r, uint64_t *v, const char *what)
{
    loom_result rc = need(r, 8, what);
    if (rc == LOOM_OK) {
        *v = le(r->p + r->pos, 8);
        r->pos += 8;
    }
    return rc;
}

/* A string of at most max bytes (0: no limit beyond the file). */
static loom_result rd_str(rd *r, loom_gguf_str *s, uint64_t max, const char *what)
{
    size_t at = r->pos;
    uint64_t len;
    loom_result rc = rd_u64(r, &len, what);
    if (rc)
        return rc;
    if (max && len > max)
        return loom_fail(LOOM_PARSE, "gguf: %s at byte %zu is %llu bytes long (at most %llu)", what, at,
                         (unsigned long long)len, (unsigned long long)max);
    if ((rc = need(r, len, what)))
        return rc;
    s->data = (const char *)r->p + r->pos;
    s->len = (size_t)len;
    r->pos += (size_t)len;
    return LOOM_OK;
}

/* Keys and tensor names are looked up by C strings: a NUL would hide. */
static loom_result check_name(loom_gguf_str s, size_t at, const char *what)
{
    if (s.len == 0)
        return loom_fail(LOOM_PARSE, "gguf: empty %s at byte %zu", what, at);
    if (memchr(s.data, 0, s.len))
        return loom_fail(LOOM_PARSE, "gguf: %s at byte %zu holds a NUL byte", what, at);
    return LOOM_OK;
}

/* ---- metadata ----------------------------------------------------------- */

/* Validates (and skips) one value of type, nested arrays included; fills v
 * when it is non-NULL. depth bounds the recursion. Every element consumes at
 * least one byte, so the walk is linear in the file size. */
static loom_result read_value(rd *r, uint32_t type, int depth, const loom_gguf_str *key, loom_gguf_value *v)
{
    size_t at = r->pos;
    loom_result rc;
    if (!value_type_known(type))
        return loom_fail(LOOM_PARSE, "gguf: key '%.*s': unknown value type %u before byte %zu", (int)key->len,
                         key->data, type, at);
    size_t n = loom_gguf_value_bytes(type);
    if (n) {
        if ((rc = need(r, n, "a metadata value")))
            return rc;
        uint64_t raw = le(r->p + r->pos, n);
        if (type == LOOM_GGUF_BOOL && raw > 1)
            return loom_fail(LOOM_PARSE, "gguf: key '%.*s': bool value %llu at byte %zu", (int)key->len, key->data,
                             (unsigned long long)raw, at);
        r->pos += n;
        if (v) {
            v->type = (loom_gguf_type)type;
            switch (type) {
            case LOOM_GGUF_INT8: v->i = (int8_t)raw; break;
            case LOOM_GGUF_INT16: v->i = (int16_t)raw; break;
            case LOOM_GGUF_INT32: v->i = (int32_t)raw; break;
            case LOOM_GGUF_INT64: v->i = (int64_t)raw; break;
            case LOOM_GGUF_FLOAT32: {
                uint32_t b = (uint32_t)raw;
                float f;
                memcpy(&f, &b, sizeof f);
                v->f = f;
                break;
            }
            case LOOM_GGUF_FLOAT64: memcpy(&v->f, &raw, sizeof v->f); break;
            default: v->u = raw; break;
            }
        }
        return LOOM_OK;
    }
    if (type == LOOM_GGUF_STRING) {
        loom_gguf_str s;
        if ((rc = rd_str(r, &s, 0, "a string value")))
            return rc;
        if (v) {
            v->type = LOOM_GGUF_STRING;
            v->str = s;
        }
        return LOOM_OK;
    }
    /* ARRAY */
    if (depth >= LOOM_GGUF_MAX_DEPTH)
        return loom_fail(LOOM_PARSE, "gguf: key '%.*s': arrays nested deeper than %d at byte %zu", (int)key->len,
                         key->data, LOOM_GGUF_MAX_DEPTH, at);
    uint32_t et;
    uint64_t count;
    if ((rc = rd_u32(r, &et, "an array element type")) || (rc = rd_u64(r, &count, "an array count")))
        return rc;
    if (!value_type_known(et))
        return loom_fail(LOOM_PARSE, "gguf: key '%.*s': array of unknown type %u at byte %zu", (int)key->len,
                         key->data, et, at);
    size_t first = r->pos;
    size_t eb = loom_gguf_value_bytes(et);
    /* Strings take 8 bytes at least, arrays 12: the count must fit. */
    uint64_t min = eb ? eb : et == LOOM_GGUF_STRING ? 8 : 12;
    if (count > (r->size - r->pos) / min)
        return loom_fail(LOOM_PARSE, "gguf: key '%.*s': array count %llu at byte %zu exceeds the %zu bytes left",
                         (int)key->len, key->data, (unsigned long long)count, at + 4, r->size - r->pos);
    if (eb && et != LOOM_GGUF_BOOL)
        r->pos += (size_t)count * eb;
    else
        for (uint64_t k = 0; k < count; k++)
            if ((rc = read_value(r, et, depth + 1, key, NULL)))
                return rc;
    if (v) {
        v->type = LOOM_GGUF_ARRAY;
        v->elem_type = (loom_gguf_type)et;
        v->count = count;
        v->elems = r->p + first;
        v->elems_bytes = r->pos - first;
    }
    return LOOM_OK;
}

static int str_cmp(loom_gguf_str a, loom_gguf_str b)
{
    int c = memcmp(a.data, b.data, a.len < b.len ? a.len : b.len);
    return c ? c : (a.len > b.len) - (a.len < b.len);
}

static int kv_cmp(const void *a, const void *b)
{
    return str_cmp((*(const loom_gguf_kv *const *)a)->key, (*(const loom_gguf_kv *const *)b)->key);
}

static int tensor_name_cmp(const void *a, const void *b)
{
    return str_cmp((*(const loom_gguf_tensor *const *)a)->name, (*(const loom_gguf_tensor *const *)b)->name);
}

static int tensor_offset_cmp(const void *a, const void *b)
{
    uint64_t x = (*(const loom_gguf_tensor *const *)a)->offset, y = (*(const loom_gguf_tensor *const *)b)->offset;
    return (x > y) - (x < y);
}

static loom_result read_metadata(loom_gguf *g, rd *r)
{
    loom_result rc;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        loom_gguf_kv *kv = &g->kv[i];
        kv->offset = r->pos;
        uint32_t type;
        if ((rc = rd_str(r, &kv->key, LOOM_GGUF_MAX_KEY, "a metadata key")) ||
            (rc = check_name(kv->key, (size_t)kv->offset, "metadata key")) ||
            (rc = rd_u32(r, &type, "a metadata value type")) ||
            (rc = read_value(r, type, 0, &kv->key, &kv->value)))
            return rc;
        g->kv_by_key[i] = kv;
    }
    if (g->n_kv)
        qsort(g->kv_by_key, (size_t)g->n_kv, sizeof *g->kv_by_key, kv_cmp);
    for (uint64_t i = 1; i < g->n_kv; i++)
        if (str_cmp(g->kv_by_key[i - 1]->key, g->kv_by_key[i]->key) == 0)
            return loom_fail(LOOM_PARSE, "gguf: metadata key '%.*s' appears twice (bytes %llu and %llu)",
                             (int)g->kv_by_key[i]->key.len, g->kv_by_key[i]->key.data,
                             (unsigned long long)g->kv_by_key[i - 1]->offset,
                             (unsigned long long)g->kv_by_key[i]->offset);
    g->alignment = LOOM_GGUF_DEFAULT_ALIGNMENT;
    const loom_gguf_kv *a = loom_gguf_find_kv(g, "general.alignment");
    if (a) {
        if (a->value.type != LOOM_GGUF_UINT32 || a->value.u == 0 || (a->value.u & (a->value.u - 1)))
            return loom_fail(LOOM_PARSE, "gguf: general.alignment at byte %llu must be a uint32 power of two",
                             (unsigned long long)a->offset);
        g->alignment = a->value.u;
    }
    return LOOM_OK;
}

/* ---- tensors ------------------------------------------------------------ */

static loom_result read_tensor_info(rd *r, loom_gguf_tensor *t)
{
    t->info_offset = r->pos;
    size_t at = r->pos;
    uint32_t type;
    loom_result rc;
    if ((rc = rd_str(r, &t->name, LOOM_GGUF_MAX_NAME, "a tensor name")) ||
        (rc = check_name(t->name, at, "tensor name")) || (rc = rd_u32(r, &t->n_dims, "a tensor's n_dims")))
        return rc;
    int nl = (int)t->name.len;
    const char *nm = t->name.data;
    if (t->n_dims == 0 || t->n_dims > LOOM_GGUF_MAX_DIMS)
        return loom_fail(LOOM_PARSE, "gguf: tensor '%.*s' (info at byte %zu): n_dims %u not in 1..%d", nl, nm, at,
                         t->n_dims, LOOM_GGUF_MAX_DIMS);
    /* Capping the count at 2^60 keeps bytes (count x 4, or count / 32 x
     * 34, at most) from overflowing; no file holds that many elements
     * anyway. */
    uint64_t n = 1;
    for (uint32_t d = 0; d < LOOM_GGUF_MAX_DIMS; d++) {
        t->dims[d] = 1;
        if (d < t->n_dims && (rc = rd_u64(r, &t->dims[d], "a tensor dimension")))
            return rc;
        if (t->dims[d] == 0 || t->dims[d] > (UINT64_C(1) << 60) / n)
            return loom_fail(LOOM_PARSE, "gguf: tensor '%.*s' (info at byte %zu): dimension %u is %llu (%s)", nl,
                             nm, at, d, (unsigned long long)t->dims[d],
                             t->dims[d] ? "element count overflows" : "zero");
        n *= t->dims[d];
    }
    if ((rc = rd_u32(r, &type, "a tensor type")) || (rc = rd_u64(r, &t->offset, "a tensor offset")))
        return rc;
    uint32_t block, block_bytes;
    if (!tensor_blocks(type, &block, &block_bytes)) {
        const char *tn = loom_gguf_tensor_type_name(type);
        return loom_fail(LOOM_UNSUPPORTED, "gguf: tensor '%.*s' (info at byte %zu): type %u (%s) unsupported; "
                                           "f32, f16, bf16, q8_0, q4_0, q4_k and q6_k are", nl, nm, at, type,
                         tn && strcmp(tn, "?") ? tn : "not a ggml type");
    }
    /* A row (dims[0]) is whole blocks, so the tensor is too. */
    if (t->dims[0] % block)
        return loom_fail(LOOM_PARSE, "gguf: tensor '%.*s' (info at byte %zu): dimension 0 (a row) is %llu, not a "
                                     "whole number of %s blocks of %u", nl, nm, at,
                         (unsigned long long)t->dims[0], loom_gguf_tensor_type_name(type), block);
    t->type = (loom_gguf_tensor_type)type;
    t->n_elems = n;
    t->bytes = n / block * block_bytes;
    return LOOM_OK;
}

/* Places every tensor inside the data section, aligned, none overlapping. */
static loom_result place_tensors(loom_gguf *g, const loom_gguf_tensor **by_offset)
{
    uint64_t avail = g->size - g->data_offset;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        loom_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment)
            return loom_fail(LOOM_PARSE, "gguf: tensor '%.*s' (info at byte %llu): offset %llu not a multiple of "
                                         "the alignment %llu", (int)t->name.len, t->name.data,
                             (unsigned long long)t->info_offset, (unsigned long long)t->offset,
                             (unsigned long long)g->alignment);
        if (t->offset > avail || t->bytes > avail - t->offset)
            return loom_fail(LOOM_PARSE, "gguf: tensor '%.*s' (info at byte %llu): data at offset %llu + %llu "
                                         "bytes runs past the end of the file (data section: %llu bytes at byte %llu)",
                             (int)t->name.len, t->name.data, (unsigned long long)t->info_offset,
                             (unsigned long long)t->offset, (unsigned long long)t->bytes,
                             (unsigned long long)avail, (unsigned long long)g->data_offset);
        t->data = g->data + g->data_offset + t->offset;
        by_offset[i] = t;
    }
    qsort(by_offset, (size_t)g->n_tensors, sizeof *by_offset, tensor_offset_cmp);
    for (uint64_t i = 1; i < g->n_tensors; i++) {
        const loom_gguf_tensor *a = by_offset[i - 1], *b = by_offset[i];
        if (b->offset - a->offset < a->bytes)
            return loom_fail(LOOM_PARSE, "gguf: tensors '%.*s' and '%.*s' overlap at data offset %llu",
                             (int)a->name.len, a->name.data, (int)b->name.len, b->name.data,
                             (unsigned long long)b->offset);
    }
    return LOOM_OK;
}

static loom_result read_tensors(loom_gguf *g, rd *r)
{
    loom_result rc;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        if ((rc = read_tensor_info(r, &g->tensors[i])))
            return rc;
        g->t_by_name[i] = &g->tensors[i];
    }
    qsort(g->t_by_name, (size_t)g->n_tensors, sizeof *g->t_by_name, tensor_name_cmp);
    for (uint64_t i = 1; i < g->n_tensors; i++)
        if (str_cmp(g->t_by_name[i - 1]->name, g->t_by_name[i]->name) == 0)
            return loom_fail(LOOM_PARSE, "gguf: tensor name '%.*s' appears twice (infos at bytes %llu and %llu)",
                             (int)g->t_by_name[i]->name.len, g->t_by_name[i]->name.data,
                             (unsigned long long)g->t_by_name[i - 1]->info_offset,
                             (unsigned long long)g->t_by_name[i]->info_offset);
    /* The data section starts at the next multiple of the alignment; a file
     * without tensors may end right after its infos. */
    uint64_t pad = (g->alignment - r->pos % g->alignment) % g->alignment;
    if (g->n_tensors == 0) {
        g->data_offset = pad <= r->size - r->pos ? r->pos + pad : r->size;
        return LOOM_OK;
    }
    if ((rc = need(r, pad, "the padding before tensor data")))
        return rc;
    g->data_offset = r->pos + pad;
    const loom_gguf_tensor **by_offset = malloc((size_t)g->n_tensors * sizeof *by_offset);
    if (!by_offset)
        return loom_fail(LOOM_OUT_OF_MEMORY, "gguf: %llu tensors", (unsigned long long)g->n_tensors);
    rc = place_tensors(g, by_offset);
    free(by_offset);
    return rc;
}

/* ---- open / close ------------------------------------------------------- */

/* Smallest encodings: a key of 1 byte with a 1-byte value; a 1-byte name
 * with one dimension. Counts beyond what the file can hold are refused
 * before anything is allocated for them. */
#define MIN_KV_BYTES (8 + 1 + 4 + 1)
#define MIN_TENSOR_INFO_BYTES (8 + 1 + 4 + 8 + 4 + 8)

static loom_result read_header(loom_gguf *g, rd *r)
{
    loom_result rc = need(r, 4, "the magic");
    if (rc)
        return rc;
    if (memcmp(r->p, "GGUF", 4) != 0)
        return loom_fail(LOOM_PARSE, "gguf: bad magic at byte 0 (%02x %02x %02x %02x, expected 'GGUF')", r->p[0],
                         r->p[1], r->p[2], r->p[3]);
    r->pos = 4;
    if ((rc = rd_u32(r, &g->version, "the version")))
        return rc;
    if (g->version != 2 && g->version != 3) {
        uint32_t v = g->version;
        uint32_t swapped = (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
        return loom_fail(LOOM_UNSUPPORTED, "gguf: version %u at byte 4 unsupported (2 and 3 are)%s", g->version,
                         swapped == 2 || swapped == 3 ? "; the file looks big-endian" : "");
    }
    if ((rc = rd_u64(r, &g->n_tensors, "the tensor count")) || (rc = rd_u64(r, &g->n_kv, "the metadata count")))
        return rc;
    size_t left = r->size - r->pos;
    if (g->n_tensors > left / MIN_TENSOR_INFO_BYTES)
        return loom_fail(LOOM_PARSE, "gguf: tensor count %llu at byte 8 exceeds what %zu bytes can hold",
                         (unsigned long long)g->n_tensors, left);
    if (g->n_kv > left / MIN_KV_BYTES)
        return loom_fail(LOOM_PARSE, "gguf: metadata count %llu at byte 16 exceeds what %zu bytes can hold",
                         (unsigned long long)g->n_kv, left);
    return LOOM_OK;
}

void loom_gguf_close(loom_gguf *g)
{
    if (!g)
        return;
    free(g->kv);
    free(g->kv_by_key);
    free(g->tensors);
    free(g->t_by_name);
    if (g->map)
        munmap(g->map, g->size);
    free(g);
}

static loom_result parse(loom_gguf *g)
{
    rd r = { .p = g->data, .size = g->size, .pos = 0 };
    loom_result rc = read_header(g, &r);
    if (rc)
        return rc;
    /* calloc(0) may return NULL: allocate at least one element. */
    size_t nk = (size_t)g->n_kv + 1, nt = (size_t)g->n_tensors + 1;
    g->kv = calloc(nk, sizeof *g->kv);
    g->kv_by_key = calloc(nk, sizeof *g->kv_by_key);
    g->tensors = calloc(nt, sizeof *g->tensors);
    g->t_by_name = calloc(nt, sizeof *g->t_by_name);
    if (!g->kv || !g->kv_by_key || !g->tensors || !g->t_by_name)
        return loom_fail(LOOM_OUT_OF_MEMORY, "gguf: %llu keys, %llu tensors", (unsigned long long)g->n_kv,
                         (unsigned long long)g->n_tensors);
    if ((rc = read_metadata(g, &r)))
        return rc;
    return read_tensors(g, &r);
}

loom_result loom_gguf_open_memory(const void *data, size_t size, loom_gguf **out)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf: out is NULL");
    *out = NULL;
    if (!data && size)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf: data is NULL");
    loom_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return loom_fail(LOOM_OUT_OF_MEMORY, "gguf reader");
    g->data = data ? data : (const uint8_t *)"";
    g->size = size;
    loom_result rc = parse(g);
    if (rc) {
        loom_gguf_close(g);
        return rc;
    }
    *out = g;
    return LOOM_OK;
}

loom_result loom_gguf_open_file(const char *path, loom_gguf **out)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf: out is NULL");
    *out = NULL;
    if (!path)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf: path is NULL");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return loom_fail(LOOM_IO, "gguf: cannot open %s: %s", path, strerror(errno));
    struct stat st;
    errno = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        close(fd);
        return loom_fail(LOOM_IO, "gguf: %s is not a readable regular file%s%s", path, e ? ": " : "",
                         e ? strerror(e) : "");
    }
    if (st.st_size == 0) {
        close(fd);
        return loom_fail(LOOM_PARSE, "gguf: %s is empty", path);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED)
        return loom_fail(LOOM_IO, "gguf: cannot map %s: %s", path, strerror(e));
    loom_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        munmap(map, (size_t)st.st_size);
        return loom_fail(LOOM_OUT_OF_MEMORY, "gguf reader");
    }
    g->map = map;
    g->data = map;
    g->size = (size_t)st.st_size;
    loom_result rc = parse(g);
    if (rc) {
        loom_gguf_close(g);
        return rc;
    }
    *out = g;
    return LOOM_OK;
}

/* ---- accessors ---------------------------------------------------------- */

uint32_t loom_gguf_version(const loom_gguf *g) { return g ? g->version : 0; }
uint64_t loom_gguf_alignment(const loom_gguf *g) { return g ? g->alignment : 0; }
uint64_t loom_gguf_data_offset(const loom_gguf *g) { return g ? g->data_offset : 0; }
uint64_t loom_gguf_kv_count(const loom_gguf *g) { return g ? g->n_kv : 0; }
uint64_t loom_gguf_tensor_count(const loom_gguf *g) { return g ? g->n_tensors : 0; }

const loom_gguf_kv *loom_gguf_kv_at(const loom_gguf *g, uint64_t i)
{
    return g && i < g->n_kv ? &g->kv[i] : NULL;
}

const loom_gguf_tensor *loom_gguf_tensor_at(const loom_gguf *g, uint64_t i)
{
    return g && i < g->n_tensors ? &g->tensors[i] : NULL;
}

/* Binary search over n pointers sorted by the string at field offset. */
static const void *find_sorted(const void *const *v, uint64_t n, size_t field, const char *name)
{
    if (!name)
        return NULL;
    loom_gguf_str want = { name, strlen(name) };
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        loom_gguf_str have;
        memcpy(&have, (const char *)v[mid] + field, sizeof have);
        int c = str_cmp(have, want);
        if (c == 0)
            return v[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const loom_gguf_kv *loom_gguf_find_kv(const loom_gguf *g, const char *key)
{
    if (!g)
        return NULL;
    return find_sorted((const void *const *)g->kv_by_key, g->n_kv, offsetof(loom_gguf_kv, key), key);
}

const loom_gguf_tensor *loom_gguf_find_tensor(const loom_gguf *g, const char *name)
{
    if (!g)
        return NULL;
    return find_sorted((const void *const *)g->t_by_name, g->n_tensors, offsetof(loom_gguf_tensor, name), name);
}

static loom_result get(const loom_gguf *g, const char *key, const loom_gguf_kv **kv)
{
    if (!g || !key)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf: reader and key are required");
    *kv = loom_gguf_find_kv(g, key);
    if (!*kv)
        return loom_fail(LOOM_NOT_FOUND, "gguf: metadata key '%s' is missing", key);
    return LOOM_OK;
}

static loom_result wrong_type(const loom_gguf_kv *kv, const char *key, const char *want)
{
    return loom_fail(LOOM_INVALID_ARGUMENT, "gguf: metadata key '%s' (byte %llu) is a %s, expected %s", key,
                     (unsigned long long)kv->offset, loom_gguf_type_name(kv->value.type), want);
}

loom_result loom_gguf_get_u32(const loom_gguf *g, const char *key, uint32_t *out)
{
    const loom_gguf_kv *kv;
    loom_result rc = get(g, key, &kv);
    if (rc)
        return rc;
    const loom_gguf_value *v = &kv->value;
    bool is_signed = v->type == LOOM_GGUF_INT8 || v->type == LOOM_GGUF_INT16 || v->type == LOOM_GGUF_INT32 ||
                     v->type == LOOM_GGUF_INT64;
    bool is_unsigned = v->type == LOOM_GGUF_UINT8 || v->type == LOOM_GGUF_UINT16 || v->type == LOOM_GGUF_UINT32 ||
                       v->type == LOOM_GGUF_UINT64;
    if (!is_signed && !is_unsigned)
        return wrong_type(kv, key, "an integer");
    if (is_signed && (v->i < 0 || v->i > (int64_t)UINT32_MAX))
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf: metadata key '%s' (byte %llu) value %lld does not fit 32 "
                                                "bits unsigned", key, (unsigned long long)kv->offset, (long long)v->i);
    if (is_unsigned && v->u > UINT32_MAX)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf: metadata key '%s' (byte %llu) value %llu does not fit 32 "
                                                "bits", key, (unsigned long long)kv->offset, (unsigned long long)v->u);
    if (out)
        *out = is_signed ? (uint32_t)v->i : (uint32_t)v->u;
    return LOOM_OK;
}

loom_result loom_gguf_get_f32(const loom_gguf *g, const char *key, float *out)
{
    const loom_gguf_kv *kv;
    loom_result rc = get(g, key, &kv);
    if (rc)
        return rc;
    if (kv->value.type != LOOM_GGUF_FLOAT32 && kv->value.type != LOOM_GGUF_FLOAT64)
        return wrong_type(kv, key, "a float");
    if (out)
        *out = (float)kv->value.f;
    return LOOM_OK;
}

loom_result loom_gguf_get_str(const loom_gguf *g, const char *key, loom_gguf_str *out)
{
    const loom_gguf_kv *kv;
    loom_result rc = get(g, key, &kv);
    if (rc)
        return rc;
    if (kv->value.type != LOOM_GGUF_STRING)
        return wrong_type(kv, key, "a string");
    if (out)
        *out = kv->value.str;
    return LOOM_OK;
}

loom_result loom_gguf_array_strings(const loom_gguf_value *v, loom_gguf_str *items)
{
    if (!v || v->type != LOOM_GGUF_ARRAY || v->elem_type != LOOM_GGUF_STRING)
        return loom_fail(LOOM_INVALID_ARGUMENT, "gguf: value is not an array of strings");
    /* Lengths were checked against the array's bytes at open. */
    size_t pos = 0;
    for (uint64_t i = 0; i < v->count; i++) {
        uint64_t len = le(v->elems + pos, 8);
        if (items) {
            items[i].data = (const char *)v->elems + pos + 8;
            items[i].len = (size_t)len;
        }
        pos += 8 + (size_t)len;
    }
    return LOOM_OK;
}
