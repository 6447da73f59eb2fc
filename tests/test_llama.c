/* Suite "llama": the example decoder end to end on the GPU, sized for a CPU
 * Vulkan device. The GPU must match the CPU reference step by step, the
 * optimized plan must match the unoptimized one (bit for bit when nothing is
 * fused) with fewer barriers, chaining tokens on the GPU must decode the
 * same sequence, and the validation layer must stay silent throughout. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "llama_run.h"
#include "loom_ref.h"
#include "runner.h"

#define ALL_OFF (LOOM_DISABLE_FUSE | LOOM_DISABLE_REORDER | LOOM_DISABLE_BARRIERS | LOOM_DISABLE_LIFETIMES)
#define TOL 2e-3f
#define STEPS 4

static loom_rt *rt;
static loom_llama_weights *weights;

static void tiny(loom_llama_config *c, loom_dtype t)
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
    c->wtype = t;
}

static void setup_weights_kv(loom_dtype t, loom_dtype kv)
{
    loom_llama_config c;
    tiny(&c, t);
    c.kvtype = kv;
    ck_assert_int_eq(loom_rt_create(&(loom_rt_desc){ .validate = true }, &rt), LOOM_OK);
    ck_assert_int_eq(loom_llama_weights_create(&c, &weights), LOOM_OK);
}

static void teardown(void)
{
    loom_rt_wait_idle(rt);
    uint64_t vmsg = loom_rt_validation_messages(rt);
    loom_llama_weights_destroy(weights);
    loom_rt_destroy(rt);
    weights = NULL;
    rt = NULL;
    ck_assert_uint_eq(vmsg, 0);
}

/* STEPS host-fed steps from token 3; logits[s] and tokens[s] per step. */
static void decode(const loom_compile_options *o, bool chain, float *logits, uint32_t *tokens)
{
    loom_llama *m = NULL;
    ck_assert_int_eq(loom_llama_create(rt, weights, &(loom_llama_desc){ .chain = chain, .compile = o }, &m), LOOM_OK);
    uint32_t tok = 3, v = weights->cfg.vocab;
    for (uint32_t s = 0; s < STEPS; s++) {
        ck_assert_int_eq(loom_llama_step(m, tok, s, logits + (size_t)s * v, &tokens[s]), LOOM_OK);
        tok = tokens[s];
    }
    loom_llama_destroy(m);
}

static void check_reference(void)
{
    uint32_t v = weights->cfg.vocab, toks[STEPS];
    float *gl = malloc(sizeof(float) * v * STEPS), *rl = malloc(sizeof(float) * v);
    ck_assert_ptr_nonnull(gl);
    ck_assert_ptr_nonnull(rl);
    decode(NULL, false, gl, toks);
    loom_llama_ref *ref = NULL;
    ck_assert_int_eq(loom_llama_ref_create(weights, &ref), LOOM_OK);
    uint32_t tok = 3;
    for (uint32_t s = 0; s < STEPS; s++) {
        uint32_t rarg;
        ck_assert_int_eq(loom_llama_ref_step(ref, tok, s, rl, &rarg), LOOM_OK);
        loom_llama_diff d;
        ck_assert_msg(loom_llama_compare(gl + (size_t)s * v, toks[s], rl, rarg, v, TOL, &d),
                      "step %u: max err %g (ref scale %g), argmax gpu %u ref %u", s, d.max_abs, d.ref_max_abs,
                      toks[s], rarg);
        tok = toks[s];
    }
    loom_llama_ref_destroy(ref);
    free(gl);
    free(rl);
}

static void setup_f32(void) { setup_weights_kv(LOOM_F32, LOOM_F32); }
static void setup_f16(void) { setup_weights_kv(LOOM_F16, LOOM_F32); }
/* f16 weights and f16 KV caches (the 1b and 7b presets): the reference
 * rounds k and v to f16 as the caches do. */
static void setup_f16_caches(void) { setup_weights_kv(LOOM_F16, LOOM_F16); }

START_TEST(gpu_matches_reference_f32) { check_reference(); }
END_TEST

START_TEST(gpu_matches_reference_f16) { check_reference(); }
END_TEST

START_TEST(gpu_matches_reference_f16_caches) { check_reference(); }
END_TEST

/* Optimized against every pass off: within tolerance with fusion, bit for
 * bit without it; and the optimized plan needs fewer barriers. */
