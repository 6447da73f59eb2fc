/* `loom bench decode`: the example decoder's step, timed in one process under
 * each plan variant — optimized, the step log at the start of the next step,
 * the attention's shares in f16, the staged norm input in f16, the gated
 * FFN's output in f16, the three halves, all four, two chunks a trip for long
 * rows, f16 and f32 KV caches, no fuse, no stage, no gather, no reorder, a
 * barrier after every dispatch, no plan cache — on one upload of the
 * weights (another for the early-log model, and for caches of the dtype
 * the config does not use). Each variant warms the GPU clock with
 * back-to-back steps, at least 1.5 s and until two windows of 200 steps
 * agree within 1% (at most 20 s: loom_llama_run), then times the steps (GPU time from a timestamp pair
 * around each step, wall time from the host clock), steps in flight and
 * tokens read behind the GPU as llama-decode runs them. With --rounds R the
 * variants take turns R times (each round starting one variant later, a 0.2 s
 * re-warm before each later run), so that drift falls on all of them alike;
 * the table gives the median of the rounds, their spread, and the ratio to
 * the first variant listed. The weight-read floor uses the copy bandwidth
 * measured in the same run. --quick skips the warm-up and shrinks the copy,
 * for CI. */
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "llama_run.h"

#define WARMUP_S 1.5
#define REWARM_S 0.2

typedef struct variant {
    const char *key, *name;
    uint32_t disable, enable;
    bool early_log;
    int kv;   /* KV caches: -1 the config's, else the loom_dtype */
} variant;

static const variant variants[] = {
    { "optimized", "optimized", 0, 0, false, -1 },
    { "early-log", "early log", 0, 0, true, -1 },
    { "half-shares", "half shares", 0, LOOM_ENABLE_HALF_SHARES, false, -1 },
    { "half-stage", "half stage", 0, LOOM_ENABLE_HALF_STAGE, false, -1 },
    { "half-act", "half FFN output", 0, LOOM_ENABLE_HALF_ACT, false, -1 },
    { "halves", "all three halves", 0, LOOM_ENABLE_HALF_ALL, false, -1 },
    { "early+halves", "early log, all halves", 0, LOOM_ENABLE_HALF_ALL, true, -1 },
    { "long-rows", "long rows", 0, LOOM_ENABLE_LONG_ROWS, false, -1 },
    { "kv-f16", "f16 KV caches", 0, 0, false, LOOM_F16 },
    { "kv-f32", "f32 KV caches", 0, 0, false, LOOM_F32 },
    { "no-fuse", "no fuse", LOOM_DISABLE_FUSE, 0, false, -1 },
    { "no-stage", "no stage", LOOM_DISABLE_STAGE, 0, false, -1 },
    { "no-gather", "no gather", LOOM_DISABLE_GATHER, 0, false, -1 },
    { "no-reorder", "no reorder", LOOM_DISABLE_REORDER, 0, false, -1 },
    { "barrier-every", "barrier every dispatch", LOOM_DISABLE_BARRIERS, 0, false, -1 },
    { "no-cache", "no cache", LOOM_DISABLE_CACHE, 0, false, -1 },
};
#define N_VARIANTS (sizeof variants / sizeof variants[0])

typedef struct row {
    loom_llama_result r[LOOM_CLI_MAX_ROUNDS];
    loom_llama_figures f;
    loom_result rc;
} row;

typedef struct bench_opts {
    uint32_t steps, rounds;
    bool quick;
    uint32_t pick[N_VARIANTS], n_pick;   /* variant indices, in the order given */
} bench_opts;

static void usage(void)
{
    fprintf(stderr,
            "usage: loom bench decode [--steps N] [--rounds R] [--variants LIST] [--in-flight K] [--device NAME]\n"
            "                         [--quick] [shape flags]\n"
            "  --variants LIST   comma-separated, in the order to run and compare (the first is the base):\n"
            "                    optimized,early-log,half-shares,half-stage,half-act,halves,early+halves,long-rows,\n"
            "                    kv-f16,kv-f32,no-fuse,no-stage,no-gather,no-reorder,barrier-every,no-cache\n"
            "                    (default: all,\n"
            "                    in that order)\n"
            "  --rounds R        the variants take turns R times (1..64, default 1); median of the rounds\n%s",
            loom_llama_args_help);
}


