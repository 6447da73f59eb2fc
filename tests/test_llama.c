/* Suite "llama": the example decoder end to end on the GPU, sized for a CPU
 * Vulkan device. The GPU must match the CPU reference step by step, the
 * optimized plan must match the unoptimized one (bit for bit when nothing is
 * fused) with fewer barriers, chaining tokens on the GPU must decode the
 * same sequence, and the validation layer must stay silent throughout. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "llama_run.h"
#include "loom_ops.h"
#include "loom_ir_edit.h"
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

static void setup_weights_ctx(loom_dtype t, loom_dtype kv, uint32_t max_seq)
{
    loom_llama_config c;
    tiny(&c, t);
    c.kvtype = kv;
    c.max_seq = max_seq;
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
        float tol = loom_llama_check_tol(rt, weights, TOL);   /* int8 x where the weights are blocks */
        ck_assert_msg(loom_llama_compare(gl + (size_t)s * v, toks[s], rl, rarg, v, tol, &d),
                      "step %u: max err %g (ref scale %g), argmax gpu %u ref %u", s, d.max_abs, d.ref_max_abs,
                      toks[s], rarg);
        tok = toks[s];
    }
    loom_llama_ref_destroy(ref);
    free(gl);
    free(rl);
}

static void setup_weights_kv(loom_dtype t, loom_dtype kv) { setup_weights_ctx(t, kv, 8); }
static void setup_f32(void) { setup_weights_kv(LOOM_F32, LOOM_F32); }
/* A context of 32 for prompts in multi-token steps, f16 caches. */
static void setup_rows(void) { setup_weights_ctx(LOOM_F16, LOOM_F16, 32); }
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
/* A model of weights w whose first copy recorded drops its drop-th tagged
 * or counting producer's output (LOOM_PROBE_DROP_TAG): its first step
 * fails with LOOM_TIMEOUT naming the program, poll_timeouts counts one, and
 * the STEPS steps after it decode logits lwant and tokens want from token
 * 3 with no further timeout. got: a scratch row of logits. */
static void faulted_then_falls_back(const loom_llama_weights *w, const char *drop, const float *lwant,
                                    const uint32_t *want, float *got)
{
    uint32_t v = w->cfg.vocab;
    loom_llama *m = NULL;
    setenv("LOOM_PROBE_DROP_TAG", drop, 1);
    loom_result rc = loom_llama_create(rt, w, &(loom_llama_desc){ 0 }, &m);
    loom_rt_counters c0, c1;
    loom_rt_get_counters(rt, &c0);
    uint32_t tok = 0;
    if (!rc)
        rc = loom_llama_step(m, 3, 0, got, &tok);
    unsetenv("LOOM_PROBE_DROP_TAG");
    ck_assert_int_eq(rc, LOOM_TIMEOUT);
    ck_assert_ptr_nonnull(strstr(loom_last_error(), "gave up"));
    ck_assert_ptr_nonnull(strstr(loom_last_error(), "llama_step"));
    loom_rt_get_counters(rt, &c1);
    ck_assert_uint_eq(c1.poll_timeouts - c0.poll_timeouts, 1);
    tok = 3;
    for (uint32_t s = 0; s < STEPS; s++) {
        uint32_t t;
        ck_assert_int_eq(loom_llama_step(m, tok, s, got, &t), LOOM_OK);
        loom_llama_diff d;
        ck_assert_msg(loom_llama_compare(got, t, lwant + (size_t)s * v, want[s], v, TOL, &d),
                      "step %u after the fallback: max err %g, argmax %u want %u", s, d.max_abs, t, want[s]);
        tok = t;
    }
    loom_rt_get_counters(rt, &c0);
    ck_assert_uint_eq(c0.poll_timeouts, c1.poll_timeouts);
    loom_llama_destroy(m);
}

/* A poll that gives up is an error at the step's wait, not a wrong token
 * passed on: LOOM_PROBE_DROP_TAG=1 (test builds) has the first copy the
 * program records drop one tagged producer's tags, so its reader polls in
 * vain. The wait returns LOOM_TIMEOUT naming the program, poll_timeouts
 * counts it once, and the program, recorded again with every barrier,
 * then decodes what a program without the probe decodes. The runtime
 * (validation on) keeps the tagged kernels with their barriers, so the
 * reader still polls. */
START_TEST(poll_fault_falls_back)
{
    uint32_t v = weights->cfg.vocab, want[STEPS];
    float *lwant = malloc((size_t)v * STEPS * sizeof(float)), *got = malloc((size_t)v * sizeof(float));
    ck_assert(lwant && got);
    decode(NULL, false, lwant, want);
    faulted_then_falls_back(weights, "1", lwant, want, got);
    free(lwant);
    free(got);
}
END_TEST

/* The awaits pass on the tiny f16 step: with awaits, each layer's gated
 * FFN -> down projection and attention -> o-projection become awaited
 * edges (the reader right after its producer, the vector at the reader's
 * x, the gate bit behind an attention, both on tagged kernels), each
 * taking one barrier and one group off the plan; without, nothing is
 * tagged. The two plans have different keys, and the plan's JSON carries
 * the edges through a parse (the text dump shows them). */
START_TEST(awaits_marks_the_edges)
{
    loom_llama *m = NULL;
    loom_graph *g = NULL, *back = NULL;
    loom_plan *on = NULL, *off = NULL;
    ck_assert_int_eq(loom_llama_create(rt, weights, NULL, &m), LOOM_OK);
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    ck_assert_int_eq(loom_llama_capture_step(m, g), LOOM_OK);
    ck_assert_int_eq(loom_compile(g, &(loom_compile_options){ .awaits = true }, &on), LOOM_OK);
    ck_assert_int_eq(loom_compile(g, &(loom_compile_options){ .awaits = false }, &off), LOOM_OK);
    const loom_plan_stats *son = loom_plan_get_stats(on), *soff = loom_plan_get_stats(off);
    uint32_t layers = weights->cfg.n_layers;
    ck_assert_uint_eq(son->awaited, 2 * layers);
    ck_assert_uint_eq(soff->awaited, 0);
    ck_assert_uint_eq(son->barriers + son->awaited, soff->barriers);
    ck_assert_uint_eq(son->groups + son->awaited, soff->groups);
    ck_assert_uint_eq(son->dispatches, soff->dispatches);
    loom_hash kon = loom_plan_key(on), koff = loom_plan_key(off);
    ck_assert(kon.lo != koff.lo || kon.hi != koff.hi);

    const loom_graph *pg = loom_plan_graph(on);
    uint32_t readers = 0, gated = 0;
    for (uint32_t i = 0; i < loom_graph_node_count(pg); i++) {
        const loom_node *n = loom_graph_node(pg, i);
        const char *k = loom_graph_kernel_name(pg, n->kernel);
        if (n->tag_out)
            ck_assert_msg(loom_form_has(k, "MV_TAG") || loom_form_has(k, "ATT_TAG"), "node %u: kernel %s", i, k);
        if (!n->tag_in)
            continue;
        readers++;
        const loom_node *p = loom_graph_node(pg, i - 1);
        bool gate = n->tag_in & LOOM_AWAIT_GATE;
        gated += gate;
        ck_assert_uint_eq(n->tag_in & ~LOOM_AWAIT_GATE, p->tag_out);
        ck_assert_uint_eq(n->group, p->group);
        ck_assert_uint_eq(gate, p->op == LOOM_OP_ATTENTION);
        ck_assert(loom_form_has(k, gate ? "MV_TAG MV_TAG_GATE" : "MV_TAG"));
        /* the poll stands in for the RAW on the vector the reader reads */
        const loom_binding *x = loom_node_slot(pg, n, n->tag_in_slot), *y = loom_node_slot(pg, p, p->tag_out_slot);
        ck_assert(loom_binding_same(x, y));
        const loom_barrier_info *bi = loom_graph_barrier_info(pg, n->barrier);
        ck_assert_ptr_nonnull(bi);
        ck_assert_uint_eq(bi->hazard, LOOM_HAZARD_RAW);
        ck_assert_uint_eq(bi->buffer, y->buffer);
    }
    ck_assert_uint_eq(readers, son->awaited);
    ck_assert_uint_eq(gated, layers);
    for (uint32_t i = 0; i < loom_graph_node_count(loom_plan_graph(off)); i++) {
        const loom_node *n = loom_graph_node(loom_plan_graph(off), i);
        ck_assert(!n->tag_in && !n->tag_out);
    }

    loom_str js, js2, txt;
    loom_str_init(&js, NULL);
    loom_str_init(&js2, NULL);
    loom_str_init(&txt, NULL);
    ck_assert_int_eq(loom_graph_dump(pg, LOOM_FORMAT_JSON, &js), LOOM_OK);
    ck_assert_ptr_nonnull(strstr(js.data, "\"tag_in\": {\"vector\": 1, \"slot\": 1, "));
    ck_assert_int_eq(loom_graph_parse_json(js.data, js.len, NULL, &back), LOOM_OK);
    ck_assert_int_eq(loom_graph_verify(back), LOOM_OK);
    ck_assert_int_eq(loom_graph_dump(back, LOOM_FORMAT_JSON, &js2), LOOM_OK);
    ck_assert_str_eq(js.data, js2.data);
    for (uint32_t i = 0; i < loom_graph_node_count(pg); i++) {
        const loom_node *a = loom_graph_node(pg, i), *b = loom_graph_node(back, i);
        ck_assert_uint_eq(a->tag_in, b->tag_in);
        ck_assert_uint_eq(a->tag_out, b->tag_out);
        ck_assert_uint_eq(a->tag_in_slot, b->tag_in_slot);
        ck_assert_uint_eq(a->tag_out_slot, b->tag_out_slot);
    }
    ck_assert_int_eq(loom_graph_dump(pg, LOOM_FORMAT_TEXT, &txt), LOOM_OK);
    ck_assert_ptr_nonnull(strstr(txt.data, "\nawaited (RAW on "));
    ck_assert_ptr_nonnull(strstr(txt.data, " await=v1@1"));
    ck_assert_ptr_nonnull(strstr(txt.data, " tag=v1@"));
    loom_str_free(&js);
    loom_str_free(&js2);
    loom_str_free(&txt);
    loom_graph_destroy(back);
    loom_plan_release(on);
    loom_plan_release(off);
    loom_graph_destroy(g);
    loom_llama_destroy(m);
}
END_TEST