static void optimized_matches_unoptimized_body(void)
{
    uint32_t v = weights->cfg.vocab, t_opt[STEPS], t_off[STEPS], t_nofuse[STEPS];
    size_t n = (size_t)v * STEPS;
    float *opt = malloc(n * sizeof(float)), *off = malloc(n * sizeof(float)), *nofuse = malloc(n * sizeof(float));
    ck_assert(opt && off && nofuse);
    decode(NULL, false, opt, t_opt);
    decode(&(loom_compile_options){ .disable = ALL_OFF }, false, off, t_off);
    decode(&(loom_compile_options){ .disable = LOOM_DISABLE_FUSE }, false, nofuse, t_nofuse);
    for (uint32_t s = 0; s < STEPS; s++) {
        loom_llama_diff d;
        ck_assert_msg(loom_llama_compare(opt + (size_t)s * v, t_opt[s], off + (size_t)s * v, t_off[s], v, TOL, &d),
                      "step %u: max err %g", s, d.max_abs);
        ck_assert_uint_eq(t_nofuse[s], t_off[s]);
    }
    ck_assert_int_eq(memcmp(nofuse, off, n * sizeof(float)), 0);
    free(opt);
    free(off);
    free(nofuse);
}

START_TEST(optimized_matches_unoptimized) { optimized_matches_unoptimized_body(); }
END_TEST

START_TEST(optimized_matches_unoptimized_f16_caches) { optimized_matches_unoptimized_body(); }
END_TEST

START_TEST(optimized_has_fewer_barriers)
{
    loom_llama *m = NULL;
    loom_graph *g = NULL;
    loom_plan *opt = NULL, *off = NULL;
    ck_assert_int_eq(loom_llama_create(rt, weights, NULL, &m), LOOM_OK);
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    ck_assert_int_eq(loom_llama_capture(m, g), LOOM_OK);
    ck_assert_int_eq(loom_compile(g, NULL, &opt), LOOM_OK);
    ck_assert_int_eq(loom_compile(g, &(loom_compile_options){ .disable = ALL_OFF }, &off), LOOM_OK);
    const loom_plan_stats *so = loom_plan_get_stats(opt), *su = loom_plan_get_stats(off);
    ck_assert_uint_lt(so->barriers, su->barriers);
    ck_assert_uint_ge(so->barriers, so->barrier_lower_bound);
    ck_assert_uint_gt(so->fused_chains, 0);
    ck_assert_uint_lt(so->dispatches, su->dispatches);
    ck_assert_uint_le(so->arena_bytes, so->scratch_bytes);
    loom_plan_release(opt);
    loom_plan_release(off);
    loom_graph_destroy(g);
    loom_llama_destroy(m);
}
END_TEST

/* After the first step every capture hits the cache and the program (one
 * recorded command buffer) is reused. */
START_TEST(steps_reuse_the_plan)
{
    loom_llama *m = NULL;
    ck_assert_int_eq(loom_llama_create(rt, weights, NULL, &m), LOOM_OK);
    loom_rt_counters before, after;
    loom_rt_get_counters(rt, &before);
    uint32_t tok = 5;
    for (uint32_t s = 0; s < STEPS; s++)
        ck_assert_int_eq(loom_llama_step(m, tok, s, NULL, &tok), LOOM_OK);
    loom_rt_get_counters(rt, &after);
    uint64_t hits, misses;
    loom_llama_cache_counts(m, &hits, &misses);
    ck_assert_uint_eq(misses, 1);
    ck_assert_uint_eq(hits, STEPS - 1);
    ck_assert_uint_eq(after.programs - before.programs, 1);
    ck_assert_uint_eq(after.submits - before.submits, STEPS);
    loom_llama_destroy(m);
}
END_TEST

/* Tokens fed from the GPU's own argmax decode the same sequence. */
START_TEST(chain_matches_host_feed)
{
    uint32_t v = weights->cfg.vocab, t_host[STEPS], t_chain[STEPS];
    size_t n = (size_t)v * STEPS;
    float *host = malloc(n * sizeof(float)), *chain = malloc(n * sizeof(float));
    ck_assert(host && chain);
    decode(NULL, false, host, t_host);
    decode(NULL, true, chain, t_chain);
    for (uint32_t s = 0; s < STEPS; s++) {
        ck_assert_uint_eq(t_chain[s], t_host[s]);
        loom_llama_diff d;
        ck_assert_msg(loom_llama_compare(chain + (size_t)s * v, t_chain[s], host + (size_t)s * v, t_host[s], v, TOL,
                                         &d),
                      "step %u: max err %g", s, d.max_abs);
    }
    free(host);
    free(chain);
}
END_TEST

