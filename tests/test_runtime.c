/* The runtime on the default device (lavapipe in CI) under the validation
 * layer with synchronization validation: hand-made graphs of small GLSL test
 * kernels compiled at run time, checked against values computed here, and
 * every test ends with no validation message. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <vulkan/vulkan.h>
#include "loom_compiler.h"
#include "loom_ir_edit.h"
#include "loom_ops.h"
#include "loom_runtime.h"
#include "test_kernels.h"
#include "runner.h"

/* runtime/internal.h: how a device's memory types classify (not exported). */
loom_rt_memory rt_memory_of(const VkPhysicalDeviceProperties *props, const VkPhysicalDeviceMemoryProperties *mp,
                            uint64_t *window);

#define N 256u   /* elements per test buffer: 1 KiB */
#define LOOM_RT_TEST_MAX_K 16u   /* the runtime's most copies in flight */

/* ---- test kernels ------------------------------------------------------- */

/* Busy work so that a step is still running when the host looks. */
static const char K_PARAMS[] =
    "#version 450\n"
    "layout(local_size_x = 1) in;\n"
    "layout(set = 0, binding = 0) readonly buffer P { uint pos, token, kv_len, step, rows; uint user[11]; } p;\n"
    "layout(set = 0, binding = 1) buffer O { uint o[]; };\n"
    "void main() { o[p.pos] = p.token; }\n";

/* ---- helpers ------------------------------------------------------------ */

static void quiet_log(void *user, loom_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

static void loud_log(void *user, loom_log_level level, const char *msg)
{
    (void)user;
    if (level >= LOOM_LOG_WARN)
        fprintf(stderr, "%s\n", msg);
}

#define OK(expr)                                                                                  \
    do {                                                                                          \
        loom_result rc_ = (expr);                                                                 \
        ck_assert_msg(rc_ == LOOM_OK, "%s: %s: %s", #expr, loom_result_str(rc_), loom_last_error()); \
    } while (0)

static loom_rt *rt_make(uint32_t spin_polls, bool quiet, const char *cache)
{
    loom_rt *rt = NULL;
    loom_rt_desc d = { .validate = true, .log = quiet ? quiet_log : loud_log, .spin_polls = spin_polls,
                       .pipeline_cache_path = cache };
    OK(loom_rt_create(&d, &rt));
    OK(test_kernels_register(rt));
    OK(loom_rt_kernel_glsl(rt, "t_params", K_PARAMS));
    return rt;
}

static void rt_done(loom_rt *rt)
{
    ck_assert_uint_eq(loom_rt_validation_messages(rt), 0);
    loom_rt_destroy(rt);
}

static loom_graph *graph_new(void)
{
    loom_graph *g = NULL;
    OK(loom_graph_create(&(loom_graph_desc){ .name = "rt_test" }, &g));
    return g;
}

static loom_rt_buffer *rbuf(loom_rt *rt, const char *name, loom_usage usage, uint64_t size)
{
    loom_rt_buffer *b = NULL;
    OK(loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ .name = name, .size = size, .usage = usage }, &b));
    return b;
}

/* A graph buffer backed by runtime buffer b. */
static uint32_t gext(loom_graph *g, loom_rt_buffer *b, const char *name)
{
    uint32_t id;
    OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = name, .size = loom_rt_buffer_size(b),
                                                     .external = loom_rt_buffer_id(b) }, &id));
    return id;
}

/* A plan-owned graph buffer. */
static uint32_t gown(loom_graph *g, const char *name, loom_usage usage, uint64_t size)
{
    uint32_t id;
    OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = name, .size = size, .usage = usage }, &id));
    return id;
}

static uint32_t dispatch(loom_graph *g, const char *kernel, const loom_binding *b, uint32_t nb, const uint32_t *pc,
                         uint32_t npc, uint32_t groups)
{
    uint32_t id;
    loom_dispatch_desc d = { .kernel = kernel, .op = LOOM_OP_OTHER, .groups = { groups, 1, 1 }, .bindings = b,
                             .n_bindings = nb, .push = pc, .push_size = npc * 4 };
    OK(loom_graph_add_dispatch(g, &d, &id));
    return id;
}

static uint32_t addk_at(loom_graph *g, uint32_t src, uint32_t dst, uint64_t dst_off, uint32_t n, uint32_t k)
{
    loom_binding b[2] = { { .buffer = src, .slot = 0, .offset = 0, .size = n * 4, .access = LOOM_ACCESS_READ },
                          { .buffer = dst, .slot = 1, .offset = dst_off, .size = n * 4,
                            .access = LOOM_ACCESS_WRITE } };
    uint32_t pc[2] = { n, k };
    return dispatch(g, "t_addk", b, 2, pc, 2, (n + 63) / 64);
}

static uint32_t addk(loom_graph *g, uint32_t src, uint32_t dst, uint32_t k) { return addk_at(g, src, dst, 0, N, k); }

static uint32_t sum(loom_graph *g, uint32_t a, uint32_t b, uint32_t c)
{
    loom_binding bb[3] = { { .buffer = a, .slot = 0, .size = N * 4, .access = LOOM_ACCESS_READ },
                           { .buffer = b, .slot = 1, .size = N * 4, .access = LOOM_ACCESS_READ },
                           { .buffer = c, .slot = 2, .size = N * 4, .access = LOOM_ACCESS_WRITE } };
    uint32_t pc[1] = { N };
    return dispatch(g, "t_sum", bb, 3, pc, 1, N / 64);
}

static uint32_t fill(loom_graph *g, uint32_t a, uint32_t k)
{
    loom_binding b[1] = { { .buffer = a, .slot = 0, .size = N * 4, .access = LOOM_ACCESS_WRITE } };
    uint32_t pc[2] = { N, k };
    return dispatch(g, "t_fill", b, 1, pc, 2, N / 64);
}

static uint32_t spin(loom_graph *g, uint32_t a, uint32_t iters)
{
    loom_binding b[1] = { { .buffer = a, .slot = 0, .size = 64 * 4, .access = LOOM_ACCESS_WRITE } };
    uint32_t pc[2] = { 64, iters };
    return dispatch(g, "t_spin", b, 1, pc, 2, 1);
}

/* Spins of attempt k of a retry loop: 2^k dispatches of iters trips each.
 * llvmpipe ends a shader's loops after 65535 trips however many it is
 * given, so a longer busy step there takes more dispatches, not more trips. */
static void spins(loom_graph *g, uint32_t a, uint32_t iters, uint32_t attempt)
{
    for (uint32_t k = 0; k < 1u << attempt; k++)
        spin(g, a, iters);
}

/* Hand schedule: groups[i] per node, a barrier before node i where
 * barrier[i]. Stands in for the reorder and barriers passes. */
static void schedule(loom_graph *g, const uint32_t *groups, const bool *barrier)
{
    for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
        loom_node *n = loom_graph_node_mut(g, i);
        n->group = groups[i];
        n->barrier = LOOM_NONE;
        if (barrier[i]) {
            loom_barrier_info info = { .hazard = LOOM_HAZARD_RAW, .buffer = LOOM_NONE, .before = i - 1, .after = i };
            OK(loom_graph_add_barrier_info(g, &info, &n->barrier));
        }
    }
    loom_graph_set_scheduled(g, true);
}

static void fill_iota(uint32_t *v, uint32_t base)
{
    for (uint32_t i = 0; i < N; i++)
        v[i] = base + i * 7u;
}

static void read_u32(loom_rt *rt, loom_rt_buffer *b, uint32_t *out)
{
    OK(loom_rt_buffer_read(rt, b, 0, out, N * 4));
}

/* ---- dependent chain ---------------------------------------------------- */

START_TEST(test_chain)
{
    loom_rt *rt = rt_make(0, false, NULL);
    loom_rt_buffer *x = rbuf(rt, "x", LOOM_USAGE_INPUT, N * 4), *y = rbuf(rt, "y", LOOM_USAGE_OUTPUT, N * 4);
    uint32_t in[N], out[N];
    fill_iota(in, 5);
    OK(loom_rt_buffer_write(rt, x, 0, in, sizeof in));
    loom_graph *g = graph_new();
    uint32_t gx = gext(g, x, "x"), gy = gext(g, y, "y"), t[5];
    for (int i = 0; i < 5; i++)
        t[i] = gown(g, NULL, LOOM_USAGE_NONE, N * 4);
    addk(g, gx, t[0], 1);
    for (int i = 1; i < 5; i++)
        addk(g, t[i - 1], t[i], (uint32_t)i + 1);
    addk(g, t[4], gy, 6);
    loom_rt_program *p;
    OK(loom_rt_program_create(rt, g, &p));
    uint64_t step;
    OK(loom_rt_replay(rt, p, NULL, &step));
    ck_assert_uint_gt(step, 0);
    OK(loom_rt_wait(rt, step));
    read_u32(rt, y, out);
    for (uint32_t i = 0; i < N; i++)
        ck_assert_uint_eq(out[i], in[i] + 21);
    /* A plan-owned intermediate, read through the program. */
    OK(loom_rt_program_read(rt, p, t[2], 0, out, sizeof out));
    for (uint32_t i = 0; i < N; i++)
        ck_assert_uint_eq(out[i], in[i] + 6);
    loom_rt_counters c;
    loom_rt_get_counters(rt, &c);
    ck_assert_uint_eq(c.dispatches, 6);
    ck_assert_uint_eq(c.barriers, 5);   /* unscheduled: between every pair */
    ck_assert_uint_eq(c.records, 1);
    ck_assert_uint_eq(c.pipelines, 1);  /* one kernel, one layout */
    loom_rt_program_release(p);
    loom_rt_buffer_release(x);
    loom_rt_buffer_release(y);
    loom_graph_destroy(g);
    rt_done(rt);
}
END_TEST