/* LOOM_ENABLE_QKV_AWAIT: q/k/v -> attention awaited too, where q/k/v
 * writes nothing else a later node reads (not the first layer's, which
 * writes the embedding row): q/k/v on its MV_TAG form, the attention on its
 * ATT_QKVT form reading q's buffer, grown to q and the step's k and v rows,
 * whole at the slot the producer tags, and the attention a producer for
 * the o-projection in turn, all three in one group. */
START_TEST(qkv_await_marks_the_edge)
{
    loom_llama *m = NULL;
    loom_graph *g = NULL;
    loom_plan *on = NULL, *base = NULL;
    ck_assert_int_eq(loom_llama_create(rt, weights, NULL, &m), LOOM_OK);
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    ck_assert_int_eq(loom_llama_capture_step(m, g), LOOM_OK);
    ck_assert_int_eq(loom_compile(g, &(loom_compile_options){ .awaits = true, .enable = LOOM_ENABLE_QKV_AWAIT }, &on),
                     LOOM_OK);
    ck_assert_int_eq(loom_compile(g, &(loom_compile_options){ .awaits = true }, &base), LOOM_OK);
    const loom_llama_config *c = &weights->cfg;
    uint64_t bytes = ((uint64_t)c->n_heads + 2ull * c->n_kv_heads) * c->head_dim * 4;
    const loom_graph *pg = loom_plan_graph(on);
    uint32_t edges = 0;
    for (uint32_t i = 1; i + 1 < loom_graph_node_count(pg); i++) {
        const loom_node *n = loom_graph_node(pg, i), *p = loom_graph_node(pg, i - 1), *o = loom_graph_node(pg, i + 1);
        const char *k = loom_graph_kernel_name(pg, n->kernel);
        if (!loom_form_has(k, "ATT_QKVT"))
            continue;
        edges++;
        ck_assert_uint_eq(n->op, LOOM_OP_ATTENTION);
        ck_assert(loom_form_has(loom_graph_kernel_name(pg, p->kernel), "MV_QKV MV_TAG"));
        ck_assert_uint_eq(n->tag_in, p->tag_out);
        ck_assert_uint_eq(n->tag_in_slot, 1);
        const loom_binding *x = loom_node_slot(pg, n, 1), *y = loom_node_slot(pg, p, p->tag_out_slot);
        ck_assert(loom_binding_same(x, y));
        ck_assert_uint_eq(y->size, bytes);
        ck_assert_uint_eq(loom_graph_buffer(pg, y->buffer)->size, bytes);
        ck_assert(n->tag_out && (o->tag_in & ~LOOM_AWAIT_GATE) == n->tag_out);   /* the o-projection polls it */
        ck_assert_uint_eq(n->group, p->group);
        ck_assert_uint_eq(o->group, p->group);
    }
    ck_assert_uint_eq(edges, c->n_layers - 1);
    ck_assert_uint_eq(loom_plan_get_stats(on)->awaited, loom_plan_get_stats(base)->awaited + edges);
    ck_assert_uint_eq(loom_plan_get_stats(on)->barriers + edges, loom_plan_get_stats(base)->barriers);
    ck_assert_int_eq(loom_graph_verify(pg), LOOM_OK);
    loom_plan_release(on);
    loom_plan_release(base);
    loom_graph_destroy(g);
    loom_llama_destroy(m);
}
END_TEST

/* A model of config c captured and compiled with awaited edges, and what
 * its release needs. */
typedef struct awaits_case {
    loom_llama_weights *w;
    loom_llama *m;
    loom_graph *g;
    loom_plan *plan;
} awaits_case;

static const loom_graph *awaits_compile_with(const loom_llama_config *c, uint32_t enable, awaits_case *a)
{
    *a = (awaits_case){ NULL, NULL, NULL, NULL };
    ck_assert_int_eq(loom_llama_weights_create(c, &a->w), LOOM_OK);
    ck_assert_int_eq(loom_llama_create(rt, a->w, NULL, &a->m), LOOM_OK);
    ck_assert_int_eq(loom_graph_create(NULL, &a->g), LOOM_OK);
    ck_assert_int_eq(loom_llama_capture_step(a->m, a->g), LOOM_OK);
    ck_assert_int_eq(loom_compile(a->g, &(loom_compile_options){ .awaits = true, .enable = enable }, &a->plan),
                     LOOM_OK);
    return loom_plan_graph(a->plan);
}

static const loom_graph *awaits_compile(const loom_llama_config *c, awaits_case *a)
{
    return awaits_compile_with(c, 0, a);
}

static void awaits_release(awaits_case *a)
{
    loom_plan_release(a->plan);
    loom_graph_destroy(a->g);
    loom_llama_destroy(a->m);
    loom_llama_weights_destroy(a->w);
}

/* The awaits pass on a block-typed step (tiny, Q8_0): each gated FFN's
 * output goes to its down projection as tagged int8 quads (the producer on
 * its MV_YQT form, the reader on MV_XQT); the o-projection behind the
 * attention stays on the f32 words, gated (MV_TAG_GATE) with f16 weights
 * and not with Q8_0 (passes/awaits.c: a block-typed reader polls as it
 * loads); the norms read the staged t as quads (MV_XQ). With f16 weights
 * nothing is quads. */
