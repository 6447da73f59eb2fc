/* `loom bench decode`: the example decoder's step, timed in one process
 * under each plan variant — optimized, the step log at the start of the
 * next step, no fuse, no stage, no gather, no reorder, a barrier after every
 * dispatch, no plan cache — on one upload of the weights, and a second
 * upload for the early-log model. Each variant warms the GPU clock with
 * 1.5 s of back-to-back steps, then times the steps (GPU time from a
 * timestamp pair around each step, wall time from the host clock), steps in
 * flight and tokens read behind the GPU as llama-decode runs them. The weight-read floor uses the copy bandwidth measured in the
 * same run. --quick skips the warm-up and shrinks the copy, for CI. */
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "llama_run.h"

#define WARMUP_S 1.5

static const struct {
    const char *name;
    uint32_t disable;
    bool early_log;
} variants[] = {
    { "optimized", 0, false },
    { "early log", 0, true },
    { "no fuse", LOOM_DISABLE_FUSE, false },
    { "no stage", LOOM_DISABLE_STAGE, false },
    { "no gather", LOOM_DISABLE_GATHER, false },
    { "no reorder", LOOM_DISABLE_REORDER, false },
    { "barrier every dispatch", LOOM_DISABLE_BARRIERS, false },
    { "no cache", LOOM_DISABLE_CACHE, false },
};
#define N_VARIANTS (sizeof variants / sizeof variants[0])

typedef struct row {
    loom_llama_result r;
    loom_llama_figures f;
    loom_result rc;
} row;

static void usage(void)
{
    fprintf(stderr, "usage: loom bench decode [--steps N] [--in-flight K] [--device NAME] [--quick] [shape flags]\n%s",
            loom_llama_args_help);
}

