/* Compiler and plan cache: plans, keys, hits and misses, forced collisions,
 * LRU order and eviction that skips busy plans, the LOOM_DISABLE /
 * LOOM_PASSES switches read from the environment, and the binding limit. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "loom_compiler.h"
#include "loom_ops.h"
#include "loom_passes.h"
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
    ck_assert_uint_eq(s->n_passes, loom_pass_count());
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

/* The binding limit is part of the key, changes the plan where a binding
 * exceeds it (split nodes in the stats), and one too small for a row block
 * fails the compile with LOOM_LIMIT and no plan. */
START_TEST(test_binding_limit)
{
    loom_graph *g;
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    uint32_t w, x, y;
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = 300 * 64 * 4, .usage = LOOM_USAGE_WEIGHT },
                                           &w), LOOM_OK);
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = 64 * 4, .usage = LOOM_USAGE_INPUT }, &x),
                     LOOM_OK);
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = 300 * 4, .usage = LOOM_USAGE_OUTPUT }, &y),
                     LOOM_OK);
    ck_assert_int_eq(loom_op_matvec(g, loom_mat(w, LOOM_F32, 300, 64), loom_vec(x, 64), loom_vec(y, 300), NULL),
                     LOOM_OK);
    loom_cache *c;
    ck_assert_int_eq(loom_cache_create(NULL, &c), LOOM_OK);
    loom_plan *whole, *split, *again;
    bool hit;
    ck_assert_int_eq(loom_cache_compile(c, g, NULL, &whole, &hit), LOOM_OK);
    ck_assert_int_eq(loom_cache_compile(c, g, &(loom_compile_options){ .max_binding_range = 16384 }, &split, &hit),
                     LOOM_OK);
    ck_assert(!hit);
    ck_assert(loom_plan_key(whole).lo != loom_plan_key(split).lo || loom_plan_key(whole).hi != loom_plan_key(split).hi);
    ck_assert_uint_eq(loom_plan_get_stats(whole)->split_nodes, 0);
    ck_assert_uint_eq(loom_plan_get_stats(whole)->dispatches, 1);
    ck_assert_uint_eq(loom_plan_get_stats(split)->split_nodes, 1);
    ck_assert_uint_eq(loom_plan_get_stats(split)->dispatches, 5);   /* 64-row blocks of 16 KiB */
    ck_assert_uint_eq(loom_plan_get_stats(split)->barriers, 0);     /* disjoint rows: one group */
    ck_assert_int_eq(loom_cache_compile(c, g, &(loom_compile_options){ .max_binding_range = 16384 }, &again, &hit),
                     LOOM_OK);
    ck_assert(hit);
    ck_assert_ptr_eq(again, split);
    loom_plan *none = (loom_plan *)1;
    ck_assert_int_eq(loom_compile(g, &(loom_compile_options){ .max_binding_range = 16383 }, &none), LOOM_LIMIT);
    ck_assert_ptr_null(none);
    /* A pipeline without the split pass cannot meet a limit: refused too. */
    ck_assert_int_eq(loom_compile(g, &(loom_compile_options){ .max_binding_range = 16384,
                                                              .pipeline = "verify,fuse,reorder,barriers" }, &none),
                     LOOM_LIMIT);
    ck_assert_ptr_null(none);
    /* So are the enabled forms, even where they change nothing here: a
     * plan made with them is never handed to a caller without them. */
    loom_plan *half, *half_again;
    ck_assert_int_eq(loom_cache_compile(c, g, &(loom_compile_options){ .enable = LOOM_ENABLE_HALF_SHARES }, &half,
                                        &hit),
                     LOOM_OK);
    ck_assert(!hit);
    ck_assert(loom_plan_key(whole).lo != loom_plan_key(half).lo || loom_plan_key(whole).hi != loom_plan_key(half).hi);
    ck_assert_int_eq(loom_cache_compile(c, g, &(loom_compile_options){ .enable = LOOM_ENABLE_HALF_SHARES },
                                        &half_again, &hit),
                     LOOM_OK);
    ck_assert(hit);
    ck_assert_ptr_eq(half_again, half);
    loom_plan_release(half), loom_plan_release(half_again);
    /* And the argmax forms' workgroup cap, a device figure like the limit. */
    loom_plan *wave, *wave_again;
    ck_assert_int_eq(loom_cache_compile(c, g, &(loom_compile_options){ .wave_groups = 528 }, &wave, &hit), LOOM_OK);
    ck_assert(!hit);
    ck_assert(loom_plan_key(whole).lo != loom_plan_key(wave).lo || loom_plan_key(whole).hi != loom_plan_key(wave).hi);
    ck_assert_int_eq(loom_cache_compile(c, g, &(loom_compile_options){ .wave_groups = 528 }, &wave_again, &hit),
                     LOOM_OK);
    ck_assert(hit);
    ck_assert_ptr_eq(wave_again, wave);
    loom_plan_release(wave), loom_plan_release(wave_again);
    /* And the cooperative-matrix forms, a device feature. */
    loom_plan *coop;
    ck_assert_int_eq(loom_cache_compile(c, g, &(loom_compile_options){ .coopmat = true }, &coop, &hit), LOOM_OK);
    ck_assert(!hit);
    ck_assert(loom_plan_key(whole).lo != loom_plan_key(coop).lo || loom_plan_key(whole).hi != loom_plan_key(coop).hi);
    loom_plan_release(coop);
    /* And awaited edges, a device rule: a plan polling in the shader is
     * never handed to a caller compiling for barriers only. */
    loom_plan *aw;
    ck_assert_int_eq(loom_cache_compile(c, g, &(loom_compile_options){ .awaits = true }, &aw, &hit), LOOM_OK);
    ck_assert(!hit);
    ck_assert(loom_plan_key(whole).lo != loom_plan_key(aw).lo || loom_plan_key(whole).hi != loom_plan_key(aw).hi);
    loom_plan_release(aw);
    loom_plan_release(whole), loom_plan_release(split), loom_plan_release(again);
    loom_cache_destroy(c);
    loom_graph_destroy(g);
}
END_TEST