START_TEST(awaits_block_typed_quads)
{
    for (int f16 = 0; f16 < 2; f16++) {
        loom_llama_config c;
        tiny(&c, f16 ? LOOM_F16 : LOOM_Q8_0);
        awaits_case a;
        const loom_graph *pg = awaits_compile(&c, &a);
        uint32_t quads = 0, gated = 0, staged = 0, behind_attention = 0;
        for (uint32_t i = 0; i < loom_graph_node_count(pg); i++) {
            const loom_node *n = loom_graph_node(pg, i);
            const char *k = loom_graph_kernel_name(pg, n->kernel);
            staged += loom_form_has(k, "MV_XQ");
            if (!n->tag_in)
                continue;
            const char *pk = loom_graph_kernel_name(pg, loom_graph_node(pg, i - 1)->kernel);
            bool gate = n->tag_in & LOOM_AWAIT_GATE, att = loom_graph_node(pg, i - 1)->op == LOOM_OP_ATTENTION;
            gated += gate;
            behind_attention += att;
            ck_assert_msg(gate == (att && f16), "node %u: %s", i, k);
            ck_assert_msg(loom_form_has(k, "MV_TAG_GATE") == gate, "node %u: %s", i, k);
            ck_assert_msg(loom_form_has(k, "MV_XQT") == (!att && !f16), "node %u: %s", i, k);
            ck_assert_msg(loom_form_has(pk, "MV_YQT") == (!att && !f16), "node %u: %s", i - 1, pk);
            quads += loom_form_has(k, "MV_XQT");
        }
        ck_assert_uint_eq(behind_attention, c.n_layers);
        ck_assert_uint_eq(gated, f16 ? c.n_layers : 0);
        ck_assert_uint_eq(quads, f16 ? 0 : c.n_layers);
        /* every gated FFN and the LM head (tiny's q/k/v, of head_dim 16,
         * are not fused into a norm form) */
        ck_assert_uint_eq(staged, f16 ? 0 : c.n_layers + 1);
        awaits_release(&a);
    }
}
END_TEST

/* A step whose q/k/v fold the staged norm (head_dim 64), as the counted
 * edges need. */
static void counted_config(loom_llama_config *c, loom_dtype t)
{
    tiny(c, t);
    c->dim = 256;
    c->n_heads = 4;
    c->n_kv_heads = 2;
    c->head_dim = 64;
    c->ffn = 512;
    c->max_seq = 16;
}

/* Counted edges (LOOM_ENABLE_COUNTS; passes/awaits.c, "counted edges"),
 * Q8_0: every layer's o-projection counts into a counter its gated FFN and
 * its down projection wait on, and every down projection but the last
 * into one the next layer's q/k/v waits on, all on their MV_CNT forms; a
 * reader right behind its producer keeps the barrier reason it replaces
 * and records no barrier: 2L - 1 fewer, as many more awaited, one group a
 * layer. _FFN or _QKV alone takes its half. The JSON carries the counters
 * through a parse, the text dump names them, the plan key differs, and
 * with f16 weights (thousands of workgroups a residual projection) nothing
 * is counted. */
START_TEST(awaits_counted_edges)
{
    for (int f16 = 0; f16 < 2; f16++) {
        loom_llama_config c;
        counted_config(&c, f16 ? LOOM_F16 : LOOM_Q8_0);
        uint32_t L = c.n_layers;
        awaits_case off, on, ffn, qkv;
        const loom_graph *pg = awaits_compile_with(&c, LOOM_ENABLE_COUNTS, &on);
        awaits_compile(&c, &off);
        awaits_compile_with(&c, LOOM_ENABLE_COUNTS_FFN, &ffn);
        awaits_compile_with(&c, LOOM_ENABLE_COUNTS_QKV, &qkv);
        const loom_plan_stats *son = loom_plan_get_stats(on.plan), *soff = loom_plan_get_stats(off.plan);
        uint32_t want = f16 ? 0 : 2 * L - 1;
        ck_assert_uint_eq(son->barriers + want, soff->barriers);
        ck_assert_uint_eq(son->awaited, soff->awaited + want);
        ck_assert_uint_eq(loom_plan_get_stats(ffn.plan)->barriers + (f16 ? 0 : L), soff->barriers);
        ck_assert_uint_eq(loom_plan_get_stats(qkv.plan)->barriers + (f16 ? 0 : L - 1), soff->barriers);
        loom_hash kon = loom_plan_key(on.plan), koff = loom_plan_key(off.plan);
        ck_assert(kon.lo != koff.lo || kon.hi != koff.hi);
        uint32_t producers = 0, readers = 0, residual = 0;
        for (uint32_t i = 0; i < loom_graph_node_count(pg); i++) {
            const loom_node *n = loom_graph_node(pg, i);
            const char *k = loom_graph_kernel_name(pg, n->kernel);
            ck_assert_msg(loom_form_has(k, "MV_CNT") == (n->count_in || n->count_out), "node %u: %s", i, k);
            if (n->count_out) {
                producers++;
                ck_assert_msg(n->op == LOOM_OP_MATVEC_ADD_STAGE, "node %u: %s", i, k);
                const loom_node *r = loom_graph_node(pg, i + 1);
                ck_assert_uint_eq(r->count_in, n->count_out);
                ck_assert_uint_eq(r->group, n->group);
                ck_assert(r->barrier != LOOM_NONE);
                ck_assert(r->op == LOOM_OP_RMS_NORM_MATVEC_SILU_MUL || r->op == LOOM_OP_RMS_NORM_QKV_ROPE_KV);
            }
            if (!n->count_in)
                continue;
            uint32_t p = i;
            while (p > 0 && loom_graph_node(pg, --p)->count_out != n->count_in) {
            }
            ck_assert_uint_eq(loom_graph_node(pg, p)->count_out, n->count_in);
            readers += p + 1 == i;
            if (p + 1 != i) {   /* the down projection, reading the o-projection's y as r */
                residual++;
                ck_assert_uint_eq(p + 2, i);
                ck_assert_uint_eq(n->op, LOOM_OP_MATVEC_ADD_STAGE);
                ck_assert(n->tag_in);
                const loom_binding *y = loom_node_slot(pg, loom_graph_node(pg, p), 4), *r = loom_node_slot(pg, n, 2);
                ck_assert(y && r && loom_binding_same(y, r));
            }
        }
        ck_assert_uint_eq(producers, want);
        ck_assert_uint_eq(readers, want);
        ck_assert_uint_eq(residual, f16 ? 0 : L);
        if (!f16) {
            loom_str js, js2, txt;
            loom_graph *back = NULL;
            loom_str_init(&js, NULL);
            loom_str_init(&js2, NULL);
            loom_str_init(&txt, NULL);
            ck_assert_int_eq(loom_graph_dump(pg, LOOM_FORMAT_JSON, &js), LOOM_OK);
            ck_assert_ptr_nonnull(strstr(js.data, "\"count_out\": 1"));
            ck_assert_ptr_nonnull(strstr(js.data, "\"count_in\": 1"));
            ck_assert_int_eq(loom_graph_parse_json(js.data, js.len, NULL, &back), LOOM_OK);
            ck_assert_int_eq(loom_graph_verify(back), LOOM_OK);
            ck_assert_int_eq(loom_graph_dump(back, LOOM_FORMAT_JSON, &js2), LOOM_OK);
            ck_assert_str_eq(js.data, js2.data);
            for (uint32_t i = 0; i < loom_graph_node_count(pg); i++) {
                ck_assert_uint_eq(loom_graph_node(pg, i)->count_in, loom_graph_node(back, i)->count_in);
                ck_assert_uint_eq(loom_graph_node(pg, i)->count_out, loom_graph_node(back, i)->count_out);
            }
            /* a reader whose counter nobody counts into is refused */
            loom_graph_node_mut(back, 2)->count_in = 99;
            ck_assert_int_eq(loom_graph_verify(back), LOOM_VERIFY);
            ck_assert_ptr_nonnull(strstr(loom_last_error(), "count_in 99"));
            ck_assert_int_eq(loom_graph_dump(pg, LOOM_FORMAT_TEXT, &txt), LOOM_OK);
            ck_assert_ptr_nonnull(strstr(txt.data, " count=c1"));
            ck_assert_ptr_nonnull(strstr(txt.data, " counted=c1"));
            loom_str_free(&js);
            loom_str_free(&js2);
            loom_str_free(&txt);
            loom_graph_destroy(back);
        }
        awaits_release(&on);
        awaits_release(&off);
        awaits_release(&ffn);
        awaits_release(&qkv);
    }
}
END_TEST