/* ---- fan-out / fan-in through the scratch arena ------------------------- */

START_TEST(test_fan)
{
    loom_rt *rt = rt_make(0, false, NULL);
    loom_rt_buffer *x = rbuf(rt, "x", LOOM_USAGE_INPUT, N * 4), *w = rbuf(rt, "w", LOOM_USAGE_OUTPUT, N * 4);
    uint32_t in[N], out[N];
    fill_iota(in, 1);
    OK(loom_rt_buffer_write(rt, x, 0, in, sizeof in));
    loom_graph *g = graph_new();
    uint32_t gx = gext(g, x, "x"), gw = gext(g, w, "w"), s[5];
    for (int i = 0; i < 5; i++) {
        s[i] = gown(g, NULL, LOOM_USAGE_SCRATCH, N * 4);
        loom_buffer *b = loom_graph_buffer_mut(g, s[i]);
        b->cls = LOOM_CLASS_SCRATCH;
        b->arena_offset = (uint64_t)i * N * 4;
    }
    loom_graph_set_arena_size(g, 5ull * N * 4);
    addk(g, gx, s[0], 1);          /* a = x + 1 */
    addk(g, s[0], s[1], 1);        /* y1 = a + 1 */
    addk(g, s[0], s[2], 2);        /* y2 = a + 2 */
    addk(g, s[0], s[3], 3);        /* y3 = a + 3 */
    sum(g, s[1], s[2], s[4]);      /* z = 3 y1 + y2 */
    sum(g, s[4], s[3], gw);        /* w = 3 z + y3 */
    schedule(g, (uint32_t[]){ 0, 1, 1, 1, 2, 3 }, (bool[]){ false, true, false, false, true, true });
    OK(loom_rt_run_graph(rt, g, NULL));
    read_u32(rt, w, out);
    for (uint32_t i = 0; i < N; i++) {
        uint32_t a = in[i] + 1, z = 3 * (a + 1) + (a + 2);
        ck_assert_uint_eq(out[i], 3 * z + a + 3);
    }
    loom_rt_counters c;
    loom_rt_get_counters(rt, &c);
    ck_assert_uint_eq(c.barriers, 3);
    loom_rt_buffer_release(x);
    loom_rt_buffer_release(w);
    loom_graph_destroy(g);
    rt_done(rt);
}
END_TEST

/* ---- WAR and WAW -------------------------------------------------------- */

START_TEST(test_war)
{
    loom_rt *rt = rt_make(0, false, NULL);
    loom_rt_buffer *a = rbuf(rt, "a", LOOM_USAGE_STATE, N * 4), *b = rbuf(rt, "b", LOOM_USAGE_OUTPUT, N * 4),
                   *c = rbuf(rt, "c", LOOM_USAGE_OUTPUT, N * 4);
    uint32_t in[N], out[N];
    fill_iota(in, 3);
    OK(loom_rt_buffer_write(rt, a, 0, in, sizeof in));
    loom_graph *g = graph_new();
    uint32_t ga = gext(g, a, "a"), gb = gext(g, b, "b"), gc = gext(g, c, "c");
    addk(g, ga, gb, 1);   /* reads a */
    fill(g, ga, 7);       /* then overwrites it: WAR */
    addk(g, ga, gc, 1);   /* RAW on the new a */
    schedule(g, (uint32_t[]){ 0, 1, 2 }, (bool[]){ false, true, true });
    OK(loom_rt_run_graph(rt, g, NULL));
    read_u32(rt, b, out);
    for (uint32_t i = 0; i < N; i++)
        ck_assert_uint_eq(out[i], in[i] + 1);
    read_u32(rt, c, out);
    for (uint32_t i = 0; i < N; i++)
        ck_assert_uint_eq(out[i], 8);
    /* a is STATE, not OUTPUT: its read needs the extra host barrier. */
    read_u32(rt, a, out);
    ck_assert_uint_eq(out[N - 1], 7);
    loom_rt_buffer_release(a);
    loom_rt_buffer_release(b);
    loom_rt_buffer_release(c);
    loom_graph_destroy(g);
    rt_done(rt);
}
END_TEST

START_TEST(test_waw)
{
    loom_rt *rt = rt_make(0, false, NULL);
    loom_rt_buffer *a = rbuf(rt, "a", LOOM_USAGE_STATE, N * 4), *b = rbuf(rt, "b", LOOM_USAGE_OUTPUT, N * 4);
    uint32_t out[N];
    loom_graph *g = graph_new();
    uint32_t ga = gext(g, a, "a"), gb = gext(g, b, "b");
    fill(g, ga, 1);
    fill(g, ga, 2);       /* WAW: the layer would not notice a missing barrier here */
    addk(g, ga, gb, 10);
    schedule(g, (uint32_t[]){ 0, 1, 2 }, (bool[]){ false, true, true });
    for (int rep = 0; rep < 3; rep++) {
        OK(loom_rt_run_graph(rt, g, NULL));
        read_u32(rt, a, out);
        for (uint32_t i = 0; i < N; i++)
            ck_assert_uint_eq(out[i], 2);
        read_u32(rt, b, out);
        for (uint32_t i = 0; i < N; i++)
            ck_assert_uint_eq(out[i], 12);
    }
    loom_rt_buffer_release(a);
    loom_rt_buffer_release(b);
    loom_graph_destroy(g);
    rt_done(rt);
}
END_TEST

/* ---- differential: full barriers vs needed barriers --------------------- */

enum { DIFF_BUFS = 6 };

/* Builds the same capture on runtime buffers bufs[]; scheduled or not. */
static loom_graph *diff_graph(loom_rt_buffer **bufs, bool scheduled)
{
    loom_graph *g = graph_new();
    uint32_t b[DIFF_BUFS];
    for (int i = 0; i < DIFF_BUFS; i++)
        b[i] = gext(g, bufs[i], NULL);
    addk(g, b[0], b[1], 3);     /* 0: b1 = b0 + 3 */
    addk(g, b[0], b[2], 5);     /* 1: b2 = b0 + 5       (independent of 0) */
    sum(g, b[1], b[2], b[3]);   /* 2: b3 = 3 b1 + b2    RAW on 0, 1 */
    fill(g, b[0], 9);           /* 3: b0 = 9            WAR on 0, 1 */
    addk(g, b[0], b[4], 1);     /* 4: b4 = b0 + 1       RAW on 3 */
    sum(g, b[3], b[4], b[5]);   /* 5: b5 = 3 b3 + b4    RAW on 2, 4 */
    fill(g, b[1], 4);           /* 6: b1 = 4            WAR on 2, WAW on 0 */
    addk(g, b[1], b[2], 2);     /* 7: b2 = b1 + 2       RAW on 6, WAR on 2, WAW on 1 */
    if (scheduled) {
        /* Levels: {0,1} | {2,3} | {4,6} | {5,7}. */
        uint32_t order[] = { 0, 1, 2, 3, 4, 6, 5, 7 };
        OK(loom_graph_permute(g, order, 8));
        schedule(g, (uint32_t[]){ 0, 0, 1, 1, 2, 2, 3, 3 },
                 (bool[]){ false, false, true, false, true, false, true, false });
    }
    return g;
}

