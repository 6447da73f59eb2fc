/* Check suite "encode": the node records a graph keeps from capture for the
 * canonical encoding. Whatever path produced them — kept at capture, rebuilt
 * after an edit, split into pieces for the plan cache — the bytes and the
 * hash must be the same, and the cache must hit, miss and key exactly as it
 * would from loom_graph_encode's bytes. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
/* xxHash's portable build, as the reference the library's hash must equal
 * whichever vector path it takes. */
#define XXH_INLINE_ALL
#include <xxhash.h>
#include "loom_compiler.h"
#include "loom_ir_edit.h"
#include "loom_ops.h"
#include "runner.h"

#define OK(expr) ck_assert_int_eq((expr), LOOM_OK)
#define DIM 64u

typedef struct bytes { uint8_t *p; size_t cap, len; } bytes;

static bytes encode(const loom_graph *g)
{
    bytes b = { 0 };
    OK(loom_graph_encode(g, &b.p, &b.cap, &b.len));
    return b;
}

static void bytes_free(const loom_graph *g, bytes *b)
{
    const loom_allocator *a = loom_graph_allocator(g);
    if (b->p)
        a->realloc(a->user, b->p, b->cap, 0);
    b->p = NULL;
}

static void ck_same(const bytes *x, const bytes *y)
{
    ck_assert_uint_eq(x->len, y->len);
    ck_assert_int_eq(memcmp(x->p, y->p, x->len), 0);
}

/* A step touching every kind of record: builders (with and without the
 * step-parameter binding), a raw dispatch with explicit ranges, a LOOM_WHOLE
 * binding, push constants and a sentinel. `flip` swaps the order of the two
 * elementwise kernels, so kernel ids differ between the two variants. */
static loom_result capture(loom_graph *g, bool flip)
{
    loom_graph_reset(g);
    uint32_t W, X, Y, T, U;
    loom_result rc = loom_graph_add_buffer(g, &(loom_buffer_desc){ "w", 1 << 16, LOOM_USAGE_WEIGHT, 7 }, &W);
    rc = rc ? rc : loom_graph_add_buffer(g, &(loom_buffer_desc){ "x", DIM * 4, LOOM_USAGE_INPUT, 0 }, &X);
    rc = rc ? rc : loom_graph_add_buffer(g, &(loom_buffer_desc){ "y", DIM * 4, LOOM_USAGE_OUTPUT, 0 }, &Y);
    rc = rc ? rc : loom_graph_add_buffer(g, &(loom_buffer_desc){ NULL, DIM * 4, LOOM_USAGE_SCRATCH, 0 }, &T);
    rc = rc ? rc : loom_graph_add_buffer(g, &(loom_buffer_desc){ "u", DIM * 4, LOOM_USAGE_SCRATCH, 0 }, &U);
    rc = rc ? rc : loom_op_copy(g, loom_vec(X, DIM), loom_vec(T, DIM), NULL);
    rc = rc ? rc : loom_op_rms_norm(g, loom_vec(T, DIM), loom_vec(U, DIM), 1e-5f, NULL);
    if (flip) {
        rc = rc ? rc : loom_op_add(g, loom_vec(U, DIM), loom_vec(T, DIM), loom_vec(T, DIM), NULL);
        rc = rc ? rc : loom_op_mul(g, loom_vec(T, DIM), loom_vec(W, DIM), loom_vec(U, DIM), NULL);
    } else {
        rc = rc ? rc : loom_op_mul(g, loom_vec(T, DIM), loom_vec(W, DIM), loom_vec(U, DIM), NULL);
        rc = rc ? rc : loom_op_add(g, loom_vec(U, DIM), loom_vec(T, DIM), loom_vec(T, DIM), NULL);
    }
    loom_tensor m16 = loom_mat(W, LOOM_F16, DIM, DIM), m32 = loom_mat(W, LOOM_F32, DIM, DIM);
    m16.offset = 1024;
    rc = rc ? rc : loom_op_matvec(g, m16, loom_vec(T, DIM), loom_vec(U, DIM), NULL);
    rc = rc ? rc : loom_op_matvec_add(g, m32, loom_vec(U, DIM), loom_vec(T, DIM), loom_vec(T, DIM), NULL);
    rc = rc ? rc : loom_op_rope(g, loom_vec(T, DIM), loom_vec(U, DIM), 4, DIM / 4, 10000.0f, NULL);
    rc = rc ? rc : loom_graph_add_barrier(g, NULL);
    loom_binding b[2] = { { .buffer = U, .slot = 0, .offset = 0, .size = LOOM_WHOLE, .access = LOOM_ACCESS_READ },
                          { .buffer = Y, .slot = 1, .offset = 0, .size = DIM * 4, .access = LOOM_ACCESS_WRITE } };
    loom_range rd = { U, 0, 0, 16 }, wr = { Y, 0, 16, 32 };
    uint32_t push[3] = { 1, 2, 3 };
    loom_dispatch_desc d = { .kernel = "custom", .op = LOOM_OP_OTHER, .groups = { 2, 3, 4 }, .bindings = b,
                             .n_bindings = 2, .push = push, .push_size = sizeof push, .reads = &rd, .n_reads = 1,
                             .writes = &wr, .n_writes = 1 };
    rc = rc ? rc : loom_graph_add_dispatch(g, &d, NULL);
    rc = rc ? rc : loom_graph_add_barrier(g, NULL);
    return rc ? rc : loom_op_copy(g, loom_vec(U, DIM), loom_vec(Y, DIM), NULL);
}