/* ---- LOOM_DISABLE and LOOM_PASSES ---------------------------------------- */

static bool ran(const loom_plan *p, const char *pass)
{
    const loom_plan_stats *s = loom_plan_get_stats(p);
    for (uint32_t i = 0; i < s->n_passes; i++)
        if (!strcmp(s->pass_names[i], pass))
            return true;
    return false;
}

static loom_plan *compile_env(const loom_graph *g, const loom_compile_options *o, const char *disable,
                              const char *passes)
{
    if (disable)
        setenv("LOOM_DISABLE", disable, 1);
    else
        unsetenv("LOOM_DISABLE");
    if (passes)
        setenv("LOOM_PASSES", passes, 1);
    else
        unsetenv("LOOM_PASSES");
    loom_plan *p = NULL;
    ck_assert_int_eq(loom_compile(g, o, &p), LOOM_OK);
    return p;
}

START_TEST(test_env_switches)
{
    loom_graph *g = make(64, 3);
    loom_plan *p = compile_env(g, NULL, NULL, NULL);
    ck_assert_uint_eq(loom_plan_get_stats(p)->n_passes, loom_pass_count());   /* the default pipeline: all */
    loom_plan_release(p);
    /* Each pass with a switch, by the table's name. */
    for (uint32_t i = 0; i < loom_pass_count(); i++) {
        const loom_pass *ps = loom_pass_at(i);
        if (!ps->disable)
            continue;
        p = compile_env(g, NULL, ps->name, NULL);
        ck_assert_msg(!ran(p, ps->name), "LOOM_DISABLE=%s still ran it", ps->name);
        ck_assert_uint_eq(loom_plan_get_stats(p)->n_passes, loom_pass_count() - 1);
        loom_plan_release(p);
    }
    /* The environment adds to the caller's bits. */
    p = compile_env(g, &(loom_compile_options){ .disable = LOOM_DISABLE_REORDER }, "fuse, lifetimes", NULL);
    ck_assert(!ran(p, "fuse") && !ran(p, "reorder") && !ran(p, "lifetimes") && ran(p, "barriers"));
    loom_plan_release(p);
    /* The barriers pass off: the plan is still explicit, a barrier per node. */
    p = compile_env(g, NULL, "barriers", NULL);
    ck_assert_uint_eq(loom_plan_get_stats(p)->barriers, 2);
    loom_plan_release(p);
    /* LOOM_PASSES replaces the caller's pipeline; disable bits still skip. */
    p = compile_env(g, &(loom_compile_options){ .pipeline = "verify,fuse" }, NULL, "verify,reorder,barriers");
    ck_assert(ran(p, "reorder") && ran(p, "barriers") && !ran(p, "fuse"));
    loom_plan_release(p);
    p = compile_env(g, NULL, "barriers", "verify,barriers");
    ck_assert_uint_eq(loom_plan_get_stats(p)->n_passes, 1);
    ck_assert(ran(p, "verify"));
    loom_plan_release(p);
    /* Settings change the key: a plan compiled under others is not reused. */
    loom_plan *a = compile_env(g, NULL, NULL, NULL), *b = compile_env(g, NULL, "fuse", NULL);
    loom_hash ka = loom_plan_key(a), kb = loom_plan_key(b);
    ck_assert(ka.lo != kb.lo || ka.hi != kb.hi);
    loom_plan_release(a);
    loom_plan_release(b);
    unsetenv("LOOM_DISABLE");
    loom_graph_destroy(g);
}
END_TEST

