/* Suite "gguf": the strict GGUF reader, the llama loader and gguf.h's
 * writer (models/llama/gguf.h).
 *
 * Files the loader is tested on are made by this test's own writer, written
 * from the format's description and independent of the reader and of
 * gguf.h's writer: a small file with every value type and f32/f16/bf16
 * tensors, and a tiny llama model written from the decoder's random weights
 * the way llama.cpp's converter lays them out (q/k rows permuted for
 * adjacent-pair RoPE), its matrices in any type the reader takes or mixed
 * per tensor, block types packed by loom_quantize_row. The reader must take
 * them and refuse every malformed variant (every truncation, corrupt header
 * fields, bad types, offsets, dims, names, rows that are not whole blocks,
 * missing keys and tensors, wrong shapes) with the right code and no crash,
 * naming the tensor. The loaded model must equal what was written bit for
 * bit, compute what the file means (RoPE checked against an adjacent-pair
 * rotation on the file's own rows, block rows too), and decode on the device
 * like the CPU reference, under the validation layer. gguf.h's writer must
 * read back as meant, a model as stored bit for bit.
 *
 * `test_gguf --write-corpus DIR` writes the seed files of the fuzz corpus;
 * `test_gguf --write-model FILE TYPE` the default-config model. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gguf.h"
#include "llama_run.h"
#include "loom_ref.h"
#include "runner.h"

#define TOL 2e-3f
#define STEPS 4

/* ---- the test's GGUF writer --------------------------------------------- */

typedef struct buf {
    uint8_t *p;
    size_t len, cap;
} buf;

static void put(buf *b, const void *d, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        ck_assert_ptr_nonnull(b->p);
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, d, n);
    b->len += n;
}

static void put_le(buf *b, uint64_t v, int n)
{
    uint8_t x[8];
    for (int i = 0; i < n; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    put(b, x, (size_t)n);
}

static void put_str(buf *b, const char *s)
{
    put_le(b, strlen(s), 8);
    put(b, s, strlen(s));
}

static void put_zeros(buf *b, size_t n)
{
    static const uint8_t z[64];
    for (; n > sizeof z; n -= sizeof z)
        put(b, z, sizeof z);
    put(b, z, n);
}

enum { T_U8 = 0, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 };
/* ggml's tensor type codes: the types read, and one that is not (q5_k). */
enum { TT_F32 = 0, TT_F16 = 1, TT_Q4_0 = 2, TT_Q8_0 = 8, TT_Q4_K = 12, TT_Q5_K = 13, TT_Q6_K = 14, TT_BF16 = 30 };

/* The ggml code of a loom dtype, and back (F32 for bf16). */
static uint32_t tt_of(loom_dtype t)
{
    static const uint32_t codes[LOOM_DTYPE_COUNT] = { [LOOM_F32] = TT_F32,   [LOOM_F16] = TT_F16,
                                                      [LOOM_Q8_0] = TT_Q8_0, [LOOM_Q4_0] = TT_Q4_0,
                                                      [LOOM_Q4_K] = TT_Q4_K, [LOOM_Q6_K] = TT_Q6_K };
    ck_assert(t != LOOM_U32 && (unsigned)t < LOOM_DTYPE_COUNT);
    return codes[t];
}

static bool tt_dtype(uint32_t tt, loom_dtype *out)
{
    *out = LOOM_F32;
    for (int t = 0; t < (int)LOOM_DTYPE_COUNT; t++)
        if (t != LOOM_U32 && tt_of((loom_dtype)t) == tt) {
            *out = (loom_dtype)t;
            return true;
        }
    return tt == TT_BF16;
}

static loom_dtype dtype_of(uint32_t tt)
{
    loom_dtype t;
    ck_assert_msg(tt_dtype(tt, &t), "type %u", tt);
    return t;
}

typedef struct gw {
    buf kv, info, data;
    uint64_t n_kv, n_tensors;
    uint32_t version, align;
} gw;

static void gw_init(gw *w)
{
    memset(w, 0, sizeof *w);
    w->version = 3;
    w->align = 32;
}

static void gw_free(gw *w)
{
    free(w->kv.p);
    free(w->info.p);
    free(w->data.p);
}

static buf *key(gw *w, const char *k, uint32_t type)
{
    put_str(&w->kv, k);
    put_le(&w->kv, type, 4);
    w->n_kv++;
    return &w->kv;
}

static void kv_u32(gw *w, const char *k, uint32_t v) { put_le(key(w, k, T_U32), v, 4); }
static void kv_str(gw *w, const char *k, const char *v) { put_str(key(w, k, T_STR), v); }

static void kv_f32(gw *w, const char *k, float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    put_le(key(w, k, T_F32), b, 4);
}

static void kv_strs(gw *w, const char *k, uint32_t n, const char *const *v)
{
    buf *b = key(w, k, T_ARR);
    put_le(b, T_STR, 4);
    put_le(b, n, 8);
    for (uint32_t i = 0; i < n; i++)
        put_str(b, v[i]);
}

/* A tensor info with whatever fields the caller gives. */
static void gw_info(gw *w, const char *name, uint32_t type, uint32_t nd, const uint64_t *dims, uint64_t offset)
{
    put_str(&w->info, name);
    put_le(&w->info, nd, 4);
    for (uint32_t d = 0; d < nd; d++)
        put_le(&w->info, dims[d], 8);
    put_le(&w->info, type, 4);
    put_le(&w->info, offset, 8);
    w->n_tensors++;
}

/* A tensor with its data, placed at the next aligned data offset. */
static void gw_tensor(gw *w, const char *name, uint32_t type, uint32_t nd, const uint64_t *dims, const void *d,
                      size_t bytes)
{
    put_zeros(&w->data, (w->align - w->data.len % w->align) % w->align);
    gw_info(w, name, type, nd, dims, w->data.len);
    put(&w->data, d, bytes);
}

/* The file: header, metadata, infos, padding, data (no trailing padding, so
 * every proper prefix cuts a tensor). */
static buf gw_finish(const gw *w)
{
    buf f = { 0 };
    put(&f, "GGUF", 4);
    put_le(&f, w->version, 4);
    put_le(&f, w->n_tensors, 8);
    put_le(&f, w->n_kv, 8);
    put(&f, w->kv.p, w->kv.len);
    put(&f, w->info.p, w->info.len);
    if (w->n_tensors)
        put_zeros(&f, (w->align - f.len % w->align) % w->align);
    put(&f, w->data.p, w->data.len);
    return f;
}

static uint16_t to_bf16(float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    b += 0x7fffu + ((b >> 16) & 1);   /* round to nearest even; no NaNs here */
    return (uint16_t)(b >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float v;
    memcpy(&v, &b, 4);
    return v;
}

/* ---- a small file with every kind of value ------------------------------ */

static const float small_f32[6] = { 1.0f, -2.5f, 3.25f, 0.0f, -0.0f, 1e-30f };
static const uint16_t small_f16[5] = { 0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000 };
static const uint16_t small_bf16[8] = { 0x3f80, 0xbf80, 0x4049, 0x0000, 0x7f7f, 0x0080, 0xc2f7, 0x3e80 };

static buf small_file(uint32_t version)
{
    gw w;
    gw_init(&w);
    w.version = version;
    w.align = 64;
    kv_u32(&w, "general.alignment", 64);
    kv_str(&w, "general.name", "small");
    put_le(key(&w, "t.u8", T_U8), 200, 1);
    put_le(key(&w, "t.i8", T_I8), (uint8_t)-5, 1);
    put_le(key(&w, "t.u16", T_U16), 65535, 2);
    put_le(key(&w, "t.i16", T_I16), (uint16_t)-300, 2);
    put_le(key(&w, "t.i32", T_I32), 123456, 4);
    put_le(key(&w, "t.u64", T_U64), UINT64_C(1) << 40, 8);
    put_le(key(&w, "t.i64", T_I64), 7, 8);
    put_le(key(&w, "t.bool", T_BOOL), 1, 1);
    double d = 0.125;
    uint64_t db;
    memcpy(&db, &d, 8);
    put_le(key(&w, "t.f64", T_F64), db, 8);
    kv_f32(&w, "t.f32", 1.5f);
    /* [[1, 2], [], [3]] of u16, and an array of bools */
    buf *b = key(&w, "t.nested", T_ARR);
    put_le(b, T_ARR, 4);
    put_le(b, 3, 8);
    put_le(b, T_U16, 4), put_le(b, 2, 8), put_le(b, 1, 2), put_le(b, 2, 2);
    put_le(b, T_U16, 4), put_le(b, 0, 8);
    put_le(b, T_U16, 4), put_le(b, 1, 8), put_le(b, 3, 2);
    b = key(&w, "t.bools", T_ARR);
    put_le(b, T_BOOL, 4), put_le(b, 3, 8), put_le(b, 1, 1), put_le(b, 0, 1), put_le(b, 1, 1);
    const char *words[] = { "a", "", "\xe2\x96\x81hello" };
    kv_strs(&w, "t.strs", 3, words);
    gw_tensor(&w, "m.f32", TT_F32, 2, (uint64_t[]){ 3, 2 }, small_f32, sizeof small_f32);
    gw_tensor(&w, "v.f16", TT_F16, 1, (uint64_t[]){ 5 }, small_f16, sizeof small_f16);
    gw_tensor(&w, "c.bf16", TT_BF16, 3, (uint64_t[]){ 2, 2, 2 }, small_bf16, sizeof small_bf16);
    buf f = gw_finish(&w);
    gw_free(&w);
    return f;
}

/* Opens an exact-size copy, so a read past the end is a sanitizer error. */
static loom_result open_copy(const uint8_t *p, size_t n, loom_gguf **g)
{
    uint8_t *c = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(c);
    memcpy(c, p, n);
    loom_result rc = loom_gguf_open_memory(c, n, g);
    if (rc == LOOM_OK) {
        /* Touch everything the reader hands out while the copy lives. */
        for (uint64_t i = 0; i < loom_gguf_tensor_count(*g); i++) {
            const loom_gguf_tensor *t = loom_gguf_tensor_at(*g, i);
            volatile uint8_t sum = 0;
            for (uint64_t k = 0; k < t->bytes; k++)
                sum += ((const uint8_t *)t->data)[k];
            (void)sum;
        }
        loom_gguf_close(*g);
        *g = NULL;
    } else {
        ck_assert_ptr_null(*g);
    }
    free(c);
    return rc;
}

START_TEST(reads_every_value_type)
{
    for (uint32_t version = 2; version <= 3; version++) {
        buf f = small_file(version);
        loom_gguf *g = NULL;
        ck_assert_int_eq(loom_gguf_open_memory(f.p, f.len, &g), LOOM_OK);
        ck_assert_uint_eq(loom_gguf_version(g), version);
        ck_assert_uint_eq(loom_gguf_alignment(g), 64);
        ck_assert_uint_eq(loom_gguf_data_offset(g) % 64, 0);
        ck_assert_uint_eq(loom_gguf_kv_count(g), 15);
        uint32_t u;
        float fl;
        loom_gguf_str s;
        ck_assert_int_eq(loom_gguf_get_u32(g, "t.u8", &u), LOOM_OK);
        ck_assert_uint_eq(u, 200);
        ck_assert_int_eq(loom_gguf_get_u32(g, "t.u16", &u), LOOM_OK);
        ck_assert_uint_eq(u, 65535);
        ck_assert_int_eq(loom_gguf_get_u32(g, "t.i32", &u), LOOM_OK);
        ck_assert_uint_eq(u, 123456);
        ck_assert_int_eq(loom_gguf_get_u32(g, "t.i64", &u), LOOM_OK);
        ck_assert_uint_eq(u, 7);
        ck_assert_int_eq(loom_gguf_get_u32(g, "t.i8", &u), LOOM_INVALID_ARGUMENT);
        ck_assert_int_eq(loom_gguf_get_u32(g, "t.i16", &u), LOOM_INVALID_ARGUMENT);
        ck_assert_int_eq(loom_gguf_get_u32(g, "t.u64", &u), LOOM_INVALID_ARGUMENT);
        ck_assert_int_eq(loom_gguf_get_u32(g, "general.name", &u), LOOM_INVALID_ARGUMENT);
        ck_assert_int_eq(loom_gguf_get_u32(g, "t.absent", &u), LOOM_NOT_FOUND);
        ck_assert_int_eq(loom_gguf_get_f32(g, "t.f32", &fl), LOOM_OK);
        ck_assert(fl == 1.5f);
        ck_assert_int_eq(loom_gguf_get_f32(g, "t.f64", &fl), LOOM_OK);
        ck_assert(fl == 0.125f);
        ck_assert_int_eq(loom_gguf_get_f32(g, "t.u8", &fl), LOOM_INVALID_ARGUMENT);
        ck_assert_int_eq(loom_gguf_get_str(g, "general.name", &s), LOOM_OK);
        ck_assert(s.len == 5 && memcmp(s.data, "small", 5) == 0);
        const loom_gguf_kv *kv = loom_gguf_find_kv(g, "t.bool");
        ck_assert(kv && kv->value.type == LOOM_GGUF_BOOL && kv->value.u == 1);
        kv = loom_gguf_find_kv(g, "t.i16");
        ck_assert(kv && kv->value.i == -300);
        kv = loom_gguf_find_kv(g, "t.nested");
        ck_assert(kv && kv->value.elem_type == LOOM_GGUF_ARRAY && kv->value.count == 3);
        ck_assert_uint_eq(kv->value.elems_bytes, 3 * 12 + 3 * 2);
        ck_assert_int_eq(loom_gguf_array_strings(&kv->value, NULL), LOOM_INVALID_ARGUMENT);
        kv = loom_gguf_find_kv(g, "t.strs");
        loom_gguf_str items[3];
        ck_assert(kv && kv->value.count == 3);
        ck_assert_int_eq(loom_gguf_array_strings(&kv->value, items), LOOM_OK);
        ck_assert(items[0].len == 1 && items[1].len == 0 && items[2].len == 8);
        ck_assert_int_eq(memcmp(items[2].data, "\xe2\x96\x81hello", 8), 0);
        /* Lookups work for every key in file order. */
        for (uint64_t i = 0; i < loom_gguf_kv_count(g); i++) {
            const loom_gguf_kv *a = loom_gguf_kv_at(g, i);
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)a->key.len, a->key.data);
            ck_assert_ptr_eq(loom_gguf_find_kv(g, name), a);
        }
        ck_assert_ptr_null(loom_gguf_kv_at(g, 15));

        ck_assert_uint_eq(loom_gguf_tensor_count(g), 3);
        const loom_gguf_tensor *t = loom_gguf_find_tensor(g, "m.f32");
        ck_assert(t && t->type == LOOM_GGUF_TENSOR_F32 && t->n_dims == 2 && t->dims[0] == 3 && t->dims[1] == 2);
        ck_assert(t->dims[2] == 1 && t->n_elems == 6 && t->bytes == sizeof small_f32);
        ck_assert_int_eq(memcmp(t->data, small_f32, sizeof small_f32), 0);
        ck_assert_uint_eq(((const uint8_t *)t->data - f.p) % 64, 0);
        t = loom_gguf_find_tensor(g, "v.f16");
        ck_assert(t && t->type == LOOM_GGUF_TENSOR_F16 && t->n_elems == 5);
        ck_assert_int_eq(memcmp(t->data, small_f16, sizeof small_f16), 0);
        t = loom_gguf_find_tensor(g, "c.bf16");
        ck_assert(t && t->type == LOOM_GGUF_TENSOR_BF16 && t->n_dims == 3 && t->n_elems == 8);
        ck_assert_int_eq(memcmp(t->data, small_bf16, sizeof small_bf16), 0);
        ck_assert_ptr_eq(t->data, (const uint8_t *)f.p + f.len - sizeof small_bf16);
        ck_assert_ptr_null(loom_gguf_find_tensor(g, "m.f3"));
        ck_assert_ptr_null(loom_gguf_find_tensor(g, "m.f32x"));
        ck_assert_ptr_null(loom_gguf_tensor_at(g, 3));
        loom_gguf_close(g);
        free(f.p);
    }
}
END_TEST