static loom_graph *make(bool flip)
{
    loom_graph *g;
    OK(loom_graph_create(NULL, &g));
    OK(capture(g, flip));
    return g;
}

static bool hash_eq(loom_hash a, loom_hash b) { return a.lo == b.lo && a.hi == b.hi; }

/* ---- kept records against a rebuild ---------------------------------------- */

START_TEST(test_kept_equals_rebuilt)
{
    loom_graph *g = make(false), *c;
    bytes kept = encode(g);
    loom_hash hk;
    OK(loom_graph_hash(g, &hk));
    ck_assert(hash_eq(hk, loom_hash_bytes(kept.p, kept.len)));
    OK(loom_graph_clone(g, &c));
    bytes cloned = encode(c);
    ck_same(&kept, &cloned);
    /* An edit that changes nothing still drops the kept records. */
    ck_assert_ptr_nonnull(loom_graph_node_mut(g, 0));
    bytes rebuilt = encode(g);
    ck_same(&kept, &rebuilt);
    loom_hash hr;
    OK(loom_graph_hash(g, &hr));
    ck_assert(hash_eq(hk, hr));
    /* A clone of an edited graph rebuilds too. */
    loom_graph *c2;
    OK(loom_graph_clone(g, &c2));
    bytes cloned2 = encode(c2);
    ck_same(&kept, &cloned2);
    /* Capture again: records are kept again and still agree. */
    OK(capture(g, false));
    bytes again = encode(g);
    ck_same(&kept, &again);
    bytes_free(g, &kept);
    bytes_free(g, &cloned);
    bytes_free(g, &rebuilt);
    bytes_free(g, &cloned2);
    bytes_free(g, &again);
    loom_graph_destroy(c);
    loom_graph_destroy(c2);
    loom_graph_destroy(g);
}
END_TEST

START_TEST(test_edits_reach_encoding)
{
    loom_graph *g = make(false), *c;
    bytes base = encode(g);
    /* Every kind of edit through the edit API must show in the bytes. */
    for (int which = 0; which < 4; which++) {
        OK(loom_graph_clone(g, &c));
        loom_node *n = loom_graph_node_mut(c, 1);
        if (which == 0)
            n->groups[0]++;
        else if (which == 1)
            ((loom_binding *)loom_node_bindings(c, n))[0].offset += 256;
        else if (which == 2)
            ((uint8_t *)loom_node_push(c, n))[0] ^= 1;
        else {
            uint32_t order[] = { 1, 0 };
            OK(loom_graph_permute(c, order, 2));
        }
        bytes b = encode(c);
        ck_assert(b.len != base.len || memcmp(b.p, base.p, b.len) != 0);
        bytes_free(c, &b);
        loom_graph_destroy(c);
    }
    /* A permutation back to the original order restores the bytes. */
    OK(loom_graph_clone(g, &c));
    uint32_t n = loom_graph_node_count(c), order[64];
    ck_assert_uint_le(n, 64);
    for (uint32_t i = 0; i < n; i++)
        order[i] = i;
    OK(loom_graph_permute(c, order, n));
    bytes same = encode(c);
    ck_same(&base, &same);
    bytes_free(c, &same);
    loom_graph_destroy(c);
    bytes_free(g, &base);
    loom_graph_destroy(g);
}
END_TEST

/* Kernel ids are found by the literal's address during capture; a reset
 * must forget them, or the second capture would reuse the first's ids. */
