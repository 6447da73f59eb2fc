/* Compile-and-cache on the device: the per-token frontend loop (capture →
 * loom_rt_compile → loom_rt_replay_plan), cache hits that record nothing,
 * misses on any change, a forced hash collision that must not replay the
 * wrong plan, and eviction while replays are in flight. Runs under the
 * validation layer; every test ends with zero validation messages. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "loom_compiler.h"
#include "loom_ir_edit.h"
#include "loom_ops.h"
#include "loom_runtime.h"
#include "runner.h"

#define N 256u         /* vector length */
#define LAYERS 3u

static loom_rt *rt;
static loom_rt_buffer *w_buf, *x_buf, *y_buf, *acc_buf;
static float w_host[LAYERS][N * N], x_host[N];

static float frand(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / (float)(1u << 24) - 0.5f;
}

static void setup(void)
{
    ck_assert_int_eq(loom_rt_create(&(loom_rt_desc){ .validate = true, .plan_cache_capacity = 4 }, &rt), LOOM_OK);
    uint32_t s = 7;
    for (uint32_t l = 0; l < LAYERS; l++)
        for (uint32_t i = 0; i < N * N; i++)
            w_host[l][i] = frand(&s) * 0.1f;
    for (uint32_t i = 0; i < N; i++)
        x_host[i] = frand(&s);
    ck_assert_int_eq(loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ "w", sizeof w_host, LOOM_USAGE_WEIGHT }, &w_buf),
                     LOOM_OK);
    ck_assert_int_eq(loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ "x", N * 4, LOOM_USAGE_INPUT }, &x_buf), LOOM_OK);
    ck_assert_int_eq(loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ "y", N * 4, LOOM_USAGE_OUTPUT }, &y_buf), LOOM_OK);
    ck_assert_int_eq(loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ "acc", N * 4, LOOM_USAGE_STATE }, &acc_buf),
                     LOOM_OK);
    ck_assert_int_eq(loom_rt_buffer_write(rt, w_buf, 0, w_host, sizeof w_host), LOOM_OK);
    ck_assert_int_eq(loom_rt_buffer_write(rt, x_buf, 0, x_host, sizeof x_host), LOOM_OK);
    float zero[N] = { 0 };
    ck_assert_int_eq(loom_rt_buffer_write(rt, acc_buf, 0, zero, sizeof zero), LOOM_OK);
}

static void teardown(void)
{
    ck_assert_uint_eq(loom_rt_validation_messages(rt), 0);
    loom_rt_buffer_release(w_buf);
    loom_rt_buffer_release(x_buf);
    loom_rt_buffer_release(y_buf);
    loom_rt_buffer_release(acc_buf);
    loom_rt_destroy(rt);
    rt = NULL;
}

static uint32_t ext(loom_graph *g, const char *name, loom_rt_buffer *b, loom_usage u)
{
    uint32_t id;
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ name, loom_rt_buffer_size(b), u, loom_rt_buffer_id(b) },
                                           &id),
                     LOOM_OK);
    return id;
}

/* The step: h = x; per layer h = rms_norm(h) * 1 → matvec + residual;
 * y = h; acc += h (state carried across steps). `variant` perturbs one push
 * constant (the norm's eps) so tests can make "the same graph but one field
 * changed". */