/* Medians over the rounds of one row's GPU and wall time. */
static void row_medians(const row *r, uint32_t rounds, double *gpu, double *gpu_lo, double *gpu_hi, double *wall)
{
    double g[LOOM_CLI_MAX_ROUNDS], w[LOOM_CLI_MAX_ROUNDS], lo, hi;
    for (uint32_t k = 0; k < rounds; k++) {
        g[k] = r->r[k].gpu_us_per_token;
        w[k] = r->r[k].wall_us_per_token;
    }
    *gpu = loom_cli_median(g, rounds, gpu_lo, gpu_hi);
    *wall = loom_cli_median(w, rounds, &lo, &hi);
}

/* Whether a variant's model has f16 KV caches. */
static bool f16_caches(const loom_llama_config *c, const variant *v)
{
    return (v->kv < 0 ? (loom_dtype)c->kvtype : (loom_dtype)v->kv) == LOOM_F16;
}

/* The model a variant runs on: models[early log][f16 caches]. */
static loom_llama **model_of(loom_llama *models[2][2], const loom_llama_config *c, const variant *v)
{
    return &models[v->early_log][f16_caches(c, v)];
}

static void destroy_models(loom_llama *models[2][2])
{
    for (int e = 0; e < 2; e++)
        for (int k = 0; k < 2; k++)
            loom_llama_destroy(models[e][k]);
}