START_TEST(test_differential)
{
    loom_rt *rt = rt_make(0, false, NULL);
    uint32_t init[N], x[N], y[N];
    loom_rt_buffer *full[DIFF_BUFS], *opt[DIFF_BUFS];
    for (int i = 0; i < DIFF_BUFS; i++) {
        full[i] = rbuf(rt, NULL, LOOM_USAGE_STATE, N * 4);
        opt[i] = rbuf(rt, NULL, LOOM_USAGE_STATE, N * 4);
        fill_iota(init, (uint32_t)i * 1000);
        OK(loom_rt_buffer_write(rt, full[i], 0, init, sizeof init));
        OK(loom_rt_buffer_write(rt, opt[i], 0, init, sizeof init));
    }
    loom_graph *gf = diff_graph(full, false), *go = diff_graph(opt, true);
    loom_rt_counters c0, c1, c2;
    loom_rt_get_counters(rt, &c0);
    OK(loom_rt_run_graph(rt, gf, NULL));
    loom_rt_get_counters(rt, &c1);
    OK(loom_rt_run_graph(rt, go, NULL));
    loom_rt_get_counters(rt, &c2);
    ck_assert_uint_eq(c1.barriers - c0.barriers, 7);
    ck_assert_uint_eq(c2.barriers - c1.barriers, 3);
    for (int i = 0; i < DIFF_BUFS; i++) {
        read_u32(rt, full[i], x);
        read_u32(rt, opt[i], y);
        ck_assert_msg(!memcmp(x, y, sizeof x), "buffer %d differs", i);
    }
    /* And the values are the intended ones, not merely equal. */
    read_u32(rt, opt[5], y);
    fill_iota(init, 0);
    ck_assert_uint_eq(y[9], 3 * (3 * (init[9] + 3) + init[9] + 5) + 10);
    for (int i = 0; i < DIFF_BUFS; i++) {
        loom_rt_buffer_release(full[i]);
        loom_rt_buffer_release(opt[i]);
    }
    loom_graph_destroy(gf);
    loom_graph_destroy(go);
    rt_done(rt);
}
END_TEST

/* ---- the oracle catches a missing barrier ------------------------------- */

START_TEST(test_missing_barrier_caught)
{
    loom_rt *rt = rt_make(0, true, NULL);
    loom_rt_buffer *a = rbuf(rt, "a", LOOM_USAGE_STATE, N * 4), *b = rbuf(rt, "b", LOOM_USAGE_OUTPUT, N * 4);
    loom_graph *g = graph_new();
    uint32_t ga = gext(g, a, "a"), gb = gext(g, b, "b");
    fill(g, ga, 1);
    addk(g, ga, gb, 1);   /* RAW on a with no barrier */
    schedule(g, (uint32_t[]){ 0, 0 }, (bool[]){ false, false });
    OK(loom_rt_run_graph(rt, g, NULL));
    ck_assert_uint_gt(loom_rt_validation_messages(rt), 0);
    loom_rt_buffer_release(a);
    loom_rt_buffer_release(b);
    loom_graph_destroy(g);
    loom_rt_destroy(rt);
}
END_TEST

/* LOOM_PROBE_SKIP_BARRIER drops the barrier in front of the named kernel
 * only: the plan's one barrier goes, the validation layer sees the RAW
 * hazard it leaves, and a name that matches nothing changes nothing. A
 * runtime built without probes (LOOM_PROBES off) ignores the variable. */
START_TEST(test_probe_skip_barrier)
{
#ifdef LOOM_PROBES
    static const struct { const char *name; uint64_t barriers; bool hazard; } cases[] = {
        { NULL, 1, false }, { "t_addk", 0, true }, { "addk", 0, true }, { "t_fill", 1, false }, { "", 1, false },
    };
#else
    static const struct { const char *name; uint64_t barriers; bool hazard; } cases[] = {
        { NULL, 1, false }, { "t_addk", 1, false }, { "addk", 1, false },
    };
#endif
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        if (cases[k].name)
            setenv("LOOM_PROBE_SKIP_BARRIER", cases[k].name, 1);
        else
            unsetenv("LOOM_PROBE_SKIP_BARRIER");
        loom_rt *rt = rt_make(0, true, NULL);
        loom_rt_buffer *a = rbuf(rt, "a", LOOM_USAGE_STATE, N * 4), *b = rbuf(rt, "b", LOOM_USAGE_OUTPUT, N * 4);
        loom_graph *g = graph_new();
        uint32_t ga = gext(g, a, "a"), gb = gext(g, b, "b");
        fill(g, ga, 1);
        addk(g, ga, gb, 1);
        schedule(g, (uint32_t[]){ 0, 1 }, (bool[]){ false, true });
        loom_rt_counters c0, c1;
        loom_rt_get_counters(rt, &c0);
        OK(loom_rt_run_graph(rt, g, NULL));
        loom_rt_get_counters(rt, &c1);
        ck_assert_msg(c1.barriers - c0.barriers == cases[k].barriers, "'%s': %llu barriers",
                      cases[k].name ? cases[k].name : "(unset)", (unsigned long long)(c1.barriers - c0.barriers));
        ck_assert_msg((loom_rt_validation_messages(rt) > 0) == cases[k].hazard, "'%s': %llu validation messages",
                      cases[k].name ? cases[k].name : "(unset)",
                      (unsigned long long)loom_rt_validation_messages(rt));
        loom_rt_buffer_release(a);
        loom_rt_buffer_release(b);
        loom_graph_destroy(g);
        loom_rt_destroy(rt);
    }
    unsetenv("LOOM_PROBE_SKIP_BARRIER");
}
END_TEST

/* ---- retention ---------------------------------------------------------- */

START_TEST(test_retention)
{
    loom_rt *rt = rt_make(0, false, NULL);
    enum { ITERS = 4, SEG = 64 };   /* each iteration writes its own 256-byte segment */
    loom_rt_buffer *out = rbuf(rt, "out", LOOM_USAGE_OUTPUT, ITERS * SEG * 4);
    for (uint32_t it = 0; it < ITERS; it++) {
        loom_rt_buffer *in = rbuf(rt, "in", LOOM_USAGE_INPUT, SEG * 4), *tmp = rbuf(rt, "tmp", 0, SEG * 4),
                       *busy = rbuf(rt, "busy", 0, SEG * 4);
        uint32_t v[SEG];
        for (uint32_t i = 0; i < SEG; i++)
            v[i] = it * 100 + i;
        OK(loom_rt_buffer_write(rt, in, 0, v, sizeof v));
        loom_graph *g = graph_new();
        uint32_t gin = gext(g, in, "in"), gtmp = gext(g, tmp, "tmp"), gout = gext(g, out, "out"),
                 gbusy = gext(g, busy, "busy");
        spin(g, gbusy, 20000);   /* keeps the step in flight past the releases */
        addk_at(g, gin, gtmp, 0, SEG, 1);
        addk_at(g, gtmp, gout, (uint64_t)it * SEG * 4, SEG, 2);
        loom_rt_program *p;
        OK(loom_rt_program_create(rt, g, &p));
        loom_graph_destroy(g);
        uint64_t step;
        OK(loom_rt_replay(rt, p, NULL, &step));
        loom_rt_program_release(p);
        loom_rt_buffer_release(in);
        loom_rt_buffer_release(tmp);
        loom_rt_buffer_release(busy);
    }
    OK(loom_rt_wait_idle(rt));
    uint32_t all[ITERS * SEG];
    OK(loom_rt_buffer_read(rt, out, 0, all, sizeof all));
    for (uint32_t it = 0; it < ITERS; it++)
        for (uint32_t i = 0; i < SEG; i++)
            ck_assert_uint_eq(all[it * SEG + i], it * 100 + i + 3);
    loom_rt_buffer_release(out);
    rt_done(rt);
}
END_TEST

/* ---- back-to-back replays use the second copy --------------------------- */

/* One replay of a ring test: a busy kernel, then params.token into
 * o[params.pos]. Returns the replay_waits the replay added. */
static uint64_t ring_replay(loom_rt *rt, loom_rt_program *p, uint32_t pos, uint64_t *step)
{
    loom_rt_counters c0, c1;
    loom_rt_get_counters(rt, &c0);
    OK(loom_rt_replay(rt, p, &(loom_step_params){ .pos = pos, .token = 100 + pos * 11 }, step));
    loom_rt_get_counters(rt, &c1);
    return c1.replay_waits - c0.replay_waits;
}

/* K replays in flight, each with its own step parameters: every result is
 * right, none of the first K waits, and the K+1th waits (for the oldest
 * only) exactly when all K are still running. */