static int bench(loom_rt *rt, const loom_llama_args *a, uint32_t steps, bool quick)
{
    const loom_llama_config *c = &a->cfg;
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    loom_llama_weights *w = NULL;
    loom_llama *models[2] = { NULL, NULL };   /* late log, early log */
    loom_result rc = loom_llama_weights_create(c, &w);
    for (int k = 0; k < 2 && !rc; k++)
        rc = loom_llama_create(rt, w, &(loom_llama_desc){ .chain = true, .early_log = k == 1 }, &models[k]);
    if (rc) {
        loom_llama_destroy(models[0]);
        loom_llama_destroy(models[1]);
        loom_llama_weights_destroy(w);
        return loom_cli_fail("bench decode", rc);
    }
    row rows[N_VARIANTS];
    double copy_gbps = 0;
    for (size_t v = 0; v < N_VARIANTS; v++) {
        row *r = &rows[v];
        loom_llama *m = models[variants[v].early_log];
        loom_llama_run_opts ro = { .steps = steps, .token = 1, .warmup_s = quick ? 0 : WARMUP_S };
        r->rc = loom_llama_set_compile(m, &(loom_compile_options){ .disable = variants[v].disable });
        if (!r->rc)
            r->rc = loom_llama_run(rt, m, NULL, &ro, 0, &r->r);
        if (!r->rc)
            r->rc = loom_llama_figures_of(loom_llama_plan(m), c->n_layers, &r->f);
        if (r->rc)
            fprintf(stderr, "loom bench decode: %s: %s: %s\n", variants[v].name, loom_result_str(r->rc),
                    loom_last_error());
        /* Right after the first variant, while the clock is warm. */
        if (v == 0 && (rc = loom_llama_copy_gbps(rt, quick ? (16ull << 20) : (1ull << 30), quick ? 0 : 0.5,
                                                 &copy_gbps)))
            fprintf(stderr, "loom bench decode: copy bandwidth: %s: %s\n", loom_result_str(rc), loom_last_error());
    }
    loom_llama_destroy(models[0]);
    loom_llama_destroy(models[1]);
    loom_llama_weights_destroy(w);

    double floor_us = copy_gbps > 0 ? rows[0].f.weight_bytes / (copy_gbps * 1e3) : 0;
    printf("loom bench decode on %s: config %s (dim %u, %u layers, %u/%u heads x %u, ffn %u, vocab %u, context %u, "
           "%s); %u timed steps per variant after %.1f s warm-up, %u in flight\n",
           info.device_name, a->config_name, c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, c->ffn,
           c->vocab, c->max_seq, c->wtype == LOOM_F16 ? "f16" : "f32", steps, quick ? 0.0 : WARMUP_S,
           loom_rt_in_flight(rt));
    printf("weights read per token %.1f MB; copy %.0f GB/s (read + write, same run): weight-read floor %.1f us\n",
           rows[0].f.weight_bytes / 1e6, copy_gbps, floor_us);
    printf("%-24s %10s %10s %6s %9s %7s %7s %7s %6s\n", "variant", "GPU us/tok", "wall us/tok", "disp", "barriers",
           "bound", "floor", "waits", "hits");
    int failures = 0;
    for (size_t v = 0; v < N_VARIANTS; v++) {
        const row *r = &rows[v];
        if (r->rc) {
            printf("%-24s failed: %s\n", variants[v].name, loom_result_str(r->rc));
            failures++;
            continue;
        }
        char share[16] = "n/a";
        if (r->r.gpu_us_per_token > 0 && floor_us > 0)
            snprintf(share, sizeof share, "%.0f%%", 100.0 * floor_us / r->r.gpu_us_per_token);
        /* Without the reorder pass nothing computes the bound. */
        char bound[16] = "n/a";
        if (!(variants[v].disable & LOOM_DISABLE_REORDER))
            snprintf(bound, sizeof bound, "%u", r->f.barrier_lower_bound);
        printf("%-24s %10.1f %10.1f %6.0f %9.0f %7s %7s %7.2f %6llu\n", variants[v].name, r->r.gpu_us_per_token,
               r->r.wall_us_per_token, r->r.dispatches_per_token, r->r.barriers_per_token, bound, share,
               r->r.host_waits_per_token, (unsigned long long)r->r.cache_hits);
    }
    printf("GPU: timestamps around each step's command buffer; wall: host clock over the timed steps; bound: the\n"
           "plan's barrier lower bound; floor: weight-read floor / GPU time; waits: host waits per token.\n");
    return failures ? 1 : 0;
}

int loom_bench_decode(int argc, char **argv)
{
    loom_llama_args a;
    if (loom_llama_args_begin(argc, argv, &a)) {
        fprintf(stderr, "loom bench decode: %s\n", loom_last_error());
        return 2;
    }
    uint32_t steps = 0, in_flight = 0;
    bool quick = false;
    const char *device = NULL;
    for (int i = 1; i < argc; i++) {
        int s = loom_llama_args_shape(argc, argv, &i, &a);
        if (s > 0)
            continue;
        if (s == 0 && !strcmp(argv[i], "--quick")) {
            quick = true;
        } else if (s == 0 && i + 1 < argc && !strcmp(argv[i], "--steps")) {
            steps = (uint32_t)strtoul(argv[++i], NULL, 10);
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
    if (!steps)
        steps = quick ? 4 : 512;
    if (loom_llama_config_check(&a.cfg) || in_flight > 16) {
        fprintf(stderr, "loom bench decode: %s\n", in_flight > 16 ? "--in-flight needs 1..16" : loom_last_error());
        return 2;
    }
    loom_rt *rt = NULL;
    loom_result rc = loom_rt_create(&(loom_rt_desc){ .device = device, .in_flight = in_flight, .timestamps = true },
                                    &rt);
    if (rc)
        return loom_cli_fail("bench decode", rc);
    int status = bench(rt, &a, steps, quick);
    status |= loom_cli_validation(rt, "bench decode");
    loom_rt_destroy(rt);
    return status;
}
