/* `loom bench micro`: the runtime's fixed costs on each device — a tiny
 * dispatch with and without a barrier after it, recording a command buffer
 * vs re-submitting it, and the latency of each wait path. Host-timed, so it
 * runs on any driver (no timestamp queries, no validation layer needed).
 * Each timed loop first runs its own work back to back for 1.5 s: the GPU
 * idles at a low clock and boosts only under sustained load.
 * --quick shrinks the counts and skips the warm-up, for CPU implementations
 * such as lavapipe. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "loom_ir_edit.h"
#include "loom_runtime.h"

static const char TINY[] =
    "#version 450\n"
    "layout(local_size_x = 64) in;\n"
    "layout(set = 0, binding = 0) writeonly buffer O { uint o[]; };\n"
    "layout(push_constant) uniform Pc { uint v; } pc;\n"
    "void main() { o[gl_LocalInvocationID.x] = pc.v; }\n";

#define SLICE 256u   /* bytes each dispatch writes; a legal binding offset step everywhere */

/* n tiny dispatches, each to its own slice of buffer b: no hazards, so a
 * scheduled graph needs no barrier; an unscheduled one gets one per pair. */
static loom_result tiny_graph(loom_rt_buffer *b, uint32_t n, bool barriers, loom_graph **out)
{
    loom_graph *g;
    loom_result rc = loom_graph_create(&(loom_graph_desc){ .name = "micro" }, &g);
    if (rc)
        return rc;
    uint32_t id;
    rc = loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = "o", .size = loom_rt_buffer_size(b),
                                                       .external = loom_rt_buffer_id(b) }, &id);
    for (uint32_t i = 0; i < n && !rc; i++) {
        loom_binding bd = { .buffer = id, .slot = 0, .offset = (uint64_t)i * SLICE, .size = SLICE,
                            .access = LOOM_ACCESS_WRITE };
        loom_dispatch_desc d = { .kernel = "bench_tiny", .op = LOOM_OP_OTHER, .groups = { 1, 1, 1 },
                                 .bindings = &bd, .n_bindings = 1, .push = &i, .push_size = 4 };
        rc = loom_graph_add_dispatch(g, &d, NULL);
        if (!rc)
            loom_graph_node_mut(g, i)->group = 0;
    }
    loom_graph_set_scheduled(g, !barriers);
    if (rc) {
        loom_graph_destroy(g);
        return rc;
    }
    *out = g;
    return LOOM_OK;
}

/* Seconds of back-to-back replays before each timed loop (0 with --quick). */
static double warmup_s = 1.5;

/* Mean µs of replay + wait over reps, after the warm-up: the same replay +
 * wait back to back for warmup_s, so the clock is the one the timed loop
 * keeps. */
static loom_result time_replays(loom_rt *rt, loom_rt_program *p, uint32_t reps, double *us)
{
    uint64_t step;
    loom_result rc = loom_rt_replay(rt, p, NULL, &step);
    if (!rc)
        rc = loom_rt_wait(rt, step);
    double w0 = loom_cli_now_us();
    while (!rc && loom_cli_now_us() - w0 < warmup_s * 1e6) {
        rc = loom_rt_replay(rt, p, NULL, &step);
        if (!rc)
            rc = loom_rt_wait(rt, step);
    }
    double t0 = loom_cli_now_us();
    for (uint32_t r = 0; r < reps && !rc; r++) {
        rc = loom_rt_replay(rt, p, NULL, &step);
        if (!rc)
            rc = loom_rt_wait(rt, step);
    }
    *us = (loom_cli_now_us() - t0) / reps;
    return rc;
}

typedef struct micro_result {
    double dispatch_us, dispatch_barrier_us, record_us, resubmit_us;
    double wait_idle_us, wait_done_us, wait_spin_us, wait_block_us;
} micro_result;

static loom_result program_of(loom_rt *rt, loom_rt_buffer *b, uint32_t n, bool barriers, loom_rt_program **p,
                              double *create_us)
{
    loom_graph *g;
    loom_result rc = tiny_graph(b, n, barriers, &g);
    if (rc)
        return rc;
    double t0 = loom_cli_now_us();
    rc = loom_rt_program_create(rt, g, p);
    if (create_us)
        *create_us = loom_cli_now_us() - t0;
    loom_graph_destroy(g);
    return rc;
}

/* Dispatch and record costs on one runtime. */
static loom_result bench_dispatch(loom_rt *rt, uint32_t n, uint32_t reps, micro_result *m)
{
    loom_rt_buffer *b;
    loom_result rc = loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ .name = "o", .size = (uint64_t)n * SLICE },
                                           &b);
    if (rc)
        return rc;
    loom_rt_program *one = NULL, *flat = NULL, *fenced = NULL;
    double t1 = 0, tf = 0, tb = 0;
    /* The pipeline exists before the timed create, so it times recording. */
    rc = program_of(rt, b, 1, false, &one, NULL);
    if (!rc)
        rc = program_of(rt, b, n, false, &flat, &m->record_us);
    if (!rc)
        rc = program_of(rt, b, n, true, &fenced, NULL);
    if (!rc)
        rc = time_replays(rt, one, reps, &t1);
    if (!rc)
        rc = time_replays(rt, flat, reps, &tf);
    if (!rc)
        rc = time_replays(rt, fenced, reps, &tb);
    m->dispatch_us = (tf - t1) / (n - 1);
    m->dispatch_barrier_us = (tb - t1) / (n - 1);
    /* Re-submit: the host cost of replay alone, the GPU drained between. */
    double sum = 0;
    for (uint32_t r = 0; r < reps && !rc; r++) {
        uint64_t step;
        double t0 = loom_cli_now_us();
        rc = loom_rt_replay(rt, flat, NULL, &step);
        sum += loom_cli_now_us() - t0;
        if (!rc)
            rc = loom_rt_wait(rt, step);
    }
    m->resubmit_us = sum / reps;
    loom_rt_program_release(one);
    loom_rt_program_release(flat);
    loom_rt_program_release(fenced);
    loom_rt_buffer_release(b);
    return rc;
}