static void ring_case(uint32_t k)
{
    loom_rt *rt = NULL;
    OK(loom_rt_create(&(loom_rt_desc){ .validate = true, .log = loud_log, .in_flight = k }, &rt));
    OK(loom_rt_kernel_glsl(rt, "t_spin", K_SPIN));
    OK(loom_rt_kernel_glsl(rt, "t_params", K_PARAMS));
    ck_assert_uint_eq(loom_rt_in_flight(rt), k);
    loom_rt_buffer *o = rbuf(rt, "o", LOOM_USAGE_OUTPUT, N * 4), *busy = rbuf(rt, "busy", 0, 256);
    bool saw_wait = false;
    /* The host may be descheduled long enough for the GPU to catch up, so a
     * run where nothing was busy at the K+1th replay retries, longer. */
    for (uint32_t iters = 2000000, attempt = 0; attempt < 7 && !saw_wait; attempt++, iters *= 2) {
        uint32_t zero[N] = { 0 }, out[N];
        OK(loom_rt_buffer_write(rt, o, 0, zero, sizeof zero));
        loom_graph *g = graph_new();
        uint32_t params, go = gext(g, o, "o"), gbusy = gext(g, busy, "busy");
        OK(loom_graph_params(g, &params));
        spins(g, gbusy, iters, attempt);
        loom_binding b[2] = { { .buffer = params, .slot = 0, .size = sizeof(loom_step_params),
                                .access = LOOM_ACCESS_READ },
                              { .buffer = go, .slot = 1, .size = N * 4, .access = LOOM_ACCESS_RW } };
        dispatch(g, "t_params", b, 2, NULL, 0, 1);
        loom_rt_program *p;
        OK(loom_rt_program_create(rt, g, &p));
        loom_graph_destroy(g);
        loom_rt_counters c0, c1;
        loom_rt_get_counters(rt, &c0);
        uint64_t steps[LOOM_RT_TEST_MAX_K + 1];
        for (uint32_t i = 0; i < k; i++)
            ck_assert_uint_eq(ring_replay(rt, p, i, &steps[i]), 0);
        uint64_t waited = ring_replay(rt, p, k, &steps[k]);
        ck_assert_uint_le(waited, 1);
        if (waited) {
            /* It waited for the oldest step: that one is done now. */
            loom_rt_counters w0, w1;
            loom_rt_get_counters(rt, &w0);
            OK(loom_rt_wait(rt, steps[0]));
            loom_rt_get_counters(rt, &w1);
            ck_assert_uint_eq(w1.waits_fast, w0.waits_fast + 1);
            saw_wait = true;
        }
        OK(loom_rt_wait(rt, steps[k]));
        loom_rt_get_counters(rt, &c1);
        ck_assert_uint_le(c1.records - c0.records, k);   /* never more copies than K */
        ck_assert_uint_eq(c1.submits - c0.submits, k + 1);
        read_u32(rt, o, out);
        for (uint32_t i = 0; i <= k; i++)
            ck_assert_uint_eq(out[i], 100 + i * 11);
        ck_assert_uint_eq(out[k + 1], 0);
        loom_rt_program_release(p);
    }
    ck_assert_msg(saw_wait, "the K+1th replay never found all %u copies busy", k);
    loom_rt_buffer_release(o);
    loom_rt_buffer_release(busy);
    rt_done(rt);
}

START_TEST(test_back_to_back)
{
    static const uint32_t ks[] = { 1, 2, 3, LOOM_RT_TEST_MAX_K };
    ring_case(ks[_i]);
}
END_TEST

/* GPU time per replay from the timestamp pair: every completed replay is
 * counted once, whether its copy was reused, collected or freed. */
START_TEST(test_step_timestamps)
{
    loom_rt *rt = NULL;
    OK(loom_rt_create(&(loom_rt_desc){ .validate = true, .log = loud_log, .timestamps = true }, &rt));
    OK(loom_rt_kernel_glsl(rt, "t_spin", K_SPIN));
    loom_rt_buffer *busy = rbuf(rt, "busy", 0, 256);
    loom_graph *g = graph_new();
    spin(g, gext(g, busy, "busy"), 20000);
    loom_rt_program *p;
    OK(loom_rt_program_create(rt, g, &p));
    loom_graph_destroy(g);
    uint64_t step;
    for (int i = 0; i < 7; i++)
        OK(loom_rt_replay(rt, p, NULL, &step));
    OK(loom_rt_wait_idle(rt));
    loom_rt_collect_timestamps(rt);
    loom_rt_counters c;
    loom_rt_get_counters(rt, &c);
    ck_assert_uint_eq(c.timed_steps, 7);
    ck_assert_uint_gt(c.gpu_ns, 0);
    loom_rt_collect_timestamps(rt);   /* nothing counted twice */
    loom_rt_get_counters(rt, &c);
    ck_assert_uint_eq(c.timed_steps, 7);
    OK(loom_rt_replay(rt, p, NULL, &step));
    OK(loom_rt_wait(rt, step));
    loom_rt_program_release(p);   /* freed at once: counted then */
    loom_rt_get_counters(rt, &c);
    ck_assert_uint_eq(c.timed_steps, 8);
    loom_rt_buffer_release(busy);
    rt_done(rt);
}
END_TEST

/* A read behind the GPU waits for the named step only and sees its write,
 * while a later step writing another slot of the same buffer runs. */
START_TEST(test_read_behind)
{
    loom_rt *rt = rt_make(0, false, NULL);
    loom_rt_buffer *o = rbuf(rt, "o", LOOM_USAGE_OUTPUT, N * 4), *busy = rbuf(rt, "busy", 0, 256);
    uint32_t zero[N] = { 0 };
    OK(loom_rt_buffer_write(rt, o, 0, zero, sizeof zero));
    loom_graph *g = graph_new();
    uint32_t params, go = gext(g, o, "o"), gbusy = gext(g, busy, "busy");
    OK(loom_graph_params(g, &params));
    loom_binding b[2] = { { .buffer = params, .slot = 0, .size = sizeof(loom_step_params), .access = LOOM_ACCESS_READ },
                          { .buffer = go, .slot = 1, .size = N * 4, .access = LOOM_ACCESS_RW } };
    dispatch(g, "t_params", b, 2, NULL, 0, 1);
    spin(g, gbusy, 4000000);   /* after the write: the step stays busy */
    loom_rt_program *p;
    OK(loom_rt_program_create(rt, g, &p));
    loom_graph_destroy(g);
    uint64_t s1, s2;
    OK(loom_rt_replay(rt, p, &(loom_step_params){ .pos = 0, .token = 7 }, &s1));
    OK(loom_rt_replay(rt, p, &(loom_step_params){ .pos = 1, .token = 9 }, &s2));
    uint32_t v = 0;
    OK(loom_rt_buffer_read_behind(rt, o, s1, 0, &v, 4));
    ck_assert_uint_eq(v, 7);
    OK(loom_rt_buffer_read_behind(rt, o, s2, 4, &v, 4));
    ck_assert_uint_eq(v, 9);
    ck_assert_int_eq(loom_rt_buffer_read_behind(rt, o, s2 + 5, 0, &v, 4), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_rt_buffer_read_behind(rt, o, s2, N * 4, &v, 4), LOOM_INVALID_ARGUMENT);
    loom_rt_program_release(p);
    loom_rt_buffer_release(o);
    loom_rt_buffer_release(busy);
    rt_done(rt);
}
END_TEST

/* ---- wait paths --------------------------------------------------------- */

static uint64_t busy_step(loom_rt *rt, loom_rt_program **p, loom_rt_buffer **busy, uint32_t iters)
{
    *busy = rbuf(rt, "busy", 0, 256);
    loom_graph *g = graph_new();
    spin(g, gext(g, *busy, "busy"), iters);
    OK(loom_rt_program_create(rt, g, p));
    loom_graph_destroy(g);
    uint64_t step;
    OK(loom_rt_replay(rt, *p, NULL, &step));
    return step;
}

/* Submits a busy step and waits for it; returns which wait counter moved
 * (0 fast, 1 spun, 2 blocked). The host can be descheduled long enough for
 * the step to finish before the wait starts — then the wait is rightly
 * fast — so callers retry with longer steps. */
static int wait_kind(loom_rt *rt, uint32_t iters, uint64_t *out_step)
{
    loom_rt_counters c0, c1;
    loom_rt_program *p;
    loom_rt_buffer *busy;
    loom_rt_get_counters(rt, &c0);
    uint64_t step = busy_step(rt, &p, &busy, iters);
    OK(loom_rt_wait(rt, step));
    loom_rt_get_counters(rt, &c1);
    loom_rt_program_release(p);
    loom_rt_buffer_release(busy);
    uint64_t fast = c1.waits_fast - c0.waits_fast, spun = c1.waits_spun - c0.waits_spun;
    uint64_t blocked = c1.waits_blocked - c0.waits_blocked;
    ck_assert_uint_eq(fast + spun + blocked, 1);   /* one wait, counted once */
    *out_step = step;
    return blocked ? 2 : spun ? 1 : 0;
}