/* Steps submitted ahead and collected behind the GPU (three in flight,
 * tokens and logits from the rings) decode what synchronous steps decode,
 * with no replay ever waiting for a copy while the host keeps fewer than K
 * queued; with the step log at the end of each step or at the start of the
 * next (early_log: the newest step read from the outputs, an older one from
 * its slot once the next step is done). Every step is collected twice: as
 * the oldest queued, and again at the end, N - index steps behind. */
static void in_flight_matches_sync(bool early_log)
{
    enum { N = 6 };
    uint32_t sync[N], ahead[N], again[N], v = weights->cfg.vocab;
    float *lsync = malloc((size_t)N * v * sizeof(float)), *lahead = malloc((size_t)v * sizeof(float));
    ck_assert(lsync && lahead);
    loom_llama *m = NULL;
    ck_assert_int_eq(loom_llama_create(rt, weights, &(loom_llama_desc){ .chain = true }, &m), LOOM_OK);
    uint32_t tok = 3;
    for (uint32_t s = 0; s < N; s++)
        ck_assert_int_eq(loom_llama_step(m, tok, s, lsync + (size_t)s * v, &sync[s]), LOOM_OK);
    loom_llama_destroy(m);
    ck_assert_int_eq(loom_llama_create(rt, weights,
                                       &(loom_llama_desc){ .chain = true, .keep_logits = true, .early_log = early_log },
                                       &m),
                     LOOM_OK);
    uint32_t k = loom_rt_in_flight(rt);
    ck_assert_uint_eq(k, 3);
    loom_rt_counters c0, c1;
    loom_rt_get_counters(rt, &c0);
    uint32_t collected = 0;
    for (uint32_t s = 0; s < N; s++) {
        uint32_t index;
        ck_assert_int_eq(loom_llama_submit(m, 3, s, &index), LOOM_OK);
        ck_assert_uint_eq(index, s);
        for (; s + 1 - collected >= k; collected++) {
            ck_assert_int_eq(loom_llama_collect(m, collected, &ahead[collected], NULL), LOOM_OK);
            /* An early log's slot is written by the next step: collect has
             * waited for it, so waiting again returns on the counter read. */
            if (early_log) {
                loom_rt_counters w0, w1;
                loom_rt_get_counters(rt, &w0);
                ck_assert_int_eq(loom_rt_wait(rt, loom_llama_step_id(m, collected + 1)), LOOM_OK);
                loom_rt_get_counters(rt, &w1);
                ck_assert_uint_eq(w1.waits_fast - w0.waits_fast, 1);
            }
        }
    }
    for (; collected < N; collected++)
        ck_assert_int_eq(loom_llama_collect(m, collected, &ahead[collected], NULL), LOOM_OK);
    loom_rt_get_counters(rt, &c1);
    ck_assert_uint_eq(c1.replay_waits - c0.replay_waits, 0);
    ck_assert_uint_eq(c1.submits - c0.submits, N);
    for (uint32_t s = 0; s < N; s++) {
        ck_assert_uint_eq(ahead[s], sync[s]);
        ck_assert_int_eq(loom_llama_collect(m, s, &again[s], lahead), LOOM_OK);
        ck_assert_uint_eq(again[s], sync[s]);
        loom_llama_diff d;
        ck_assert_msg(loom_llama_compare(lahead, again[s], lsync + (size_t)s * v, sync[s], v, TOL, &d),
                      "step %u: max err %g", s, d.max_abs);
    }
    /* Out of range: not submitted yet. */
    ck_assert_int_eq(loom_llama_collect(m, N, &tok, NULL), LOOM_INVALID_ARGUMENT);
    loom_llama_destroy(m);
    free(lsync);
    free(lahead);
}

START_TEST(in_flight_matches_sync_late_log) { in_flight_matches_sync(false); }
END_TEST

START_TEST(in_flight_matches_sync_early_log) { in_flight_matches_sync(true); }
END_TEST

/* The dry model needs no device: the 1b step plan compiles, and its figures
 * match the shape (weights read once, one embedding row). */