START_TEST(test_env_cache)
{
    loom_cache *c;
    ck_assert_int_eq(loom_cache_create(NULL, &c), LOOM_OK);
    loom_graph *g = make(64, 2);
    loom_plan *p[4];
    bool hit = true;
    unsetenv("LOOM_DISABLE");
    unsetenv("LOOM_PASSES");
    ck_assert_int_eq(loom_cache_compile(c, g, NULL, &p[0], &hit), LOOM_OK);
    ck_assert(!hit);
    setenv("LOOM_DISABLE", "reorder", 1);   /* another key: a miss, not the first plan */
    ck_assert_int_eq(loom_cache_compile(c, g, NULL, &p[1], &hit), LOOM_OK);
    ck_assert(!hit);
    ck_assert(!ran(p[1], "reorder"));
    setenv("LOOM_DISABLE", "cache", 1);     /* never a hit, nothing stored */
    ck_assert_int_eq(loom_cache_compile(c, g, NULL, &p[2], &hit), LOOM_OK);
    ck_assert(!hit);
    ck_assert_ptr_ne(p[2], p[0]);
    unsetenv("LOOM_DISABLE");
    ck_assert_int_eq(loom_cache_compile(c, g, NULL, &p[3], &hit), LOOM_OK);
    ck_assert(hit);
    ck_assert_ptr_eq(p[3], p[0]);
    loom_cache_stats st;
    loom_cache_get_stats(c, &st);
    ck_assert_uint_eq(st.entries, 2);
    for (int i = 0; i < 4; i++)
        loom_plan_release(p[i]);
    loom_cache_destroy(c);
    loom_graph_destroy(g);
}
END_TEST

/* An unknown name fails both entry points, and the message lists every
 * name the table knows. */
static void expect_unknown(const char *var, const char *value, bool only_switches)
{
    setenv(var, value, 1);
    loom_graph *g = make(64, 2);
    loom_plan *p = (loom_plan *)1;
    ck_assert_int_eq(loom_compile(g, NULL, &p), LOOM_INVALID_ARGUMENT);
    ck_assert_ptr_null(p);
    const char *msg = loom_last_error();
    for (uint32_t i = 0; i < loom_pass_count(); i++) {
        const loom_pass *ps = loom_pass_at(i);
        if (!only_switches || ps->disable)
            ck_assert_msg(strstr(msg, ps->name), "%s=%s: '%s' does not name pass %s", var, value, msg, ps->name);
    }
    if (only_switches) {
        ck_assert_msg(strstr(msg, "cache"), "'%s' does not name the cache switch", msg);
        ck_assert_msg(strstr(msg, "split_k"), "'%s' does not name the split_k switch", msg);
    }
    loom_cache *c;
    ck_assert_int_eq(loom_cache_create(NULL, &c), LOOM_OK);
    bool hit = true;
    p = (loom_plan *)1;
    ck_assert_int_eq(loom_cache_compile(c, g, NULL, &p, &hit), LOOM_INVALID_ARGUMENT);
    ck_assert_ptr_null(p);
    ck_assert(!hit);
    loom_cache_destroy(c);
    loom_graph_destroy(g);
    unsetenv(var);
}