/* A counted producer that loses its count (LOOM_PROBE_DROP_TAG=2: the
 * second tagged or counting producer, layer 0's o-projection, counts
 * nothing in the first copy recorded) is a wait that gives up: the step's
 * wait returns LOOM_TIMEOUT and poll_timeouts counts it. The counter stays
 * behind every later step unless the fallback sets it to what the replays
 * so far added; it does, so the program, recorded again with every
 * barrier, decodes what the CPU reference decodes with no further
 * timeout. The validation layer is on (the runtime keeps the barriers and
 * the counted kernels, which still wait). */
START_TEST(counted_fault_falls_back)
{
    loom_llama_config c;
    counted_config(&c, LOOM_Q8_0);
    loom_llama_weights *w = NULL;
    loom_llama *ref = NULL;
    ck_assert_int_eq(loom_llama_weights_create(&c, &w), LOOM_OK);
    uint32_t v = c.vocab, want[STEPS];
    float *lwant = malloc((size_t)v * STEPS * sizeof(float)), *got = malloc((size_t)v * sizeof(float));
    ck_assert(lwant && got);
    ck_assert_int_eq(loom_llama_create(rt, w, NULL, &ref), LOOM_OK);
    uint32_t tok = 3;
    for (uint32_t s = 0; s < STEPS; s++) {
        ck_assert_int_eq(loom_llama_step(ref, tok, s, lwant + (size_t)s * v, &want[s]), LOOM_OK);
        tok = want[s];
    }
    loom_llama_destroy(ref);
    setenv("LOOM_ENABLE", "counts", 1);
    faulted_then_falls_back(w, "2", lwant, want, got);
    unsetenv("LOOM_ENABLE");
    loom_llama_weights_destroy(w);
    free(lwant);
    free(got);
}
END_TEST

/* The wide attention (head_dim 128) is tagged only for a block-typed
 * o-projection (passes/awaits.c: an f16 one's many workgroups spinning
 * beside it cost more than the barrier): with Q8_0 weights every layer's
 * attention -> o-projection edge is awaited, the attention on its wide
 * tagged form and the o-projection not gated; with f16 weights none is,
 * and the gated FFN edges are awaited either way. */
START_TEST(awaits_wide_attention_block_readers)
{
    for (int f16 = 0; f16 < 2; f16++) {
        loom_llama_config c;
        tiny(&c, f16 ? LOOM_F16 : LOOM_Q8_0);
        c.dim = 256;
        c.n_heads = 2;
        c.n_kv_heads = 1;
        c.head_dim = 128;
        c.ffn = 256;
        awaits_case a;
        const loom_graph *pg = awaits_compile(&c, &a);
        uint32_t gated = 0, attentions = 0, behind_attention = 0;
        for (uint32_t i = 0; i < loom_graph_node_count(pg); i++) {
            const loom_node *n = loom_graph_node(pg, i);
            const char *k = loom_graph_kernel_name(pg, n->kernel);
            if (n->op == LOOM_OP_ATTENTION) {
                attentions++;
                ck_assert_msg(!strncmp(k, "attention_wide", 14), "node %u: %s", i, k);
                ck_assert_msg(loom_form_has(k, "ATT_TAG") == !f16, "node %u: %s", i, k);
            }
            gated += (n->tag_in & LOOM_AWAIT_GATE) != 0;
            behind_attention += n->tag_in && loom_graph_node(pg, i - 1)->op == LOOM_OP_ATTENTION;
        }
        ck_assert_uint_eq(attentions, c.n_layers);
        ck_assert_uint_eq(gated, 0);
        ck_assert_uint_eq(behind_attention, f16 ? 0 : c.n_layers);
        ck_assert_uint_eq(loom_plan_get_stats(a.plan)->awaited, f16 ? c.n_layers : 2 * c.n_layers);
        awaits_release(&a);
    }
}
END_TEST

/* Steps of the tiny f16 model, with the runtime's device options (awaited
 * edges on lavapipe), counting what a step records. */
static void step_counts(loom_rt *r, float *logits, uint32_t *tok, const loom_plan_stats **stats, uint64_t *barriers,
                        uint64_t *polled)
{
    loom_llama *m = NULL;
    ck_assert_int_eq(loom_llama_create(r, weights, NULL, &m), LOOM_OK);
    loom_rt_counters c0, c1;
    ck_assert_int_eq(loom_llama_step(m, 3, 0, logits, tok), LOOM_OK);   /* the first step records */
    loom_rt_get_counters(r, &c0);
    ck_assert_int_eq(loom_llama_step(m, *tok, 1, logits, tok), LOOM_OK);
    loom_rt_get_counters(r, &c1);
    *barriers = c1.barriers - c0.barriers;
    *polled = c1.polled - c0.polled;
    static loom_plan_stats keep;
    keep = *loom_plan_get_stats(loom_llama_plan(m));
    *stats = &keep;
    loom_llama_destroy(m);
}

/* The runtime records what the plan says: without the validation layer a
 * step records the plan's barriers and polls its awaited edges; under it
 * (which cannot see a poll) every awaited edge's barrier is recorded too,
 * and nothing counts as polled. Both decode the same. */
START_TEST(recorded_barriers_follow_the_plan)
{
    uint32_t v = weights->cfg.vocab, t_val, t_plain;
    float *lval = malloc(v * sizeof(float)), *lplain = malloc(v * sizeof(float));
    ck_assert(lval && lplain);
    const loom_plan_stats *st;
    uint64_t barriers, polled;
    step_counts(rt, lval, &t_val, &st, &barriers, &polled);
    ck_assert_uint_gt(st->awaited, 0);
    ck_assert_uint_eq(barriers, st->barriers + st->awaited);
    ck_assert_uint_eq(polled, 0);

    const char *env = getenv("LOOM_VALIDATE");
    char *saved = env ? strdup(env) : NULL;
    unsetenv("LOOM_VALIDATE");
    loom_rt *plain = NULL;
    loom_result rc = loom_rt_create(&(loom_rt_desc){ .validate = false }, &plain);
    if (saved)
        setenv("LOOM_VALIDATE", saved, 1);
    free(saved);
    ck_assert_int_eq(rc, LOOM_OK);
    step_counts(plain, lplain, &t_plain, &st, &barriers, &polled);
    loom_rt_wait_idle(plain);
    loom_rt_destroy(plain);
    ck_assert_uint_gt(st->awaited, 0);
    ck_assert_uint_eq(barriers, st->barriers);
    ck_assert_uint_eq(polled, st->awaited);
    loom_llama_diff d;
    ck_assert_msg(loom_llama_compare(lplain, t_plain, lval, t_val, v, TOL, &d), "max err %g", d.max_abs);
    free(lval);
    free(lplain);
}
END_TEST

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
    ck_assert_int_eq(loom_llama_dry_figures(&c, NULL, NULL, false, &f), LOOM_OK);
    uint64_t layer = (2048ull * 2048 * 2 + 512ull * 2048 * 2 + 3ull * 8192 * 2048) * 2 + 2 * 2048 * 4;
    uint64_t expect = 16 * layer + 32000ull * 2048 * 2 + 2048 * 2 + 2048 * 4;
    ck_assert_uint_eq(f.weight_bytes, expect);
    ck_assert_uint_ge(f.barriers, f.barrier_lower_bound);
    ck_assert(f.levels_per_layer >= 1.0 && f.levels_per_layer < 20.0);
    ck_assert_int_eq(loom_llama_dry_figures(&c, NULL, &(loom_compile_options){ .disable = ALL_OFF }, false, &off),
                     LOOM_OK);
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
    ck_assert_int_eq(loom_llama_dry_figures(&c, NULL, NULL, true, &early), LOOM_OK);
    ck_assert_uint_eq(early.dispatches, f.dispatches + 1);
    ck_assert_uint_eq(early.barriers, f.barriers);
    ck_assert_uint_eq(early.barriers, early.barrier_lower_bound);
    c.n_kv_heads = 5;
    ck_assert_int_eq(loom_llama_dry_figures(&c, NULL, NULL, false, &f), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_llama_preset("13b", &c), LOOM_NOT_FOUND);
}
END_TEST