static int bench(loom_rt *rt, const loom_llama_args *a, const bench_opts *o)
{
    const loom_llama_config *c = &a->cfg;
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    loom_llama_weights *w = NULL;
    /* Only the models a picked variant needs. A model with the other cache
     * dtype reads the same host weights through a copy of their header
     * whose config says so (it must outlive the model). */
    loom_llama *models[2][2] = { { NULL, NULL }, { NULL, NULL } };
    loom_llama_weights wk[2];
    loom_result rc = loom_llama_weights_create(c, &w);
    for (uint32_t i = 0; i < o->n_pick && !rc; i++) {
        const variant *v = &variants[o->pick[i]];
        loom_llama **m = model_of(models, c, v);
        if (*m)
            continue;
        bool f16 = f16_caches(c, v);
        wk[f16] = *w;
        wk[f16].cfg.kvtype = f16 ? LOOM_F16 : LOOM_F32;
        rc = loom_llama_create(rt, &wk[f16], &(loom_llama_desc){ .chain = true, .early_log = v->early_log }, m);
    }
    if (rc) {
        destroy_models(models);
        loom_llama_weights_destroy(w);
        return loom_cli_fail("bench decode", rc);
    }
    row *rows = calloc(o->n_pick, sizeof *rows);
    if (!rows) {
        destroy_models(models);
        loom_llama_weights_destroy(w);
        return loom_cli_fail("bench decode", loom_fail(LOOM_OUT_OF_MEMORY, "bench decode: %u rows", o->n_pick));
    }
    double copy_gbps = 0;
    bool copied = false;
    for (uint32_t k = 0; k < o->rounds; k++)
        for (uint32_t j = 0; j < o->n_pick; j++) {
            uint32_t i = (j + k) % o->n_pick;   /* round k starts k variants later */
            row *r = &rows[i];
            const variant *v = &variants[o->pick[i]];
            if (r->rc)
                continue;
            loom_llama *m = *model_of(models, c, v);
            loom_llama_run_opts ro = { .steps = o->steps, .token = 1,
                                       .warmup_s = o->quick ? 0 : k == 0 ? WARMUP_S : REWARM_S };
            /* The compile options are set anew before every run: the models
             * take turns between variants. */
            r->rc = loom_llama_set_compile(m, &(loom_compile_options){ .disable = v->disable, .enable = v->enable });
            if (!r->rc)
                r->rc = loom_llama_run(rt, m, NULL, &ro, 0, &r->r[k]);
            if (!r->rc && k == 0)
                r->rc = loom_llama_figures_of(loom_llama_plan(m), c->n_layers, &r->f);
            if (r->rc)
                fprintf(stderr, "loom bench decode: %s: %s: %s\n", v->name, loom_result_str(r->rc),
                        loom_last_error());
            /* Right after the first run, while the clock is warm. */
            if (!copied) {
                copied = true;
                if ((rc = loom_llama_copy_gbps(rt, o->quick ? (16ull << 20) : (1ull << 30), o->quick ? 0 : 0.5,
                                               &copy_gbps)))
                    fprintf(stderr, "loom bench decode: copy bandwidth: %s: %s\n", loom_result_str(rc),
                            loom_last_error());
            }
        }
    destroy_models(models);
    loom_llama_weights_destroy(w);

    /* The floor from the first variant that ran: every variant reads the
     * same weights. */
    uint64_t weight_bytes = 0;
    for (uint32_t i = 0; i < o->n_pick && !weight_bytes; i++)
        weight_bytes = rows[i].rc ? 0 : rows[i].f.weight_bytes;
    double floor_us = copy_gbps > 0 ? weight_bytes / (copy_gbps * 1e3) : 0;
    char types[160];
    loom_llama_describe_types(c, NULL, types, sizeof types);
    printf("loom bench decode on %s: config %s (dim %u, %u layers, %u/%u heads x %u, ffn %u, vocab %u, context %u, "
           "%s weights (%s), %s KV caches); %u timed steps per run after a warm-up of at least %.1f s that ends on "
           "two windows of %u steps within %.0f%% (at most %.0f s), %u round%s, %u in flight\n",
           info.device_name, a->config_name, c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, c->ffn,
           c->vocab, c->max_seq, loom_llama_wtype_name(c), types, loom_dtype_name(c->kvtype),
           o->steps, o->quick ? 0.0 : WARMUP_S, LOOM_LLAMA_WARM_WINDOW, 100 * LOOM_LLAMA_WARM_AGREE,
           LOOM_LLAMA_WARM_CAP_S, o->rounds, o->rounds == 1 ? "" : "s", loom_rt_in_flight(rt));
    for (uint32_t i = 0; i < o->n_pick && !o->quick; i++)
        if (!rows[i].rc) {
            printf("warm-up of the first run (%s): %.2f s, %llu steps, %s\n", variants[o->pick[i]].name,
                   rows[i].r[0].warmup_s, (unsigned long long)rows[i].r[0].warmup_steps,
                   rows[i].r[0].warmup_stable ? "stable" : "stopped at the cap");
            break;
        }
    printf("weights read per token %.1f MB (as stored); copy %.0f GB/s (read + write, same run): weight-read floor "
           "%.1f us\n",
           weight_bytes / 1e6, copy_gbps, floor_us);
    printf("%-24s %10s %15s %8s %10s %6s %9s %7s %7s %7s %7s %6s\n", "variant", "GPU us/tok", "rounds min-max",
           "vs base", "wall us/tok", "disp", "barriers", "polled", "bound", "floor", "waits", "hits");
    int failures = 0;
    double base = 0;
    for (uint32_t i = 0; i < o->n_pick; i++) {
        const row *r = &rows[i];
        const variant *v = &variants[o->pick[i]];
        if (r->rc) {
            printf("%-24s failed: %s\n", v->name, loom_result_str(r->rc));
            failures++;
            continue;
        }
        double gpu, lo, hi, wall;
        row_medians(r, o->rounds, &gpu, &lo, &hi, &wall);
        if (i == 0)
            base = gpu;
        char share[16] = "n/a", spread[32] = "-", vs[16] = "n/a", bound[16] = "n/a";
        if (gpu > 0 && floor_us > 0)
            snprintf(share, sizeof share, "%.0f%%", 100.0 * floor_us / gpu);
        if (o->rounds > 1)
            snprintf(spread, sizeof spread, "%.1f-%.1f", lo, hi);
        if (gpu > 0 && base > 0)
            snprintf(vs, sizeof vs, "%.4f", gpu / base);
        /* Without the reorder pass nothing computes the bound. */
        if (!(v->disable & LOOM_DISABLE_REORDER))
            snprintf(bound, sizeof bound, "%u", r->f.barrier_lower_bound);
        const loom_llama_result *last = &r->r[o->rounds - 1];
        printf("%-24s %10.1f %15s %8s %10.1f %6.0f %9.0f %7.0f %7s %7s %7.2f %6llu\n", v->name, gpu, spread, vs, wall,
               last->dispatches_per_token, last->barriers_per_token, last->polled_per_token, bound, share,
               last->host_waits_per_token, (unsigned long long)last->cache_hits);
    }
    printf("GPU: timestamps around each step's command buffer, median of the rounds; vs base: GPU time over the\n"
           "first variant's; wall: host clock over the timed steps; polled: dependencies polled in the shader\n"
           "instead of a barrier (tagged vectors); bound: the plan's barrier lower bound; floor: weight-read floor /\n"
           "GPU time; waits: host waits per token.\n");
    free(rows);
    return failures ? 1 : 0;
}