START_TEST(test_env_unknown)
{
    unsetenv("LOOM_DISABLE");
    unsetenv("LOOM_PASSES");
    expect_unknown("LOOM_DISABLE", "fuse,fusion", true);
    expect_unknown("LOOM_DISABLE", "verify", true);   /* verify has no switch */
    expect_unknown("LOOM_PASSES", "verify,nope", false);
    expect_unknown("LOOM_PASSES", "verify,fuse,lifetime", false);
}
END_TEST

/* LOOM_ENABLE reaches the passes as the option does (the stage pass's f16
 * t on a residual add and the norm reading it), is part of the key (a
 * miss, then the plan made without it again), and refuses an unknown name
 * with the known ones in the message. */
START_TEST(test_env_enable)
{
    unsetenv("LOOM_DISABLE");
    unsetenv("LOOM_PASSES");
    loom_graph *g;
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    uint32_t dim = 256, w, a, x, gn, y;
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = dim * dim * 2, .usage = LOOM_USAGE_WEIGHT },
                                           &w), LOOM_OK);
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = dim * 4, .usage = LOOM_USAGE_INPUT }, &a),
                     LOOM_OK);
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = dim * 4, .usage = LOOM_USAGE_STATE }, &x),
                     LOOM_OK);
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = dim * 4, .usage = LOOM_USAGE_WEIGHT }, &gn),
                     LOOM_OK);
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = dim * 4, .usage = LOOM_USAGE_OUTPUT }, &y),
                     LOOM_OK);
    loom_tensor W = loom_mat(w, LOOM_F16, dim, dim);
    ck_assert_int_eq(loom_op_matvec_add(g, W, loom_vec(a, dim), loom_vec(x, dim), loom_vec(x, dim), NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_rms_norm_matvec(g, W, loom_vec(x, dim), loom_vec(gn, dim), loom_vec(y, dim), 1e-5f, NULL),
                     LOOM_OK);
    loom_cache *c;
    ck_assert_int_eq(loom_cache_create(NULL, &c), LOOM_OK);
    loom_plan *p[3];
    bool hit = true;
    unsetenv("LOOM_ENABLE");
    ck_assert_int_eq(loom_cache_compile(c, g, NULL, &p[0], &hit), LOOM_OK);
    ck_assert(!hit);
    setenv("LOOM_ENABLE", "half_stage", 1);
    ck_assert_int_eq(loom_cache_compile(c, g, NULL, &p[1], &hit), LOOM_OK);
    ck_assert(!hit);
    bool plain = false, half = false;
    for (int k = 0; k < 2; k++) {
        const loom_graph *pg = loom_plan_graph(p[k]);
        for (uint32_t i = 0; i < loom_graph_node_count(pg); i++) {
            const char *kn = loom_graph_kernel_name(pg, loom_graph_node(pg, i)->kernel);
            if (kn && !strcmp(kn, k ? "rms_norm_matvec_pre_x16_f16" : "rms_norm_matvec_pre_f16"))
                *(k ? &half : &plain) = true;
        }
    }
    ck_assert(plain && half);
    unsetenv("LOOM_ENABLE");
    ck_assert_int_eq(loom_cache_compile(c, g, NULL, &p[2], &hit), LOOM_OK);
    ck_assert(hit);
    ck_assert_ptr_eq(p[2], p[0]);
    setenv("LOOM_ENABLE", "half_stage,half", 1);
    loom_plan *bad = (loom_plan *)1;
    ck_assert_int_eq(loom_compile(g, NULL, &bad), LOOM_INVALID_ARGUMENT);
    ck_assert_ptr_null(bad);
    ck_assert(strstr(loom_last_error(), "'half'") && strstr(loom_last_error(), "half_shares, half_stage, half_act"));
    unsetenv("LOOM_ENABLE");
    for (int i = 0; i < 3; i++)
        loom_plan_release(p[i]);
    loom_cache_destroy(c);
    loom_graph_destroy(g);
}
END_TEST