/* The weight-read floor counts the bytes as stored: q4_k is 144 bytes per
 * 256 weights, q6_k 210; under q4_k_m the LM head and 8 of the 16 layers'
 * attn_v and ffn_down (0, 1, 4, 7, 10, 13, 14, 15) are q6_k. */
START_TEST(dry_figures_count_quantized_bytes)
{
    loom_llama_config c;
    ck_assert_int_eq(loom_llama_preset("1b", &c), LOOM_OK);
    uint64_t q = 2048ull * 2048, kv = 512ull * 2048, mlp = 8192ull * 2048, head = 32000ull * 2048;
    uint64_t norms = 16 * 2 * 2048 * 4 + 2048 * 4;
    loom_llama_figures f;
    ck_assert_int_eq(loom_llama_wtype_parse("q4_k", &c), LOOM_OK);
    ck_assert_int_eq(loom_llama_dry_figures(&c, NULL, NULL, false, &f), LOOM_OK);
    uint64_t layer = (2 * q + 2 * kv + 3 * mlp) / 256 * 144;
    ck_assert_uint_eq(f.weight_bytes, 16 * layer + head / 256 * 144 + 2048 / 256 * 144 + norms);
    ck_assert_int_eq(loom_llama_wtype_parse("q4_k_m", &c), LOOM_OK);
    ck_assert_int_eq(loom_llama_dry_figures(&c, NULL, NULL, false, &f), LOOM_OK);
    uint64_t more = (kv + mlp) / 256 * 210 + (2 * q + kv + 2 * mlp) / 256 * 144;
    ck_assert_uint_eq(f.weight_bytes, 8 * layer + 8 * more + head / 256 * 210 + 2048 / 256 * 144 + norms);
}
END_TEST

/* llama.cpp's Q4_K_M choice, layer by layer, and the fallbacks for rows
 * that are not whole blocks. */
START_TEST(matrix_types_follow_the_mix)
{
    loom_llama_config c;
    ck_assert_int_eq(loom_llama_preset("7b", &c), LOOM_OK);
    ck_assert_int_eq(loom_llama_wtype_parse("q4_k_m", &c), LOOM_OK);
    ck_assert_str_eq(loom_llama_wtype_name(&c), "q4_k_m");
    /* 32 layers: 0-3 and 28-31, and 6, 9, ..., 27 between. */
    for (uint32_t l = 0; l < 32; l++) {
        bool more = l < 4 || l >= 28 || (l >= 4 && (l - 4) % 3 == 2);
        loom_dtype want = more ? LOOM_Q6_K : LOOM_Q4_K;
        ck_assert_msg(loom_llama_matrix_type(&c, LOOM_LLAMA_WV, l) == want, "attn_v of layer %u", l);
        ck_assert_msg(loom_llama_matrix_type(&c, LOOM_LLAMA_WD, l) == want, "ffn_down of layer %u", l);
        ck_assert_int_eq(loom_llama_matrix_type(&c, LOOM_LLAMA_WK, l), LOOM_Q4_K);
        ck_assert_int_eq(loom_llama_matrix_type(&c, LOOM_LLAMA_WU, l), LOOM_Q4_K);
    }
    ck_assert_int_eq(loom_llama_matrix_type(&c, LOOM_LLAMA_OUT, 0), LOOM_Q6_K);
    ck_assert_int_eq(loom_llama_matrix_type(&c, LOOM_LLAMA_EMBED, 0), LOOM_Q4_K);
    char buf[128];
    ck_assert_str_eq(loom_llama_describe_types(&c, NULL, buf, sizeof buf), "q4_k x 193, q6_k x 33");
    /* tiny: ffn_down's rows of 688 are not whole blocks of 256 nor 32. */
    loom_llama_default_config(&c);
    ck_assert_int_eq(loom_llama_wtype_parse("q4_k", &c), LOOM_OK);
    ck_assert_int_eq(loom_llama_matrix_type(&c, LOOM_LLAMA_WD, 0), LOOM_F16);
    ck_assert_int_eq(loom_llama_matrix_type(&c, LOOM_LLAMA_WU, 0), LOOM_Q4_K);
    ck_assert_str_eq(loom_llama_describe_types(&c, NULL, buf, sizeof buf), "q4_k x 26, f16 x 4");
    c.ffn = 544;   /* 17 x 32: q8_0 */
    ck_assert_int_eq(loom_llama_matrix_type(&c, LOOM_LLAMA_WD, 0), LOOM_Q8_0);
    ck_assert_int_eq(loom_llama_wtype_parse("q4_0", &c), LOOM_OK);
    ck_assert_int_eq(loom_llama_matrix_type(&c, LOOM_LLAMA_WD, 0), LOOM_Q4_0);
    c.ffn = 688;
    ck_assert_int_eq(loom_llama_matrix_type(&c, LOOM_LLAMA_WD, 0), LOOM_F16);
    ck_assert_int_eq(loom_llama_wtype_parse("u32", &c), LOOM_NOT_FOUND);
    ck_assert_int_eq(loom_llama_wtype_parse("q5_k", &c), LOOM_NOT_FOUND);
    /* A mix over another wtype is not a config. */
    c.wtype = LOOM_Q6_K;
    c.mix = LOOM_LLAMA_MIX_Q4_K_M;
    ck_assert_int_eq(loom_llama_config_check(&c), LOOM_INVALID_ARGUMENT);
}
END_TEST

/* Quantized models: dim 256 and ffn 512, so every matrix is whole blocks
 * of the type asked for (under q4_k_m, layer 0's attn_v and ffn_down are
 * q4_k, layer 1's q6_k, as llama.cpp's rule gives for two layers); the
 * GPU reads the blocks, the reference their dequantized values. */
static const char *const quant_types[] = { "q8_0", "q4_0", "q4_k", "q6_k", "q4_k_m" };

static void setup_quantized(const char *wtype)
{
    loom_llama_config c;
    tiny(&c, LOOM_F32);
    c.dim = 256;
    c.ffn = 512;
    c.head_dim = 64;
    ck_assert_int_eq(loom_llama_wtype_parse(wtype, &c), LOOM_OK);
    ck_assert_int_eq(loom_rt_create(&(loom_rt_desc){ .validate = true }, &rt), LOOM_OK);
    ck_assert_int_eq(loom_llama_weights_create(&c, &weights), LOOM_OK);
    for (int k = 0; k < LOOM_LLAMA_MAT_COUNT; k++)
        ck_assert(loom_dtype_is_block(loom_llama_weights_matrix(weights, (loom_llama_mat)k, 1)->type));
}

START_TEST(gpu_matches_reference_quantized)
{
    setup_quantized(quant_types[_i]);
    check_reference();
}
END_TEST

/* The reference decodes a quantized model: near the f32 model of the same
 * draws (the quantization error is all that differs), and exactly as an
 * f32 model holding the dequantized values. */