static void capture(loom_graph *g, float eps)
{
    loom_graph_reset(g);
    uint32_t W = ext(g, "w", w_buf, LOOM_USAGE_WEIGHT), X = ext(g, "x", x_buf, LOOM_USAGE_INPUT);
    uint32_t Y = ext(g, "y", y_buf, LOOM_USAGE_OUTPUT), A = ext(g, "acc", acc_buf, LOOM_USAGE_STATE);
    uint32_t h[2], t, n;
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ i ? "h1" : "h0", N * 4, LOOM_USAGE_SCRATCH, 0 },
                                               &h[i]),
                         LOOM_OK);
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ "t", N * 4, LOOM_USAGE_SCRATCH, 0 }, &t), LOOM_OK);
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ "n", N * 4, LOOM_USAGE_SCRATCH, 0 }, &n), LOOM_OK);
    ck_assert_int_eq(loom_op_copy(g, loom_vec(X, N), loom_vec(h[0], N), NULL), LOOM_OK);
    for (uint32_t l = 0; l < LAYERS; l++) {
        uint32_t in = h[l & 1], out = h[(l + 1) & 1];
        loom_tensor Wl = loom_mat(W, LOOM_F32, N, N);
        Wl.offset = (uint64_t)l * N * N * 4;
        ck_assert_int_eq(loom_op_rms_norm(g, loom_vec(in, N), loom_vec(n, N), eps, NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_matvec(g, Wl, loom_vec(n, N), loom_vec(t, N), NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_add(g, loom_vec(t, N), loom_vec(in, N), loom_vec(out, N), NULL), LOOM_OK);
    }
    uint32_t last = h[LAYERS & 1];
    ck_assert_int_eq(loom_op_copy(g, loom_vec(last, N), loom_vec(Y, N), NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_add(g, loom_vec(A, N), loom_vec(last, N), loom_vec(A, N), NULL), LOOM_OK);
}

static void read_f32(loom_rt_buffer *b, float *out)
{
    ck_assert_int_eq(loom_rt_buffer_read(rt, b, 0, out, N * 4), LOOM_OK);
}

/* A hit returns the same plan and records nothing: no program, no command
 * buffer, no pipeline. */
START_TEST(test_hit_records_nothing)
{
    loom_graph *g;
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    capture(g, 1e-5f);
    loom_plan *p1, *p2;
    bool hit;
    ck_assert_int_eq(loom_rt_compile(rt, g, NULL, &p1, &hit), LOOM_OK);
    ck_assert(!hit);
    uint64_t step;
    ck_assert_int_eq(loom_rt_replay_plan(rt, p1, &(loom_step_params){ 0 }, &step), LOOM_OK);
    ck_assert_int_eq(loom_rt_wait(rt, step), LOOM_OK);
    loom_rt_counters before, after;
    loom_rt_get_counters(rt, &before);
    capture(g, 1e-5f);
    ck_assert_int_eq(loom_rt_compile(rt, g, NULL, &p2, &hit), LOOM_OK);
    ck_assert(hit);
    ck_assert_ptr_eq(p1, p2);
    ck_assert_int_eq(loom_rt_replay_plan(rt, p2, &(loom_step_params){ 0 }, &step), LOOM_OK);
    ck_assert_int_eq(loom_rt_wait(rt, step), LOOM_OK);
    loom_rt_get_counters(rt, &after);
    ck_assert_uint_eq(after.records, before.records);
    ck_assert_uint_eq(after.pipelines, before.pipelines);
    ck_assert_uint_eq(after.programs, before.programs);
    ck_assert_uint_eq(after.submits, before.submits + 1);
    loom_cache_stats cs;
    loom_rt_get_cache_stats(rt, &cs);
    ck_assert_uint_eq(cs.hits, 1);
    ck_assert_uint_eq(cs.misses, 1);
    loom_plan_release(p1);
    loom_plan_release(p2);
    loom_graph_destroy(g);
}
END_TEST

/* One push-constant value, one workgroup count, one binding offset: each
 * change is a miss and a new plan. */
START_TEST(test_change_misses)
{
    loom_graph *g;
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    capture(g, 1e-5f);
    loom_plan *base, *p;
    bool hit;
    ck_assert_int_eq(loom_rt_compile(rt, g, NULL, &base, &hit), LOOM_OK);
    for (int change = 0; change < 3; change++) {
        capture(g, change == 0 ? 2e-5f : 1e-5f);
        loom_node *n = loom_graph_node_mut(g, 2);
        if (change == 1)
            n->groups[0]++;
        if (change == 2)
            n->flags ^= 1;
        ck_assert_int_eq(loom_rt_compile(rt, g, NULL, &p, &hit), LOOM_OK);
        ck_assert_msg(!hit, "change %d hit the cache", change);
        ck_assert_ptr_ne(p, base);
        loom_plan_release(p);
    }
    loom_plan_release(base);
    loom_graph_destroy(g);
}
END_TEST

/* Forced collision: every key equal. Two graphs that differ only in eps
 * must still get their own plans, and the replay gives each its own result. */
START_TEST(test_forced_collision)
{
    loom_cache *c;
    ck_assert_int_eq(loom_cache_create(&(loom_cache_desc){ .capacity = 8 }, &c), LOOM_OK);
    loom_hash k = { 42, 42 };
    loom_cache_force_key(c, &k);
    loom_graph *g;
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    float y[2][N];
    loom_plan *plans[2];
    for (int round = 0; round < 2; round++)
        for (int v = 0; v < 2; v++) {
            capture(g, v ? 0.5f : 1e-5f);
            bool hit;
            loom_plan *p;
            ck_assert_int_eq(loom_cache_compile(c, g, NULL, &p, &hit), LOOM_OK);
            ck_assert(hit == (round == 1));
            if (round == 0)
                plans[v] = p;
            else
                ck_assert_ptr_eq(p, plans[v]);
            uint64_t step;
            ck_assert_int_eq(loom_rt_replay_plan(rt, p, NULL, &step), LOOM_OK);
            ck_assert_int_eq(loom_rt_wait(rt, step), LOOM_OK);
            float got[N];
            read_f32(y_buf, got);
            if (round == 0)
                memcpy(y[v], got, sizeof got);
            else
                ck_assert_mem_eq(got, y[v], sizeof got);
            loom_plan_release(p);
        }
    ck_assert(memcmp(y[0], y[1], sizeof y[0]) != 0);
    loom_cache_stats st;
    loom_cache_get_stats(c, &st);
    ck_assert_uint_ge(st.collisions, 1);
    ck_assert_uint_eq(st.hits, 2);
    loom_cache_destroy(c);
    loom_graph_destroy(g);
}
END_TEST

/* Capacity 4; replays of many distinct plans submitted back to back without
 * waiting, so most are in flight when later compiles evict. Nothing in
 * flight may be freed: the layer would see a destroyed buffer in use, and
 * the results would be wrong. */
START_TEST(test_eviction_in_flight)
{
    loom_graph *g;
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    uint64_t last = 0, steps[12] = { 0 };
    for (int i = 0; i < 12; i++) {
        /* The least recently used plan goes idle; the three after it may
         * still be running when this compile has to evict one. */
        if (i >= 4)
            ck_assert_int_eq(loom_rt_wait(rt, steps[i - 4]), LOOM_OK);
        capture(g, 1e-5f * (float)(i + 1));
        loom_plan *p;
        bool hit;
        ck_assert_int_eq(loom_rt_compile(rt, g, NULL, &p, &hit), LOOM_OK);
        ck_assert(!hit);
        ck_assert_int_eq(loom_rt_replay_plan(rt, p, NULL, &last), LOOM_OK);
        steps[i] = last;
        loom_plan_release(p);   /* the cache (or nobody) holds it now */
    }
    ck_assert_int_eq(loom_rt_wait(rt, last), LOOM_OK);
    loom_cache_stats st;
    loom_rt_get_cache_stats(rt, &st);
    ck_assert_uint_ge(st.evictions, 1);
    ck_assert_uint_le(st.entries, 4);
    loom_graph_destroy(g);
}
END_TEST

/* The intended frontend loop, 100 tokens: capture, compile (hit), replay.
 * Results equal those of compiling once and replaying 100 times, and equal
 * the unoptimized plan's (a barrier after every node, no fusion). */
static void run_loop(uint32_t steps, bool recapture, uint32_t disable, float *y_out, float *acc_out)
{
    float zero[N] = { 0 };
    ck_assert_int_eq(loom_rt_buffer_write(rt, acc_buf, 0, zero, sizeof zero), LOOM_OK);
    loom_graph *g;
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    loom_compile_options o = { .disable = disable };
    loom_plan *once = NULL;
    capture(g, 1e-5f);
    ck_assert_int_eq(loom_rt_compile(rt, g, &o, &once, NULL), LOOM_OK);
    loom_rt_counters c0;
    loom_rt_get_counters(rt, &c0);
    uint64_t step = 0;
    for (uint32_t s = 0; s < steps; s++) {
        loom_plan *p = once;
        if (recapture) {
            capture(g, 1e-5f);
            bool hit;
            ck_assert_int_eq(loom_rt_compile(rt, g, &o, &p, &hit), LOOM_OK);
            ck_assert(hit);
        }
        ck_assert_int_eq(loom_rt_replay_plan(rt, p, &(loom_step_params){ .pos = s, .step = s }, &step), LOOM_OK);
        if (recapture)
            loom_plan_release(p);
    }
    ck_assert_int_eq(loom_rt_wait(rt, step), LOOM_OK);
    loom_rt_counters c1;
    loom_rt_get_counters(rt, &c1);
    ck_assert_uint_le(c1.records - c0.records, loom_rt_in_flight(rt));   /* at most the K copies */
    ck_assert_uint_le(c1.programs - c0.programs, 1);   /* none when an earlier loop made it */
    read_f32(y_buf, y_out);
    read_f32(acc_buf, acc_out);
    loom_plan_release(once);
    loom_graph_destroy(g);
}

START_TEST(test_frontend_loop)
{
    static float y1[N], a1[N], y2[N], a2[N], y3[N], a3[N];
    run_loop(100, true, 0, y1, a1);
    run_loop(100, false, 0, y2, a2);
    ck_assert_mem_eq(y1, y2, sizeof y1);
    ck_assert_mem_eq(a1, a2, sizeof a1);
    /* Unoptimized: same kernels unless fused, so compare within tolerance. */
    run_loop(100, true, LOOM_DISABLE_FUSE | LOOM_DISABLE_REORDER | LOOM_DISABLE_BARRIERS | LOOM_DISABLE_LIFETIMES, y3,
             a3);
    for (uint32_t i = 0; i < N; i++) {
        ck_assert_msg(fabsf(y1[i] - y3[i]) <= 1e-4f + 1e-4f * fabsf(y3[i]), "y[%u] %g vs %g", i, y1[i], y3[i]);
        ck_assert_msg(fabsf(a1[i] - a3[i]) <= 1e-2f + 1e-4f * fabsf(a3[i]), "acc[%u] %g vs %g", i, a1[i], a3[i]);
        ck_assert(fabsf(a1[i] - 100.0f * y1[i]) <= 1e-3f + 1e-4f * fabsf(a1[i]));
    }
}
END_TEST

static Suite *plan_suite(void)
{
    Suite *s = suite_create("plan");
    TCase *t = tcase_create("cache");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_hit_records_nothing);
    tcase_add_test(t, test_change_misses);
    tcase_add_test(t, test_forced_collision);
    tcase_add_test(t, test_eviction_in_flight);
    suite_add_tcase(s, t);
    TCase *l = tcase_create("loop");
    tcase_add_checked_fixture(l, setup, teardown);
    tcase_set_timeout(l, 300);
    tcase_add_test(l, test_frontend_loop);
    suite_add_tcase(s, l);
    return s;
}

void loom_test_register(loom_test_runner *r, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    loom_test_add_suite(r, plan_suite());
}