START_TEST(reads_files)
{
    buf f = small_file(3);
    char path[] = "/tmp/loom-gguf-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, f.p, f.len), (ssize_t)f.len);
    close(fd);
    loom_gguf *g = NULL;
    ck_assert_int_eq(loom_gguf_open_file(path, &g), LOOM_OK);
    const loom_gguf_tensor *t = loom_gguf_find_tensor(g, "c.bf16");
    ck_assert(t && memcmp(t->data, small_bf16, sizeof small_bf16) == 0);
    loom_gguf_close(g);
    g = NULL;
    ck_assert_int_eq(truncate(path, 0), 0);
    ck_assert_int_eq(loom_gguf_open_file(path, &g), LOOM_PARSE);
    ck_assert_ptr_null(g);
    unlink(path);
    ck_assert_int_eq(loom_gguf_open_file(path, &g), LOOM_IO);
    ck_assert_int_eq(loom_gguf_open_file("/tmp", &g), LOOM_IO);
    ck_assert_int_eq(loom_gguf_open_file(NULL, &g), LOOM_INVALID_ARGUMENT);
    ck_assert_ptr_null(g);
    ck_assert_int_eq(loom_gguf_open_memory(f.p, f.len, NULL), LOOM_INVALID_ARGUMENT);
    loom_gguf_close(NULL);
    free(f.p);
}
END_TEST

START_TEST(every_truncation_fails)
{
    buf f = small_file(3);
    loom_gguf *g = NULL;
    ck_assert_int_eq(open_copy(f.p, f.len, &g), LOOM_OK);
    for (size_t n = 0; n < f.len; n++)
        ck_assert_msg(open_copy(f.p, n, &g) == LOOM_PARSE, "prefix of %zu bytes: %s", n, loom_last_error());
    free(f.p);
}
END_TEST

/* A byte-patched copy of the small file. */
static loom_result patched(const buf *f, size_t at, uint64_t v, int n)
{
    uint8_t *c = malloc(f->len);
    ck_assert_ptr_nonnull(c);
    memcpy(c, f->p, f->len);
    for (int i = 0; i < n; i++)
        c[at + (size_t)i] = (uint8_t)(v >> (8 * i));
    loom_gguf *g = NULL;
    loom_result rc = open_copy(c, f->len, &g);
    free(c);
    return rc;
}

START_TEST(corrupt_header_fails)
{
    buf f = small_file(3);
    for (size_t i = 0; i < 4; i++)
        ck_assert_int_eq(patched(&f, i, f.p[i] ^ 0x20, 1), LOOM_PARSE);
    const uint32_t versions[] = { 0, 1, 4, 0x02000000, 0x03000000, 0xffffffff };
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++)
        ck_assert_int_eq(patched(&f, 4, versions[i], 4), LOOM_UNSUPPORTED);
    /* Counts no file of this size can hold are refused before allocation. */
    const uint64_t big[] = { UINT64_MAX, UINT64_C(1) << 63, UINT64_C(1) << 32, 1000 };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        ck_assert_int_eq(patched(&f, 8, big[i], 8), LOOM_PARSE);
        ck_assert_int_eq(patched(&f, 16, big[i], 8), LOOM_PARSE);
    }
    /* Off-by-one counts misread what follows; they must still fail. */
    /* (One tensor fewer may parse: the last info then reads as padding.) */
    ck_assert_int_ne(patched(&f, 8, 4, 8), LOOM_OK);
    ck_assert_int_ne(patched(&f, 16, 16, 8), LOOM_OK);
    ck_assert_int_ne(patched(&f, 16, 14, 8), LOOM_OK);
    free(f.p);
}
END_TEST

/* Any byte of the header, metadata and infos flipped: never a crash, and a
 * failure always with a known code. */
START_TEST(corrupt_bytes_never_crash)
{
    buf f = small_file(3);
    loom_gguf *g = NULL;
    ck_assert_int_eq(loom_gguf_open_memory(f.p, f.len, &g), LOOM_OK);
    size_t end = (size_t)loom_gguf_data_offset(g);
    loom_gguf_close(g);
    const uint8_t masks[] = { 0x01, 0x80, 0xff };
    for (size_t i = 0; i < end; i++)
        for (size_t m = 0; m < sizeof masks; m++) {
            loom_result rc = patched(&f, i, f.p[i] ^ masks[m], 1);
            ck_assert_msg(rc == LOOM_OK || rc == LOOM_PARSE || rc == LOOM_UNSUPPORTED, "byte %zu: %s", i,
                          loom_result_str(rc));
        }
    free(f.p);
}
END_TEST

/* One small file with a single tensor info as given, plus 64 data bytes. */
static loom_result one_tensor(uint32_t type, uint32_t nd, const uint64_t *dims, uint64_t offset)
{
    gw w;
    gw_init(&w);
    gw_info(&w, "t", type, nd, dims, offset);
    put_zeros(&w.data, 64);
    buf f = gw_finish(&w);
    loom_gguf *g = NULL;
    loom_result rc = open_copy(f.p, f.len, &g);
    gw_free(&w);
    free(f.p);
    return rc;
}

START_TEST(bad_tensor_infos_fail)
{
    const uint64_t d4[] = { 4, 4, 1, 1 };
    ck_assert_int_eq(one_tensor(TT_F32, 2, d4, 0), LOOM_OK);
    ck_assert_int_eq(one_tensor(TT_BF16, 4, d4, 32), LOOM_OK);
    /* Unknown or unsupported types: ggml's, a retired one, none at all. */
    const uint32_t types[] = { 3, TT_Q5_K, 29, 31, 40, 0xffffffff };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        ck_assert_int_eq(one_tensor(types[i], 2, d4, 0), LOOM_UNSUPPORTED);
    /* Block types: rows of whole blocks that fit the 64 data bytes; a
     * block that does not (the data runs past the end, one block short);
     * rows that are not whole blocks, of every block type. */
    ck_assert_int_eq(one_tensor(TT_Q8_0, 2, (uint64_t[]){ 32, 1 }, 0), LOOM_OK);
    ck_assert_int_eq(one_tensor(TT_Q4_0, 3, (uint64_t[]){ 32, 1, 3 }, 0), LOOM_OK);
    ck_assert_int_eq(one_tensor(TT_Q8_0, 2, (uint64_t[]){ 32, 2 }, 0), LOOM_PARSE);
    ck_assert_int_eq(one_tensor(TT_Q4_0, 1, (uint64_t[]){ 128 }, 0), LOOM_PARSE);
    ck_assert_int_eq(one_tensor(TT_Q4_K, 1, (uint64_t[]){ 256 }, 0), LOOM_PARSE);
    ck_assert_int_eq(one_tensor(TT_Q6_K, 1, (uint64_t[]){ 256 }, 0), LOOM_PARSE);
    const uint32_t blocks[][2] = { { TT_Q8_0, 32 }, { TT_Q4_0, 32 }, { TT_Q4_K, 256 }, { TT_Q6_K, 256 } };
    for (size_t i = 0; i < 4; i++) {
        ck_assert_int_eq(one_tensor(blocks[i][0], 1, (uint64_t[]){ blocks[i][1] / 2 }, 0), LOOM_PARSE);
        ck_assert_int_eq(one_tensor(blocks[i][0], 2, (uint64_t[]){ blocks[i][1] + 1, 1 }, 0), LOOM_PARSE);
        /* ... the element count a whole number of blocks, but not a row */
        ck_assert_int_eq(one_tensor(blocks[i][0], 2, (uint64_t[]){ blocks[i][1] / 2, 2 }, 0), LOOM_PARSE);
    }
    /* Out of bounds, unaligned, overflowing offsets. */
    ck_assert_int_eq(one_tensor(TT_F32, 2, d4, 64), LOOM_PARSE);
    ck_assert_int_eq(one_tensor(TT_F32, 2, d4, 32), LOOM_PARSE);
    ck_assert_int_eq(one_tensor(TT_F32, 2, d4, 4), LOOM_PARSE);
    ck_assert_int_eq(one_tensor(TT_F32, 2, d4, UINT64_MAX - 31), LOOM_PARSE);
    ck_assert_int_eq(one_tensor(TT_F32, 1, (uint64_t[]){ 17 }, 0), LOOM_PARSE);
    /* Dims: zero, too many, too few, overflowing products and byte sizes. */
    ck_assert_int_eq(one_tensor(TT_F32, 2, (uint64_t[]){ 4, 0 }, 0), LOOM_PARSE);
    ck_assert_int_eq(one_tensor(TT_F32, 0, d4, 0), LOOM_PARSE);
    ck_assert_int_eq(one_tensor(TT_F32, 5, (uint64_t[]){ 1, 1, 1, 1, 1 }, 0), LOOM_PARSE);
    ck_assert_int_eq(one_tensor(TT_F32, 3, (uint64_t[]){ 1u << 31, 1u << 31, 1u << 31 }, 0), LOOM_PARSE);
    ck_assert_int_eq(one_tensor(TT_F32, 2, (uint64_t[]){ UINT64_MAX, 2 }, 0), LOOM_PARSE);
    ck_assert_int_eq(one_tensor(TT_F32, 1, (uint64_t[]){ UINT64_C(1) << 62 }, 0), LOOM_PARSE);
    ck_assert_int_eq(one_tensor(TT_F32, 1, (uint64_t[]){ UINT64_C(1) << 60 }, 0), LOOM_PARSE);
    ck_assert_int_eq(one_tensor(TT_F16, 2, (uint64_t[]){ UINT64_C(1) << 31, UINT64_C(1) << 31 }, 0), LOOM_PARSE);
}
END_TEST