START_TEST(reference_decodes_quantized)
{
    loom_llama_config c;
    tiny(&c, LOOM_F32);
    c.dim = 256;
    c.ffn = 512;
    c.head_dim = 64;
    loom_llama_weights *f32 = NULL, *q = NULL, *deq = NULL;
    ck_assert_int_eq(loom_llama_weights_create(&c, &f32), LOOM_OK);
    ck_assert_int_eq(loom_llama_wtype_parse(quant_types[_i], &c), LOOM_OK);
    ck_assert_int_eq(loom_llama_weights_create(&c, &q), LOOM_OK);
    /* deq: the f32 model's header over the quantized model's f32 values. */
    deq = malloc(sizeof *deq);
    ck_assert_ptr_nonnull(deq);
    *deq = *q;
    deq->cfg.wtype = LOOM_F32;
    deq->cfg.mix = LOOM_LLAMA_MIX_NONE;
    loom_llama_layer *layers = malloc(c.n_layers * sizeof *layers);
    ck_assert_ptr_nonnull(layers);
    memcpy(layers, q->layers, c.n_layers * sizeof *layers);
    deq->layers = layers;
    for (int k = 0; k < LOOM_LLAMA_MAT_COUNT; k++)
        for (uint32_t l = 0; l < (loom_llama_mat_per_layer((loom_llama_mat)k) ? c.n_layers : 1); l++) {
            loom_llama_matrix *mx = (loom_llama_matrix *)loom_llama_weights_matrix(deq, (loom_llama_mat)k, l);
            mx->type = LOOM_F32;
            mx->raw = NULL;
        }
    loom_llama_ref *rf = NULL, *rq = NULL, *rd = NULL;
    ck_assert_int_eq(loom_llama_ref_create(f32, &rf), LOOM_OK);
    ck_assert_int_eq(loom_llama_ref_create(q, &rq), LOOM_OK);
    ck_assert_int_eq(loom_llama_ref_create(deq, &rd), LOOM_OK);
    uint32_t v = c.vocab, tok = 3;
    float *lf = malloc(v * sizeof(float)), *lq = malloc(v * sizeof(float)), *ld = malloc(v * sizeof(float));
    ck_assert(lf && lq && ld);
    for (uint32_t s = 0; s < STEPS; s++) {
        uint32_t af, aq, ad;
        ck_assert_int_eq(loom_llama_ref_step(rf, tok, s, lf, &af), LOOM_OK);
        ck_assert_int_eq(loom_llama_ref_step(rq, tok, s, lq, &aq), LOOM_OK);
        ck_assert_int_eq(loom_llama_ref_step(rd, tok, s, ld, &ad), LOOM_OK);
        ck_assert_int_eq(memcmp(lq, ld, v * sizeof(float)), 0);
        float scale = 0, err = 0;
        for (uint32_t i = 0; i < v; i++) {
            scale = fmaxf(scale, fabsf(lf[i]));
            err = fmaxf(err, fabsf(lq[i] - lf[i]));
            ck_assert(isfinite(lq[i]));
        }
        ck_assert_msg(err > 0 && err < 0.25f * scale, "%s step %u: |quantized - f32| %g of logits up to %g",
                      quant_types[_i], s, err, scale);
        tok = af;
    }
    free(lf);
    free(lq);
    free(ld);
    loom_llama_ref_destroy(rf);
    loom_llama_ref_destroy(rq);
    loom_llama_ref_destroy(rd);
    free(layers);
    free(deq);
    loom_llama_weights_destroy(q);
    loom_llama_weights_destroy(f32);
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
    /* Matrices that do not fit: a dtype whose blocks do not divide the
     * rows (64 wide, q4_k), a missing upload, a wrong shape; each named. */
    loom_llama_weights bad = *weights;
    loom_llama_layer layer1 = weights->layers[1];
    loom_llama_layer *layers = malloc(weights->cfg.n_layers * sizeof *layers);
    ck_assert_ptr_nonnull(layers);
    memcpy(layers, weights->layers, weights->cfg.n_layers * sizeof *layers);
    bad.layers = layers;
    layers[1].wv.type = LOOM_Q4_K;
    ck_assert_int_eq(loom_llama_create(rt, &bad, NULL, &none), LOOM_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(loom_last_error(), "l1.wv"));
    layers[1] = layer1;
    layers[1].wo.type = LOOM_F16;   /* f16 with no f16 bits to upload */
    ck_assert_int_eq(loom_llama_create(rt, &bad, NULL, &none), LOOM_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(loom_last_error(), "l1.wo"));
    layers[1] = layer1;
    bad.out.rows--;
    ck_assert_int_eq(loom_llama_create(rt, &bad, NULL, &none), LOOM_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(loom_last_error(), "out"));
    ck_assert_ptr_null(none);
    free(layers);
}
END_TEST

/* Multi-token steps: bad rows are refused naming the field; a prompt in
 * steps of 5, 2, 3, 5, 2 and 7 rows compiles one plan per bucket (8, 2, 4)
 * and replays it from then on, so the last three compile nothing; the token
 * after each step is the reference's after the same ids, and so is the
 * decode step's after the last. */
START_TEST(row_steps)
{
    loom_llama *m = NULL;
    ck_assert_int_eq(loom_llama_create(rt, weights, &(loom_llama_desc){ .chain = true }, &m), LOOM_OK);
    const loom_llama_config *c = &weights->cfg;
    uint32_t ids[24];
    for (uint32_t i = 0; i < 24; i++)
        ids[i] = (i * 37 + 5) % c->vocab;
    ck_assert_int_eq(loom_llama_set_prompt(m, ids, 24, 0), LOOM_OK);
    uint32_t bad_id = c->vocab;
    ck_assert_int_eq(loom_llama_set_prompt(m, &bad_id, 1, 3), LOOM_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(loom_last_error(), "position 3"));
    ck_assert_int_eq(loom_llama_submit_rows(m, 0, 0, NULL), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_llama_submit_rows(m, 0, LOOM_LLAMA_MAX_ROWS + 1, NULL), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_llama_submit_rows(m, c->max_seq - 3, 4, NULL), LOOM_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(loom_last_error(), "max_seq"));
    ck_assert_int_eq(loom_llama_steps(m), 0);

    loom_llama_ref *r = NULL;
    ck_assert_int_eq(loom_llama_ref_create(weights, &r), LOOM_OK);
    uint32_t chunks[][2] = { { 0, 5 }, { 5, 2 }, { 7, 3 }, { 10, 5 }, { 15, 2 }, { 17, 7 } };
    uint64_t h0, m0, h1, m1;
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        uint32_t pos = chunks[i][0], rows = chunks[i][1], index = 0, tok = 0, want = 0;
        if (i == 3)
            loom_llama_cache_counts(m, &h0, &m0);
        ck_assert_int_eq(loom_llama_submit_rows(m, pos, rows, &index), LOOM_OK);
        ck_assert_int_eq(loom_llama_collect(m, index, &tok, NULL), LOOM_OK);
        for (uint32_t j = pos; j < pos + rows; j++)
            ck_assert_int_eq(loom_llama_ref_step(r, ids[j], j, NULL, &want), LOOM_OK);
        ck_assert_msg(tok == want, "chunk [%u, %u): token %u, reference %u", pos, pos + rows, tok, want);
    }
    /* Steps 3..5 (buckets 8, 2 and 8) were all seen before: no compile. */
    loom_llama_cache_counts(m, &h1, &m1);
    ck_assert_uint_eq(m1 - m0, 0);
    ck_assert_uint_eq(h1 - h0, 3);
    /* The decode step after it goes on from the last chunk's token. */
    uint32_t index = 0, tok = 0, want = 0, last = 0;
    ck_assert_int_eq(loom_llama_collect(m, loom_llama_steps(m) - 1, &last, NULL), LOOM_OK);
    ck_assert_int_eq(loom_llama_submit(m, 0, 24, &index), LOOM_OK);
    ck_assert_int_eq(loom_llama_collect(m, index, &tok, NULL), LOOM_OK);
    ck_assert_int_eq(loom_llama_ref_step(r, last, 24, NULL, &want), LOOM_OK);
    ck_assert_uint_eq(tok, want);
    loom_llama_ref_destroy(r);
    loom_llama_destroy(m);
}
END_TEST