/* Wait latencies: idle queue, finished step, and submit + wait on a
 * one-dispatch step (spinning or blocking, set by the runtime's spin_polls). */
static loom_result bench_waits(loom_rt *rt, uint32_t reps, double *idle, double *done, double *running)
{
    loom_rt_buffer *b;
    loom_result rc = loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ .name = "o", .size = SLICE }, &b);
    if (rc)
        return rc;
    loom_rt_program *p;
    if ((rc = program_of(rt, b, 1, false, &p, NULL))) {
        loom_rt_buffer_release(b);
        return rc;
    }
    uint64_t step = 0;
    rc = loom_rt_replay(rt, p, NULL, &step);
    if (!rc)
        rc = loom_rt_wait_idle(rt);
    double t0 = loom_cli_now_us();
    for (uint32_t r = 0; r < reps && !rc; r++)
        rc = loom_rt_wait_idle(rt);
    *idle = (loom_cli_now_us() - t0) / reps;
    t0 = loom_cli_now_us();
    for (uint32_t r = 0; r < reps && !rc; r++)
        rc = loom_rt_wait(rt, step);
    *done = (loom_cli_now_us() - t0) / reps;
    if (!rc)
        rc = time_replays(rt, p, reps, running);
    loom_rt_program_release(p);
    loom_rt_buffer_release(b);
    return rc;
}

static loom_result make_rt(const char *device, uint32_t spin, loom_rt **rt)
{
    loom_result rc = loom_rt_create(&(loom_rt_desc){ .device = device, .spin_polls = spin }, rt);
    if (!rc && (rc = loom_rt_kernel_glsl(*rt, "bench_tiny", TINY))) {
        loom_rt_destroy(*rt);
        *rt = NULL;
    }
    return rc;
}

static loom_result bench_device(const char *device, uint32_t n, uint32_t reps, char *name, size_t name_size,
                                micro_result *m)
{
    loom_rt *rt;
    loom_result rc = make_rt(device, UINT32_MAX / 4, &rt);
    if (rc)
        return rc;
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    snprintf(name, name_size, "%s", info.device_name);
    double unused;
    rc = bench_dispatch(rt, n, reps, m);
    if (!rc)
        rc = bench_waits(rt, reps, &m->wait_idle_us, &m->wait_done_us, &m->wait_spin_us);
    loom_rt_destroy(rt);
    if (rc)
        return rc;
    if ((rc = make_rt(device, 1, &rt)))
        return rc;
    rc = bench_waits(rt, reps, &unused, &unused, &m->wait_block_us);
    loom_rt_destroy(rt);
    return rc;
}

int loom_bench_micro(int argc, char **argv)
{
    uint32_t n = 512, reps = 50;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            n = 64;
            reps = 5;
            warmup_s = 0;
        } else if (!strcmp(argv[i], "--dispatches") && i + 1 < argc) {
            n = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr, "usage: loom bench micro [--quick] [--dispatches N] [--reps R] [--device I|NAME]\n");
            return 2;
        }
    }
    if (n < 2 || reps < 1) {
        fprintf(stderr, "loom bench micro: need --dispatches >= 2 and --reps >= 1\n");
        return 2;
    }
    printf("loom bench micro: %u dispatches per command buffer, %u replays, host-timed µs\n", n, reps);
    printf("%-28s %10s %10s %10s %10s %10s %10s %10s %10s\n", "device", "dispatch", "+barrier", "record",
           "resubmit", "wait-idle", "wait-done", "sub+spin", "sub+block");
    int failures = 0, benched = 0;
    for (int dev = 0; dev < 32; dev++) {
        char idx[16], name[256];
        snprintf(idx, sizeof idx, "%d", dev);
        micro_result m = { 0 };
        loom_result rc = bench_device(only ? only : idx, n, reps, name, sizeof name, &m);
        if (rc == LOOM_NOT_FOUND && !only)
            break;
        if (rc == LOOM_UNSUPPORTED && !only)
            continue;
        if (rc) {
            fprintf(stderr, "loom bench micro: device %s: %s: %s\n", only ? only : idx, loom_result_str(rc),
                    loom_last_error());
            failures++;
        } else {
            benched++;
            printf("%-28.28s %10.2f %10.2f %10.1f %10.1f %10.2f %10.2f %10.1f %10.1f\n", name, m.dispatch_us,
                   m.dispatch_barrier_us, m.record_us, m.resubmit_us, m.wait_idle_us, m.wait_done_us,
                   m.wait_spin_us, m.wait_block_us);
        }
        if (only)
            break;
    }
    printf("dispatch/+barrier: per tiny dispatch; record: create + record a %u-dispatch program; resubmit: host\n"
           "cost of one replay call; sub+spin/sub+block: submit one dispatch then wait, spinning vs blocking.\n", n);
    return failures || !benched ? 1 : 0;
}
