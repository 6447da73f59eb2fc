/* llama_demo: greedy decoding with the example model on the default Vulkan
 * device ($LOOM_DEVICE overrides), checking every step's logits against the
 * CPU reference and printing what the compiler made of the step graph.
 * Exits 0 when every step matches and the validation layer (if on) stayed
 * silent, 1 on a mismatch or error, 2 on bad arguments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "llama.h"

#define ALL_OFF (LOOM_DISABLE_FUSE | LOOM_DISABLE_REORDER | LOOM_DISABLE_BARRIERS | LOOM_DISABLE_LIFETIMES)
#define TOLERANCE 2e-3f

typedef struct opts {
    loom_llama_config cfg;
    uint32_t steps, token;
    bool chain, no_opt, quiet, profile;
    const char *device;
} opts;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: llama_demo [options]\n"
            "  --steps N       decode steps (default 16, at most max-seq)\n"
            "  --token T       start token (default 1)\n"
            "  --f16           f16 weights (default f32)\n"
            "  --chain         feed each step's argmax to the next on the GPU\n"
            "  --no-opt        compile with fuse, reorder, barriers, lifetimes off\n"
            "  --layers L --dim D --heads H --kv-heads K --head-dim E --ffn F\n"
            "  --vocab V --max-seq S --seed N   model shape (head-dim defaults to dim/heads)\n"
            "  --device NAME   Vulkan device index or name substring\n"
            "  --quiet         no per-step lines\n");
}

static bool parse_u32(const char *s, uint32_t *out)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || v > 0xffffffffUL)
        return false;
    *out = (uint32_t)v;
    return true;
}

/* Returns -1 to go on, else the exit code. */
static int parse(int argc, char **argv, opts *o)
{
    loom_llama_default_config(&o->cfg);
    o->steps = 16;
    o->token = 1;
    bool head_dim_set = false, dims_set = false;
    static const char *const names[] = { "--layers", "--dim", "--heads", "--kv-heads", "--head-dim",
                                         "--ffn", "--vocab", "--max-seq", "--steps", "--token" };
    uint32_t *slots[] = { &o->cfg.n_layers, &o->cfg.dim, &o->cfg.n_heads, &o->cfg.n_kv_heads, &o->cfg.head_dim,
                          &o->cfg.ffn, &o->cfg.vocab, &o->cfg.max_seq, &o->steps, &o->token };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--f16")) { o->cfg.wtype = LOOM_F16; continue; }
        if (!strcmp(a, "--chain")) { o->chain = true; continue; }
        if (!strcmp(a, "--no-opt")) { o->no_opt = true; continue; }
        if (!strcmp(a, "--quiet")) { o->quiet = true; continue; }
        if (!strcmp(a, "--profile")) { o->profile = true; continue; }
        size_t k = 0;
        while (k < sizeof names / sizeof names[0] && strcmp(a, names[k]))
            k++;
        bool known = k < sizeof names / sizeof names[0] || !strcmp(a, "--device") || !strcmp(a, "--seed");
        if (!known || i + 1 >= argc) {
            fprintf(stderr, "llama_demo: %s %s\n", a, known ? "needs a value" : "is not an option");
            usage(stderr);
            return 2;
        }
        if (!strcmp(a, "--device")) { o->device = argv[++i]; continue; }
        if (!strcmp(a, "--seed")) {
            o->cfg.seed = strtoull(argv[++i], NULL, 10);
            continue;
        }
        if (!parse_u32(argv[i + 1], slots[k])) {
            fprintf(stderr, "llama_demo: bad option %s %s\n", a, argv[i + 1]);
            usage(stderr);
            return 2;
        }
        head_dim_set |= slots[k] == &o->cfg.head_dim;
        dims_set |= slots[k] == &o->cfg.dim || slots[k] == &o->cfg.n_heads;
        i++;
    }
    if (dims_set && !head_dim_set && o->cfg.n_heads)
        o->cfg.head_dim = o->cfg.dim / o->cfg.n_heads;
    if (o->cfg.n_kv_heads > o->cfg.n_heads)
        o->cfg.n_kv_heads = o->cfg.n_heads;
    if (loom_llama_config_check(&o->cfg)) {
        fprintf(stderr, "llama_demo: %s\n", loom_last_error());
        return 2;
    }
    if (o->steps == 0 || o->steps > o->cfg.max_seq || o->token >= o->cfg.vocab) {
        fprintf(stderr, "llama_demo: need 1 <= steps <= max-seq (%u) and token < vocab (%u)\n", o->cfg.max_seq,
                o->cfg.vocab);
        return 2;
    }
    return -1;
}

