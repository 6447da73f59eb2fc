/* Suite "gguf": the strict GGUF reader and the llama loader (examples/gguf.h).
 *
 * A small file with every value type and f32/f16/bf16 tensors, and its
 * malformed variants, are made byte by byte by this test's own raw writer,
 * from the format's description and independent of the reader. A tiny llama
 * model is written from the decoder's random weights by gguf.h's writer
 * (the layout of llama.cpp's converter: q/k rows permuted for adjacent-pair
 * RoPE), and broken by editing the writer's keys and tensors. The reader
 * must take the files and refuse every malformed variant (every truncation,
 * corrupt header fields, bad types, offsets, dims, names, missing keys and
 * tensors, wrong shapes) with the right code and no crash. The loaded model
 * must equal what was written bit for bit, compute what the file means
 * (RoPE checked against an adjacent-pair rotation on the file's own rows),
 * and decode on the device like the CPU reference, under the validation
 * layer. The writer's own keys, tensors and alignment are read back too.
 *
 * `test_gguf --write-corpus DIR` writes the seed files of the fuzz corpus;
 * `test_gguf --write-model FILE f32|f16|bf16` the default-config model. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gguf.h"
#include "llama.h"
#include "loom_ref.h"
#include "runner.h"

#define TOL 2e-3f
#define STEPS 4

/* ---- the test's raw GGUF writer, for files gguf.h's writer would refuse -- */

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
enum { TT_F32 = 0, TT_F16 = 1, TT_BF16 = 30 };

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
    /* Unknown or unsupported (quantized) types. */
    const uint32_t types[] = { 2, 8, 29, 31, 0xffffffff };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        ck_assert_int_eq(one_tensor(types[i], 2, d4, 0), LOOM_UNSUPPORTED);
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
    ck_assert_int_eq(loom_gguf_writer_add_tensor(w, "u", (loom_gguf_tensor_type)2, 1, d2, NULL, NULL),
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
    ck_assert_int_eq(loom_gguf_writer_add_llama(w, W, &(loom_gguf_llama_desc){ .type = (loom_gguf_tensor_type)8 }),
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

typedef struct model_opts {
    uint32_t ttype;             /* of the matrices; norms are f32 */
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

/* A matrix value as written in ttype, decoded back to f32. */
static float written(float v, uint32_t ttype, uint16_t *bits)
{
    if (ttype == TT_F16) {
        *bits = loom_f32_to_f16(v);
        return loom_f16_to_f32(*bits);
    }
    if (ttype == TT_BF16) {
        *bits = to_bf16(v);
        return from_bf16(*bits);
    }
    return v;
}

/* The test's vocabulary: "<id>", and one with the SentencePiece space. */
static const char *const *test_tokens(uint32_t vocab)
{
    static char names[1024][16];
    static const char *tokens[1024];
    ck_assert_uint_le(vocab, 1024);
    for (uint32_t i = 0; i < vocab; i++) {
        snprintf(names[i], sizeof names[i], i == 5 ? "\xe2\x96\x81tok%u" : "<%u>", i);
        tokens[i] = names[i];
    }
    return tokens;
}

/* The model through gguf.h's writer, then broken as o says. */
static buf model_file(const loom_llama_weights *W, const model_opts *o)
{
    loom_gguf_writer *w = NULL;
    ck_assert_int_eq(loom_gguf_writer_create(&w), LOOM_OK);
    loom_gguf_llama_desc d = { .type = o->ttype, .name = "tiny", .context = o->context ? o->context : CONTEXT,
                               .tied = o->tied, .tokens = o->vocab ? test_tokens(W->cfg.vocab) : NULL,
                               .no_vocab = !o->vocab };
    ck_assert_int_eq(loom_gguf_writer_add_llama(w, W, &d), LOOM_OK);
    if (o->skip_key)
        ck_assert_int_eq(loom_gguf_writer_remove_key(w, o->skip_key), LOOM_OK);
    if (o->arch)
        ck_assert_int_eq(loom_gguf_writer_set_str(w, "general.architecture", o->arch), LOOM_OK);
    if (o->str_block_count)
        ck_assert_int_eq(loom_gguf_writer_set_str(w, "llama.block_count", "2"), LOOM_OK);
    if (o->rope_scaling)
        ck_assert_int_eq(loom_gguf_writer_set_str(w, "llama.rope.scaling.type", o->rope_scaling), LOOM_OK);
    if (o->skip_tensor)
        ck_assert_int_eq(loom_gguf_writer_remove_tensor(w, o->skip_tensor), LOOM_OK);
    if (o->bad_shape) {   /* one more row (or element), of zeros */
        uint32_t nd;
        uint64_t dims[LOOM_GGUF_MAX_DIMS];
        ck_assert_int_eq(loom_gguf_writer_tensor_dims(w, o->bad_shape, &nd, dims), LOOM_OK);
        dims[nd - 1]++;
        ck_assert_int_eq(loom_gguf_writer_remove_tensor(w, o->bad_shape), LOOM_OK);
        ck_assert_int_eq(loom_gguf_writer_add_tensor(w, o->bad_shape, nd == 1 ? LOOM_GGUF_TENSOR_F32 : o->ttype, nd,
                                                     dims, NULL, NULL),
                         LOOM_OK);
    }
    if (o->extra_tensor)
        ck_assert_int_eq(loom_gguf_writer_add_tensor(w, o->extra_tensor, LOOM_GGUF_TENSOR_F32, 1, (uint64_t[]){ 4 },
                                                     small_f32, NULL),
                         LOOM_OK);
    buf f = { 0 };
    void *p;
    ck_assert_int_eq(loom_gguf_writer_to_memory(w, &p, &f.len), LOOM_OK);
    f.p = p;
    loom_gguf_writer_destroy(w);
    return f;
}

static loom_llama_weights *reference_weights(void)
{
    loom_llama_config c;
    tiny(&c);
    loom_llama_weights *W = NULL;
    ck_assert_int_eq(loom_llama_weights_create(&c, &W), LOOM_OK);
    return W;
}

/* The loaded matrix is the original with values as written, then stored
 * as wtype: bit for bit. */
static void expect_matrix(const loom_llama_matrix *got, const loom_llama_matrix *orig, uint32_t ttype,
                          loom_dtype wtype, const char *what)
{
    ck_assert_uint_eq(got->rows, orig->rows);
    ck_assert_uint_eq(got->cols, orig->cols);
    ck_assert(wtype == LOOM_F16 ? got->f16 != NULL : got->f16 == NULL);
    for (size_t i = 0; i < (size_t)orig->rows * orig->cols; i++) {
        uint16_t bits = 0;
        float v = written(orig->f32[i], ttype, &bits);
        if (wtype == LOOM_F16) {
            uint16_t h = ttype == TT_F16 ? bits : loom_f32_to_f16(v);
            ck_assert_msg(got->f16[i] == h, "%s[%zu]: f16 %04x, want %04x", what, i, got->f16[i], h);
            v = loom_f16_to_f32(h);
        }
        ck_assert_msg(memcmp(&got->f32[i], &v, 4) == 0, "%s[%zu]: %a, want %a", what, i, got->f32[i], v);
    }
}

static void expect_weights(const loom_llama_weights *got, const loom_llama_weights *W, uint32_t ttype,
                           loom_dtype wtype, bool tied)
{
    const loom_llama_config *c = &got->cfg, *o = &W->cfg;
    ck_assert_uint_eq(c->dim, o->dim);
    ck_assert_uint_eq(c->n_layers, o->n_layers);
    ck_assert_uint_eq(c->n_heads, o->n_heads);
    ck_assert_uint_eq(c->n_kv_heads, o->n_kv_heads);
    ck_assert_uint_eq(c->head_dim, o->head_dim);
    ck_assert_uint_eq(c->ffn, o->ffn);
    ck_assert_uint_eq(c->vocab, o->vocab);
    ck_assert_uint_eq(c->max_seq, o->max_seq);
    ck_assert(c->eps == o->eps && c->rope_theta == o->rope_theta);
    ck_assert_int_eq(c->wtype, wtype);
    expect_matrix(&got->embed, &W->embed, ttype, wtype, "embed");
    expect_matrix(&got->out, tied ? &W->embed : &W->out, ttype, wtype, "out");
    ck_assert_int_eq(memcmp(got->final_norm, W->final_norm, c->dim * sizeof(float)), 0);
    for (uint32_t l = 0; l < c->n_layers; l++) {
        const loom_llama_layer *a = &got->layers[l], *b = &W->layers[l];
        ck_assert_int_eq(memcmp(a->attn_norm, b->attn_norm, c->dim * sizeof(float)), 0);
        ck_assert_int_eq(memcmp(a->ffn_norm, b->ffn_norm, c->dim * sizeof(float)), 0);
        expect_matrix(&a->wq, &b->wq, ttype, wtype, "wq");
        expect_matrix(&a->wk, &b->wk, ttype, wtype, "wk");
        expect_matrix(&a->wv, &b->wv, ttype, wtype, "wv");
        expect_matrix(&a->wo, &b->wo, ttype, wtype, "wo");
        expect_matrix(&a->wg, &b->wg, ttype, wtype, "wg");
        expect_matrix(&a->wu, &b->wu, ttype, wtype, "wu");
        expect_matrix(&a->wd, &b->wd, ttype, wtype, "wd");
    }
}

static const uint32_t ttypes[] = { TT_F32, TT_F16, TT_BF16 };

START_TEST(model_round_trips)
{
    loom_llama_weights *W = reference_weights();
    uint32_t ttype = ttypes[_i / 4];
    loom_dtype wtype = _i % 2 ? LOOM_F16 : LOOM_F32;
    bool tied = (_i / 2) % 2;
    model_opts o = { .ttype = ttype, .tied = tied, .vocab = !tied };
    buf f = model_file(W, &o);
    loom_llama_weights *got = NULL;
    ck_assert_msg(loom_llama_weights_from_gguf_memory(f.p, f.len, wtype, 8, &got) == LOOM_OK, "%s",
                  loom_last_error());
    expect_weights(got, W, ttype, wtype, tied);
    if (o.vocab) {
        ck_assert_uint_eq(got->n_tokens, 128);
        ck_assert_str_eq(loom_llama_token_str(got, 0), "<0>");
        ck_assert_str_eq(loom_llama_token_str(got, 5), "\xe2\x96\x81tok5");
        ck_assert_str_eq(loom_llama_token_str(got, 127), "<127>");
        ck_assert_ptr_null(loom_llama_token_str(got, 128));
    } else {
        ck_assert_ptr_null(loom_llama_token_str(got, 0));
    }
    ck_assert_ptr_null(loom_llama_token_str(NULL, 0));
    loom_llama_weights_destroy(got);
    free(f.p);
    loom_llama_weights_destroy(W);
}
END_TEST

/* From a path; max_seq is the context length capped by the caller. */
START_TEST(model_from_file)
{
    loom_llama_weights *W = reference_weights();
    buf f = model_file(W, &(model_opts){ .ttype = TT_F16, .vocab = true });
    char path[] = "/tmp/loom-gguf-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, f.p, f.len), (ssize_t)f.len);
    close(fd);
    const uint32_t caps[][2] = { { 8, 8 }, { 0, CONTEXT }, { 100, CONTEXT }, { 1, 1 } };
    for (size_t i = 0; i < 4; i++) {
        loom_llama_weights *got = NULL;
        ck_assert_int_eq(loom_llama_weights_from_gguf(path, LOOM_F32, caps[i][0], &got), LOOM_OK);
        ck_assert_uint_eq(got->cfg.max_seq, caps[i][1]);
        ck_assert_str_eq(loom_llama_token_str(got, 9), "<9>");
        loom_llama_weights_destroy(got);
    }
    loom_llama_weights *got = NULL;
    ck_assert_int_eq(loom_llama_weights_from_gguf(path, LOOM_U32, 8, &got), LOOM_INVALID_ARGUMENT);
    ck_assert_ptr_null(got);
    unlink(path);
    ck_assert_int_eq(loom_llama_weights_from_gguf(path, LOOM_F32, 8, &got), LOOM_IO);
    ck_assert_ptr_null(got);
    free(f.p);
    loom_llama_weights_destroy(W);
}
END_TEST

static loom_result load_with(const loom_llama_weights *W, const model_opts *o)
{
    buf f = model_file(W, o);
    loom_llama_weights *got = NULL;
    loom_result rc = loom_llama_weights_from_gguf_memory(f.p, f.len, LOOM_F32, 8, &got);
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
    ck_assert_int_eq(loom_llama_weights_from_gguf_memory(f.p, f.len, LOOM_F32, 8, &got), LOOM_INVALID_ARGUMENT);
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
    ck_assert_int_eq(loom_llama_weights_from_gguf_memory("GGML", 4, LOOM_F32, 8, &got), LOOM_PARSE);
    ck_assert_ptr_null(got);
    loom_llama_weights_destroy(W);
}
END_TEST

/* Every truncation of the model fails cleanly: all of the header, metadata
 * and infos, and sampled points of the data. */
START_TEST(model_truncations_fail)
{
    loom_llama_weights *W = reference_weights();
    buf f = model_file(W, &(model_opts){ .ttype = TT_BF16, .vocab = true });
    loom_gguf *g = NULL;
    ck_assert_int_eq(loom_gguf_open_memory(f.p, f.len, &g), LOOM_OK);
    size_t data = (size_t)loom_gguf_data_offset(g);
    loom_gguf_close(g);
    for (size_t n = 0; n < f.len; n += n < data + 64 ? 1 : 997) {
        loom_llama_weights *got = NULL;
        ck_assert_int_eq(open_copy(f.p, n, &g), LOOM_PARSE);
        ck_assert_int_eq(loom_llama_weights_from_gguf_memory(f.p, n, LOOM_F32, 8, &got), LOOM_PARSE);
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

START_TEST(rope_layout_matches_the_file)
{
    loom_llama_weights *W = reference_weights();
    buf f = model_file(W, &(model_opts){ .ttype = TT_F32 });
    loom_gguf *g = NULL;
    loom_llama_weights *got = NULL;
    ck_assert_int_eq(loom_gguf_open_memory(f.p, f.len, &g), LOOM_OK);
    ck_assert_int_eq(loom_llama_weights_from_gguf_reader(g, LOOM_F32, 8, &got), LOOM_OK);
    const loom_llama_config *c = &got->cfg;
    uint32_t hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd, group = c->n_heads / c->n_kv_heads;
    const float *fq = loom_gguf_find_tensor(g, "blk.1.attn_q.weight")->data;
    const float *fk = loom_gguf_find_tensor(g, "blk.1.attn_k.weight")->data;
    float x[64], q1[64], k1[32], q2[64], k2[32];
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
            ck_assert_msg(fabs(s1 - s2) <= 1e-4 * (1 + fabs(s1)), "head %u pos %u/%u: %g vs %g", h, pos[p][0],
                          pos[p][1], s1, s2);
        }
    }
    loom_llama_weights_destroy(got);
    loom_gguf_close(g);
    free(f.p);
    loom_llama_weights_destroy(W);
}
END_TEST

/* ---- decoding with loaded weights on the device ------------------------- */

START_TEST(loaded_model_decodes_like_reference)
{
    static const struct { uint32_t ttype; loom_dtype wtype; } cases[] = {
        { TT_F32, LOOM_F32 }, { TT_BF16, LOOM_F32 }, { TT_F16, LOOM_F16 },
    };
    loom_llama_weights *W = reference_weights();
    buf f = model_file(W, &(model_opts){ .ttype = cases[_i].ttype, .vocab = true });
    loom_llama_weights *got = NULL;
    ck_assert_int_eq(loom_llama_weights_from_gguf_memory(f.p, f.len, cases[_i].wtype, 8, &got), LOOM_OK);
    free(f.p);

    loom_rt *rt = NULL;
    loom_llama *m = NULL;
    loom_llama_ref *ref = NULL, *ref0 = NULL;
    ck_assert_int_eq(loom_rt_create(&(loom_rt_desc){ .validate = true }, &rt), LOOM_OK);
    ck_assert_int_eq(loom_llama_create(rt, got, NULL, &m), LOOM_OK);
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
        ck_assert_msg(loom_llama_compare(gl, garg, rl, rarg, v, TOL, &d),
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
    return 0;
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
    suite_add_tcase(s, tc);
    tc = tcase_create("loader");
    tcase_add_loop_test(tc, model_round_trips, 0, 12);
    tcase_add_test(tc, model_from_file);
    tcase_add_test(tc, missing_tensors_fail);
    tcase_add_test(tc, bad_metadata_keys_fail);
    tcase_add_test(tc, model_truncations_fail);
    tcase_add_test(tc, rope_layout_matches_the_file);
    suite_add_tcase(s, tc);
    tc = tcase_create("decode");
    tcase_add_loop_test(tc, loaded_model_decodes_like_reference, 0, 3);
    suite_add_tcase(s, tc);
    return s;
}

/* `--write-model FILE f32|f16|bf16`: the default-config decoder
 * (loom_llama_default_config, seed and all) as a GGUF file with gguf.h's
 * made-up vocabulary, context length = max_seq; for frontends' tests. */
static const char *model_path, *model_type;

static void write_model(void)
{
    loom_llama_config c;
    loom_llama_default_config(&c);
    loom_llama_weights *W = NULL;
    ck_assert_int_eq(loom_llama_weights_create(&c, &W), LOOM_OK);
    uint32_t t = strcmp(model_type, "f16") == 0 ? TT_F16 : strcmp(model_type, "bf16") == 0 ? TT_BF16 : TT_F32;
    ck_assert_msg(t != TT_F32 || strcmp(model_type, "f32") == 0, "unknown type %s", model_type);
    loom_gguf_llama_desc d = { .type = t, .name = "tiny" };
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