START_TEST(test_waits)
{
    loom_rt_counters c;
    /* Blocking: one poll, then vkWaitSemaphores. */
    loom_rt *rt = rt_make(1, false, NULL);
    OK(loom_rt_wait(rt, 0));   /* idle queue */
    loom_rt_get_counters(rt, &c);
    ck_assert_uint_eq(c.waits_fast, 1);
    uint64_t step = 0;
    int kind = 0;
    for (uint32_t k = 0, iters = 2000000; k < 4 && kind != 2; k++, iters *= 2) {
        kind = wait_kind(rt, iters, &step);
        ck_assert_int_ne(kind, 1);   /* one poll allowed: never counted as spinning */
    }
    ck_assert_int_eq(kind, 2);
    loom_rt_get_counters(rt, &c);
    uint64_t fast = c.waits_fast;
    OK(loom_rt_wait(rt, step));   /* already finished */
    loom_rt_get_counters(rt, &c);
    ck_assert_uint_eq(c.waits_fast, fast + 1);
    ck_assert_int_eq(loom_rt_wait(rt, step + 100), LOOM_INVALID_ARGUMENT);
    rt_done(rt);

    /* Spinning: enough polls to outlast the step; never blocks. */
    rt = rt_make(UINT32_MAX, false, NULL);
    kind = 0;
    for (uint32_t k = 0, iters = 2000000; k < 4 && kind != 1; k++, iters *= 2) {
        kind = wait_kind(rt, iters, &step);
        ck_assert_int_ne(kind, 2);
    }
    ck_assert_int_eq(kind, 1);
    rt_done(rt);
}
END_TEST

/* ---- tagged words: what an awaited edge rounds -------------------------- */

/* tag_word, the function of shaders/tag.glsl itself (cut from the file, so
 * the device runs what the tagged kernels run), over the worst cases of
 * its stated rounding (docs/design-notes.md "What a tagged vector
 * rounds"): 15 bits of mantissa, ties away from zero, at most 2^-16 of a
 * normal value off, 2^-142 of a subnormal one; the overflow edge to
 * infinity; a NaN stays a NaN whatever its payload; signed zeros and
 * infinities stay. The low byte is the tag. */
static char *tag_function(void)
{
    const char *dir = getenv("LOOM_TEST_DATA");
    char path[1024];
    snprintf(path, sizeof path, "%s/../shaders/tag.glsl", dir ? dir : "tests");
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    static char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    char *a = strstr(text, "uint tag_word(float v, uint tag)");
    ck_assert_msg(a != NULL, "tag.glsl: no tag_word");
    char *b = strstr(a, "\n}\n");
    ck_assert_msg(b != NULL, "tag.glsl: tag_word has no end");
    b[3] = 0;
    return a;
}

START_TEST(test_tag_rounding)
{
    loom_rt *rt = rt_make(0, false, NULL);
    char src[4096];
    snprintf(src, sizeof src,
             "#version 450\nlayout(local_size_x = 64) in;\n"
             "layout(set = 0, binding = 0) readonly buffer X { uint x[]; };\n"
             "layout(set = 0, binding = 1) writeonly buffer W { uint w[]; };\n%s\n"
             "void main() { uint i = gl_GlobalInvocationID.x; w[i] = tag_word(uintBitsToFloat(x[i]), 0x5au); }\n",
             tag_function());
    OK(loom_rt_kernel_glsl(rt, "t_tag_word", src));
    /* Bit patterns: around 1.0 and -3.5 every dropped byte that matters
     * (0x00, 0x7f the largest rounded down, 0x80 the tie, 0xff), the same
     * in subnormals, the largest finite values, NaNs with payloads in the
     * dropped byte only and in the kept bits, infinities, zeros. */
    static const uint32_t cases[] = {
        0x3f800000u, 0x3f80007fu, 0x3f800080u, 0x3f8000ffu, 0x3f8fff7fu, 0x3f8fff80u, 0x3fffff80u,
        0xc0600000u, 0xc060007fu, 0xc0600080u, 0xc06000ffu, 0x00000001u, 0x0000007fu, 0x00000080u,
        0x807fffffu, 0x00400080u, 0x7f7fff00u, 0x7f7fff7fu, 0x7f7fff80u, 0x7f7fffffu, 0xff7fffffu,
        0x7f800001u, 0xff8000ffu, 0x7fc00000u, 0x7fc12345u, 0x7f800000u, 0xff800000u, 0x00000000u,
        0x80000000u, 0x3eaaaaabu, 0x42f6e979u, 0x1e3ce508u,
    };
    const uint32_t nc = sizeof cases / sizeof cases[0];
    uint32_t in[N], out[N];
    for (uint32_t i = 0; i < N; i++)
        in[i] = i < nc ? cases[i] : 0x3f800000u + i * 0x1357u;   /* and a spread of ordinary values */
    loom_rt_buffer *x = rbuf(rt, "x", LOOM_USAGE_INPUT, N * 4), *y = rbuf(rt, "y", LOOM_USAGE_OUTPUT, N * 4);
    OK(loom_rt_buffer_write(rt, x, 0, in, sizeof in));
    loom_graph *g = graph_new();
    loom_binding b[2] = { { .buffer = gext(g, x, "x"), .slot = 0, .size = N * 4, .access = LOOM_ACCESS_READ },
                          { .buffer = gext(g, y, "y"), .slot = 1, .size = N * 4, .access = LOOM_ACCESS_WRITE } };
    dispatch(g, "t_tag_word", b, 2, NULL, 0, N / 64);
    OK(loom_rt_run_graph(rt, g, NULL));
    read_u32(rt, y, out);
    for (uint32_t i = 0; i < N; i++) {
        uint32_t v = in[i], w = out[i], kept = w & 0xffffff00u;
        float fv, fw;
        memcpy(&fv, &v, 4);
        memcpy(&fw, &kept, 4);
        ck_assert_msg((w & 0xffu) == 0x5au, "0x%08x: tag 0x%02x", v, w & 0xffu);
        bool nan = (v & 0x7f800000u) == 0x7f800000u && (v & 0x007fffffu);
        if (nan) {
            ck_assert_msg(fw != fw, "NaN 0x%08x read back as 0x%08x", v, kept);
            continue;
        }
        if ((v & 0x7fffffffu) == 0x7f800000u) {
            ck_assert_msg(kept == v, "infinity 0x%08x read back as 0x%08x", v, kept);
            continue;
        }
        /* The stated rounding, bit for bit: ties away from zero on the
         * magnitude, a carry into the exponent included. */
        ck_assert_msg(kept == ((v + 0x80u) & 0xffffff00u), "0x%08x -> 0x%08x", v, kept);
        if ((v & 0x7fffffffu) >= 0x7f7fff80u && (v & 0x7fffffffu) < 0x7f800000u) {
            ck_assert_msg((kept & 0x7fffffffu) == 0x7f800000u, "0x%08x should round to infinity", v);
            continue;
        }
        double err = fabs((double)fw - (double)fv);
        double bound = (v & 0x7f800000u) == 0 ? ldexp(1.0, -142) : ldexp(fabs((double)fv), -16);
        ck_assert_msg(err <= bound, "0x%08x: off by %g, bound %g", v, err, bound);
        ck_assert_msg((kept ^ v) >> 31 == 0, "0x%08x: sign lost", v);
    }
    /* The worst case is reached, not just bounded: the tie 1 + 2^-16 moves
     * by exactly the bound. */
    ck_assert_uint_eq(out[2] & 0xffffff00u, 0x3f800100u);
    loom_graph_destroy(g);
    loom_rt_buffer_release(x);
    loom_rt_buffer_release(y);
    rt_done(rt);
}
END_TEST

/* ---- errors ------------------------------------------------------------- */

START_TEST(test_glsl_error)
{
    loom_rt *rt = rt_make(0, false, NULL);
    const char *bad = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() { undeclared = 1; }\n";
    ck_assert_int_eq(loom_rt_kernel_glsl(rt, "bad", bad), LOOM_SHADER_COMPILE);
    ck_assert_ptr_nonnull(strstr(loom_last_error(), ":3:"));   /* the shader's line */
    ck_assert_int_eq(loom_rt_kernel_spirv(rt, "junk", (const uint32_t[]){ 1, 2, 3 }, 12), LOOM_INVALID_ARGUMENT);
    /* A graph naming a kernel nobody registered. */
    loom_rt_buffer *a = rbuf(rt, "a", 0, N * 4);
    loom_graph *g = graph_new();
    loom_binding b[1] = { { .buffer = gext(g, a, "a"), .slot = 0, .size = N * 4, .access = LOOM_ACCESS_WRITE } };
    dispatch(g, "no_such_kernel", b, 1, NULL, 0, 1);
    loom_rt_program *p = (loom_rt_program *)1;
    ck_assert_int_eq(loom_rt_program_create(rt, g, &p), LOOM_NOT_FOUND);
    ck_assert_ptr_null(p);
    loom_graph_destroy(g);
    loom_rt_buffer_release(a);
    rt_done(rt);
}
END_TEST