/* The split K walk is the default: a matrix of one weight on the portable
 * tiles with fewer than LOOM_MATMUL_COOP_L_FROM tiles compiles to its split
 * form (twice the workgroups), and loom_compile_options.disable's
 * LOOM_DISABLE_SPLIT_K or LOOM_DISABLE=split_k keeps the tiles whole, each
 * under a key of its own. The switch is a bit of its own: it was once
 * PASS_MASK + 2, the cache's bit and fuse's, so that it also turned the
 * fuse pass off. */
START_TEST(test_disable_split_k)
{
    ck_assert_uint_eq(__builtin_popcount(LOOM_DISABLE_SPLIT_K), 1);
    ck_assert_uint_eq(LOOM_DISABLE_SPLIT_K & (LOOM_DISABLE_PASS_MASK | LOOM_DISABLE_CACHE), 0);
    unsetenv("LOOM_DISABLE");
    unsetenv("LOOM_PASSES");
    unsetenv("LOOM_ENABLE");
    loom_graph *g;
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    uint32_t rows = 130, cols = 96, T = 100, w, x, y;
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = rows * cols * 4, .usage = LOOM_USAGE_WEIGHT },
                                           &w), LOOM_OK);
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = T * cols * 4, .usage = LOOM_USAGE_INPUT }, &x),
                     LOOM_OK);
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = T * rows * 4, .usage = LOOM_USAGE_OUTPUT }, &y),
                     LOOM_OK);
    ck_assert_int_eq(loom_op_matmul(g, loom_mat(w, LOOM_F32, rows, cols), loom_mat(x, LOOM_F32, T, cols),
                                    loom_mat(y, LOOM_F32, T, rows), NULL),
                     LOOM_OK);
    loom_cache *c;
    ck_assert_int_eq(loom_cache_create(NULL, &c), LOOM_OK);
    loom_plan *p[3];
    bool hit = true;
    ck_assert_int_eq(loom_cache_compile(c, g, NULL, &p[0], &hit), LOOM_OK);
    ck_assert(!hit);
    ck_assert_int_eq(loom_cache_compile(c, g, &(loom_compile_options){ .disable = LOOM_DISABLE_SPLIT_K }, &p[1], &hit),
                     LOOM_OK);
    ck_assert(!hit);
    setenv("LOOM_DISABLE", "split_k", 1);
    ck_assert_int_eq(loom_cache_compile(c, g, NULL, &p[2], &hit), LOOM_OK);
    unsetenv("LOOM_DISABLE");
    static const char *want[3] = { "matmul_tiled_sk_f32", "matmul_tiled_f32", "matmul_tiled_f32" };
    static const uint32_t groups[3] = { 2 * 3 * 2, 3 * 2, 3 * 2 };   /* 3 x 2 tiles of 64 by 64, twice split */
    for (int k = 0; k < 3; k++) {
        const loom_graph *pg = loom_plan_graph(p[k]);
        ck_assert_uint_eq(loom_graph_node_count(pg), 1);
        const loom_node *n = loom_graph_node(pg, 0);
        ck_assert_str_eq(loom_graph_kernel_name(pg, n->kernel), want[k]);
        ck_assert_uint_eq(n->groups[0], groups[k]);
    }
    for (int k = 0; k < 3; k++)
        loom_plan_release(p[k]);
    loom_cache_destroy(c);
    loom_graph_destroy(g);
}
END_TEST

/* ---- what a random-graph checker found ------------------------------------ */

#define CN 64u   /* floats a vector: one 256-byte binding unit */