/* A verifying step: every row's argmax is the reference's after that
 * row's id (3 rows in a bucket of 4, 1 row in a bucket of 2, after a
 * prefill of 6); the step's own token is the last row's. */
START_TEST(verify_rows)
{
    loom_llama *m = NULL;
    ck_assert_int_eq(loom_llama_create(rt, weights, &(loom_llama_desc){ .chain = true }, &m), LOOM_OK);
    const loom_llama_config *c = &weights->cfg;
    uint32_t ids[10];
    for (uint32_t i = 0; i < 10; i++)
        ids[i] = (i * 53 + 11) % c->vocab;
    ck_assert_int_eq(loom_llama_set_prompt(m, ids, 10, 0), LOOM_OK);
    loom_llama_ref *r = NULL;
    ck_assert_int_eq(loom_llama_ref_create(weights, &r), LOOM_OK);
    uint32_t index = 0, want = 0, tok = 0;
    ck_assert_int_eq(loom_llama_submit_rows(m, 0, 6, &index), LOOM_OK);
    for (uint32_t j = 0; j < 6; j++)
        ck_assert_int_eq(loom_llama_ref_step(r, ids[j], j, NULL, &want), LOOM_OK);
    uint32_t spans[][2] = { { 6, 3 }, { 9, 1 } };
    for (int s = 0; s < 2; s++) {
        uint32_t pos = spans[s][0], rows = spans[s][1], got[4] = { 0 };
        ck_assert_int_eq(loom_llama_submit_verify(m, pos, rows, &index), LOOM_OK);
        ck_assert_int_eq(loom_llama_collect(m, index, &tok, NULL), LOOM_OK);
        ck_assert_int_eq(loom_llama_read_row_tokens(m, got, rows), LOOM_OK);
        for (uint32_t j = 0; j < rows; j++) {
            ck_assert_int_eq(loom_llama_ref_step(r, ids[pos + j], pos + j, NULL, &want), LOOM_OK);
            ck_assert_msg(got[j] == want, "verify [%u, +%u) row %u: %u, reference %u", pos, rows, j, got[j], want);
        }
        ck_assert_uint_eq(tok, got[rows - 1]);
    }
    loom_llama_ref_destroy(r);
    loom_llama_destroy(m);
}
END_TEST

/* The T-row graph as captured (unfused MATMUL, ADD, SILU_MUL) compiles
 * with the residual adds folded into MATMUL_ADD and the gate into
 * MATMUL_SILU_MUL, for f16 and Q4_K_M weights; without the fuse pass
 * they stay apart. Device-free. */
START_TEST(row_graph_fuses)
{
    const char *wt[] = { "f16", "q4_k_m" };
    for (int w = 0; w < 2; w++)
        for (int fuse = 0; fuse < 2; fuse++) {
            loom_llama_config c;
            ck_assert_int_eq(loom_llama_preset("1b", &c), LOOM_OK);
            ck_assert_int_eq(loom_llama_wtype_parse(wt[w], &c), LOOM_OK);
            c.n_layers = 3;
            loom_llama *m = NULL;
            ck_assert_int_eq(loom_llama_create_dry(&c, NULL, &m), LOOM_OK);
            loom_graph *g = NULL;
            ck_assert_int_eq(loom_graph_create(&(loom_graph_desc){ .name = "rows" }, &g), LOOM_OK);
            ck_assert_int_eq(loom_llama_capture_rows(m, g, 24), LOOM_OK);
            loom_plan *plan = NULL;
            loom_compile_options o = { .disable = fuse ? 0 : LOOM_DISABLE_FUSE };
            ck_assert_msg(loom_compile(g, &o, &plan) == LOOM_OK, "%s", loom_last_error());
            const loom_graph *pg = loom_plan_graph(plan);
            uint32_t count[LOOM_OP_COUNT] = { 0 };
            for (uint32_t i = 0; i < loom_graph_node_count(pg); i++)
                count[loom_graph_node(pg, i)->op]++;
            ck_assert_uint_eq(count[LOOM_OP_MATMUL_ADD], fuse ? 2 * c.n_layers : 0);
            ck_assert_uint_eq(count[LOOM_OP_MATMUL_SILU_MUL], fuse ? c.n_layers : 0);
            ck_assert_uint_eq(count[LOOM_OP_SILU_MUL], fuse ? 0 : c.n_layers);
            ck_assert_uint_eq(count[LOOM_OP_MATMUL], fuse ? 3 * c.n_layers : 7 * c.n_layers);
            ck_assert_uint_eq(count[LOOM_OP_ATTENTION_ROWS], c.n_layers);
            loom_plan_release(plan);
            loom_graph_destroy(g);
            loom_llama_destroy(m);
        }
}
END_TEST

/* Early logs: a decode step between two multi-token steps is collected
 * after the second was submitted, so its token must reach its slot (the
 * second logs it first, as an early-log decode step would). */
START_TEST(row_steps_early_log)
{
    loom_llama *m = NULL;
    ck_assert_int_eq(loom_llama_create(rt, weights, &(loom_llama_desc){ .chain = true, .early_log = true }, &m),
                     LOOM_OK);
    const loom_llama_config *c = &weights->cfg;
    uint32_t ids[9];
    for (uint32_t i = 0; i < 9; i++)
        ids[i] = (i * 29 + 7) % c->vocab;
    ck_assert_int_eq(loom_llama_set_prompt(m, ids, 9, 0), LOOM_OK);
    uint32_t first = 0, mid = 0, last = 0, t0 = 0, t1 = 0, t2 = 0, want = 0;
    ck_assert_msg(loom_llama_submit_rows(m, 0, 5, &first) == LOOM_OK, "%s", loom_last_error());
    ck_assert_int_eq(loom_llama_submit(m, 0, 5, &mid), LOOM_OK);
    ck_assert_int_eq(loom_llama_submit_rows(m, 6, 3, &last), LOOM_OK);
    ck_assert_int_eq(loom_llama_collect(m, first, &t0, NULL), LOOM_OK);
    ck_assert_int_eq(loom_llama_collect(m, mid, &t1, NULL), LOOM_OK);
    ck_assert_int_eq(loom_llama_collect(m, last, &t2, NULL), LOOM_OK);
    loom_llama_ref *r = NULL;
    ck_assert_int_eq(loom_llama_ref_create(weights, &r), LOOM_OK);
    for (uint32_t j = 0; j < 5; j++)
        ck_assert_int_eq(loom_llama_ref_step(r, ids[j], j, NULL, &want), LOOM_OK);
    ck_assert_uint_eq(t0, want);
    ck_assert_int_eq(loom_llama_ref_step(r, t0, 5, NULL, &want), LOOM_OK);
    ck_assert_uint_eq(t1, want);
    for (uint32_t j = 6; j < 9; j++)
        ck_assert_int_eq(loom_llama_ref_step(r, ids[j], j, NULL, &want), LOOM_OK);
    ck_assert_uint_eq(t2, want);
    loom_llama_ref_destroy(r);
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

/* Row by row: the draws, then (for any dtype but f32) the row as
 * loom_quantize_row packs it, which raw must hold byte for byte, and f32
 * what those bytes decode to. */
static void expect_matrix(const loom_llama_matrix *mx, uint32_t rows, uint32_t cols, float scale, loom_dtype t,
                          const char *name)
{
    ck_assert_uint_eq(mx->rows, rows);
    ck_assert_uint_eq(mx->cols, cols);
    ck_assert_msg(mx->type == t, "%s: dtype %s, want %s", name, loom_dtype_name(mx->type), loom_dtype_name(t));
    ck_assert(t == LOOM_F32 ? mx->raw == NULL : mx->raw != NULL);
    size_t rb = (size_t)loom_dtype_row_bytes(t, cols);
    float *row = malloc(cols * sizeof *row);
    uint8_t *packed = malloc(rb);
    ck_assert(row && packed);
    /* One check a row: a check point per element would cost a pipe write
     * each. */
    for (uint32_t r = 0; r < rows; r++) {
        for (uint32_t j = 0; j < cols; j++)
            row[j] = draw() * scale;
        if (t != LOOM_F32) {
            ck_assert_int_eq(loom_quantize_row(t, row, cols, packed), LOOM_OK);
            if (memcmp(packed, (const uint8_t *)mx->raw + r * rb, rb))
                ck_abort_msg("%s row %u: raw bytes differ from the row's draws packed as %s", name, r,
                             loom_dtype_name(t));
            ck_assert_int_eq(loom_dequantize_row(t, packed, cols, row), LOOM_OK);
        }
        if (memcmp(row, mx->f32 + (size_t)r * cols, cols * sizeof *row))
            ck_abort_msg("%s row %u: f32 values differ from one pass's draws (as %s)", name, r, loom_dtype_name(t));
    }
    free(row);
    free(packed);
}

static void expect_norm(const float *g, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++) {
        float v = 1.0f + 0.25f * draw();
        if (g[i] != v)
            ck_abort_msg("%s[%u]: %.9g, one pass draws %.9g", name, i, g[i], v);
    }
}