START_TEST(test_kernel_ids_after_reset)
{
    loom_graph *g = make(false), *fresh = make(true);
    OK(capture(g, true));
    bytes a = encode(g), b = encode(fresh);
    ck_same(&a, &b);
    for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
        const loom_node *x = loom_graph_node(g, i), *y = loom_graph_node(fresh, i);
        if (x->type == LOOM_NODE_DISPATCH)
            ck_assert_str_eq(loom_graph_kernel_name(g, x->kernel), loom_graph_kernel_name(fresh, y->kernel));
    }
    bytes_free(g, &a);
    bytes_free(fresh, &b);
    loom_graph_destroy(g);
    loom_graph_destroy(fresh);
}
END_TEST

/* ---- pieces ----------------------------------------------------------------- */

START_TEST(test_parts_join_to_encoding)
{
    loom_graph *g = make(false);
    for (int edited = 0; edited < 2; edited++) {
        if (edited)
            loom_graph_node_mut(g, 0);
        bytes whole = encode(g), pre = { 0 };
        const uint8_t *nodes;
        size_t nlen;
        OK(loom_graph_encode_parts(g, &pre.p, &pre.cap, &pre.len, &nodes, &nlen));
        ck_assert(edited ? nlen == 0 : nlen > 0);
        ck_assert_uint_eq(pre.len + nlen, whole.len);
        ck_assert_int_eq(memcmp(pre.p, whole.p, pre.len), 0);
        if (nlen)
            ck_assert_int_eq(memcmp(nodes, whole.p + pre.len, nlen), 0);
        loom_hash h = loom_hash_concat(2, (const void *const[]){ pre.p, nodes }, (const size_t[]){ pre.len, nlen });
        ck_assert(hash_eq(h, loom_hash_bytes(whole.p, whole.len)));
        bytes_free(g, &whole);
        bytes_free(g, &pre);
    }
    loom_graph_destroy(g);
}
END_TEST

START_TEST(test_hash_concat_splits)
{
    /* Lengths around XXH3's internal boundaries (16, 128, 240, stripes of
     * 64, blocks of 1024) and empty pieces. */
    static const size_t lens[] = { 0, 1, 16, 17, 128, 129, 240, 241, 255, 256, 1023, 1024, 1025, 5000, 100003 };
    size_t max = 100003;
    uint8_t *data = malloc(max);
    ck_assert_ptr_nonnull(data);
    for (size_t i = 0; i < max; i++)
        data[i] = (uint8_t)(i * 131 + 7 + (i >> 9));
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        for (size_t cut = 0; cut <= lens[i]; cut += lens[i] / 7 + 1) {
            size_t n = lens[i];
            loom_hash one = loom_hash_bytes(data, n);
            XXH128_hash_t ref = XXH3_128bits(data, n);
            ck_assert(one.lo == ref.low64 && one.hi == ref.high64);
            size_t third = (n - cut) / 2;
            loom_hash three = loom_hash_concat(
                3, (const void *const[]){ data, data + cut, data + cut + third },
                (const size_t[]){ cut, third, n - cut - third });
            ck_assert(hash_eq(one, three));
        }
    free(data);
}
END_TEST

/* ---- plan cache ------------------------------------------------------------- */

START_TEST(test_cache_key_matches_compile)
{
    static const loom_compile_options variants[] = {
        { 0 },
        { .pipeline = "verify,fuse", .window = 3 },
        { .disable = LOOM_DISABLE_REORDER },
    };
    loom_graph *g = make(false);
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        const loom_compile_options *o = v ? &variants[v] : NULL;
        loom_cache *c;
        OK(loom_cache_create(NULL, &c));
        loom_plan *direct, *cached, *again;
        bool hit = true;
        OK(loom_compile(g, o, &direct));
        OK(loom_cache_compile(c, g, o, &cached, &hit));
        ck_assert(!hit);
        loom_hash a = loom_plan_key(direct), b = loom_plan_key(cached);
        ck_assert(hash_eq(a, b));
        OK(capture(g, false));   /* the next token's capture */
        OK(loom_cache_compile(c, g, o, &again, &hit));
        ck_assert(hit);
        ck_assert_ptr_eq(again, cached);
        loom_plan_release(direct);
        loom_plan_release(cached);
        loom_plan_release(again);
        loom_cache_destroy(c);
    }
    loom_graph_destroy(g);
}
END_TEST

