/* Compiler and plan cache: plans, keys, hits and misses, forced collisions,
 * LRU order and eviction that skips busy plans. */
#include <check.h>
#include <stdlib.h>
#include "loom_compiler.h"
#include "runner.h"

static loom_graph *make(uint64_t size, uint32_t n)
{
    loom_graph *g;
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    uint32_t b;
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = size, .usage = LOOM_USAGE_OUTPUT }, &b),
                     LOOM_OK);
    for (uint32_t i = 0; i < n; i++) {
        loom_range w = { b, 0, 0, 16 };
        loom_dispatch_desc d = { .kernel = "k", .groups = { 1, 1, 1 }, .writes = &w, .n_writes = 1 };
        ck_assert_int_eq(loom_graph_add_dispatch(g, &d, NULL), LOOM_OK);
    }
    return g;
}

START_TEST(test_compile_stats)
{
    loom_graph *g = make(64, 3);
    loom_plan *p;
    ck_assert_int_eq(loom_compile(g, NULL, &p), LOOM_OK);
    const loom_plan_stats *s = loom_plan_get_stats(p);
    ck_assert_uint_eq(s->nodes, 3);
    ck_assert_uint_eq(s->dispatches, 3);
    ck_assert_uint_eq(s->barriers, 2);   /* WAW chain */
    ck_assert_uint_eq(s->barrier_lower_bound, 2);
    ck_assert_uint_eq(s->n_passes, 5);
    loom_plan_attachment none = { 0 };
    (void)none;
    ck_assert_ptr_null(loom_plan_get_attachment(p));
    loom_plan_release(p);
    ck_assert_int_eq(loom_compile(g, &(loom_compile_options){ .pipeline = "verify,bogus" }, &p),
                     LOOM_INVALID_ARGUMENT);
    ck_assert_ptr_null(p);
    loom_graph_destroy(g);
}
END_TEST

static int destroyed;
static bool busy_flag;
static void att_destroy(void *o) { (void)o; destroyed++; }
static bool att_busy(void *o) { (void)o; return busy_flag; }

START_TEST(test_attachment)
{
    loom_graph *g = make(64, 1);
    loom_plan *p;
    ck_assert_int_eq(loom_compile(g, NULL, &p), LOOM_OK);
    destroyed = 0;
    int obj;
    loom_plan_set_attachment(p, &(loom_plan_attachment){ &obj, att_destroy, NULL, NULL });
    ck_assert_ptr_eq(loom_plan_get_attachment(p), &obj);
    loom_plan_retain(p);
    loom_plan_release(p);
    ck_assert_int_eq(destroyed, 0);
    loom_plan_release(p);
    ck_assert_int_eq(destroyed, 1);
    loom_graph_destroy(g);
}
END_TEST

START_TEST(test_cache_hit_miss)
{
    loom_cache *c;
    ck_assert_int_eq(loom_cache_create(NULL, &c), LOOM_OK);
    loom_graph *g = make(64, 2), *g2 = make(64, 2), *g3 = make(128, 2);
    loom_plan *p1, *p2, *p3, *p4;
    bool hit;
    ck_assert_int_eq(loom_cache_compile(c, g, NULL, &p1, &hit), LOOM_OK);
    ck_assert(!hit);
    ck_assert_int_eq(loom_cache_compile(c, g2, NULL, &p2, &hit), LOOM_OK);   /* equal structure */
    ck_assert(hit);
    ck_assert_ptr_eq(p1, p2);
    ck_assert_int_eq(loom_cache_compile(c, g3, NULL, &p3, &hit), LOOM_OK);   /* a size changed */
    ck_assert(!hit);
    ck_assert_int_eq(loom_cache_compile(c, g, &(loom_compile_options){ .window = 3 }, &p4, &hit), LOOM_OK);
    ck_assert(!hit);   /* an option that changes the plan */
    ck_assert(loom_plan_key(p1).lo != loom_plan_key(p4).lo || loom_plan_key(p1).hi != loom_plan_key(p4).hi);
    loom_cache_stats st;
    loom_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.hits, 1);
    ck_assert_uint_eq(st.misses, 3);
    ck_assert_uint_eq(st.entries, 3);
    loom_plan_release(p1), loom_plan_release(p2), loom_plan_release(p3), loom_plan_release(p4);
    loom_cache_destroy(c);
    loom_graph_destroy(g), loom_graph_destroy(g2), loom_graph_destroy(g3);
}
END_TEST