START_TEST(dry_figures_of_1b)
{
    loom_llama_config c;
    ck_assert_int_eq(loom_llama_preset("1b", &c), LOOM_OK);
    loom_llama_figures f, off;
    ck_assert_int_eq(loom_llama_dry_figures(&c, NULL, false, &f), LOOM_OK);
    uint64_t layer = (2048ull * 2048 * 2 + 512ull * 2048 * 2 + 3ull * 8192 * 2048) * 2 + 2 * 2048 * 4;
    uint64_t expect = 16 * layer + 32000ull * 2048 * 2 + 2048 * 2 + 2048 * 4;
    ck_assert_uint_eq(f.weight_bytes, expect);
    ck_assert_uint_ge(f.barriers, f.barrier_lower_bound);
    ck_assert(f.levels_per_layer >= 1.0 && f.levels_per_layer < 20.0);
    ck_assert_int_eq(loom_llama_dry_figures(&c, &(loom_compile_options){ .disable = ALL_OFF }, false, &off), LOOM_OK);
    ck_assert_uint_gt(off.barriers, f.barriers);
    ck_assert_uint_eq(off.barriers, off.dispatches - 1);   /* a barrier between every pair */
    /* The token's log at the step's end is folded into the LM head
     * (argmax_log): 16 layers of 5 levels and the LM head's, nothing
     * after it. The log at the start of the next step joins the first
     * level instead: a dispatch of its own, the same barriers, still at
     * the bound. */
    ck_assert_uint_eq(f.barriers, 80);
    ck_assert_uint_eq(f.barriers, f.barrier_lower_bound);
    loom_llama_figures early;
    ck_assert_int_eq(loom_llama_dry_figures(&c, NULL, true, &early), LOOM_OK);
    ck_assert_uint_eq(early.dispatches, f.dispatches + 1);
    ck_assert_uint_eq(early.barriers, f.barriers);
    ck_assert_uint_eq(early.barriers, early.barrier_lower_bound);
    c.n_kv_heads = 5;
    ck_assert_int_eq(loom_llama_dry_figures(&c, NULL, false, &f), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_llama_preset("13b", &c), LOOM_NOT_FOUND);
}
END_TEST

START_TEST(bad_input_is_rejected)
{
    loom_llama *m = NULL;
    ck_assert_int_eq(loom_llama_create(rt, weights, NULL, &m), LOOM_OK);
    ck_assert_int_eq(loom_llama_step(m, weights->cfg.vocab, 0, NULL, NULL), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_llama_step(m, 0, weights->cfg.max_seq, NULL, NULL), LOOM_INVALID_ARGUMENT);
    loom_llama *none = m;
    ck_assert_int_eq(loom_llama_create(rt, NULL, NULL, &none), LOOM_INVALID_ARGUMENT);
    ck_assert_ptr_null(none);
    loom_llama_destroy(m);
}
END_TEST

/* Config checks need no device. */
/* The weights are one stream of splitmix64 draws taken in a fixed order
 * (embedding; per layer the two norms, then q, k, v, o, gate, up, down;
 * the final norm; the LM head), each uniform in [-1, 1) from its top 24
 * bits, times 1/sqrt(fan-in) (norms: 1 + v/4), rounded through f16 for
 * f16 weights. Generation splits large matrices over threads that start
 * mid-stream; every value must be the one a single pass draws. */
static uint64_t draw_state;