static uint32_t buf(loom_graph *g, uint64_t size, loom_usage u)
{
    uint32_t id;
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = size, .usage = u }, &id), LOOM_OK);
    return id;
}

/* Every buffer a pass declared (id from `first` on) is bound by some node. */
static uint32_t unused_from(const loom_graph *g, uint32_t first)
{
    uint32_t unused = 0;
    for (uint32_t b = first; b < loom_graph_buffer_count(g); b++) {
        bool used = false;
        for (uint32_t i = 0; i < loom_graph_node_count(g) && !used; i++) {
            const loom_node *nd = loom_graph_node(g, i);
            const loom_binding *bb = loom_node_bindings(g, nd);
            for (uint32_t k = 0; k < nd->n_bindings && !used; k++)
                used = bb[k].buffer == b;
        }
        unused += !used;
    }
    return unused;
}

/* The plan's graph written as JSON reads back (docs/json-format.md). */
static loom_result round_trip(const loom_plan *p)
{
    loom_str s;
    loom_str_init(&s, NULL);
    loom_result rc = loom_graph_dump(loom_plan_graph(p), LOOM_FORMAT_JSON, &s);
    loom_graph *back = NULL;
    if (!rc)
        rc = loom_graph_parse_json(s.data, s.len, NULL, &back);
    loom_graph_destroy(back);
    loom_str_free(&s);
    return rc;
}

/* MATVEC_ADD(W, x, r -> h) then RMS_NORM_MATVEC(W2, h, g -> y): the stage
 * pass stages the norm into the producer and adds a ZERO node, which must
 * not claim the producer's captured node: the plan reads back. */