/* A file with the given extra raw metadata record (key + type + value). */
static loom_result with_kv(const void *rec, size_t n, uint64_t count_adjust)
{
    gw w;
    gw_init(&w);
    kv_str(&w, "general.name", "x");
    put(&w.kv, rec, n);
    w.n_kv += 1 + count_adjust;
    gw_tensor(&w, "t", TT_F32, 1, (uint64_t[]){ 2 }, small_f32, 8);
    buf f = gw_finish(&w);
    loom_gguf *g = NULL;
    loom_result rc = open_copy(f.p, f.len, &g);
    gw_free(&w);
    free(f.p);
    return rc;
}

static loom_result kv_record(const char *k, uint32_t type, const void *val, size_t n)
{
    buf b = { 0 };
    put_str(&b, k);
    put_le(&b, type, 4);
    put(&b, val, n);
    loom_result rc = with_kv(b.p, b.len, 0);
    free(b.p);
    return rc;
}

/* An array header (type, count) followed by n raw bytes. */
static loom_result array_record(uint32_t et, uint64_t count, const void *rest, size_t n)
{
    buf b = { 0 };
    put_le(&b, et, 4);
    put_le(&b, count, 8);
    put(&b, rest, n);
    loom_result rc = kv_record("a", T_ARR, b.p, b.len);
    free(b.p);
    return rc;
}

START_TEST(bad_metadata_fails)
{
    uint32_t one = 1;
    ck_assert_int_eq(kv_record("k", T_U32, &one, 4), LOOM_OK);
    ck_assert_int_eq(kv_record("k", 13, &one, 4), LOOM_PARSE);
    ck_assert_int_eq(kv_record("k", 0xffffffff, &one, 4), LOOM_PARSE);
    ck_assert_int_eq(kv_record("k", T_BOOL, "\x02", 1), LOOM_PARSE);
    ck_assert_int_eq(kv_record("", T_U32, &one, 4), LOOM_PARSE);
    ck_assert_int_eq(kv_record("general.name", T_U32, &one, 4), LOOM_PARSE);   /* duplicate */
    /* a key with a NUL inside */
    ck_assert_int_eq(with_kv("\x03\0\0\0\0\0\0\0a\0b\x04\0\0\0\x01\0\0\0", 19, 0), LOOM_PARSE);
    ck_assert_int_eq(with_kv("\x03\0\0\0\0\0\0\0abc\x04\0\0\0\x01\0\0\0", 19, 0), LOOM_OK);
    /* Lengths and counts past the end, and the largest ones. */
    ck_assert_int_eq(with_kv("\xff\xff\xff\xff\xff\xff\xff\xff", 8, 0), LOOM_PARSE);
    ck_assert_int_eq(with_kv("\x00\x00\x01\x00\x00\x00\x00\x00", 8, 0), LOOM_PARSE);   /* key > 65535 */
    ck_assert_int_eq(kv_record("k", T_STR, "\xff\xff\xff\xff\xff\xff\xff\x7f", 8), LOOM_PARSE);
    ck_assert_int_eq(kv_record("k", T_STR, "\x40\0\0\0\0\0\0\0", 8), LOOM_PARSE);
    ck_assert_int_eq(array_record(T_U8, 3, "abc", 3), LOOM_OK);
    ck_assert_int_eq(array_record(T_U8, UINT64_MAX, "abc", 3), LOOM_PARSE);
    ck_assert_int_eq(array_record(T_U64, UINT64_C(1) << 61, "abc", 3), LOOM_PARSE);
    ck_assert_int_eq(array_record(T_STR, UINT64_C(1) << 60, "", 0), LOOM_PARSE);
    ck_assert_int_eq(array_record(T_ARR, UINT64_C(1) << 60, "", 0), LOOM_PARSE);
    ck_assert_int_eq(array_record(T_BOOL, 2, "\x01\x03", 2), LOOM_PARSE);
    ck_assert_int_eq(array_record(14, 0, "", 0), LOOM_PARSE);
    /* Nesting: LOOM_GGUF_MAX_DEPTH arrays deep is fine, one more is not. */
    for (int depth = 1; depth <= LOOM_GGUF_MAX_DEPTH + 1; depth++) {
        buf b = { 0 };
        for (int i = 1; i < depth; i++) {
            put_le(&b, T_ARR, 4);
            put_le(&b, 1, 8);
        }
        put_le(&b, T_U8, 4);
        put_le(&b, 0, 8);
        loom_result rc = kv_record("deep", T_ARR, b.p, b.len);
        ck_assert_int_eq(rc, depth <= LOOM_GGUF_MAX_DEPTH ? LOOM_OK : LOOM_PARSE);
        free(b.p);
    }
    /* general.alignment: a uint32 power of two. */
    ck_assert_int_eq(kv_record("general.alignment", T_U32, "\x40\0\0\0", 4), LOOM_OK);
    ck_assert_int_eq(kv_record("general.alignment", T_U32, "\0\0\0\0", 4), LOOM_PARSE);
    ck_assert_int_eq(kv_record("general.alignment", T_U32, "\x30\0\0\0", 4), LOOM_PARSE);
    ck_assert_int_eq(kv_record("general.alignment", T_U64, "\x20\0\0\0\0\0\0\0", 8), LOOM_PARSE);
}
END_TEST

START_TEST(bad_names_fail)
{
    gw w;
    char long_name[LOOM_GGUF_MAX_NAME + 2];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    const char *names[][2] = { { "t", "t" }, { "t", "" }, { "t", long_name }, { "a", "b" } };
    const loom_result want[] = { LOOM_PARSE, LOOM_PARSE, LOOM_PARSE, LOOM_OK };
    for (size_t i = 0; i < 4; i++) {
        gw_init(&w);
        gw_tensor(&w, names[i][0], TT_F32, 1, (uint64_t[]){ 2 }, small_f32, 8);
        gw_tensor(&w, names[i][1], TT_F32, 1, (uint64_t[]){ 2 }, small_f32, 8);
        buf f = gw_finish(&w);
        loom_gguf *g = NULL;
        ck_assert_int_eq(open_copy(f.p, f.len, &g), want[i]);
        gw_free(&w);
        free(f.p);
    }
    /* The longest name allowed; overlapping tensors. */
    long_name[LOOM_GGUF_MAX_NAME] = '\0';
    gw_init(&w);
    gw_tensor(&w, long_name, TT_F32, 1, (uint64_t[]){ 2 }, small_f32, 8);
    gw_info(&w, "over", TT_F16, 1, (uint64_t[]){ 4 }, 0);
    buf f = gw_finish(&w);
    loom_gguf *g = NULL;
    ck_assert_int_eq(open_copy(f.p, f.len, &g), LOOM_PARSE);
    gw_free(&w);
    free(f.p);
    gw_init(&w);
    gw_tensor(&w, long_name, TT_F32, 1, (uint64_t[]){ 2 }, small_f32, 8);
    f = gw_finish(&w);
    ck_assert_int_eq(open_copy(f.p, f.len, &g), LOOM_OK);
    gw_free(&w);
    free(f.p);
}
END_TEST

/* ---- gguf.h's writer ----------------------------------------------------- */

/* Keys set, replaced in place and removed, tensors added, filled in place
 * and removed, a set alignment: the file reads back as meant, in order. */
START_TEST(writer_round_trips)
{
    loom_gguf_writer *w = NULL;
    ck_assert_int_eq(loom_gguf_writer_create(&w), LOOM_OK);
    const int32_t ints[3] = { -1, 0, 5 };
    const char *words[] = { "a", "", "bc" };
    ck_assert_int_eq(loom_gguf_writer_set_u32(w, "k.u32", 7), LOOM_OK);
    ck_assert_int_eq(loom_gguf_writer_set_str(w, "k.was_str", "x"), LOOM_OK);
    ck_assert_int_eq(loom_gguf_writer_set_f32(w, "k.f32", 1.5f), LOOM_OK);
    ck_assert_int_eq(loom_gguf_writer_set_array(w, "k.ints", LOOM_GGUF_INT32, ints, 3), LOOM_OK);
    ck_assert_int_eq(loom_gguf_writer_set_strs(w, "k.strs", words, 3), LOOM_OK);
    ck_assert_int_eq(loom_gguf_writer_set_u32(w, "general.alignment", 64), LOOM_OK);
    ck_assert_int_eq(loom_gguf_writer_set_u32(w, "k.was_str", 9), LOOM_OK);
    ck_assert_int_eq(loom_gguf_writer_remove_key(w, "k.f32"), LOOM_OK);
    void *d = NULL;
    ck_assert_int_eq(loom_gguf_writer_add_tensor(w, "v", LOOM_GGUF_TENSOR_F16, 1, (uint64_t[]){ 5 }, small_f16, NULL),
                     LOOM_OK);
    ck_assert_int_eq(loom_gguf_writer_add_tensor(w, "gone", LOOM_GGUF_TENSOR_BF16, 1, (uint64_t[]){ 8 }, small_bf16,
                                                 NULL),
                     LOOM_OK);
    ck_assert_int_eq(loom_gguf_writer_add_tensor(w, "m", LOOM_GGUF_TENSOR_F32, 2, (uint64_t[]){ 3, 2 }, NULL, &d),
                     LOOM_OK);
    memcpy(d, small_f32, sizeof small_f32);
    ck_assert_int_eq(loom_gguf_writer_remove_tensor(w, "gone"), LOOM_OK);
    uint32_t nd = 0;
    uint64_t dims[LOOM_GGUF_MAX_DIMS] = { 0 };
    ck_assert_int_eq(loom_gguf_writer_tensor_dims(w, "m", &nd, dims), LOOM_OK);
    ck_assert(nd == 2 && dims[0] == 3 && dims[1] == 2);

    void *p = NULL;
    size_t n = 0;
    loom_gguf *g = NULL;
    ck_assert_int_eq(loom_gguf_writer_to_memory(w, &p, &n), LOOM_OK);
    ck_assert_int_eq(open_copy(p, n, &g), LOOM_OK);
    ck_assert_int_eq(loom_gguf_open_memory(p, n, &g), LOOM_OK);
    ck_assert_uint_eq(loom_gguf_version(g), 3);
    ck_assert_uint_eq(loom_gguf_alignment(g), 64);
    ck_assert_uint_eq(loom_gguf_kv_count(g), 5);
    const char *order[] = { "k.u32", "k.was_str", "k.ints", "k.strs", "general.alignment" };
    for (uint64_t i = 0; i < 5; i++) {
        const loom_gguf_kv *kv = loom_gguf_kv_at(g, i);
        ck_assert(kv->key.len == strlen(order[i]) && memcmp(kv->key.data, order[i], kv->key.len) == 0);
    }
    uint32_t u = 0;
    ck_assert_int_eq(loom_gguf_get_u32(g, "k.was_str", &u), LOOM_OK);
    ck_assert_uint_eq(u, 9);
    const loom_gguf_kv *kv = loom_gguf_find_kv(g, "k.ints");
    ck_assert(kv && kv->value.elem_type == LOOM_GGUF_INT32 && kv->value.count == 3);
    ck_assert_int_eq(memcmp(kv->value.elems, ints, sizeof ints), 0);
    loom_gguf_str items[3];
    ck_assert_int_eq(loom_gguf_array_strings(&loom_gguf_find_kv(g, "k.strs")->value, items), LOOM_OK);
    ck_assert(items[0].len == 1 && items[1].len == 0 && items[2].len == 2 && memcmp(items[2].data, "bc", 2) == 0);
    ck_assert_uint_eq(loom_gguf_tensor_count(g), 2);
    const loom_gguf_tensor *v = loom_gguf_tensor_at(g, 0), *m = loom_gguf_tensor_at(g, 1);
    ck_assert(v->name.len == 1 && v->name.data[0] == 'v' && m->name.len == 1 && m->name.data[0] == 'm');
    ck_assert_int_eq(memcmp(v->data, small_f16, sizeof small_f16), 0);
    ck_assert_int_eq(memcmp(m->data, small_f32, sizeof small_f32), 0);
    ck_assert_uint_eq(((const uint8_t *)m->data - (const uint8_t *)p) % 64, 0);
    ck_assert_ptr_eq((const uint8_t *)m->data + m->bytes, (const uint8_t *)p + n);   /* no trailing padding */
    loom_gguf_close(g);

    /* The same bytes through a file. */
    char path[] = "/tmp/loom-gguf-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(loom_gguf_writer_to_file(w, path), LOOM_OK);
    FILE *f = fopen(path, "rb");
    uint8_t *back = malloc(n + 1);
    ck_assert(f && back);
    ck_assert_uint_eq(fread(back, 1, n + 1, f), n);
    ck_assert_int_eq(memcmp(back, p, n), 0);
    fclose(f);
    free(back);
    unlink(path);
    ck_assert_int_eq(loom_gguf_writer_to_file(w, "/nonexistent-dir/x.gguf"), LOOM_IO);
    free(p);
    loom_gguf_writer_destroy(w);
}
END_TEST