/* wtype "f32", "q4_k_m", ... */
static void weights_are_one_stream(const char *wtype)
{
    /* Matrices of 0.2M-1.6M elements: split over every core there is (at
     * least 64K elements a thread, whole rows). Block types get widths of
     * whole blocks, but for the mix's fallbacks: ffn_down of rows of 800
     * is q8_0 under a K-quant, f16 under q4_0 and q8_0. */
    loom_llama_config c;
    loom_llama_default_config(&c);
    ck_assert_int_eq(loom_llama_wtype_parse(wtype, &c), LOOM_OK);
    bool blocks = loom_dtype_is_block(c.wtype);
    c.dim = blocks ? 512 : 520;
    c.n_layers = blocks ? 3 : 2;
    c.n_heads = 8;
    c.n_kv_heads = 2;
    c.head_dim = 64;
    c.ffn = blocks ? 800 : 3000;
    c.vocab = 1001;
    loom_llama_weights *w = NULL;
    ck_assert_int_eq(loom_llama_weights_create(&c, &w), LOOM_OK);
    draw_state = c.seed;
    uint32_t qd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim;
    float sd = 1.0f / sqrtf((float)c.dim), sq = 1.0f / sqrtf((float)qd), sf = 1.0f / sqrtf((float)c.ffn);
#define T(k, l) loom_llama_matrix_type(&c, LOOM_LLAMA_##k, l)
    expect_matrix(&w->embed, c.vocab, c.dim, 1.0f, T(EMBED, 0), "embed");
    for (uint32_t l = 0; l < c.n_layers; l++) {
        const loom_llama_layer *L = &w->layers[l];
        expect_norm(L->attn_norm, c.dim, "attn_norm");
        expect_norm(L->ffn_norm, c.dim, "ffn_norm");
        expect_matrix(&L->wq, qd, c.dim, sd, T(WQ, l), "wq");
        expect_matrix(&L->wk, kvd, c.dim, sd, T(WK, l), "wk");
        expect_matrix(&L->wv, kvd, c.dim, sd, T(WV, l), "wv");
        expect_matrix(&L->wo, c.dim, qd, sq, T(WO, l), "wo");
        expect_matrix(&L->wg, c.ffn, c.dim, sd, T(WG, l), "wg");
        expect_matrix(&L->wu, c.ffn, c.dim, sd, T(WU, l), "wu");
        expect_matrix(&L->wd, c.dim, c.ffn, sf, T(WD, l), "wd");
    }
    expect_norm(w->final_norm, c.dim, "final_norm");
    expect_matrix(&w->out, c.vocab, c.dim, sd, T(OUT, 0), "out");
#undef T
    loom_llama_weights_destroy(w);
}

static const char *const wtypes[] = { "f32", "f16", "q8_0", "q4_0", "q4_k", "q6_k", "q4_k_m" };

START_TEST(weights_are_one_stream_of_each_type) { weights_are_one_stream(wtypes[_i]); }
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

static double wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* The warm-up rule's minimum counts from the end of its first window: the
 * host time before that (a plan compiled, its pipelines made, with the GPU
 * idle) is no warm-up. Here the warm-up "began" 5 s before its first
 * window, and windows of equal sleeps agree: a rule counting from t0 ends
 * at the second window, 20 ms after the first; it must not end before
 * min_s have passed since the first window (it may run on if no two
 * windows agree, up to the cap). */
START_TEST(warm_up_minimum_follows_first_window)
{
    loom_rt *r;
    ck_assert_int_eq(loom_rt_create(&(loom_rt_desc){ .validate = false }, &r), LOOM_OK);
    const double min_s = 0.3;
    loom_llama_warm w = { .t0 = wall_us() - 5e6 };
    double first_end = 0, over_at = 0;
    for (uint32_t i = 0; i < 60 && !over_at; i++) {
        loom_llama_warm_begin(r, &w);
        nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 * 1000 }, NULL);
        bool over = loom_llama_warm_end(r, &w, 1, min_s, 60.0);
        double now = wall_us();
        if (i == 0)
            first_end = now;
        if (over)
            over_at = now;
    }
    if (over_at > 0)
        ck_assert_msg((over_at - first_end) / 1e6 >= min_s - 0.005,
                      "the warm-up ended %.3f s after its first window (minimum %.1f s)",
                      (over_at - first_end) / 1e6, min_s);
    loom_rt_destroy(r);
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
    tcase_add_test(tc, poll_fault_falls_back);
    tcase_add_test(tc, awaits_marks_the_edges);
    tcase_add_test(tc, qkv_await_marks_the_edge);
    tcase_add_test(tc, awaits_block_typed_quads);
    tcase_add_test(tc, awaits_counted_edges);
    tcase_add_test(tc, counted_fault_falls_back);
    tcase_add_test(tc, awaits_wide_attention_block_readers);
    tcase_add_test(tc, recorded_barriers_follow_the_plan);
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
    tc = tcase_create("rows");
    tcase_add_checked_fixture(tc, setup_rows, teardown);
    tcase_add_test(tc, row_steps);
    tcase_add_test(tc, row_graph_fuses);
    tcase_add_test(tc, row_steps_early_log);
    tcase_add_test(tc, verify_rows);
    suite_add_tcase(s, tc);
    tc = tcase_create("quantized");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_loop_test(tc, gpu_matches_reference_quantized, 0, sizeof quant_types / sizeof quant_types[0]);
    suite_add_tcase(s, tc);
    tc = tcase_create("config");
    tcase_add_test(tc, config_is_checked);
    tcase_add_test(tc, warm_up_minimum_follows_first_window);
    tcase_add_test(tc, dry_figures_of_1b);
    tcase_add_test(tc, dry_figures_count_quantized_bytes);
    tcase_add_test(tc, matrix_types_follow_the_mix);
    tcase_add_loop_test(tc, reference_decodes_quantized, 0, sizeof quant_types / sizeof quant_types[0]);
    tcase_add_loop_test(tc, weights_are_one_stream_of_each_type, 0, sizeof wtypes / sizeof wtypes[0]);
    suite_add_tcase(s, tc);
    return s;
}

void loom_test_register(loom_test_runner *r, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    loom_test_add_suite(r, llama_suite());
}