/* --variants a,b,...: those, in that order, each at most once. */
static bool pick_variants(const char *list, bench_opts *o)
{
    bool seen[N_VARIANTS] = { false };
    o->n_pick = 0;
    for (const char *p = list; *p;) {
        size_t v = loom_cli_list_next(&p, variants, N_VARIANTS, sizeof *variants, offsetof(variant, key));
        if (v == N_VARIANTS || seen[v])
            return false;
        seen[v] = true;
        o->pick[o->n_pick++] = (uint32_t)v;
    }
    return o->n_pick > 0;
}

int loom_bench_decode(int argc, char **argv)
{
    loom_llama_args a;
    if (loom_llama_args_begin(argc, argv, &a)) {
        fprintf(stderr, "loom bench decode: %s\n", loom_last_error());
        return 2;
    }
    bench_opts o = { .rounds = 1 };
    for (uint32_t v = 0; v < N_VARIANTS; v++)
        o.pick[o.n_pick++] = v;
    uint32_t in_flight = 0;
    const char *device = NULL;
    for (int i = 1; i < argc; i++) {
        int s = loom_llama_args_shape(argc, argv, &i, &a);
        if (s > 0)
            continue;
        if (s == 0 && !strcmp(argv[i], "--quick")) {
            o.quick = true;
        } else if (s == 0 && i + 1 < argc && !strcmp(argv[i], "--steps")) {
            o.steps = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else if (s == 0 && i + 1 < argc && !strcmp(argv[i], "--rounds")) {
            o.rounds = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else if (s == 0 && i + 1 < argc && !strcmp(argv[i], "--variants")) {
            if (!pick_variants(argv[++i], &o)) {
                fprintf(stderr, "loom bench decode: --variants takes a list of distinct names from ");
                for (size_t v = 0; v < N_VARIANTS; v++)
                    fprintf(stderr, "%s%s", v ? "," : "", variants[v].key);
                fprintf(stderr, "\n");
                return 2;
            }
        } else if (s == 0 && i + 1 < argc && !strcmp(argv[i], "--in-flight")) {
            in_flight = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else if (s == 0 && i + 1 < argc && !strcmp(argv[i], "--device")) {
            device = argv[++i];
        } else {
            usage();
            return 2;
        }
    }
    loom_llama_args_finish(&a);
    if (!o.steps)
        o.steps = o.quick ? 4 : 512;
    if (loom_llama_config_check(&a.cfg) || in_flight > 16 || !o.rounds || o.rounds > LOOM_CLI_MAX_ROUNDS) {
        fprintf(stderr, "loom bench decode: %s\n",
                in_flight > 16                    ? "--in-flight needs 1..16"
                : !o.rounds || o.rounds > LOOM_CLI_MAX_ROUNDS ? "--rounds needs 1..64"
                                                  : loom_last_error());
        return 2;
    }
    loom_rt *rt = NULL;
    loom_result rc = loom_rt_create(&(loom_rt_desc){ .device = device, .in_flight = in_flight, .timestamps = true },
                                    &rt);
    if (rc)
        return loom_cli_fail("bench decode", rc);
    int status = bench(rt, &a, &o);
    status |= loom_cli_validation(rt, "bench decode");
    loom_rt_destroy(rt);
    return status;
}
