/* `loom bench profile`: what profiling costs. The example decoder's step
 * runs under each way of timing it — nothing, the step's timestamp pair,
 * group timestamps (LOOM_PROFILE=1), a timestamp per node (LOOM_PROFILE=2)
 * and a trace (LOOM_TRACE) — each on a runtime of its own holding its own
 * copy of the weights, all alive at once. The variants take turns, a
 * round of timed steps each (each round starting one variant later), so
 * that drift on a shared machine or in the GPU clock falls on all of them
 * alike; the table gives the median and the best of the rounds' wall time
 * and the median of their CPU time, per token, each with its ratio to the
 * untimed step. The first round of each variant follows a clock warm-up
 * (none with --quick). */
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "llama_run.h"

#define WARMUP_S 1.5
#define REWARM_S 0.2

typedef struct variant {
    const char *name, *key;
    loom_rt_profile_level level;
    bool timestamps, trace;
} variant;

static const variant variants[] = {
    { "off", "off", LOOM_PROFILE_OFF, false, false },
    { "step timestamps", "steps", LOOM_PROFILE_OFF, true, false },
    { "groups (LOOM_PROFILE=1)", "groups", LOOM_PROFILE_GROUPS, false, false },
    { "nodes (LOOM_PROFILE=2)", "nodes", LOOM_PROFILE_NODES, false, false },
    { "trace (LOOM_TRACE)", "trace", LOOM_PROFILE_OFF, false, true },
};
#define N_VARIANTS (sizeof variants / sizeof variants[0])

typedef struct run {
    bool on;
    loom_rt *rt;
    loom_llama *m;
    double wall[LOOM_CLI_MAX_ROUNDS], cpu[LOOM_CLI_MAX_ROUNDS], gpu[LOOM_CLI_MAX_ROUNDS];
    uint32_t queries;        /* timestamps per step */
    loom_result rc;
} run;

typedef struct bench_opts {
    loom_llama_args shape;
    uint32_t steps, rounds, in_flight;
    bool quick;
    const char *device, *trace_file;
} bench_opts;

static void usage(void)
{
    fprintf(stderr, "usage: loom bench profile [--steps N] [--rounds R] [--variants off,steps,groups,nodes,trace]\n"
                    "       [--trace-file F] [--in-flight K] [--device NAME] [--quick] [shape flags]\n%s",
            loom_llama_args_help);
}


static loom_result start(run *r, const variant *v, const bench_opts *o, const loom_llama_weights *w)
{
    loom_rt_desc d = { .device = o->device, .in_flight = o->in_flight, .timestamps = v->timestamps,
                       .profile = v->level, .trace_path = v->trace ? o->trace_file : NULL };
    loom_result rc = loom_rt_create(&d, &r->rt);
    if (!rc)
        rc = loom_llama_create(r->rt, w, &(loom_llama_desc){ .chain = true }, &r->m);
    return rc;
}

/* CPU time of the process, every thread: on a CPU Vulkan device this is
 * the device's work too, and a busy machine does not inflate it. */
static double cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* One round: a run of timed steps (after a warm-up), and the timestamps
 * per step of the plan it ran. */
static loom_result round_of(run *r, const variant *v, const bench_opts *o, uint32_t k)
{
    double warm = o->quick ? 0 : k == 0 ? WARMUP_S : REWARM_S;
    loom_llama_run_opts ro = { .steps = o->steps, .token = 1, .warmup_s = warm };
    loom_llama_result res;
    double cpu0 = cpu_us();
    loom_result rc = loom_llama_run(r->rt, r->m, NULL, &ro, 0, &res);
    if (rc)
        return rc;
    r->cpu[k] = (cpu_us() - cpu0) / (double)(res.steps + res.warmup_steps);
    r->wall[k] = res.wall_us_per_token;
    r->gpu[k] = res.gpu_us_per_token;
    const loom_plan *plan = loom_llama_plan(r->m);
    uint32_t groups = loom_plan_get_stats(plan)->groups, nodes = loom_graph_node_count(loom_plan_graph(plan));
    r->queries = v->level == LOOM_PROFILE_NODES ? nodes + 1
                 : v->level || v->trace         ? groups + 1
                 : v->timestamps                ? 2
                                                : 0;
    return LOOM_OK;
}