START_TEST(test_missing_buffer)
{
    loom_rt *rt = rt_make(0, false, NULL);
    loom_rt_buffer *a = rbuf(rt, "a", 0, N * 4), *gone = rbuf(rt, "gone", 0, N * 4);
    loom_graph *g = graph_new();
    uint32_t ga = gext(g, a, "a"), gg = gext(g, gone, "gone");
    addk(g, ga, gg, 1);
    loom_rt_buffer_release(gone);
    loom_rt_program *p = (loom_rt_program *)1;
    ck_assert_int_eq(loom_rt_program_create(rt, g, &p), LOOM_NOT_FOUND);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(loom_rt_run_graph(rt, g, NULL), LOOM_NOT_FOUND);
    /* A serial that never existed. */
    loom_graph_destroy(g);
    g = graph_new();
    uint32_t gb;
    OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = "ghost", .size = N * 4, .external = 999999 }, &gb));
    fill(g, gb, 1);
    ck_assert_int_eq(loom_rt_run_graph(rt, g, NULL), LOOM_NOT_FOUND);
    /* A misaligned binding offset is refused, not recorded. */
    loom_graph_destroy(g);
    g = graph_new();
    ga = gext(g, a, "a");
    uint32_t gt = gown(g, "t", 0, N * 8);
    addk_at(g, ga, gt, 4, N, 1);
    ck_assert_int_eq(loom_rt_run_graph(rt, g, NULL), LOOM_INVALID_ARGUMENT);
    loom_graph_destroy(g);
    loom_rt_buffer_release(a);
    rt_done(rt);
}
END_TEST

/* ---- pipeline cache ----------------------------------------------------- */

START_TEST(test_pipeline_cache)
{
    char path[] = "/tmp/loom_pcache_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    unlink(path);

    loom_rt *rt = rt_make(0, false, path);
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    ck_assert_uint_eq(info.pipeline_cache_loaded, 0);
    loom_rt_buffer *a = rbuf(rt, "a", LOOM_USAGE_OUTPUT, N * 4);
    loom_graph *g = graph_new();
    fill(g, gext(g, a, "a"), 5);
    OK(loom_rt_run_graph(rt, g, NULL));
    loom_rt_buffer_release(a);
    rt_done(rt);
    ck_assert_int_eq(access(path, R_OK), 0);

    rt = rt_make(0, false, path);
    loom_rt_get_info(rt, &info);
    ck_assert_uint_gt(info.pipeline_cache_loaded, 0);
    a = rbuf(rt, "a", LOOM_USAGE_OUTPUT, N * 4);
    loom_graph_destroy(g);
    g = graph_new();
    fill(g, gext(g, a, "a"), 5);
    OK(loom_rt_run_graph(rt, g, NULL));
    uint32_t out[N];
    read_u32(rt, a, out);
    ck_assert_uint_eq(out[17], 5);
    loom_rt_buffer_release(a);
    rt_done(rt);

    /* A file from elsewhere is ignored, not fed to the driver. */
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs("definitely not a pipeline cache, but long enough to have a header", f);
    fclose(f);
    rt = rt_make(0, true, path);
    loom_rt_get_info(rt, &info);
    ck_assert_uint_eq(info.pipeline_cache_loaded, 0);
    rt_done(rt);
    unlink(path);
    loom_graph_destroy(g);
}
END_TEST

/* ---- host access by class ----------------------------------------------- */

static void counters(loom_rt *rt, loom_rt_counters *c) { loom_rt_get_counters(rt, c); }

/* A host write to an INPUT waits for the in-flight step that reads it, so
 * the step computes with the old values; a read right after the next
 * submit waits for it and sees the new ones. The reader runs after a long
 * busy kernel, so a write that did not wait would land before the GPU read
 * the input. The host can be descheduled long enough for the step to end
 * before the write — then the write rightly does not wait — so a run that
 * saw no wait retries with a longer step. */
START_TEST(test_host_input_in_flight)
{
    loom_rt *rt = rt_make(0, false, NULL);
    loom_rt_buffer *in = rbuf(rt, "in", LOOM_USAGE_INPUT, N * 4), *out = rbuf(rt, "out", LOOM_USAGE_OUTPUT, N * 4);
    loom_rt_buffer *other = rbuf(rt, "other", LOOM_USAGE_INPUT, N * 4), *busy = rbuf(rt, "busy", 0, 256);
    bool saw_wait = false;
    for (uint32_t iters = 2000000, attempt = 0; attempt < 7 && !saw_wait; attempt++, iters *= 2) {
        loom_graph *g = graph_new();
        uint32_t gin = gext(g, in, "in"), gout = gext(g, out, "out");
        spins(g, gext(g, busy, "busy"), iters, attempt);
        addk(g, gin, gout, 1);   /* unscheduled: after the spin */
        loom_rt_program *p;
        OK(loom_rt_program_create(rt, g, &p));
        loom_graph_destroy(g);
        uint32_t old_v[N], new_v[N], got[N];
        fill_iota(old_v, 10);
        fill_iota(new_v, 5000);
        OK(loom_rt_buffer_write(rt, in, 0, old_v, sizeof old_v));
        uint64_t s1, s2;
        OK(loom_rt_replay(rt, p, NULL, &s1));
        loom_rt_counters c0, c1, c2;
        counters(rt, &c0);
        OK(loom_rt_buffer_write(rt, other, 0, new_v, sizeof new_v));   /* no step uses it: no wait */
        OK(loom_rt_buffer_write(rt, in, 0, new_v, sizeof new_v));
        counters(rt, &c1);
        ck_assert_uint_eq(c1.host_writes_ready - c0.host_writes_ready +
                              c1.host_writes_waited - c0.host_writes_waited, 2);
        ck_assert_uint_ge(c1.host_writes_ready - c0.host_writes_ready, 1);
        saw_wait = c1.host_writes_waited > c0.host_writes_waited;
        OK(loom_rt_wait(rt, s1));
        read_u32(rt, out, got);
        for (uint32_t i = 0; i < N; i++)
            ck_assert_uint_eq(got[i], old_v[i] + 1);
        /* Right after submit: the read waits for the step, sees its result. */
        OK(loom_rt_replay(rt, p, NULL, &s2));
        counters(rt, &c1);
        read_u32(rt, out, got);
        counters(rt, &c2);
        for (uint32_t i = 0; i < N; i++)
            ck_assert_uint_eq(got[i], new_v[i] + 1);
        ck_assert_uint_eq(c2.host_reads_waited - c1.host_reads_waited + c2.host_reads_ready - c1.host_reads_ready, 1);
        ck_assert(!loom_rt_program_busy(rt, p));
        loom_rt_program_release(p);
    }
    ck_assert_msg(saw_wait, "the write to the input never found its reader in flight");
    loom_rt_buffer_release(in);
    loom_rt_buffer_release(out);
    loom_rt_buffer_release(other);
    loom_rt_buffer_release(busy);
    rt_done(rt);
}
END_TEST

/* Reading a STATE or KV_CACHE buffer (or a WEIGHT) waits for its last
 * writer alone: a later step that does not write it is still running when
 * the read returns. Reading the WEIGHT that step uses does not wait at all.
 * Retried as above when the host was too slow to find the later step busy. */
START_TEST(test_host_read_last_writer)
{
    loom_rt *rt = rt_make(0, false, NULL);
    loom_rt_buffer *st = rbuf(rt, "state", LOOM_USAGE_STATE, N * 4), *kv = rbuf(rt, "kv", LOOM_USAGE_KV_CACHE, N * 4);
    loom_rt_buffer *w = rbuf(rt, "w", LOOM_USAGE_WEIGHT, N * 4), *tmp = rbuf(rt, "tmp", 0, N * 4);
    loom_rt_buffer *busy = rbuf(rt, "busy", 0, 256);
    uint32_t wv[N];
    fill_iota(wv, 3);
    OK(loom_rt_buffer_write(rt, w, 0, wv, sizeof wv));
    loom_graph *g = graph_new();
    fill(g, gext(g, st, "state"), 5);
    fill(g, gext(g, kv, "kv"), 9);
    loom_rt_program *writer;
    OK(loom_rt_program_create(rt, g, &writer));
    loom_graph_destroy(g);
    bool saw_busy = false;
    /* Longer spins until one outlasts the reads: a loaded machine may not run
     * this thread again before a short one ends. */
    for (uint32_t iters = 2000000, attempt = 0; attempt < 7 && !saw_busy; attempt++, iters *= 2) {
        g = graph_new();
        spins(g, gext(g, busy, "busy"), iters, attempt);
        addk(g, gext(g, w, "w"), gext(g, tmp, "tmp"), 1);
        loom_rt_program *later;
        OK(loom_rt_program_create(rt, g, &later));
        loom_graph_destroy(g);
        uint64_t s1, s2;
        OK(loom_rt_replay(rt, writer, NULL, &s1));
        OK(loom_rt_replay(rt, later, NULL, &s2));
        loom_rt_counters c0, c1;
        counters(rt, &c0);
        uint32_t got[N];
        OK(loom_rt_buffer_read(rt, w, 0, got, sizeof got));   /* never written by a graph */
        counters(rt, &c1);
        ck_assert_uint_eq(c1.host_reads_ready, c0.host_reads_ready + 1);
        ck_assert_uint_eq(got[7], wv[7]);
        read_u32(rt, st, got);
        for (uint32_t i = 0; i < N; i++)
            ck_assert_uint_eq(got[i], 5);
        read_u32(rt, kv, got);
        for (uint32_t i = 0; i < N; i++)
            ck_assert_uint_eq(got[i], 9);
        saw_busy = loom_rt_program_busy(rt, later);
        counters(rt, &c1);
        ck_assert_uint_eq(c1.host_reads_waited + c1.host_reads_ready - c0.host_reads_waited - c0.host_reads_ready, 3);
        OK(loom_rt_wait(rt, s2));
        loom_rt_program_release(later);
    }
    ck_assert_msg(saw_busy, "every read of the state waited for the later step too");
    loom_rt_program_release(writer);
    loom_rt_buffer_release(st);
    loom_rt_buffer_release(kv);
    loom_rt_buffer_release(w);
    loom_rt_buffer_release(tmp);
    loom_rt_buffer_release(busy);
    rt_done(rt);
}
END_TEST