START_TEST(test_stage_round_trip)
{
    loom_graph *g;
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    uint32_t W = buf(g, CN * CN * 4, LOOM_USAGE_WEIGHT), W2 = buf(g, CN * CN * 4, LOOM_USAGE_WEIGHT);
    uint32_t x = buf(g, CN * 4, LOOM_USAGE_INPUT), r = buf(g, CN * 4, LOOM_USAGE_INPUT);
    uint32_t h = buf(g, CN * 4, LOOM_USAGE_NONE), gw = buf(g, CN * 4, LOOM_USAGE_WEIGHT);
    uint32_t y = buf(g, CN * 4, LOOM_USAGE_OUTPUT);
    ck_assert_int_eq(loom_op_matvec_add(g, loom_mat(W, LOOM_F32, CN, CN), loom_vec(x, CN), loom_vec(r, CN),
                                        loom_vec(h, CN), NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_rms_norm_matvec(g, loom_mat(W2, LOOM_F32, CN, CN), loom_vec(h, CN), loom_vec(gw, CN),
                                             loom_vec(y, CN), 1e-5f, NULL), LOOM_OK);
    loom_plan *p;
    ck_assert_int_eq(loom_compile(g, NULL, &p), LOOM_OK);
    const loom_graph *pg = loom_plan_graph(p);
    ck_assert_uint_eq(loom_graph_node_count(pg), 3);   /* the stage pass did change it */
    ck_assert_uint_eq(loom_graph_node(pg, 0)->op, LOOM_OP_ZERO);
    ck_assert_int_eq(round_trip(p), LOOM_OK);
    loom_plan_release(p);
    loom_graph_destroy(g);
}
END_TEST

/* RMS_NORM -> MUL -> MATVEC -> ARGMAX fuses in two rounds (MATVEC_ARGMAX,
 * then RMS_NORM_MATVEC_ARGMAX): the first round's workspaces go with the
 * node that used them. */
START_TEST(test_fuse_twice_workspaces)
{
    loom_graph *g;
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    uint32_t x = buf(g, CN * 4, LOOM_USAGE_INPUT), t = buf(g, CN * 4, LOOM_USAGE_NONE);
    uint32_t w = buf(g, CN * 4, LOOM_USAGE_WEIGHT), u = buf(g, CN * 4, LOOM_USAGE_NONE);
    uint32_t W = buf(g, CN * CN * 4, LOOM_USAGE_WEIGHT), y = buf(g, CN * 4, LOOM_USAGE_OUTPUT);
    uint32_t tok = buf(g, 4, LOOM_USAGE_OUTPUT);
    ck_assert_int_eq(loom_op_rms_norm(g, loom_vec(x, CN), loom_vec(t, CN), 1e-5f, NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_mul(g, loom_vec(t, CN), loom_vec(w, CN), loom_vec(u, CN), NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_matvec(g, loom_mat(W, LOOM_F32, CN, CN), loom_vec(u, CN), loom_vec(y, CN), NULL),
                     LOOM_OK);
    ck_assert_int_eq(loom_op_argmax(g, loom_vec(y, CN), (loom_tensor){ tok, LOOM_U32, 0, 1, 1 }, NULL), LOOM_OK);
    uint32_t captured = loom_graph_buffer_count(g);
    loom_plan *p;
    ck_assert_int_eq(loom_compile(g, NULL, &p), LOOM_OK);
    const loom_graph *pg = loom_plan_graph(p);
    ck_assert_uint_eq(loom_graph_node_count(pg), 1);
    ck_assert_uint_eq(loom_graph_node(pg, 0)->op, LOOM_OP_RMS_NORM_MATVEC_ARGMAX);
    ck_assert_uint_eq(loom_graph_buffer_count(pg), captured + 2);   /* its part and count */
    ck_assert_uint_eq(unused_from(pg, captured), 0);
    loom_plan_release(p);
    loom_graph_destroy(g);
}
END_TEST

/* MATVEC -> ARGMAX whose x sits at byte offset 64 (a raw dispatch: the
 * builders bind at 256-byte steps): MATVEC_ARGMAX's builder refuses the view,
 * the chain stays unfused, and the workspaces it had in mind are not left. */
START_TEST(test_refused_view_workspaces)
{
    loom_graph *g;
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    uint32_t W = buf(g, CN * CN * 4, LOOM_USAGE_WEIGHT), x = buf(g, CN * 4 + 64, LOOM_USAGE_INPUT);
    uint32_t y = buf(g, CN * 4, LOOM_USAGE_OUTPUT), tok = buf(g, 4, LOOM_USAGE_OUTPUT);
    loom_binding b[3] = { { .buffer = W, .slot = 0, .offset = 0, .size = CN * CN * 4, .access = LOOM_ACCESS_READ },
                          { .buffer = x, .slot = 1, .offset = 64, .size = CN * 4, .access = LOOM_ACCESS_READ },
                          { .buffer = y, .slot = 2, .offset = 0, .size = CN * 4, .access = LOOM_ACCESS_WRITE } };
    loom_pc_matvec pc = { CN, CN };
    loom_dispatch_desc d = { .kernel = "matvec_f32", .op = LOOM_OP_MATVEC, .groups = { CN / 2, 1, 1 },
                             .bindings = b, .n_bindings = 3, .push = &pc, .push_size = sizeof pc };
    ck_assert_int_eq(loom_graph_add_dispatch(g, &d, NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_argmax(g, loom_vec(y, CN), (loom_tensor){ tok, LOOM_U32, 0, 1, 1 }, NULL), LOOM_OK);
    uint32_t captured = loom_graph_buffer_count(g);
    loom_plan *p;
    ck_assert_int_eq(loom_compile(g, NULL, &p), LOOM_OK);
    ck_assert_uint_eq(loom_graph_node_count(loom_plan_graph(p)), 2);   /* unfused */
    ck_assert_uint_eq(loom_graph_buffer_count(loom_plan_graph(p)), captured);
    loom_plan_release(p);
    /* The builder alone, too: a refused view declares nothing. */
    ck_assert_int_ne(loom_op_matvec_argmax(g, loom_mat(W, LOOM_F32, CN, CN), loom_vec_at(x, 64, CN), loom_vec(y, CN),
                                           (loom_tensor){ tok, LOOM_U32, 0, 1, 1 }, NULL), LOOM_OK);
    ck_assert_uint_eq(loom_graph_buffer_count(g), captured);
    loom_graph_destroy(g);
}
END_TEST

/* A captured MATVEC_ADD whose y is its x (the builders allow y = r only),
 * read by an RMS_NORM_MATVEC: refused by the verifier, so every pipeline
 * gives the same answer. */
START_TEST(test_verify_matvec_add_y_is_x)
{
    loom_graph *g;
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    uint32_t W = buf(g, CN * CN * 4, LOOM_USAGE_WEIGHT), W2 = buf(g, CN * CN * 4, LOOM_USAGE_WEIGHT);
    uint32_t h = buf(g, CN * 4, LOOM_USAGE_STATE), r = buf(g, CN * 4, LOOM_USAGE_INPUT);
    uint32_t gw = buf(g, CN * 4, LOOM_USAGE_WEIGHT), y = buf(g, CN * 4, LOOM_USAGE_OUTPUT);
    loom_binding b[4] = { { .buffer = W, .slot = 0, .offset = 0, .size = CN * CN * 4, .access = LOOM_ACCESS_READ },
                          { .buffer = h, .slot = 1, .offset = 0, .size = CN * 4, .access = LOOM_ACCESS_READ },
                          { .buffer = r, .slot = 2, .offset = 0, .size = CN * 4, .access = LOOM_ACCESS_READ },
                          { .buffer = h, .slot = 3, .offset = 0, .size = CN * 4, .access = LOOM_ACCESS_WRITE } };
    loom_pc_matvec pc = { CN, CN };
    loom_dispatch_desc d = { .kernel = "matvec_add_f32", .op = LOOM_OP_MATVEC_ADD, .groups = { CN / 2, 1, 1 },
                             .bindings = b, .n_bindings = 4, .push = &pc, .push_size = sizeof pc };
    ck_assert_int_eq(loom_graph_add_dispatch(g, &d, NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_rms_norm_matvec(g, loom_mat(W2, LOOM_F32, CN, CN), loom_vec(h, CN), loom_vec(gw, CN),
                                             loom_vec(y, CN), 1e-5f, NULL), LOOM_OK);
    ck_assert_int_eq(loom_graph_verify(g), LOOM_VERIFY);
    static const char *const pipelines[] = { NULL, "verify,fuse,reorder,barriers,lifetimes", "verify",
                                             "fuse,split,stage" };
    for (size_t i = 0; i < sizeof pipelines / sizeof pipelines[0]; i++) {
        loom_plan *p = (loom_plan *)1;
        ck_assert_int_eq(loom_compile(g, &(loom_compile_options){ .pipeline = pipelines[i] }, &p), LOOM_VERIFY);
        ck_assert_ptr_null(p);
    }
    loom_graph_destroy(g);
}
END_TEST

static Suite *compiler_suite(void)
{
    Suite *s = suite_create("compiler");
    TCase *tc = tcase_create("compile");
    tcase_add_test(tc, test_compile_stats);
    tcase_add_test(tc, test_attachment);
    tcase_add_test(tc, test_binding_limit);
    suite_add_tcase(s, tc);
    tc = tcase_create("cache");
    tcase_add_test(tc, test_cache_hit_miss);
    tcase_add_test(tc, test_cache_forced_collision);
    tcase_add_test(tc, test_cache_lru_and_busy);
    tcase_add_test(tc, test_cache_disabled);
    suite_add_tcase(s, tc);
    tc = tcase_create("env");
    tcase_add_test(tc, test_env_switches);
    tcase_add_test(tc, test_env_cache);
    tcase_add_test(tc, test_env_unknown);
    tcase_add_test(tc, test_env_enable);
    tcase_add_test(tc, test_disable_split_k);
    suite_add_tcase(s, tc);
    tc = tcase_create("checker");
    tcase_add_test(tc, test_stage_round_trip);
    tcase_add_test(tc, test_fuse_twice_workspaces);
    tcase_add_test(tc, test_refused_view_workspaces);
    tcase_add_test(tc, test_verify_matvec_add_y_is_x);
    suite_add_tcase(s, tc);
    return s;
}

void loom_test_register(loom_test_runner *r, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    loom_test_add_suite(r, compiler_suite());
}