/* What the writer refuses, leaving the file as it was. */
START_TEST(writer_refuses_bad_input)
{
    loom_gguf_writer *w = NULL;
    ck_assert_int_eq(loom_gguf_writer_create(&w), LOOM_OK);
    ck_assert_int_eq(loom_gguf_writer_add_tensor(w, "t", LOOM_GGUF_TENSOR_F32, 1, (uint64_t[]){ 2 }, small_f32, NULL),
                     LOOM_OK);
    char long_name[LOOM_GGUF_MAX_NAME + 2];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    const uint64_t d2[] = { 2, 2, 2, 2, 2 }, d0[] = { 2, 0 };
    ck_assert_int_eq(loom_gguf_writer_add_tensor(w, "t", LOOM_GGUF_TENSOR_F32, 1, d2, NULL, NULL),
                     LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_gguf_writer_add_tensor(w, "", LOOM_GGUF_TENSOR_F32, 1, d2, NULL, NULL),
                     LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_gguf_writer_add_tensor(w, long_name, LOOM_GGUF_TENSOR_F32, 1, d2, NULL, NULL),
                     LOOM_INVALID_ARGUMENT);
    long_name[LOOM_GGUF_MAX_NAME] = '\0';
    ck_assert_int_eq(loom_gguf_writer_add_tensor(w, long_name, LOOM_GGUF_TENSOR_F32, 1, d2, NULL, NULL), LOOM_OK);
    ck_assert_int_eq(loom_gguf_writer_add_tensor(w, "u", LOOM_GGUF_TENSOR_F32, 2, d0, NULL, NULL),
                     LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_gguf_writer_add_tensor(w, "u", LOOM_GGUF_TENSOR_F32, 0, d2, NULL, NULL),
                     LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_gguf_writer_add_tensor(w, "u", LOOM_GGUF_TENSOR_F32, 5, d2, NULL, NULL),
                     LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_gguf_writer_add_tensor(w, "u", (loom_gguf_tensor_type)TT_Q5_K, 1, d2, NULL, NULL),
                     LOOM_INVALID_ARGUMENT);
    /* rows that are not whole blocks */
    ck_assert_int_eq(loom_gguf_writer_add_tensor(w, "u", (loom_gguf_tensor_type)TT_Q8_0, 1, d2, NULL, NULL),
                     LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_gguf_writer_add_tensor(w, "u", LOOM_GGUF_TENSOR_F32, 2,
                                                 (uint64_t[]){ UINT64_C(1) << 62, 4 }, NULL, NULL),
                     LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_gguf_writer_set_u32(w, "", 1), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_gguf_writer_set_u32(w, "general.alignment", 48), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_gguf_writer_set_u32(w, "general.alignment", 0), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_gguf_writer_set_f32(w, "general.alignment", 64), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_gguf_writer_set_array(w, "a", LOOM_GGUF_STRING, "x", 1), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_gguf_writer_set_array(w, "a", LOOM_GGUF_ARRAY, "x", 1), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_gguf_writer_set_str(w, "a", NULL), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_gguf_writer_remove_key(w, "a"), LOOM_NOT_FOUND);
    ck_assert_int_eq(loom_gguf_writer_remove_tensor(w, "u"), LOOM_NOT_FOUND);
    uint32_t nd;
    uint64_t dims[LOOM_GGUF_MAX_DIMS];
    ck_assert_int_eq(loom_gguf_writer_tensor_dims(w, "u", &nd, dims), LOOM_NOT_FOUND);
    /* A llama model of a type the loader does not take. */
    loom_llama_config c;
    loom_llama_default_config(&c);
    c = (loom_llama_config){ .dim = 4, .n_layers = 1, .n_heads = 2, .n_kv_heads = 1, .head_dim = 2, .ffn = 4,
                             .vocab = 8, .max_seq = 8, .eps = 1e-5f, .rope_theta = 10000.0f, .seed = 1 };
    loom_llama_weights *W = NULL;
    ck_assert_int_eq(loom_llama_weights_create(&c, &W), LOOM_OK);
    ck_assert_int_eq(loom_gguf_writer_add_llama(w, W, &(loom_gguf_llama_desc){ .type = (loom_gguf_tensor_type)
                                                                                 TT_Q5_K }),
                     LOOM_INVALID_ARGUMENT);
    loom_llama_weights_destroy(W);

    void *p = NULL;
    size_t n = 0;
    loom_gguf *g = NULL;
    ck_assert_int_eq(loom_gguf_writer_to_memory(w, &p, &n), LOOM_OK);
    ck_assert_int_eq(loom_gguf_open_memory(p, n, &g), LOOM_OK);
    ck_assert_uint_eq(loom_gguf_kv_count(g), 0);
    ck_assert_uint_eq(loom_gguf_tensor_count(g), 2);
    ck_assert_uint_eq(loom_gguf_alignment(g), 32);
    loom_gguf_close(g);
    free(p);
    loom_gguf_writer_destroy(w);
}
END_TEST

/* ---- a tiny llama model ------------------------------------------------- */

static void tiny(loom_llama_config *c)
{
    loom_llama_default_config(c);
    c->dim = 64;
    c->n_layers = 2;
    c->n_heads = 4;
    c->n_kv_heads = 2;
    c->head_dim = 16;
    c->ffn = 96;
    c->vocab = 128;
    c->max_seq = 8;
    c->eps = 1e-6f;
    c->rope_theta = 500000.0f;
    c->seed = 77;
}

#define CONTEXT 16

/* The loader's descriptor most tests load with: a cache of 8 rows. */
static const loom_llama_gguf_desc EIGHT = { .max_seq = 8 };

/* dim 256 and ffn 512: every row whole blocks of 256, for the K-quants. */
static void tiny_k(loom_llama_config *c)
{
    tiny(c);
    c->dim = 256;
    c->ffn = 512;
    c->head_dim = 64;
    c->vocab = 64;
}

/* ffn 80: ffn_down's rows are not whole blocks of 32. */
static void tiny_odd(loom_llama_config *c)
{
    tiny(c);
    c->ffn = 80;
}

typedef struct model_opts {
    uint32_t ttype;             /* of the matrices; norms are f32 */
    /* Each matrix in the dtype loom_llama_matrix_type gives under this
     * config's wtype and mix (ttype unused); NULL: ttype. */
    const loom_llama_config *types;
    const char *type_tensor;    /* this one in type_code, whatever the data (zeros) */
    uint32_t type_code;
    bool tied;                  /* no output.weight */
    bool vocab;
    const char *skip_tensor;    /* leave this one out */
    const char *skip_key;
    const char *bad_shape;      /* write this one with one more row */
    const char *arch;           /* NULL: "llama" */
    bool str_block_count;       /* llama.block_count as a string */
    uint32_t context;           /* llama.context_length; 0: CONTEXT */
    const char *extra_tensor;   /* one more (f32 vector of 8) */
    const char *rope_scaling;   /* llama.rope.scaling.type */
} model_opts;

/* Row r of the file is row file_to_ours(r) of the decoder's matrix: q/k rows
 * in adjacent-pair RoPE order, as llama.cpp's converter writes them. */
static uint32_t file_to_ours(uint32_t r, uint32_t heads, uint32_t hd)
{
    if (!heads)
        return r;
    uint32_t h = r / hd, k = r % hd;
    return h * hd + (k % 2) * (hd / 2) + k / 2;
}

/* Bytes of a row of n values in ttype; 0 for a type not read, or n not
 * whole blocks. */
static size_t tt_row_bytes(uint32_t ttype, uint32_t n)
{
    loom_dtype t;
    if (!tt_dtype(ttype, &t))
        return 0;
    return ttype == TT_BF16 ? 2 * (size_t)n : (size_t)loom_dtype_row_bytes(t, n);
}

/* A row of n values as ttype stores it: f32 and f16 element by element,
 * bf16 rounded to nearest even, block types as loom_quantize_row packs
 * them (the round-to-nearest quantizer of GGML's block layouts). */
static void pack_row(uint32_t ttype, const float *v, uint32_t n, uint8_t *out)
{
    if (ttype == TT_BF16) {
        for (uint32_t i = 0; i < n; i++) {
            uint16_t b = to_bf16(v[i]);
            memcpy(out + 2 * i, &b, 2);
        }
        return;
    }
    ck_assert_int_eq(loom_quantize_row(dtype_of(ttype), v, n, out), LOOM_OK);
}

/* The GGUF name of matrix k of layer l. */
static void tensor_name(loom_llama_mat k, uint32_t l, char *buf, size_t n)
{
    static const char *const names[LOOM_LLAMA_MAT_COUNT] = { "token_embd", "attn_q", "attn_k", "attn_v",
                                                             "attn_output", "ffn_gate", "ffn_up", "ffn_down",
                                                             "output" };
    if (loom_llama_mat_per_layer(k))
        snprintf(buf, n, "blk.%u.%s.weight", l, names[k]);
    else
        snprintf(buf, n, "%s.weight", names[k]);
}

/* The file type of a matrix (k of layer l) under the options. */
static uint32_t matrix_ttype(const model_opts *o, const char *name, loom_llama_mat k, uint32_t l)
{
    if (o->type_tensor && strcmp(o->type_tensor, name) == 0)
        return o->type_code;
    return o->types ? tt_of(loom_llama_matrix_type(o->types, k, l)) : o->ttype;
}

static void put_matrix(gw *w, const model_opts *o, const char *name, const loom_llama_matrix *m, uint32_t heads,
                       uint32_t hd, uint32_t ttype)
{
    if (o->skip_tensor && strcmp(o->skip_tensor, name) == 0)
        return;
    uint32_t rows = m->rows + (o->bad_shape && strcmp(o->bad_shape, name) == 0);
    /* A type the reader refuses, or rows not whole blocks: zeros of the
     * f32 size, since only the info matters. */
    bool packable = tt_row_bytes(ttype, m->cols) > 0;
    size_t rb = packable ? tt_row_bytes(ttype, m->cols) : 4 * (size_t)m->cols;
    uint8_t *d = calloc(rows, rb);
    ck_assert_ptr_nonnull(d);
    for (uint32_t r = 0; r < m->rows && packable; r++)
        pack_row(ttype, m->f32 + (size_t)file_to_ours(r, heads, hd) * m->cols, m->cols, d + r * rb);
    gw_tensor(w, name, ttype, 2, (uint64_t[]){ m->cols, rows }, d, rows * rb);
    free(d);
}

static void put_vector(gw *w, const model_opts *o, const char *name, const float *v, uint32_t n)
{
    if (o->skip_tensor && strcmp(o->skip_tensor, name) == 0)
        return;
    uint32_t len = n + (o->bad_shape && strcmp(o->bad_shape, name) == 0);
    float *d = calloc(len, sizeof *d);
    ck_assert_ptr_nonnull(d);
    memcpy(d, v, (size_t)n * sizeof *d);
    gw_tensor(w, name, TT_F32, 1, (uint64_t[]){ len }, d, (size_t)len * sizeof *d);
    free(d);
}

static void model_kv_u32(gw *w, const model_opts *o, const char *k, uint32_t v)
{
    if (!o->skip_key || strcmp(o->skip_key, k) != 0)
        kv_u32(w, k, v);
}