/* Through the compiler: a plan-owned SCRATCH buffer shares arena bytes and
 * cannot be read (the error names it); a kept one is an OUTPUT with its own
 * memory and reads back what the step wrote; plan-owned STATE reads wait
 * for the program's last replay. */
START_TEST(test_host_scratch_and_keep)
{
    loom_rt *rt = rt_make(0, false, NULL);
    loom_rt_buffer *x = rbuf(rt, "x", LOOM_USAGE_INPUT, N * 4), *y = rbuf(rt, "y", LOOM_USAGE_OUTPUT, N * 4);
    uint32_t in[N], got[N];
    fill_iota(in, 2);
    OK(loom_rt_buffer_write(rt, x, 0, in, sizeof in));
    loom_graph *g = graph_new();
    uint32_t gx = gext(g, x, "x"), gy = gext(g, y, "y");
    uint32_t t = gown(g, "t", LOOM_USAGE_NONE, N * 4), u = gown(g, "u", LOOM_USAGE_NONE, N * 4);
    uint32_t v = gown(g, "v", LOOM_USAGE_NONE, N * 4), st = gown(g, "st", LOOM_USAGE_STATE, N * 4);
    OK(loom_graph_keep_buffer(g, u));
    addk(g, gx, t, 1);
    addk(g, t, u, 2);
    addk(g, u, v, 4);
    addk(g, v, gy, 8);
    addk(g, v, st, 16);
    loom_plan *plan;
    OK(loom_compile(g, NULL, &plan));
    const loom_graph *pg = loom_plan_graph(plan);
    ck_assert_uint_eq(loom_graph_buffer(pg, t)->cls, LOOM_CLASS_SCRATCH);
    ck_assert_uint_eq(loom_graph_buffer(pg, u)->cls, LOOM_CLASS_OUTPUT);
    ck_assert_uint_eq(loom_graph_buffer(pg, st)->cls, LOOM_CLASS_STATE);
    loom_rt_program *p;
    OK(loom_rt_program_create(rt, pg, &p));
    uint64_t step;
    OK(loom_rt_replay(rt, p, NULL, &step));
    ck_assert_int_eq(loom_rt_program_read(rt, p, t, 0, got, sizeof got), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_rt_program_read(rt, p, v, 0, got, sizeof got), LOOM_INVALID_ARGUMENT);
    OK(loom_rt_program_read(rt, p, u, 0, got, sizeof got));
    for (uint32_t i = 0; i < N; i++)
        ck_assert_uint_eq(got[i], in[i] + 3);
    OK(loom_rt_program_read(rt, p, st, 0, got, sizeof got));
    for (uint32_t i = 0; i < N; i++)
        ck_assert_uint_eq(got[i], in[i] + 23);
    read_u32(rt, y, got);
    for (uint32_t i = 0; i < N; i++)
        ck_assert_uint_eq(got[i], in[i] + 15);
    loom_rt_program_release(p);
    loom_plan_release(plan);
    loom_graph_destroy(g);
    loom_rt_buffer_release(x);
    loom_rt_buffer_release(y);
    rt_done(rt);
}
END_TEST

/* Memory kinds from memory types as drivers report them: a CPU device
 * (lavapipe), an integrated GPU, a discrete GPU with a resizable BAR (the
 * window over all of VRAM), with the classic 256 MiB window, and with none.
 * Only a CPU or integrated device is unified memory. */