/* GPU time of the last replay by op kind (timestamps after every node). */
static loom_result print_profile(loom_rt *rt, loom_llama *m)
{
    const loom_graph *g = loom_plan_graph(loom_llama_plan(m));
    uint32_t n = loom_graph_node_count(g);
    double *us = calloc(n ? n : 1, sizeof *us), total = 0, by_op[LOOM_OP_COUNT] = { 0 };
    uint32_t count[LOOM_OP_COUNT] = { 0 }, after_barrier[LOOM_OP_COUNT] = { 0 };
    if (!us)
        return loom_fail(LOOM_OUT_OF_MEMORY, "profile: out of memory");
    loom_result rc = loom_rt_program_timings(rt, loom_llama_program(m), us, n, &total);
    for (uint32_t i = 0; i < n && !rc; i++) {
        const loom_node *node = loom_graph_node(g, i);
        by_op[node->op] += us[i];
        count[node->op]++;
        after_barrier[node->op] += node->barrier != LOOM_NONE;
    }
    if (!rc) {
        printf("GPU time of one step: %.1f us (timestamps after every node; a barrier's drain is charged to the "
               "node after it)\n%-18s %6s %9s %9s %8s\n", total, "op", "nodes", "after-bar", "us", "us/node");
        for (int op = 0; op < LOOM_OP_COUNT; op++)
            if (count[op])
                printf("%-18s %6u %9u %9.1f %8.2f\n", loom_op_name((loom_op)op), count[op], after_barrier[op],
                       by_op[op], by_op[op] / count[op]);
    }
    free(us);
    return rc;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Barrier count of the step graph compiled with every optimization off. */
static loom_result unoptimized_stats(loom_llama *m, loom_plan_stats *out)
{
    loom_graph *g = NULL;
    loom_plan *p = NULL;
    loom_result rc = loom_graph_create(&(loom_graph_desc){ .name = "llama_step" }, &g);
    if (!rc)
        rc = loom_llama_capture(m, g);
    if (!rc)
        rc = loom_compile(g, &(loom_compile_options){ .disable = ALL_OFF }, &p);
    if (!rc)
        *out = *loom_plan_get_stats(p);
    loom_plan_release(p);
    loom_graph_destroy(g);
    return rc;
}

static void print_stats(const loom_plan_stats *s, const loom_plan_stats *u)
{
    printf("plan: %u captured nodes -> %u dispatches in %u groups, %u fused chains\n", s->captured_nodes,
           s->dispatches, s->groups, s->fused_chains);
    printf("barriers: %u (lower bound %u); unoptimized plan: %u barriers, %u dispatches\n", s->barriers,
           s->barrier_lower_bound, u->barriers, u->dispatches);
    printf("arena: %llu bytes packed vs %llu unpacked (lower bound %llu)\n", (unsigned long long)s->arena_bytes,
           (unsigned long long)s->scratch_bytes, (unsigned long long)s->arena_lower_bound);
}

static int run(const opts *o, loom_rt *rt)
{
    const loom_llama_config *c = &o->cfg;
    loom_llama_weights *w = NULL;
    loom_llama_ref *ref = NULL;
    loom_llama *m = NULL;
    float *gl = malloc(c->vocab * sizeof(float)), *rl = malloc(c->vocab * sizeof(float));
    int status = 1;
    loom_compile_options copts = { .disable = o->no_opt ? ALL_OFF : 0 };
    loom_result rc = !gl || !rl ? loom_fail(LOOM_OUT_OF_MEMORY, "logits") : LOOM_OK;
    if (!rc)
        rc = loom_llama_weights_create(c, &w);
    if (!rc)
        rc = loom_llama_ref_create(w, &ref);
    if (!rc)
        rc = loom_llama_create(rt, w, &(loom_llama_desc){ .chain = o->chain, .compile = &copts }, &m);
    if (rc)
        goto out;

    uint32_t token = o->token, bad = 0;
    float worst = 0.0f;
    double gpu_ms = 0.0, first_ms = 0.0;
    if (!o->quiet)
        printf("step  pos  token -> gpu  ref   max|err|\n");
    for (uint32_t s = 0; s < o->steps; s++) {
        uint32_t garg = 0, rarg = 0;
        double t0 = now_ms();
        if ((rc = loom_llama_step(m, token, s, gl, &garg)))
            goto out;
        if (s == 0)
            first_ms = now_ms() - t0;
        else
            gpu_ms += now_ms() - t0;
        if ((rc = loom_llama_ref_step(ref, token, s, rl, &rarg)))
            goto out;
        loom_llama_diff d;
        bool ok = loom_llama_compare(gl, garg, rl, rarg, c->vocab, TOLERANCE, &d);
        bad += !ok;
        if (d.max_abs > worst)
            worst = d.max_abs;
        if (!o->quiet || !ok)
            printf("%4u %4u %6u -> %4u %4u  %.3g%s\n", s, s, token, garg, rarg, d.max_abs,
                   ok ? "" : "  MISMATCH");
        /* Both sides continue from the GPU's choice (it is what chain mode
         * feeds itself), so one near tie does not derail the comparison. */
        token = garg < c->vocab ? garg : rarg;
    }

    loom_plan_stats unopt;
    if ((rc = unoptimized_stats(m, &unopt)))
        goto out;
    print_stats(loom_plan_get_stats(loom_llama_plan(m)), &unopt);
    uint64_t hits, misses;
    loom_llama_cache_counts(m, &hits, &misses);
    loom_rt_counters k;
    loom_rt_get_counters(rt, &k);
    printf("cache: %llu hits, %llu misses; runtime: %llu records, %llu submits, %llu dispatches, %llu barriers\n",
           (unsigned long long)hits, (unsigned long long)misses, (unsigned long long)k.records,
           (unsigned long long)k.submits, (unsigned long long)k.dispatches, (unsigned long long)k.barriers);
    /* The first step compiles and records; the rest are cache hits. */
    printf("%u steps: first %.2f ms, then %.3f ms per step (capture + cached compile + replay + read); "
           "max |err| %.3g; %u mismatches\n",
           o->steps, first_ms, o->steps > 1 ? gpu_ms / (o->steps - 1) : 0.0, worst, bad);
    /* Steady state without host reads: the cost of a decode step as a
     * frontend that chains tokens on the GPU would see it. Positions go on
     * from where the checked steps stopped. */
    uint32_t extra = c->max_seq - o->steps < 32 ? c->max_seq - o->steps : 32;
    if (extra) {
        double t0 = now_ms();
        for (uint32_t s = 0; s < extra && !rc; s++)
            rc = loom_llama_step(m, token, o->steps + s, NULL, NULL);
        if (rc)
            goto out;
        printf("%u more steps without host reads: %.3f ms per step (capture + cached compile + replay + wait)\n",
               extra, (now_ms() - t0) / extra);
    }
    if (o->profile && (rc = print_profile(rt, m)))
        goto out;
    status = bad ? 1 : 0;
out:
    if (rc)
        fprintf(stderr, "llama_demo: %s: %s\n", loom_result_str(rc), loom_last_error());
    loom_llama_destroy(m);
    loom_llama_ref_destroy(ref);
    loom_llama_weights_destroy(w);
    free(gl);
    free(rl);
    return status;
}

int main(int argc, char **argv)
{
    opts o = { 0 };
    int code = parse(argc, argv, &o);
    if (code >= 0)
        return code;
    loom_rt *rt = NULL;
    loom_result rc = loom_rt_create(&(loom_rt_desc){ .device = o.device, .profile = o.profile }, &rt);
    if (rc) {
        fprintf(stderr, "llama_demo: no Vulkan device: %s: %s\n", loom_result_str(rc), loom_last_error());
        return 1;
    }
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    printf("llama_demo on %s: dim %u, %u layers, %u/%u heads x %u, ffn %u, vocab %u, %s weights%s%s\n",
           info.device_name, o.cfg.dim, o.cfg.n_layers, o.cfg.n_heads, o.cfg.n_kv_heads, o.cfg.head_dim,
           o.cfg.ffn, o.cfg.vocab, o.cfg.wtype == LOOM_F16 ? "f16" : "f32", o.chain ? ", chained" : "",
           o.no_opt ? ", unoptimized" : "");
    int status = run(&o, rt);
    loom_rt_wait_idle(rt);
    uint64_t vmsg = loom_rt_validation_messages(rt);
    loom_rt_destroy(rt);
    if (vmsg) {
        fprintf(stderr, "llama_demo: %llu validation messages\n", (unsigned long long)vmsg);
        status = 1;
    }
    return status;
}