static buf model_file(const loom_llama_weights *W, const model_opts *o)
{
    const loom_llama_config *c = &W->cfg;
    gw w;
    gw_init(&w);
    if (!o->skip_key || strcmp(o->skip_key, "general.architecture") != 0)
        kv_str(&w, "general.architecture", o->arch ? o->arch : "llama");
    kv_str(&w, "general.name", "tiny");
    model_kv_u32(&w, o, "llama.context_length", o->context ? o->context : CONTEXT);
    model_kv_u32(&w, o, "llama.embedding_length", c->dim);
    if (o->str_block_count)
        kv_str(&w, "llama.block_count", "2");
    else
        model_kv_u32(&w, o, "llama.block_count", c->n_layers);
    model_kv_u32(&w, o, "llama.feed_forward_length", c->ffn);
    model_kv_u32(&w, o, "llama.rope.dimension_count", c->head_dim);
    if (c->head_dim * c->n_heads != c->dim)
        model_kv_u32(&w, o, "llama.attention.key_length", c->head_dim);
    model_kv_u32(&w, o, "llama.attention.head_count", c->n_heads);
    model_kv_u32(&w, o, "llama.attention.head_count_kv", c->n_kv_heads);
    if (!o->skip_key || strcmp(o->skip_key, "llama.attention.layer_norm_rms_epsilon") != 0)
        kv_f32(&w, "llama.attention.layer_norm_rms_epsilon", c->eps);
    kv_f32(&w, "llama.rope.freq_base", c->rope_theta);
    kv_u32(&w, "general.alignment", 32);
    if (o->rope_scaling)
        kv_str(&w, "llama.rope.scaling.type", o->rope_scaling);
    if (o->extra_tensor)
        put_vector(&w, o, o->extra_tensor, small_f32, 4);
    if (o->vocab) {
        char(*names)[16] = malloc((size_t)c->vocab * sizeof *names);
        const char **toks = malloc((size_t)c->vocab * sizeof *toks);
        ck_assert(names && toks);
        for (uint32_t i = 0; i < c->vocab; i++) {
            snprintf(names[i], sizeof names[i], i == 5 ? "\xe2\x96\x81tok%u" : "<%u>", i);
            toks[i] = names[i];
        }
        kv_strs(&w, "tokenizer.ggml.tokens", c->vocab, toks);
        free(names);
        free(toks);
    }
#define MATRIX(name, m, k, l, heads) \
    put_matrix(&w, o, name, m, heads, c->head_dim, matrix_ttype(o, name, LOOM_LLAMA_##k, l))
    MATRIX("token_embd.weight", &W->embed, EMBED, 0, 0);
    char name[64];
    for (uint32_t l = 0; l < c->n_layers; l++) {
        const loom_llama_layer *L = &W->layers[l];
#define NAME(s) (snprintf(name, sizeof name, "blk.%u." s ".weight", l), name)
        put_vector(&w, o, NAME("attn_norm"), L->attn_norm, c->dim);
        MATRIX(NAME("attn_q"), &L->wq, WQ, l, c->n_heads);
        MATRIX(NAME("attn_k"), &L->wk, WK, l, c->n_kv_heads);
        MATRIX(NAME("attn_v"), &L->wv, WV, l, 0);
        MATRIX(NAME("attn_output"), &L->wo, WO, l, 0);
        put_vector(&w, o, NAME("ffn_norm"), L->ffn_norm, c->dim);
        MATRIX(NAME("ffn_gate"), &L->wg, WG, l, 0);
        MATRIX(NAME("ffn_up"), &L->wu, WU, l, 0);
        MATRIX(NAME("ffn_down"), &L->wd, WD, l, 0);
#undef NAME
    }
    put_vector(&w, o, "output_norm.weight", W->final_norm, c->dim);
    if (!o->tied)
        MATRIX("output.weight", &W->out, OUT, 0, 0);
#undef MATRIX
    buf f = gw_finish(&w);
    gw_free(&w);
    return f;
}

/* f32 weights of tiny (or tiny_k, for the K-quants). */
static loom_llama_weights *reference_weights_of(void (*shape)(loom_llama_config *))
{
    loom_llama_config c;
    shape(&c);
    loom_llama_weights *W = NULL;
    ck_assert_int_eq(loom_llama_weights_create(&c, &W), LOOM_OK);
    return W;
}

static loom_llama_weights *reference_weights(void) { return reference_weights_of(tiny); }

/* The loaded matrix is the original's rows as the file stores them, in the
 * file's type (bf16: f32): raw byte for byte, f32 what raw decodes to
 * (bf16: the rounded values). */
static void expect_matrix(const loom_llama_matrix *got, const loom_llama_matrix *orig, uint32_t ttype,
                          const char *what)
{
    ck_assert_uint_eq(got->rows, orig->rows);
    ck_assert_uint_eq(got->cols, orig->cols);
    loom_dtype t = dtype_of(ttype);
    ck_assert_msg(got->type == t, "%s: dtype %s, want %s", what, loom_dtype_name(got->type), loom_dtype_name(t));
    ck_assert(t == LOOM_F32 ? got->raw == NULL : got->raw != NULL);
    size_t rb = tt_row_bytes(ttype, orig->cols), cols = orig->cols;
    uint8_t *packed = malloc(rb);
    float *want = malloc(cols * sizeof *want);
    ck_assert(packed && want);
    for (uint32_t r = 0; r < orig->rows; r++) {
        const float *row = orig->f32 + r * cols;
        pack_row(ttype, row, orig->cols, packed);
        if (ttype == TT_BF16)
            for (size_t j = 0; j < cols; j++)
                want[j] = from_bf16(to_bf16(row[j]));
        else if (ttype == TT_F32)
            memcpy(want, row, cols * sizeof *want);
        else
            ck_assert_int_eq(loom_dequantize_row(t, packed, orig->cols, want), LOOM_OK);
        ck_assert_msg(!got->raw || memcmp((const uint8_t *)got->raw + r * rb, packed, rb) == 0,
                      "%s row %u: raw bytes are not the row as the file stores it", what, r);
        ck_assert_msg(memcmp(got->f32 + r * cols, want, cols * sizeof *want) == 0,
                      "%s row %u: f32 values are not what the file's row decodes to", what, r);
    }
    free(packed);
    free(want);
}

static void expect_weights(const loom_llama_weights *got, const loom_llama_weights *W, const model_opts *o)
{
    const loom_llama_config *c = &got->cfg, *w = &W->cfg;
    ck_assert_uint_eq(c->dim, w->dim);
    ck_assert_uint_eq(c->n_layers, w->n_layers);
    ck_assert_uint_eq(c->n_heads, w->n_heads);
    ck_assert_uint_eq(c->n_kv_heads, w->n_kv_heads);
    ck_assert_uint_eq(c->head_dim, w->head_dim);
    ck_assert_uint_eq(c->ffn, w->ffn);
    ck_assert_uint_eq(c->vocab, w->vocab);
    ck_assert_uint_eq(c->max_seq, w->max_seq);
    ck_assert(c->eps == w->eps && c->rope_theta == w->rope_theta);
    ck_assert_int_eq(c->mix, LOOM_LLAMA_MIX_NONE);
    ck_assert_int_eq(c->kvtype, LOOM_F32);
    for (int k = 0; k < LOOM_LLAMA_MAT_COUNT; k++)
        for (uint32_t l = 0; l < (loom_llama_mat_per_layer((loom_llama_mat)k) ? c->n_layers : 1); l++) {
            char name[64];
            tensor_name((loom_llama_mat)k, l, name, sizeof name);
            /* tied: the output is token_embd, in its type */
            loom_llama_mat from = k == LOOM_LLAMA_OUT && o->tied ? LOOM_LLAMA_EMBED : (loom_llama_mat)k;
            uint32_t tt = matrix_ttype(o, from == LOOM_LLAMA_EMBED ? "token_embd.weight" : name, from, l);
            expect_matrix(loom_llama_weights_matrix(got, (loom_llama_mat)k, l),
                          loom_llama_weights_matrix(W, from, l), tt, name);
        }
    ck_assert_int_eq(memcmp(got->final_norm, W->final_norm, c->dim * sizeof(float)), 0);
    for (uint32_t l = 0; l < c->n_layers; l++) {
        const loom_llama_layer *a = &got->layers[l], *b = &W->layers[l];
        ck_assert_int_eq(memcmp(a->attn_norm, b->attn_norm, c->dim * sizeof(float)), 0);
        ck_assert_int_eq(memcmp(a->ffn_norm, b->ffn_norm, c->dim * sizeof(float)), 0);
    }
}

/* Files of every type taken, uniform and mixed per tensor, tied or not: in
 * a shape whose rows are whole blocks of the type, or, for a mix, in the
 * dtypes loom_llama_matrix_type gives under that wtype (q4_k_m over tiny_k:
 * q4_k and q6_k; q4_k over tiny_odd: q8_0, and f16 for ffn_down). */
static const struct {
    uint32_t ttype;
    const char *mix;
    void (*shape)(loom_llama_config *);
} round_trips[] = {
    { TT_F32, NULL, tiny },         { TT_F16, NULL, tiny },        { TT_BF16, NULL, tiny },
    { TT_Q8_0, NULL, tiny },        { TT_Q4_0, NULL, tiny },       { TT_Q4_K, NULL, tiny_k },
    { TT_Q6_K, NULL, tiny_k },      { TT_Q4_K, "q4_k_m", tiny_k }, { TT_Q8_0, "q4_k", tiny_odd },
};

/* The writer's options for round trip i; cfg holds the mix's config. */
static model_opts round_trip_opts(int i, bool tied, loom_llama_config *cfg)
{
    model_opts o = { .ttype = round_trips[i].ttype, .tied = tied, .vocab = !tied };
    if (round_trips[i].mix) {
        round_trips[i].shape(cfg);
        ck_assert_int_eq(loom_llama_wtype_parse(round_trips[i].mix, cfg), LOOM_OK);
        o.types = cfg;
    }
    return o;
}

START_TEST(model_round_trips)
{
    int i = _i / 2;
    bool tied = _i % 2;
    loom_llama_config mix;
    model_opts o = round_trip_opts(i, tied, &mix);
    loom_llama_weights *W = reference_weights_of(round_trips[i].shape);
    buf f = model_file(W, &o);
    loom_llama_weights *got = NULL;
    ck_assert_msg(loom_llama_weights_from_gguf_memory(f.p, f.len, &(loom_llama_gguf_desc){ .max_seq = 8 }, &got) ==
                      LOOM_OK, "%s", loom_last_error());
    expect_weights(got, W, &o);
    ck_assert_int_eq(got->cfg.wtype, o.types && round_trips[i].shape == tiny_k ? LOOM_Q4_K
                                     : o.types                                ? LOOM_Q8_0
                                                                              : dtype_of(o.ttype));
    if (o.vocab) {
        ck_assert_uint_eq(got->n_tokens, W->cfg.vocab);
        ck_assert_str_eq(loom_llama_token_str(got, 0), "<0>");
        ck_assert_str_eq(loom_llama_token_str(got, 5), "\xe2\x96\x81tok5");
        ck_assert_ptr_null(loom_llama_token_str(got, W->cfg.vocab));
    } else {
        ck_assert_ptr_null(loom_llama_token_str(got, 0));
    }
    ck_assert_ptr_null(loom_llama_token_str(NULL, 0));
    /* A shapes-only load has the same shapes and dtypes, and no values. */
    loom_llama_weights *shapes = NULL;
    ck_assert_int_eq(loom_llama_weights_from_gguf_memory(f.p, f.len, &(loom_llama_gguf_desc){ .shapes_only = true },
                                                         &shapes),
                     LOOM_OK);
    ck_assert(shapes->no_values && !shapes->final_norm && !shapes->layers[0].attn_norm);
    char a[128], b[128];
    ck_assert_str_eq(loom_llama_describe_types(NULL, shapes, a, sizeof a),
                     loom_llama_describe_types(NULL, got, b, sizeof b));
    for (int k = 0; k < LOOM_LLAMA_MAT_COUNT; k++) {
        const loom_llama_matrix *s = loom_llama_weights_matrix(shapes, (loom_llama_mat)k, 1);
        const loom_llama_matrix *g = loom_llama_weights_matrix(got, (loom_llama_mat)k, 1);
        ck_assert(s->rows == g->rows && s->cols == g->cols && s->type == g->type && !s->f32 && !s->raw);
    }
    loom_llama_ref *ref = NULL;
    ck_assert_int_eq(loom_llama_ref_create(shapes, &ref), LOOM_INVALID_ARGUMENT);
    loom_llama_weights_destroy(shapes);
    loom_llama_weights_destroy(got);
    free(f.p);
    loom_llama_weights_destroy(W);
}
END_TEST

/* A model through gguf.h's writer and back: as stored, every matrix in its
 * own dtype, bit for bit (q/k block rows permuted and back); a raw-only
 * load of it written again, the same bytes; an f32 model written in a
 * block type, rows as loom_quantize_row packs them. */
static const char *const writer_wtypes[] = { "f32", "f16", "q8_0", "q4_0", "q4_k", "q6_k", "q4_k_m" };

START_TEST(writer_writes_models_as_stored)
{
    loom_llama_config c;
    tiny_k(&c);
    c.max_seq = CONTEXT;
    ck_assert_int_eq(loom_llama_wtype_parse(writer_wtypes[_i], &c), LOOM_OK);
    loom_llama_weights *W = NULL, *got = NULL, *raw = NULL, *again = NULL;
    ck_assert_int_eq(loom_llama_weights_create(&c, &W), LOOM_OK);
    void *p = NULL, *q = NULL;
    size_t n = 0, m = 0;
    loom_gguf_writer *w = NULL;
    ck_assert_int_eq(loom_gguf_writer_create(&w), LOOM_OK);
    ck_assert_int_eq(loom_gguf_writer_add_llama(w, W, &(loom_gguf_llama_desc){ .as_stored = true }), LOOM_OK);
    ck_assert_int_eq(loom_gguf_writer_to_memory(w, &p, &n), LOOM_OK);
    loom_gguf_writer_destroy(w);
    ck_assert_int_eq(loom_llama_weights_from_gguf_memory(p, n, NULL, &got), LOOM_OK);
    ck_assert_int_eq(loom_llama_weights_from_gguf_memory(p, n, &(loom_llama_gguf_desc){ .raw_only = true }, &raw),
                     LOOM_OK);
    for (int k = 0; k < LOOM_LLAMA_MAT_COUNT; k++)
        for (uint32_t l = 0; l < (loom_llama_mat_per_layer((loom_llama_mat)k) ? c.n_layers : 1); l++) {
            const loom_llama_matrix *a = loom_llama_weights_matrix(W, (loom_llama_mat)k, l);
            const loom_llama_matrix *b = loom_llama_weights_matrix(got, (loom_llama_mat)k, l);
            ck_assert_msg(a->type == b->type && memcmp(a->f32, b->f32, (size_t)a->rows * a->cols * 4) == 0 &&
                              memcmp(loom_llama_matrix_data(a), loom_llama_matrix_data(b),
                                     loom_llama_matrix_bytes(a)) == 0,
                          "%s: matrix %s of layer %u differs", writer_wtypes[_i],
                          loom_llama_mat_name((loom_llama_mat)k), l);
        }
    ck_assert_int_eq(loom_llama_weights_to_gguf(raw, &(loom_gguf_llama_desc){ .as_stored = true }, "/dev/null"),
                     LOOM_OK);
    ck_assert_int_eq(loom_gguf_writer_create(&w), LOOM_OK);
    ck_assert_int_eq(loom_gguf_writer_add_llama(w, raw, &(loom_gguf_llama_desc){ .as_stored = true }), LOOM_OK);
    ck_assert_int_eq(loom_gguf_writer_to_memory(w, &q, &m), LOOM_OK);
    loom_gguf_writer_destroy(w);
    ck_assert(m == n && memcmp(p, q, n) == 0);
    free(q);
    /* Converting needs the f32 values a raw-only load has not got. */
    bool all_f32 = strcmp(writer_wtypes[_i], "f32") == 0;
    ck_assert_int_eq(loom_llama_weights_to_gguf(raw, &(loom_gguf_llama_desc){ .type = LOOM_GGUF_TENSOR_BF16 },
                                                "/dev/null"),
                     all_f32 ? LOOM_OK : LOOM_UNSUPPORTED);
    loom_llama_weights_destroy(raw);
    loom_llama_weights_destroy(got);
    free(p);
    if (all_f32) {   /* the f32 model written as q4_k */
        ck_assert_int_eq(loom_gguf_writer_create(&w), LOOM_OK);
        ck_assert_int_eq(loom_gguf_writer_add_llama(w, W, &(loom_gguf_llama_desc){ .type = LOOM_GGUF_TENSOR_Q4_K }), LOOM_OK);
        ck_assert_int_eq(loom_gguf_writer_to_memory(w, &p, &n), LOOM_OK);
        loom_gguf_writer_destroy(w);
        ck_assert_int_eq(loom_llama_weights_from_gguf_memory(p, n, NULL, &again), LOOM_OK);
        free(p);
        expect_weights(again, W, &(model_opts){ .ttype = TT_Q4_K });
        loom_llama_weights_destroy(again);
    }
    loom_llama_weights_destroy(W);
}
END_TEST

/* From a path; max_seq is the context length, capped by default and
 * lowered by the caller, never raised. */
START_TEST(model_from_file)
{
    loom_llama_weights *W = reference_weights();
    buf f = model_file(W, &(model_opts){ .ttype = TT_F16, .vocab = true });
    char path[] = "/tmp/loom-gguf-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, f.p, f.len), (ssize_t)f.len);
    close(fd);
    const uint32_t caps[][2] = { { 8, 8 }, { 0, CONTEXT }, { CONTEXT, CONTEXT }, { 1, 1 } };
    for (size_t i = 0; i < 4; i++) {
        loom_llama_weights *got = NULL;
        ck_assert_int_eq(loom_llama_weights_from_gguf(path, &(loom_llama_gguf_desc){ .max_seq = caps[i][0] }, &got),
                         LOOM_OK);
        ck_assert_uint_eq(got->cfg.max_seq, caps[i][1]);
        ck_assert_str_eq(loom_llama_token_str(got, 9), "<9>");
        ck_assert_int_eq(got->cfg.wtype, LOOM_F16);
        loom_llama_weights_destroy(got);
    }
    loom_llama_weights *got = NULL;
    ck_assert_int_eq(loom_llama_weights_from_gguf(path, &(loom_llama_gguf_desc){ .max_seq = CONTEXT + 1 }, &got),
                     LOOM_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(loom_last_error(), "llama.context_length"));
    ck_assert_ptr_null(got);
    ck_assert_int_eq(loom_llama_weights_from_gguf(path, NULL, &got), LOOM_OK);
    ck_assert_uint_eq(got->cfg.max_seq, CONTEXT);
    loom_llama_weights_destroy(got);
    got = NULL;
    unlink(path);
    ck_assert_int_eq(loom_llama_weights_from_gguf(path, NULL, &got), LOOM_IO);
    ck_assert_ptr_null(got);
    free(f.p);
    loom_llama_weights_destroy(W);
}
END_TEST

static loom_result load_with(const loom_llama_weights *W, const model_opts *o)
{
    buf f = model_file(W, o);
    loom_llama_weights *got = NULL;
    loom_result rc = loom_llama_weights_from_gguf_memory(f.p, f.len, &EIGHT, &got);
    ck_assert(rc == LOOM_OK ? got != NULL : got == NULL);
    loom_llama_weights_destroy(got);
    free(f.p);
    return rc;
}

START_TEST(missing_tensors_fail)
{
    loom_llama_weights *W = reference_weights();
    static const char *const parts[] = { "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                         "ffn_norm", "ffn_gate", "ffn_up", "ffn_down" };
    char name[64];
    for (uint32_t l = 0; l < 2; l++)
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
            snprintf(name, sizeof name, "blk.%u.%s.weight", l, parts[i]);
            ck_assert_msg(load_with(W, &(model_opts){ .skip_tensor = name }) == LOOM_NOT_FOUND, "%s", name);
            ck_assert_msg(load_with(W, &(model_opts){ .bad_shape = name }) == LOOM_INVALID_ARGUMENT, "%s", name);
        }
    const char *model_wide[] = { "token_embd.weight", "output_norm.weight" };
    for (size_t i = 0; i < 2; i++)
        ck_assert_int_eq(load_with(W, &(model_opts){ .skip_tensor = model_wide[i] }), LOOM_NOT_FOUND);
    ck_assert_int_eq(load_with(W, &(model_opts){ .bad_shape = "output.weight" }), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(load_with(W, &(model_opts){ .bad_shape = "output_norm.weight" }), LOOM_INVALID_ARGUMENT);
    /* An embedding of another width does not give a vocabulary. */
    ck_assert_int_eq(load_with(W, &(model_opts){ .skip_key = "llama.embedding_length" }), LOOM_NOT_FOUND);
    ck_assert_int_eq(load_with(W, &(model_opts){ 0 }), LOOM_OK);
    loom_llama_weights_destroy(W);
}
END_TEST

START_TEST(bad_metadata_keys_fail)
{
    loom_llama_weights *W = reference_weights();
    const char *required[] = { "general.architecture", "llama.context_length", "llama.embedding_length",
                               "llama.block_count", "llama.feed_forward_length", "llama.attention.head_count",
                               "llama.attention.layer_norm_rms_epsilon" };
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        ck_assert_msg(load_with(W, &(model_opts){ .skip_key = required[i] }) == LOOM_NOT_FOUND, "%s", required[i]);
    /* head_count_kv defaults to head_count: another model, still valid. */
    buf f = model_file(W, &(model_opts){ .skip_key = "llama.attention.head_count_kv" });
    loom_llama_weights *got = NULL;
    ck_assert_int_eq(loom_llama_weights_from_gguf_memory(f.p, f.len, &EIGHT, &got), LOOM_INVALID_ARGUMENT);
    free(f.p);
    ck_assert_int_eq(load_with(W, &(model_opts){ .arch = "gpt2" }), LOOM_UNSUPPORTED);
    ck_assert_int_eq(load_with(W, &(model_opts){ .arch = "llamax" }), LOOM_UNSUPPORTED);
    ck_assert_int_eq(load_with(W, &(model_opts){ .str_block_count = true }), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(load_with(W, &(model_opts){ .rope_scaling = "linear" }), LOOM_UNSUPPORTED);
    ck_assert_int_eq(load_with(W, &(model_opts){ .rope_scaling = "none" }), LOOM_OK);
    /* Tensors the decoder would ignore change the model: refused. */
    const char *extra[] = { "rope_freqs.weight", "blk.0.attn_q.bias", "blk.2.attn_q.weight", "blk.01.ffn_up.weight",
                            "blk.0.ffn_up.weightx", "blk.-1.ffn_up.weight", "output.weight.x" };
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
        ck_assert_msg(load_with(W, &(model_opts){ .extra_tensor = extra[i] }) == LOOM_UNSUPPORTED, "%s", extra[i]);
    /* Not a GGUF file at all. */
    ck_assert_int_eq(loom_llama_weights_from_gguf_memory("GGML", 4, &EIGHT, &got), LOOM_PARSE);
    ck_assert_ptr_null(got);
    loom_llama_weights_destroy(W);
}
END_TEST

/* Loads f, expecting rc and a message naming the tensor (and the type
 * when given). */
static void expect_load_error(const buf *f, loom_result rc, const char *tensor, const char *type)
{
    loom_llama_weights *got = NULL;
    ck_assert_int_eq(loom_llama_weights_from_gguf_memory(f->p, f->len, &EIGHT, &got), rc);
    ck_assert_ptr_null(got);
    ck_assert_msg(strstr(loom_last_error(), tensor) && (!type || strstr(loom_last_error(), type)),
                  "the message does not name %s %s: %s", tensor, type ? type : "", loom_last_error());
}

/* Malformed quantized models: a type not taken, a row that is not whole
 * blocks, a tensor one block (or part of one) short at the end of the
 * file, a tensor placed past the end: each an error naming the tensor. */
START_TEST(quantized_errors_name_the_tensor)
{
    loom_llama_weights *W = reference_weights_of(tiny_k), *W0 = reference_weights();
    buf f = model_file(W, &(model_opts){ .ttype = TT_Q4_K, .type_tensor = "blk.1.ffn_up.weight",
                                         .type_code = TT_Q5_K });
    expect_load_error(&f, LOOM_UNSUPPORTED, "blk.1.ffn_up.weight", "q5_k");
    free(f.p);
    /* tiny's ffn_down has rows of 96: not whole q4_k blocks. */
    f = model_file(W0, &(model_opts){ .ttype = TT_Q8_0, .type_tensor = "blk.0.ffn_down.weight",
                                      .type_code = TT_Q4_K });
    expect_load_error(&f, LOOM_PARSE, "blk.0.ffn_down.weight", "q4_k");
    free(f.p);
    /* output.weight (q6_k, 210-byte blocks) is the file's last tensor. */
    f = model_file(W, &(model_opts){ .ttype = TT_Q6_K });
    const size_t cuts[] = { 1, 2, 105, 209, 210, 211 };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        buf cut = { f.p, f.len - cuts[i], f.cap };
        expect_load_error(&cut, LOOM_PARSE, "output.weight", NULL);
    }
    /* blk.1.attn_v.weight's offset moved to the end of the data section. */
    loom_gguf *g = NULL;
    ck_assert_int_eq(loom_gguf_open_memory(f.p, f.len, &g), LOOM_OK);
    const loom_gguf_tensor *t = loom_gguf_find_tensor(g, "blk.1.attn_v.weight");
    size_t at = (size_t)t->info_offset + 8 + t->name.len + 4 + 8 * t->n_dims + 4;
    uint64_t end = f.len - loom_gguf_data_offset(g);
    end += (32 - end % 32) % 32;
    loom_gguf_close(g);
    for (int i = 0; i < 8; i++)
        f.p[at + i] = (uint8_t)(end >> (8 * i));
    expect_load_error(&f, LOOM_PARSE, "blk.1.attn_v.weight", NULL);
    free(f.p);
    loom_llama_weights_destroy(W);
    loom_llama_weights_destroy(W0);
}
END_TEST

/* Every truncation of the model fails cleanly: all of the header, metadata
 * and infos, and sampled points of the data. */
START_TEST(model_truncations_fail)
{
    /* bf16, and the q4_k_m mix (cut mid-block too) */
    loom_llama_config mix;
    model_opts o = _i ? round_trip_opts(7, false, &mix) : (model_opts){ .ttype = TT_BF16, .vocab = true };
    loom_llama_weights *W = reference_weights_of(_i ? tiny_k : tiny);
    buf f = model_file(W, &o);
    loom_gguf *g = NULL;
    ck_assert_int_eq(loom_gguf_open_memory(f.p, f.len, &g), LOOM_OK);
    size_t data = (size_t)loom_gguf_data_offset(g);
    loom_gguf_close(g);
    for (size_t n = 0; n < f.len; n += n < data + 64 ? 1 : 997) {
        loom_llama_weights *got = NULL;
        ck_assert_int_eq(open_copy(f.p, n, &g), LOOM_PARSE);
        ck_assert_int_eq(loom_llama_weights_from_gguf_memory(f.p, n, &EIGHT, &got), LOOM_PARSE);
    }
    free(f.p);
    loom_llama_weights_destroy(W);
}
END_TEST

/* What the file means: RoPE on adjacent pairs (2i, 2i+1) of the file's own
 * q/k rows gives the same per-head scores q.k as the decoder's RoPE on the
 * loaded rows. */
static void rope_adjacent(float *x, uint32_t heads, uint32_t hd, float theta, uint32_t pos)
{
    for (uint32_t h = 0; h < heads; h++)
        for (uint32_t i = 0; i < hd / 2; i++) {
            double a = pos * pow(theta, -2.0 * i / hd), c = cos(a), s = sin(a);
            float *p = x + h * hd + 2 * i;
            double x0 = p[0], x1 = p[1];
            p[0] = (float)(x0 * c - x1 * s);
            p[1] = (float)(x0 * s + x1 * c);
        }
}

static void matvec_rows(const float *W, const float *x, float *y, uint32_t rows, uint32_t cols)
{
    for (uint32_t r = 0; r < rows; r++) {
        double s = 0;
        for (uint32_t c = 0; c < cols; c++)
            s += (double)W[(size_t)r * cols + c] * x[c];
        y[r] = (float)s;
    }
}

/* A tensor of the file decoded to f32 in file order (caller frees). */
static float *file_values(const loom_gguf *g, const char *name)
{
    const loom_gguf_tensor *t = loom_gguf_find_tensor(g, name);
    ck_assert_ptr_nonnull(t);
    float *v = malloc((size_t)t->n_elems * sizeof *v);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(loom_dequantize_row(dtype_of(t->type), t->data, t->n_elems, v), LOOM_OK);
    return v;
}

/* f32 and block-typed files alike: the permutation moves whole rows, so a
 * block row stays whole. */
static const struct {
    uint32_t ttype;
    void (*shape)(loom_llama_config *);
} rope_files[] = { { TT_F32, tiny }, { TT_Q8_0, tiny }, { TT_Q4_0, tiny }, { TT_Q4_K, tiny_k }, { TT_Q6_K, tiny_k } };

START_TEST(rope_layout_matches_the_file)
{
    loom_llama_weights *W = reference_weights_of(rope_files[_i].shape);
    buf f = model_file(W, &(model_opts){ .ttype = rope_files[_i].ttype });
    loom_gguf *g = NULL;
    loom_llama_weights *got = NULL;
    ck_assert_int_eq(loom_gguf_open_memory(f.p, f.len, &g), LOOM_OK);
    ck_assert_int_eq(loom_llama_weights_from_gguf_reader(g, &EIGHT, &got), LOOM_OK);
    const loom_llama_config *c = &got->cfg;
    uint32_t hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd, group = c->n_heads / c->n_kv_heads;
    ck_assert_int_eq(got->layers[1].wq.type, dtype_of(rope_files[_i].ttype));
    float *fq = file_values(g, "blk.1.attn_q.weight"), *fk = file_values(g, "blk.1.attn_k.weight");
    float *x = malloc(c->dim * sizeof *x), *q1 = malloc(qd * sizeof *q1), *q2 = malloc(qd * sizeof *q2);
    float *k1 = malloc(kvd * sizeof *k1), *k2 = malloc(kvd * sizeof *k2);
    ck_assert(x && q1 && q2 && k1 && k2);
    for (uint32_t i = 0; i < c->dim; i++)
        x[i] = sinf(0.3f * (float)i) + 0.1f;
    const uint32_t pos[][2] = { { 5, 2 }, { 7, 7 }, { 3, 0 } };
    for (size_t p = 0; p < 3; p++) {
        matvec_rows(fq, x, q1, qd, c->dim);
        matvec_rows(fk, x, k1, kvd, c->dim);
        rope_adjacent(q1, c->n_heads, hd, c->rope_theta, pos[p][0]);
        rope_adjacent(k1, c->n_kv_heads, hd, c->rope_theta, pos[p][1]);
        matvec_rows(got->layers[1].wq.f32, x, q2, qd, c->dim);
        matvec_rows(got->layers[1].wk.f32, x, k2, kvd, c->dim);
        loom_ref_rope(q2, q2, c->n_heads, hd, c->rope_theta, pos[p][0]);
        loom_ref_rope(k2, k2, c->n_kv_heads, hd, c->rope_theta, pos[p][1]);
        for (uint32_t h = 0; h < c->n_heads; h++) {
            double s1 = 0, s2 = 0;
            for (uint32_t i = 0; i < hd; i++) {
                s1 += (double)q1[h * hd + i] * k1[(h / group) * hd + i];
                s2 += (double)q2[h * hd + i] * k2[(h / group) * hd + i];
            }
            ck_assert_msg(fabs(s1 - s2) <= 1e-4 * (1 + fabs(s1)), "%s head %u pos %u/%u: %g vs %g",
                          loom_gguf_tensor_type_name(rope_files[_i].ttype), h, pos[p][0], pos[p][1], s1, s2);
        }
    }
    free(x);
    free(q1);
    free(q2);
    free(k1);
    free(k2);
    free(fq);
    free(fk);
    loom_llama_weights_destroy(got);
    loom_gguf_close(g);
    free(f.p);
    loom_llama_weights_destroy(W);
}
END_TEST

/* A shapes-only load plans as the model it describes: the q4_k_m file's
 * dry plan is the synthetic q4_k_m model's (same dtypes, bytes, plan). */
START_TEST(shapes_only_file_plans_like_its_model)
{
    loom_llama_config mix;
    model_opts o = round_trip_opts(7, false, &mix);
    loom_llama_weights *W = reference_weights_of(tiny_k), *shapes = NULL;
    buf f = model_file(W, &o);
    ck_assert_int_eq(loom_llama_weights_from_gguf_memory(f.p, f.len, &(loom_llama_gguf_desc){ .shapes_only = true },
                                                         &shapes),
                     LOOM_OK);
    free(f.p);
    mix.max_seq = shapes->cfg.max_seq;
    ck_assert_uint_eq(mix.max_seq, CONTEXT);
    loom_llama_figures a, b;
    ck_assert_int_eq(loom_llama_dry_figures(NULL, shapes, NULL, false, &a), LOOM_OK);
    ck_assert_int_eq(loom_llama_dry_figures(&mix, NULL, NULL, false, &b), LOOM_OK);
    ck_assert_uint_eq(a.weight_bytes, b.weight_bytes);
    ck_assert_uint_eq(a.dispatches, b.dispatches);
    ck_assert_uint_eq(a.barriers, b.barriers);
    ck_assert(a.levels_per_layer == b.levels_per_layer);
    char ta[128], tb[128];
    ck_assert_str_eq(loom_llama_describe_types(NULL, shapes, ta, sizeof ta),
                     loom_llama_describe_types(&mix, NULL, tb, sizeof tb));
    ck_assert_str_eq(ta, "q4_k x 13, q6_k x 3");
    loom_llama_weights_destroy(shapes);
    loom_llama_weights_destroy(W);
}
END_TEST

/* The reference decodes a quantized file: as an f32 model whose every
 * matrix holds what the file's rows decode to (made here from the
 * original weights, row by row), logit for logit. */
START_TEST(reference_decodes_quantized_file)
{
    int i = _i + 3;   /* the round trips from q8_0 on */
    loom_llama_config mix;
    model_opts o = round_trip_opts(i, false, &mix);
    loom_llama_weights *W = reference_weights_of(round_trips[i].shape), *got = NULL;
    buf f = model_file(W, &o);
    ck_assert_int_eq(loom_llama_weights_from_gguf_memory(f.p, f.len, &EIGHT, &got), LOOM_OK);
    free(f.p);
    for (int k = 0; k < LOOM_LLAMA_MAT_COUNT; k++)
        for (uint32_t l = 0; l < (loom_llama_mat_per_layer((loom_llama_mat)k) ? W->cfg.n_layers : 1); l++) {
            char name[64];
            tensor_name((loom_llama_mat)k, l, name, sizeof name);
            loom_llama_matrix *mx = (loom_llama_matrix *)loom_llama_weights_matrix(W, (loom_llama_mat)k, l);
            uint32_t tt = matrix_ttype(&o, name, (loom_llama_mat)k, l);
            uint8_t *packed = malloc(tt_row_bytes(tt, mx->cols));
            ck_assert_ptr_nonnull(packed);
            for (uint32_t r = 0; r < mx->rows; r++) {
                float *row = mx->f32 + (size_t)r * mx->cols;
                pack_row(tt, row, mx->cols, packed);
                ck_assert_int_eq(loom_dequantize_row(dtype_of(tt), packed, mx->cols, row), LOOM_OK);
            }
            free(packed);
        }
    loom_llama_ref *rq = NULL, *rd = NULL;
    ck_assert_int_eq(loom_llama_ref_create(got, &rq), LOOM_OK);
    ck_assert_int_eq(loom_llama_ref_create(W, &rd), LOOM_OK);
    uint32_t v = W->cfg.vocab, tok = 3;
    float *lq = malloc(v * sizeof(float)), *ld = malloc(v * sizeof(float));
    ck_assert(lq && ld);
    for (uint32_t s = 0; s < STEPS; s++) {
        uint32_t aq, ad;
        ck_assert_int_eq(loom_llama_ref_step(rq, tok, s, lq, &aq), LOOM_OK);
        ck_assert_int_eq(loom_llama_ref_step(rd, tok, s, ld, &ad), LOOM_OK);
        ck_assert_msg(memcmp(lq, ld, v * sizeof(float)) == 0, "%s step %u: the logits differ",
                      loom_gguf_tensor_type_name(o.ttype), s);
        ck_assert_uint_eq(aq, ad);
        tok = aq;
    }
    free(lq);
    free(ld);
    loom_llama_ref_destroy(rq);
    loom_llama_ref_destroy(rd);
    loom_llama_weights_destroy(got);
    loom_llama_weights_destroy(W);
}
END_TEST

/* ---- decoding with loaded weights on the device ------------------------- */

/* Every round-trip file, quantized and mixed ones included: the GPU reads
 * the blocks as loaded (raw only: no f32 copies, which the reference then
 * refuses), the reference their dequantized values (a full load). */
START_TEST(loaded_model_decodes_like_reference)
{
    loom_llama_config mix;
    model_opts o = round_trip_opts(_i, false, &mix);
    o.vocab = true;
    loom_llama_weights *W = reference_weights_of(round_trips[_i].shape);
    buf f = model_file(W, &o);
    loom_llama_weights *got = NULL, *raw = NULL;
    ck_assert_int_eq(loom_llama_weights_from_gguf_memory(f.p, f.len, &EIGHT, &got), LOOM_OK);
    ck_assert_int_eq(loom_llama_weights_from_gguf_memory(f.p, f.len, &(loom_llama_gguf_desc){ .max_seq = 8,
                                                                                               .raw_only = true },
                                                         &raw),
                     LOOM_OK);
    free(f.p);
    bool f32_copies = true;
    for (int k = 0; k < LOOM_LLAMA_MAT_COUNT; k++) {
        const loom_llama_matrix *a = loom_llama_weights_matrix(raw, (loom_llama_mat)k, 1);
        const loom_llama_matrix *b = loom_llama_weights_matrix(got, (loom_llama_mat)k, 1);
        ck_assert(a->type == b->type && (a->f32 != NULL) == (a->type == LOOM_F32));
        ck_assert_int_eq(memcmp(loom_llama_matrix_data(a), loom_llama_matrix_data(b), loom_llama_matrix_bytes(a)), 0);
        f32_copies &= a->type == LOOM_F32;
    }

    loom_rt *rt = NULL;
    loom_llama *m = NULL;
    loom_llama_ref *ref = NULL, *ref0 = NULL;
    ck_assert_int_eq(loom_llama_ref_create(raw, &ref), f32_copies ? LOOM_OK : LOOM_INVALID_ARGUMENT);
    loom_llama_ref_destroy(ref);
    ref = NULL;
    ck_assert_int_eq(loom_rt_create(&(loom_rt_desc){ .validate = true }, &rt), LOOM_OK);
    ck_assert_int_eq(loom_llama_create(rt, raw, NULL, &m), LOOM_OK);
    ck_assert_int_eq(loom_llama_ref_create(got, &ref), LOOM_OK);
    ck_assert_int_eq(loom_llama_ref_create(W, &ref0), LOOM_OK);
    uint32_t v = got->cfg.vocab, tok = 3;
    float *gl = malloc(v * sizeof(float)), *rl = malloc(v * sizeof(float)), *r0 = malloc(v * sizeof(float));
    ck_assert(gl && rl && r0);
    for (uint32_t s = 0; s < STEPS; s++) {
        uint32_t garg, rarg, arg0;
        ck_assert_int_eq(loom_llama_step(m, tok, s, gl, &garg), LOOM_OK);
        ck_assert_int_eq(loom_llama_ref_step(ref, tok, s, rl, &rarg), LOOM_OK);
        loom_llama_diff d;
        ck_assert_msg(loom_llama_compare(gl, garg, rl, rarg, v, loom_llama_check_tol(rt, raw, TOL), &d),
                      "step %u: max err %g (ref scale %g), argmax gpu %u ref %u", s, d.max_abs, d.ref_max_abs, garg,
                      rarg);
        /* An f32 file loaded as f32 is the original model exactly. */
        ck_assert_int_eq(loom_llama_ref_step(ref0, tok, s, r0, &arg0), LOOM_OK);
        if (_i == 0)
            ck_assert_int_eq(memcmp(rl, r0, v * sizeof(float)), 0);
        ck_assert_ptr_nonnull(loom_llama_token_str(got, rarg));
        tok = rarg;
    }
    free(gl);
    free(rl);
    free(r0);
    loom_llama_ref_destroy(ref0);
    loom_llama_ref_destroy(ref);
    loom_llama_destroy(m);
    loom_rt_wait_idle(rt);
    uint64_t vmsg = loom_rt_validation_messages(rt);
    loom_rt_destroy(rt);
    ck_assert_uint_eq(vmsg, 0);
    loom_llama_weights_destroy(raw);
    loom_llama_weights_destroy(got);
    loom_llama_weights_destroy(W);
}
END_TEST

/* ---- corpus seeds ------------------------------------------------------- */

static void write_file(const char *dir, const char *name, const buf *f)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *o = fopen(path, "wb");
    if (!o || fwrite(f->p, 1, f->len, o) != f->len) {
        perror(path);
        exit(1);
    }
    fclose(o);
}

/* A seed the loader must answer with rc. */
static void write_seed(const char *dir, const char *name, const buf *f, loom_result rc)
{
    loom_llama_weights *w = NULL;
    ck_assert_msg(loom_llama_weights_from_gguf_memory(f->p, f->len, NULL, &w) == rc, "%s: %s", name,
                  loom_last_error());
    loom_llama_weights_destroy(w);
    write_file(dir, name, f);
}

/* Quantized seeds: rows of 32 (and 256 for the K-quants) with heads of 2
 * and an FFN of 2, so the files stay small; the matrices whose rows are 2
 * wide fall back to f16, so each file mixes types. And malformed ones: cut
 * mid-block, a q4_k tensor whose rows are not whole blocks, a q5_k one. */
static int write_quantized_corpus(const char *dir)
{
    loom_llama_config c = { .dim = 32, .n_layers = 1, .n_heads = 1, .n_kv_heads = 1, .head_dim = 2, .ffn = 2,
                            .vocab = 8, .max_seq = 8, .eps = 1e-5f, .rope_theta = 10000.0f, .seed = 2 };
    const char *wtypes[] = { "q8_0", "q4_0", "q4_k_m" };
    const char *names[] = { "model-q8_0.gguf", "model-q4_0.gguf", "model-q4_k_m.gguf" };
    for (int i = 0; i < 3; i++) {
        c.dim = i == 2 ? 256 : 32;
        loom_llama_weights *W = NULL;
        loom_llama_config types = c;
        if (loom_llama_weights_create(&c, &W) != LOOM_OK || loom_llama_wtype_parse(wtypes[i], &types) != LOOM_OK)
            return 1;
        model_opts o = { .types = &types, .vocab = i == 0, .tied = i == 1 };
        buf f = model_file(W, &o);
        write_seed(dir, names[i], &f, LOOM_OK);
        if (i == 0) {
            buf cut = { f.p, f.len - 17, f.cap };
            write_seed(dir, "bad-model-q8_0-cut-mid-block", &cut, LOOM_PARSE);
            free(f.p);
            o.type_tensor = "blk.0.attn_q.weight";
            o.type_code = TT_Q4_K;
            f = model_file(W, &o);
            write_seed(dir, "bad-model-q4_k-rows-not-blocks", &f, LOOM_PARSE);
            free(f.p);
            o.type_tensor = "blk.0.ffn_up.weight";
            o.type_code = TT_Q5_K;
            f = model_file(W, &o);
            write_seed(dir, "bad-model-q5_k", &f, LOOM_UNSUPPORTED);
        }
        free(f.p);
        loom_llama_weights_destroy(W);
    }
    return 0;
}

/* Seeds: the small file (v2, v3) and small models. Models are shrunk to one
 * layer and a vocabulary of 8 so the fuzzer can afford them. */
static int write_corpus(const char *dir)
{
    buf f = small_file(2);
    write_file(dir, "small-v2.gguf", &f);
    free(f.p);
    f = small_file(3);
    write_file(dir, "small-v3.gguf", &f);
    free(f.p);
    loom_llama_config c;
    loom_llama_default_config(&c);
    c = (loom_llama_config){ .dim = 4, .n_layers = 1, .n_heads = 2, .n_kv_heads = 1, .head_dim = 2, .ffn = 4,
                             .vocab = 8, .max_seq = 8, .eps = 1e-5f, .rope_theta = 10000.0f, .seed = 1 };
    loom_llama_weights *W = NULL;
    if (loom_llama_weights_create(&c, &W) != LOOM_OK)
        return 1;
    const model_opts opts[] = { { .ttype = TT_F32, .tied = true }, { .ttype = TT_F16, .vocab = true },
                                { .ttype = TT_BF16 } };
    const char *names[] = { "model-f32-tied.gguf", "model-f16.gguf", "model-bf16.gguf" };
    for (int i = 0; i < 3; i++) {
        f = model_file(W, &opts[i]);
        write_file(dir, names[i], &f);
        free(f.p);
    }
    loom_llama_weights_destroy(W);
    return write_quantized_corpus(dir);
}

static Suite *gguf_suite(void)
{
    Suite *s = suite_create("gguf");
    TCase *tc = tcase_create("reader");
    tcase_add_test(tc, reads_every_value_type);
    tcase_add_test(tc, reads_files);
    suite_add_tcase(s, tc);
    tc = tcase_create("malformed");
    tcase_add_test(tc, every_truncation_fails);
    tcase_add_test(tc, corrupt_header_fails);
    tcase_add_test(tc, corrupt_bytes_never_crash);
    tcase_add_test(tc, bad_tensor_infos_fail);
    tcase_add_test(tc, bad_metadata_fails);
    tcase_add_test(tc, bad_names_fail);
    suite_add_tcase(s, tc);
    tc = tcase_create("writer");
    tcase_add_test(tc, writer_round_trips);
    tcase_add_test(tc, writer_refuses_bad_input);
    tcase_add_loop_test(tc, writer_writes_models_as_stored, 0, sizeof writer_wtypes / sizeof writer_wtypes[0]);
    suite_add_tcase(s, tc);
    tc = tcase_create("loader");
    tcase_add_loop_test(tc, model_round_trips, 0, 2 * (int)(sizeof round_trips / sizeof round_trips[0]));
    tcase_add_test(tc, model_from_file);
    tcase_add_test(tc, missing_tensors_fail);
    tcase_add_test(tc, bad_metadata_keys_fail);
    tcase_add_loop_test(tc, model_truncations_fail, 0, 2);
    tcase_add_test(tc, quantized_errors_name_the_tensor);
    tcase_add_test(tc, shapes_only_file_plans_like_its_model);
    tcase_add_loop_test(tc, reference_decodes_quantized_file, 0, sizeof round_trips / sizeof round_trips[0] - 3);
    tcase_add_loop_test(tc, rope_layout_matches_the_file, 0, sizeof rope_files / sizeof rope_files[0]);
    suite_add_tcase(s, tc);
    tc = tcase_create("decode");
    tcase_add_loop_test(tc, loaded_model_decodes_like_reference, 0, sizeof round_trips / sizeof round_trips[0]);
    suite_add_tcase(s, tc);
    return s;
}

/* `--write-model FILE TYPE`: the default-config decoder (loom_llama_
 * default_config, seed and all) as a GGUF file with gguf.h's made-up
 * vocabulary, context length = max_seq; for frontends' tests. TYPE is bf16
 * (from the f32 model) or a --wtype value (f32, f16, q8_0, q4_0, q4_k, q6_k,
 * q4_k_m): the model `llama-decode --wtype TYPE` makes, written as stored,
 * so the file's model is that one, bit for bit. */
static const char *model_path, *model_type;

static void write_model(void)
{
    loom_llama_config c;
    loom_llama_default_config(&c);
    bool bf16 = strcmp(model_type, "bf16") == 0;
    ck_assert_msg(bf16 || loom_llama_wtype_parse(model_type, &c) == LOOM_OK, "unknown type %s", model_type);
    loom_llama_weights *W = NULL;
    ck_assert_int_eq(loom_llama_weights_create(&c, &W), LOOM_OK);
    loom_gguf_llama_desc d = { .type = LOOM_GGUF_TENSOR_BF16, .as_stored = !bf16, .name = "tiny" };
    ck_assert_msg(loom_llama_weights_to_gguf(W, &d, model_path) == LOOM_OK, "%s", loom_last_error());
    loom_llama_weights_destroy(W);
}

/* The writer's checks are Check assertions, so it runs as a test. */
static const char *corpus_dir;

START_TEST(writes_files)
{
    if (corpus_dir)
        ck_assert_int_eq(write_corpus(corpus_dir), 0);
    if (model_path)
        write_model();
}
END_TEST

static Suite *writer_suite(void)
{
    Suite *s = suite_create("gguf-writer");
    TCase *tc = tcase_create("files");
    tcase_add_test(tc, writes_files);
    suite_add_tcase(s, tc);
    return s;
}

void loom_test_register(loom_test_runner *r, int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0)
        corpus_dir = argv[2];
    if (argc == 4 && strcmp(argv[1], "--write-model") == 0) {
        model_path = argv[2];
        model_type = argv[3];
    }
    loom_test_add_suite(r, corpus_dir || model_path ? writer_suite() : gguf_suite());
}