START_TEST(test_cache_forced_collision)
{
    loom_cache *c;
    ck_assert_int_eq(loom_cache_create(NULL, &c), LOOM_OK);
    loom_cache_force_key(c, &(loom_hash){ 42, 42 });
    loom_graph *a = make(64, 2), *b = make(64, 3);
    loom_plan *pa, *pb, *pa2;
    bool hit;
    ck_assert_int_eq(loom_cache_compile(c, a, NULL, &pa, &hit), LOOM_OK);
    ck_assert_int_eq(loom_cache_compile(c, b, NULL, &pb, &hit), LOOM_OK);
    ck_assert(!hit);
    ck_assert_ptr_ne(pa, pb);
    ck_assert_uint_eq(loom_plan_get_stats(pb)->nodes, 3);
    ck_assert_int_eq(loom_cache_compile(c, a, NULL, &pa2, &hit), LOOM_OK);
    ck_assert(hit);
    ck_assert_ptr_eq(pa, pa2);
    loom_cache_stats st;
    loom_cache_get_stats(c, &st);
    ck_assert_uint_ge(st.collisions, 1);
    loom_plan_release(pa), loom_plan_release(pb), loom_plan_release(pa2);
    loom_cache_destroy(c);
    loom_graph_destroy(a), loom_graph_destroy(b);
}
END_TEST

START_TEST(test_cache_lru_and_busy)
{
    loom_cache *c;
    ck_assert_int_eq(loom_cache_create(&(loom_cache_desc){ .capacity = 2 }, &c), LOOM_OK);
    loom_graph *g[4];
    for (int i = 0; i < 4; i++)
        g[i] = make(64, (uint32_t)i + 1);
    loom_plan *p;
    bool hit;
#define GET(i, want)                                                            \
    do {                                                                        \
        ck_assert_int_eq(loom_cache_compile(c, g[i], NULL, &p, &hit), LOOM_OK); \
        ck_assert_int_eq(hit, want);                                            \
    } while (0)
    GET(0, false);
    loom_plan_release(p);
    GET(1, false);
    loom_plan_release(p);
    GET(0, true);   /* 0 is now most recent */
    loom_plan_release(p);
    GET(2, false);  /* evicts 1 */
    loom_plan_release(p);
    GET(0, true);
    loom_plan_release(p);
    GET(1, false);  /* evicts 2 */
    /* Mark 1 busy; 0 is least recent and idle, so 0 goes, never 1. */
    busy_flag = true;
    destroyed = 0;
    loom_plan_set_attachment(p, &(loom_plan_attachment){ p, att_destroy, att_busy, NULL });
    loom_plan_release(p);
    GET(3, false);
    loom_plan_release(p);
    GET(3, true);
    loom_plan_release(p);
    /* Now 1 (busy) is least recent: 3 is evicted instead. */
    GET(2, false);
    loom_plan_release(p);
    GET(1, true);
    loom_plan_release(p);
    loom_cache_stats st;
    loom_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.evictions, 4);
    ck_assert_uint_eq(st.entries, 2);
    busy_flag = false;
    loom_cache_destroy(c);
    ck_assert_int_eq(destroyed, 1);
    for (int i = 0; i < 4; i++)
        loom_graph_destroy(g[i]);
#undef GET
}
END_TEST

START_TEST(test_cache_disabled)
{
    loom_cache *c;
    ck_assert_int_eq(loom_cache_create(NULL, &c), LOOM_OK);
    loom_graph *g = make(64, 2);
    loom_plan *p1, *p2;
    bool hit;
    loom_compile_options o = { .disable = LOOM_DISABLE_CACHE };
    ck_assert_int_eq(loom_cache_compile(c, g, &o, &p1, &hit), LOOM_OK);
    ck_assert_int_eq(loom_cache_compile(c, g, &o, &p2, &hit), LOOM_OK);
    ck_assert(!hit);
    ck_assert_ptr_ne(p1, p2);
    loom_plan_release(p1), loom_plan_release(p2);
    loom_cache_destroy(c);
    loom_graph_destroy(g);
}
END_TEST

static Suite *compiler_suite(void)
{
    Suite *s = suite_create("compiler");
    TCase *tc = tcase_create("compile");
    tcase_add_test(tc, test_compile_stats);
    tcase_add_test(tc, test_attachment);
    suite_add_tcase(s, tc);
    tc = tcase_create("cache");
    tcase_add_test(tc, test_cache_hit_miss);
    tcase_add_test(tc, test_cache_forced_collision);
    tcase_add_test(tc, test_cache_lru_and_busy);
    tcase_add_test(tc, test_cache_disabled);
    suite_add_tcase(s, tc);
    return s;
}

void loom_test_register(loom_test_runner *r, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    loom_test_add_suite(r, compiler_suite());
}