START_TEST(test_memory_kinds)
{
    enum { DL = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
           HC = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, CA = VK_MEMORY_PROPERTY_HOST_CACHED_BIT };
    const uint64_t vram = 141ull << 30, sys = 128ull << 30, bar = 256ull << 20;
    static const struct {
        VkPhysicalDeviceType type;
        uint32_t n_heaps, n_types;
        uint64_t heap[3];
        uint32_t flags[4], heap_of[4];
        loom_rt_memory want;
        uint64_t window;
    } cases[] = {
        { VK_PHYSICAL_DEVICE_TYPE_CPU, 1, 1, { 2048ull << 20 }, { DL | HV | HC | CA }, { 0 },
          LOOM_RT_MEMORY_UNIFIED, 2048ull << 20 },
        { VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU, 1, 2, { 8ull << 30 }, { DL, DL | HV | HC }, { 0, 0 },
          LOOM_RT_MEMORY_UNIFIED, 8ull << 30 },
        { VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, 2, 4, { vram, sys }, { DL, HV | HC, HV | HC | CA, DL | HV | HC },
          { 0, 1, 1, 0 }, LOOM_RT_MEMORY_REBAR, vram },
        { VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, 3, 4, { vram, sys, bar }, { DL, HV | HC, HV | HC | CA, DL | HV | HC },
          { 0, 1, 1, 2 }, LOOM_RT_MEMORY_BAR, bar },
        { VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, 2, 3, { vram, sys }, { DL, HV | HC, HV | HC | CA }, { 0, 1, 1 },
          LOOM_RT_MEMORY_DISCRETE, 0 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        VkPhysicalDeviceProperties props = { .deviceType = cases[k].type };
        VkPhysicalDeviceMemoryProperties mp = { .memoryTypeCount = cases[k].n_types,
                                                .memoryHeapCount = cases[k].n_heaps };
        for (uint32_t h = 0; h < cases[k].n_heaps; h++)
            mp.memoryHeaps[h] = (VkMemoryHeap){ cases[k].heap[h], h == 0 ? VK_MEMORY_HEAP_DEVICE_LOCAL_BIT : 0 };
        for (uint32_t t = 0; t < cases[k].n_types; t++)
            mp.memoryTypes[t] = (VkMemoryType){ cases[k].flags[t], cases[k].heap_of[t] };
        uint64_t window = 1;
        ck_assert_int_eq(rt_memory_of(&props, &mp, &window), cases[k].want);
        ck_assert_uint_eq(window, cases[k].window);
        ck_assert_str_ne(loom_rt_memory_name(cases[k].want), "?");
    }
    /* The device the tests run on. */
    loom_rt *rt = rt_make(0, false, NULL);
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    ck_assert(info.unified_memory == (info.memory == LOOM_RT_MEMORY_UNIFIED));
    if (info.device_type == VK_PHYSICAL_DEVICE_TYPE_CPU)
        ck_assert_int_eq(info.memory, LOOM_RT_MEMORY_UNIFIED);
    rt_done(rt);
}
END_TEST

/* Which plan holds MATVEC_ADD_STAGE (the stage pass's producer). */
static bool has_stage(const loom_plan *p)
{
    const loom_graph *g = loom_plan_graph(p);
    for (uint32_t i = 0; i < loom_graph_node_count(g); i++)
        if (loom_graph_node(g, i)->op == LOOM_OP_MATVEC_ADD_STAGE)
            return true;
    return false;
}

/* On a device without float atomic adds (as LOOM_ATOMIC_FLOAT=0 makes
 * one) loom_rt_compile leaves the stage pass out, and a plan compiled
 * elsewhere that holds its kernels is refused with a message naming the
 * node, not run. */
START_TEST(test_stage_needs_atomics)
{
    setenv("LOOM_ATOMIC_FLOAT", "0", 1);
    loom_rt *rt = rt_make(0, true, NULL);
    unsetenv("LOOM_ATOMIC_FLOAT");
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    ck_assert(!info.atomic_float_add);
    const uint32_t n = 64;
    loom_rt_buffer *w = rbuf(rt, "W", LOOM_USAGE_WEIGHT, n * n * 4), *a = rbuf(rt, "a", LOOM_USAGE_INPUT, n * 4);
    loom_rt_buffer *x = rbuf(rt, "x", LOOM_USAGE_STATE, n * 4), *gw = rbuf(rt, "g", LOOM_USAGE_WEIGHT, n * 4);
    loom_rt_buffer *y = rbuf(rt, "y", LOOM_USAGE_OUTPUT, n * 4);
    loom_graph *g = graph_new();
    loom_tensor W = loom_mat(gext(g, w, "W"), LOOM_F32, n, n), xv = loom_vec(gext(g, x, "x"), n);
    OK(loom_op_matvec_add(g, W, loom_vec(gext(g, a, "a"), n), xv, xv, NULL));
    OK(loom_op_rms_norm_matvec(g, W, xv, loom_vec(gext(g, gw, "g"), n), loom_vec(gext(g, y, "y"), n), 1e-5f, NULL));
    loom_plan *here, *elsewhere;
    OK(loom_rt_compile(rt, g, NULL, &here, NULL));
    ck_assert(!has_stage(here));
    OK(loom_compile(g, NULL, &elsewhere));
    ck_assert(has_stage(elsewhere));
    uint64_t step;
    OK(loom_rt_replay_plan(rt, here, NULL, &step));
    OK(loom_rt_wait(rt, step));
    ck_assert_int_eq(loom_rt_replay_plan(rt, elsewhere, NULL, &step), LOOM_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(loom_last_error(), "MATVEC_ADD_STAGE"));
    loom_plan_release(here);
    loom_plan_release(elsewhere);
    loom_graph_destroy(g);
    loom_rt_buffer_release(w);
    loom_rt_buffer_release(a);
    loom_rt_buffer_release(x);
    loom_rt_buffer_release(gw);
    loom_rt_buffer_release(y);
    rt_done(rt);
}
END_TEST

/* The queue family: one with graphics as well as compute by default where
 * the device has one, a compute-only one under LOOM_QUEUE=compute where it
 * has one, else the same; either runs a plan. */
static void queue_run(loom_rt *rt)
{
    const uint32_t n = 64;
    loom_rt_buffer *a = rbuf(rt, "a", LOOM_USAGE_INPUT, n * 4), *b = rbuf(rt, "b", LOOM_USAGE_INPUT, n * 4);
    loom_rt_buffer *y = rbuf(rt, "y", LOOM_USAGE_OUTPUT, n * 4);
    float av[64], bv[64], yv[64];
    for (uint32_t i = 0; i < n; i++) {
        av[i] = (float)i;
        bv[i] = 0.5f * (float)i;
    }
    OK(loom_rt_buffer_write(rt, a, 0, av, sizeof av));
    OK(loom_rt_buffer_write(rt, b, 0, bv, sizeof bv));
    loom_graph *g = graph_new();
    OK(loom_op_add(g, loom_vec(gext(g, a, "a"), n), loom_vec(gext(g, b, "b"), n), loom_vec(gext(g, y, "y"), n),
                   NULL));
    loom_plan *plan;
    OK(loom_rt_compile(rt, g, NULL, &plan, NULL));
    uint64_t step;
    OK(loom_rt_replay_plan(rt, plan, NULL, &step));
    OK(loom_rt_wait(rt, step));
    OK(loom_rt_buffer_read(rt, y, 0, yv, sizeof yv));
    for (uint32_t i = 0; i < n; i++)
        ck_assert_float_eq(yv[i], 1.5f * (float)i);
    loom_plan_release(plan);
    loom_graph_destroy(g);
    loom_rt_buffer_release(a);
    loom_rt_buffer_release(b);
    loom_rt_buffer_release(y);
}

START_TEST(test_queue_family)
{
    loom_rt *rt = rt_make(0, true, NULL);
    loom_rt_info def, comp;
    loom_rt_get_info(rt, &def);
    queue_run(rt);
    rt_done(rt);
    setenv("LOOM_QUEUE", "compute", 1);
    rt = rt_make(0, true, NULL);
    unsetenv("LOOM_QUEUE");
    loom_rt_get_info(rt, &comp);
    queue_run(rt);
    rt_done(rt);
    ck_assert(def.queue_flags & LOOM_RT_QUEUE_COMPUTE);
    ck_assert(comp.queue_flags & LOOM_RT_QUEUE_COMPUTE);
    /* The two differ exactly when the device has a compute-only family
     * besides a graphics one (lavapipe has one family, both). */
    if (comp.queue_family != def.queue_family) {
        ck_assert(def.queue_flags & LOOM_RT_QUEUE_GRAPHICS);
        ck_assert(!(comp.queue_flags & LOOM_RT_QUEUE_GRAPHICS));
    }
    if (!(def.queue_flags & LOOM_RT_QUEUE_GRAPHICS))   /* no graphics family at all */
        ck_assert_uint_eq(comp.queue_family, def.queue_family);
}
END_TEST

/* f16 KV caches need 16-bit storage: on a device without it (as
 * LOOM_STORAGE16=0 makes one) a graph with them is refused with a message
 * naming the node and the kernel, while the same graph with f32 caches
 * runs. The need is read from a kernel's SPIR-V, so a custom kernel that
 * declares 16-bit storage is refused as it is registered. */
START_TEST(test_f16_caches_need_storage16)
{
    setenv("LOOM_STORAGE16", "0", 1);
    loom_rt *rt = rt_make(0, true, NULL);
    unsetenv("LOOM_STORAGE16");
    const uint32_t dim = 16, rows = 4;
    for (int kh = 0; kh < 2; kh++) {
        uint64_t cb = (uint64_t)dim * rows * (kh ? 2 : 4);
        loom_rt_buffer *k = rbuf(rt, "k", LOOM_USAGE_INPUT, dim * 4), *v = rbuf(rt, "v", LOOM_USAGE_INPUT, dim * 4);
        loom_rt_buffer *kc = rbuf(rt, "kc", LOOM_USAGE_KV_CACHE, cb), *vc = rbuf(rt, "vc", LOOM_USAGE_KV_CACHE, cb);
        loom_graph *g = graph_new();
        loom_dtype dt = kh ? LOOM_F16 : LOOM_F32;
        OK(loom_op_kv_append(g, loom_vec(gext(g, k, "k"), dim), loom_vec(gext(g, v, "v"), dim),
                             loom_mat(gext(g, kc, "kc"), dt, rows, dim), loom_mat(gext(g, vc, "vc"), dt, rows, dim),
                             NULL));
        loom_plan *plan;
        OK(loom_rt_compile(rt, g, NULL, &plan, NULL));
        uint64_t step;
        loom_result rc = loom_rt_replay_plan(rt, plan, &(loom_step_params){ .pos = 1, .kv_len = 2 }, &step);
        if (kh) {
            ck_assert_int_eq(rc, LOOM_UNSUPPORTED);
            ck_assert_ptr_nonnull(strstr(loom_last_error(), "node 0 (KV_APPEND): kernel kv_append_kh"));
        } else {
            OK(rc);
            OK(loom_rt_wait(rt, step));
        }
        loom_plan_release(plan);
        loom_graph_destroy(g);
        loom_rt_buffer_release(k);
        loom_rt_buffer_release(v);
        loom_rt_buffer_release(kc);
        loom_rt_buffer_release(vc);
    }
    static const char K_HALF[] =
        "#version 450\n#extension GL_EXT_shader_16bit_storage : require\n"
        "layout(local_size_x = 64) in;\n"
        "layout(set = 0, binding = 0) buffer H { float16_t h[]; };\n"
        "void main() { h[gl_GlobalInvocationID.x] = float16_t(1.0); }\n";
    ck_assert_int_eq(loom_rt_kernel_glsl(rt, "t_half", K_HALF), LOOM_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(loom_last_error(), "kernel t_half declares 16-bit storage"));
    rt_done(rt);
}
END_TEST

/* ---- suite -------------------------------------------------------------- */

static Suite *runtime_suite(void)
{
    Suite *s = suite_create("runtime");
    struct { const char *name; const TTest *test; } cases[] = {
        { "chain", test_chain },
        { "fan", test_fan },
        { "war", test_war },
        { "waw", test_waw },
        { "differential", test_differential },
        { "oracle", test_missing_barrier_caught },
        { "probe_skip_barrier", test_probe_skip_barrier },
        { "retention", test_retention },
        { "step_timestamps", test_step_timestamps },
        { "read_behind", test_read_behind },
        { "waits", test_waits },
        { "tag_rounding", test_tag_rounding },
        { "glsl_error", test_glsl_error },
        { "missing_buffer", test_missing_buffer },
        { "pipeline_cache", test_pipeline_cache },
        { "host_input_in_flight", test_host_input_in_flight },
        { "host_read_last_writer", test_host_read_last_writer },
        { "host_scratch_and_keep", test_host_scratch_and_keep },
        { "memory_kinds", test_memory_kinds },
        { "stage_needs_atomics", test_stage_needs_atomics },
        { "f16_caches_need_storage16", test_f16_caches_need_storage16 },
        { "queue_family", test_queue_family },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
    TCase *tc = tcase_create("in_flight_ring");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_back_to_back, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}

void loom_test_register(loom_test_runner *r, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    loom_test_add_suite(r, runtime_suite());
}