/* "n/a", or x / base to three places. */
static void ratio(char *buf, size_t n, double x, double base)
{
    if (base > 0 && x > 0)
        snprintf(buf, n, "%.3f", x / base);
    else
        snprintf(buf, n, "n/a");
}

static void print_table(const run *runs, const bench_opts *o, const char *device)
{
    const loom_llama_config *c = &o->shape.cfg;
    printf("loom bench profile on %s: config %s (dim %u, %u layers, ffn %u, vocab %u, %s); %u timed steps x %u "
           "rounds per variant, %u in flight\n",
           device, o->shape.config_name, c->dim, c->n_layers, c->ffn, c->vocab, loom_llama_wtype_name(c),
           o->steps, o->rounds, runs[0].rt ? loom_rt_in_flight(runs[0].rt) : 0);
    printf("%-24s %7s %11s %6s %10s %6s %7s %10s %6s %10s %6s\n", "variant", "ts/step", "wall us/tok", "vs off",
           "best", "vs off", "spread", "CPU us/tok", "vs off", "GPU us/tok", "vs ts");
    double med[N_VARIANTS][3] = { { 0 } }, best[N_VARIANTS] = { 0 }, spread[N_VARIANTS] = { 0 }, lo, hi;
    for (size_t v = 0; v < N_VARIANTS; v++) {
        const run *r = &runs[v];
        if (!r->on || r->rc)
            continue;
        med[v][0] = loom_cli_median(r->wall, o->rounds, &lo, &hi);
        best[v] = lo;
        spread[v] = med[v][0] > 0 ? (hi - lo) / med[v][0] : 0;
        med[v][1] = loom_cli_median(r->cpu, o->rounds, &lo, &hi);
        med[v][2] = loom_cli_median(r->gpu, o->rounds, &lo, &hi);
    }
    for (size_t v = 0; v < N_VARIANTS; v++) {
        const run *r = &runs[v];
        if (!r->on)
            continue;
        if (r->rc) {
            printf("%-24s failed: %s\n", variants[v].name, loom_result_str(r->rc));
            continue;
        }
        char vs[3][16], gpu[16] = "n/a";
        ratio(vs[0], sizeof vs[0], med[v][0], med[0][0]);
        ratio(vs[1], sizeof vs[1], best[v], best[0]);
        ratio(vs[2], sizeof vs[2], med[v][1], med[0][1]);
        if (med[v][2] > 0)
            snprintf(gpu, sizeof gpu, "%.1f", med[v][2]);
        char gvs[16];
        ratio(gvs, sizeof gvs, med[v][2], med[1][2]);
        printf("%-24s %7u %11.1f %6s %10.1f %6s %6.1f%% %10.1f %6s %10s %6s\n", variants[v].name, r->queries,
               med[v][0], vs[0], best[v], vs[1], 100.0 * spread[v], med[v][1], vs[2], gpu, gvs);
    }
    printf("ts/step: GPU timestamps written per step. wall: host clock over the timed steps, median of the rounds;\n"
           "best: the fastest round; spread: (max - min) / median. CPU: the process's CPU time per step, warm-up\n"
           "steps included (on a CPU device it holds the device's work, and other processes do not inflate it).\n"
           "GPU: first to last timestamp of a step, against the step-timestamp pair (vs ts; off has none).\n");
    if (runs[N_VARIANTS - 1].on && !runs[N_VARIANTS - 1].rc)
        printf("trace written to %s when its runtime is destroyed (the newest 1024 steps)\n", o->trace_file);
}