static float draw(void)
{
    uint64_t z = (draw_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

static void expect_matrix(const loom_llama_matrix *mx, uint32_t rows, uint32_t cols, float scale, const char *name)
{
    ck_assert_uint_eq(mx->rows, rows);
    ck_assert_uint_eq(mx->cols, cols);
    /* One check a matrix: a check point per element would cost a pipe
     * write each. */
    for (size_t i = 0; i < (size_t)rows * cols; i++) {
        float v = draw() * scale;
        uint16_t h = loom_f32_to_f16(v);
        if (mx->f16)
            v = loom_f16_to_f32(h);
        if ((mx->f16 && mx->f16[i] != h) || mx->f32[i] != v)
            ck_abort_msg("%s[%zu]: %.9g (f16 %#x), one pass draws %.9g (%#x)", name, i, mx->f32[i],
                         mx->f16 ? mx->f16[i] : 0, v, h);
    }
}

static void expect_norm(const float *g, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++) {
        float v = 1.0f + 0.25f * draw();
        if (g[i] != v)
            ck_abort_msg("%s[%u]: %.9g, one pass draws %.9g", name, i, g[i], v);
    }
}

static void weights_are_one_stream(loom_dtype t)
{
    /* Matrices of 0.2M-1.6M elements: split over every core there is (at
     * least 64K elements a thread), at bounds that are not row bounds. */
    loom_llama_config c;
    loom_llama_default_config(&c);
    c.dim = 520;
    c.n_layers = 2;
    c.n_heads = 8;
    c.n_kv_heads = 2;
    c.head_dim = 64;
    c.ffn = 3000;
    c.vocab = 1001;
    c.wtype = t;
    loom_llama_weights *w = NULL;
    ck_assert_int_eq(loom_llama_weights_create(&c, &w), LOOM_OK);
    draw_state = c.seed;
    uint32_t qd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim;
    float sd = 1.0f / sqrtf((float)c.dim), sq = 1.0f / sqrtf((float)qd), sf = 1.0f / sqrtf((float)c.ffn);
    expect_matrix(&w->embed, c.vocab, c.dim, 1.0f, "embed");
    for (uint32_t l = 0; l < c.n_layers; l++) {
        const loom_llama_layer *L = &w->layers[l];
        expect_norm(L->attn_norm, c.dim, "attn_norm");
        expect_norm(L->ffn_norm, c.dim, "ffn_norm");
        expect_matrix(&L->wq, qd, c.dim, sd, "wq");
        expect_matrix(&L->wk, kvd, c.dim, sd, "wk");
        expect_matrix(&L->wv, kvd, c.dim, sd, "wv");
        expect_matrix(&L->wo, c.dim, qd, sq, "wo");
        expect_matrix(&L->wg, c.ffn, c.dim, sd, "wg");
        expect_matrix(&L->wu, c.ffn, c.dim, sd, "wu");
        expect_matrix(&L->wd, c.dim, c.ffn, sf, "wd");
    }
    expect_norm(w->final_norm, c.dim, "final_norm");
    expect_matrix(&w->out, c.vocab, c.dim, sd, "out");
    loom_llama_weights_destroy(w);
}

START_TEST(weights_are_one_stream_f32) { weights_are_one_stream(LOOM_F32); }
END_TEST

START_TEST(weights_are_one_stream_f16) { weights_are_one_stream(LOOM_F16); }
END_TEST

START_TEST(config_is_checked)
{
    loom_llama_config c;
    tiny(&c, LOOM_F32);
    ck_assert_int_eq(loom_llama_config_check(&c), LOOM_OK);
    c.n_kv_heads = 3;
    ck_assert_int_eq(loom_llama_config_check(&c), LOOM_INVALID_ARGUMENT);
    tiny(&c, LOOM_F32);
    c.head_dim = 15;
    ck_assert_int_eq(loom_llama_config_check(&c), LOOM_INVALID_ARGUMENT);
    tiny(&c, LOOM_F32);
    c.vocab = 0;
    ck_assert_int_eq(loom_llama_config_check(&c), LOOM_INVALID_ARGUMENT);
    tiny(&c, LOOM_F32);
    c.wtype = LOOM_U32;
    loom_llama_weights *w = NULL;
    ck_assert_int_eq(loom_llama_weights_create(&c, &w), LOOM_INVALID_ARGUMENT);
    ck_assert_ptr_null(w);
    tiny(&c, LOOM_F16);
    c.kvtype = LOOM_U32;
    ck_assert_int_eq(loom_llama_config_check(&c), LOOM_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(loom_last_error(), "kvtype"));
}
END_TEST

static Suite *llama_suite(void)
{
    Suite *s = suite_create("llama");
    TCase *tc = tcase_create("reference");
    tcase_add_checked_fixture(tc, setup_f32, teardown);
    tcase_add_test(tc, gpu_matches_reference_f32);
    tcase_add_test(tc, bad_input_is_rejected);
    suite_add_tcase(s, tc);
    tc = tcase_create("reference_f16");
    tcase_add_checked_fixture(tc, setup_f16, teardown);
    tcase_add_test(tc, gpu_matches_reference_f16);
    suite_add_tcase(s, tc);
    tc = tcase_create("f16_caches");
    tcase_add_checked_fixture(tc, setup_f16_caches, teardown);
    tcase_add_test(tc, gpu_matches_reference_f16_caches);
    tcase_add_test(tc, optimized_matches_unoptimized_f16_caches);
    suite_add_tcase(s, tc);
    tc = tcase_create("optimized");
    tcase_add_checked_fixture(tc, setup_f32, teardown);
    tcase_add_test(tc, optimized_matches_unoptimized);
    tcase_add_test(tc, optimized_has_fewer_barriers);
    suite_add_tcase(s, tc);
    tc = tcase_create("replay");
    tcase_add_checked_fixture(tc, setup_f32, teardown);
    tcase_add_test(tc, steps_reuse_the_plan);
    tcase_add_test(tc, chain_matches_host_feed);
    tcase_add_test(tc, in_flight_matches_sync_late_log);
    tcase_add_test(tc, in_flight_matches_sync_early_log);
    suite_add_tcase(s, tc);
    tc = tcase_create("config");
    tcase_add_test(tc, config_is_checked);
    tcase_add_test(tc, dry_figures_of_1b);
    tcase_add_test(tc, weights_are_one_stream_f32);
    tcase_add_test(tc, weights_are_one_stream_f16);
    suite_add_tcase(s, tc);
    return s;
}

void loom_test_register(loom_test_runner *r, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    loom_test_add_suite(r, llama_suite());
}