START_TEST(test_cache_rebuilt_encoding)
{
    loom_cache *c;
    OK(loom_cache_create(NULL, &c));
    loom_graph *g = make(false), *edited;
    loom_plan *p1, *p2, *p3;
    bool hit;
    OK(loom_cache_compile(c, g, NULL, &p1, &hit));
    ck_assert(!hit);
    /* Same graph through the rebuild path: a hit on the same plan. */
    OK(loom_graph_clone(g, &edited));
    loom_graph_node_mut(edited, 0);
    OK(loom_cache_compile(c, edited, NULL, &p2, &hit));
    ck_assert(hit);
    ck_assert_ptr_eq(p1, p2);
    /* A real change after the edit: a miss. */
    loom_graph_node_mut(edited, 0)->groups[1] = 2;
    OK(loom_cache_compile(c, edited, NULL, &p3, &hit));
    ck_assert(!hit);
    ck_assert_ptr_ne(p1, p3);
    /* A forced collision still tells the two apart by their bytes. */
    loom_cache_force_key(c, &(loom_hash){ 1, 2 });
    loom_plan *f1, *f2, *f3;
    OK(loom_cache_compile(c, g, NULL, &f1, &hit));
    ck_assert(!hit);
    OK(loom_cache_compile(c, edited, NULL, &f2, &hit));
    ck_assert(!hit);
    OK(loom_cache_compile(c, g, NULL, &f3, &hit));
    ck_assert(hit);
    ck_assert_ptr_eq(f1, f3);
    loom_cache_stats st;
    loom_cache_get_stats(c, &st);
    ck_assert_uint_ge(st.collisions, 1);
    loom_plan *all[] = { p1, p2, p3, f1, f2, f3 };
    for (size_t i = 0; i < 6; i++)
        loom_plan_release(all[i]);
    loom_cache_destroy(c);
    loom_graph_destroy(edited);
    loom_graph_destroy(g);
}
END_TEST

/* ---- allocation failure ----------------------------------------------------- */

static int budget;   /* allocations left before failing; < 0: unlimited */

static void *failing_realloc(void *user, void *p, size_t old_size, size_t new_size)
{
    (void)user;
    (void)old_size;
    if (new_size == 0) {
        free(p);
        return NULL;
    }
    if (budget == 0)
        return NULL;
    if (budget > 0)
        budget--;
    return realloc(p, new_size);
}

/* Failing at each allocation in turn: capture reports LOOM_OUT_OF_MEMORY,
 * and whatever it did capture still encodes as a rebuild would. */
START_TEST(test_capture_oom_keeps_records_exact)
{
    static const loom_allocator fail_alloc = { failing_realloc, NULL };
    bool finished = false;
    for (int k = 0; !finished && k < 200; k++) {
        loom_graph *g;
        budget = -1;
        OK(loom_graph_create(&(loom_graph_desc){ .allocator = &fail_alloc }, &g));
        budget = k;
        loom_result rc = capture(g, false);
        budget = -1;
        ck_assert(rc == LOOM_OK || rc == LOOM_OUT_OF_MEMORY);
        finished = rc == LOOM_OK;
        bytes kept = encode(g);
        loom_graph_node_mut(g, 0);
        bytes rebuilt = encode(g);
        ck_same(&kept, &rebuilt);
        bytes_free(g, &kept);
        bytes_free(g, &rebuilt);
        loom_graph_destroy(g);
    }
    ck_assert(finished);
}
END_TEST

static Suite *encode_suite(void)
{
    Suite *s = suite_create("encode");
    TCase *tc = tcase_create("kept_records");
    tcase_add_test(tc, test_kept_equals_rebuilt);
    tcase_add_test(tc, test_edits_reach_encoding);
    tcase_add_test(tc, test_kernel_ids_after_reset);
    suite_add_tcase(s, tc);
    tc = tcase_create("pieces");
    tcase_add_test(tc, test_parts_join_to_encoding);
    tcase_add_test(tc, test_hash_concat_splits);
    suite_add_tcase(s, tc);
    tc = tcase_create("cache");
    tcase_add_test(tc, test_cache_key_matches_compile);
    tcase_add_test(tc, test_cache_rebuilt_encoding);
    suite_add_tcase(s, tc);
    tc = tcase_create("oom");
    tcase_add_test(tc, test_capture_oom_keeps_records_exact);
    suite_add_tcase(s, tc);
    return s;
}

void loom_test_register(loom_test_runner *r, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    loom_test_add_suite(r, encode_suite());
}