static int bench(const bench_opts *o, const bool *on)
{
    loom_llama_weights *w = NULL;
    loom_result rc = loom_llama_weights_create(&o->shape.cfg, &w);
    if (rc)
        return loom_cli_fail("bench profile", rc);
    run runs[N_VARIANTS];
    memset(runs, 0, sizeof runs);
    for (size_t v = 0; v < N_VARIANTS; v++)
        runs[v].on = on[v];
    int status = 0;
    char device[256] = "?";
    for (size_t v = 0; v < N_VARIANTS && !rc; v++) {
        if (!runs[v].on)
            continue;
        if ((rc = start(&runs[v], &variants[v], o, w)))
            fprintf(stderr, "loom bench profile: %s: %s: %s\n", variants[v].name, loom_result_str(rc),
                    loom_last_error());
        else if (device[0] == '?') {
            loom_rt_info info;
            loom_rt_get_info(runs[v].rt, &info);
            snprintf(device, sizeof device, "%s", info.device_name);
        }
    }
    /* Each round starts one variant later, so none always runs first. */
    for (uint32_t k = 0; k < o->rounds && !rc; k++)
        for (size_t j = 0, v = k % N_VARIANTS; j < N_VARIANTS; j++, v = (v + 1) % N_VARIANTS)
            if (runs[v].on && !runs[v].rc && (runs[v].rc = round_of(&runs[v], &variants[v], o, k)))
                fprintf(stderr, "loom bench profile: %s: %s: %s\n", variants[v].name,
                        loom_result_str(runs[v].rc), loom_last_error());
    if (!rc)
        print_table(runs, o, device);
    for (size_t v = 0; v < N_VARIANTS; v++) {
        if (runs[v].rc)
            status = 1;
        loom_llama_destroy(runs[v].m);
        if (runs[v].rt) {
            char what[96];
            snprintf(what, sizeof what, "bench profile: %s", variants[v].name);
            status |= loom_cli_validation(runs[v].rt, what);
        }
        loom_rt_destroy(runs[v].rt);
    }
    loom_llama_weights_destroy(w);
    return rc ? 1 : status;
}

/* --variants off,groups,...: the others are left out. */
static bool pick_variants(const char *list, bool *on)
{
    for (size_t v = 0; v < N_VARIANTS; v++)
        on[v] = false;
    for (const char *p = list; *p;) {
        size_t v = loom_cli_list_next(&p, variants, N_VARIANTS, sizeof *variants, offsetof(variant, key));
        if (v == N_VARIANTS)
            return false;
        on[v] = true;
    }
    return true;
}

int loom_bench_profile(int argc, char **argv)
{
    bench_opts o = { .rounds = 3 };
    if (loom_llama_args_begin(argc, argv, &o.shape)) {
        fprintf(stderr, "loom bench profile: %s\n", loom_last_error());
        return 2;
    }
    bool on[N_VARIANTS] = { true, true, true, true, true };
    for (int i = 1; i < argc; i++) {
        int s = loom_llama_args_shape(argc, argv, &i, &o.shape);
        if (s > 0)
            continue;
        const char *a = argv[i], *v = s == 0 && i + 1 < argc ? argv[i + 1] : NULL;
        if (s == 0 && !strcmp(a, "--quick")) {
            o.quick = true;
        } else if (v && !strcmp(a, "--steps")) {
            o.steps = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else if (v && !strcmp(a, "--rounds")) {
            o.rounds = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else if (v && !strcmp(a, "--in-flight")) {
            o.in_flight = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else if (v && !strcmp(a, "--device")) {
            o.device = argv[++i];
        } else if (v && !strcmp(a, "--trace-file")) {
            o.trace_file = argv[++i];
        } else if (v && !strcmp(a, "--variants")) {
            if (!pick_variants(argv[++i], on)) {
                fprintf(stderr, "loom bench profile: --variants takes off,steps,groups,nodes,trace\n");
                return 2;
            }
        } else {
            usage();
            return 2;
        }
    }
    loom_llama_args_finish(&o.shape);
    if (!o.steps)
        o.steps = o.quick ? 4 : 256;
    if (o.quick && o.rounds == 3)
        o.rounds = 1;
    if (loom_llama_config_check(&o.shape.cfg) || o.in_flight > 16 || !o.rounds || o.rounds > LOOM_CLI_MAX_ROUNDS) {
        fprintf(stderr, "loom bench profile: %s\n",
                o.in_flight > 16 ? "--in-flight needs 1..16"
                : !o.rounds || o.rounds > LOOM_CLI_MAX_ROUNDS ? "--rounds needs 1..64"
                                                     : loom_last_error());
        return 2;
    }
    /* The variants set their own levels: the environment must not raise
     * the untimed one. */
    if (getenv("LOOM_PROFILE") || getenv("LOOM_TRACE"))
        fprintf(stderr, "loom bench profile: ignoring LOOM_PROFILE and LOOM_TRACE (each variant sets its own)\n");
    unsetenv("LOOM_PROFILE");
    unsetenv("LOOM_TRACE");
    char path[512];
    if (!o.trace_file) {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/loom-bench-profile.json", dir && *dir ? dir : "/tmp");
        o.trace_file = path;
    }
    return bench(&o, on);
}
