/* `loom bench cache`: what one decode step costs the host when the plan is
 * cached — capture the step's graph again, hash it, look it up (hash +
 * canonical-byte confirmation), write the step parameters and submit — next
 * to re-recording a command buffer every step, for graphs of 100, 500 and
 * 2,000 captured dispatches. Medians over many steps; GPU time is waited for
 * outside the timed regions. Options: --device NAME, --reps N. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "loom_ops.h"
#include "loom_runtime.h"

#define DIM 256u

static double median(double *v, uint32_t n)
{
    qsort(v, n, sizeof *v, loom_cli_cmp_double);
    return v[n / 2];
}

typedef struct bufs { loom_rt_buffer *w, *x, *y; } bufs;

/* A decoder-like step of n dispatches: blocks of RMS_NORM, MUL (weight),
 * MATVEC, ADD (residual) over scratch vectors, then a copy to the output. */
static loom_result capture(loom_graph *g, const bufs *b, uint32_t n)
{
    loom_graph_reset(g);
    uint32_t W, X, Y, h[2], t, u;
    loom_result rc = loom_graph_add_buffer(g, &(loom_buffer_desc){ "w", loom_rt_buffer_size(b->w), LOOM_USAGE_WEIGHT,
                                                                   loom_rt_buffer_id(b->w) }, &W);
    rc = rc ? rc : loom_graph_add_buffer(g, &(loom_buffer_desc){ "x", DIM * 4, LOOM_USAGE_INPUT, loom_rt_buffer_id(b->x) }, &X);
    rc = rc ? rc : loom_graph_add_buffer(g, &(loom_buffer_desc){ "y", DIM * 4, LOOM_USAGE_OUTPUT, loom_rt_buffer_id(b->y) }, &Y);
    rc = rc ? rc : loom_graph_add_buffer(g, &(loom_buffer_desc){ "h0", DIM * 4, LOOM_USAGE_SCRATCH, 0 }, &h[0]);
    rc = rc ? rc : loom_graph_add_buffer(g, &(loom_buffer_desc){ "h1", DIM * 4, LOOM_USAGE_SCRATCH, 0 }, &h[1]);
    rc = rc ? rc : loom_graph_add_buffer(g, &(loom_buffer_desc){ "t", DIM * 4, LOOM_USAGE_SCRATCH, 0 }, &t);
    rc = rc ? rc : loom_graph_add_buffer(g, &(loom_buffer_desc){ "u", DIM * 4, LOOM_USAGE_SCRATCH, 0 }, &u);
    rc = rc ? rc : loom_op_copy(g, loom_vec(X, DIM), loom_vec(h[0], DIM), NULL);
    loom_tensor norm_w = loom_vec(W, DIM), mat = loom_mat(W, LOOM_F16, DIM, DIM);
    mat.offset = LOOM_BIND_ALIGN * 4;
    uint32_t cur = 0, made = 2;
    while (!rc && made + 4 <= n) {
        rc = loom_op_rms_norm(g, loom_vec(h[cur], DIM), loom_vec(t, DIM), 1e-5f, NULL);
        rc = rc ? rc : loom_op_mul(g, loom_vec(t, DIM), norm_w, loom_vec(u, DIM), NULL);
        rc = rc ? rc : loom_op_matvec(g, mat, loom_vec(u, DIM), loom_vec(t, DIM), NULL);
        rc = rc ? rc : loom_op_add(g, loom_vec(t, DIM), loom_vec(h[cur], DIM), loom_vec(h[cur ^ 1], DIM), NULL);
        cur ^= 1;
        made += 4;
    }
    while (!rc && made < n) {   /* pad to exactly n with copies */
        rc = loom_op_copy(g, loom_vec(h[cur], DIM), loom_vec(h[cur ^ 1], DIM), NULL);
        cur ^= 1;
        made++;
    }
    return rc ? rc : loom_op_copy(g, loom_vec(h[cur], DIM), loom_vec(Y, DIM), NULL);
}

typedef struct row {
    uint32_t n, plan_dispatches, plan_barriers;
    double capture, hash, lookup, submit, step_cached, rerecord, rerecord_step;
} row;

static loom_result measure(loom_rt *rt, const bufs *b, uint32_t n, uint32_t reps, row *r)
{
    double *t[6];
    for (int i = 0; i < 6; i++)
        if (!(t[i] = calloc(reps, sizeof(double))))
            return loom_fail(LOOM_OUT_OF_MEMORY, "bench cache: out of memory");
    loom_graph *g = NULL;
    loom_plan *plan = NULL;
    loom_result rc = loom_graph_create(&(loom_graph_desc){ .name = "bench-cache" }, &g);
    rc = rc ? rc : capture(g, b, n);
    rc = rc ? rc : loom_rt_compile(rt, g, NULL, &plan, NULL);
    uint64_t step = 0;
    rc = rc ? rc : loom_rt_replay_plan(rt, plan, NULL, &step);   /* records, warms up */
    rc = rc ? rc : loom_rt_wait(rt, step);
    if (!rc) {
        const loom_plan_stats *st = loom_plan_get_stats(plan);
        r->plan_dispatches = st->dispatches;
        r->plan_barriers = st->barriers;
    }
    loom_plan_release(plan);
    for (uint32_t i = 0; i < reps && !rc; i++) {
        double t0 = loom_cli_now_us();
        rc = capture(g, b, n);
        double t1 = loom_cli_now_us();
        loom_hash h;
        rc = rc ? rc : loom_graph_hash(g, &h);
        double t2 = loom_cli_now_us();
        bool hit = false;
        rc = rc ? rc : loom_rt_compile(rt, g, NULL, &plan, &hit);
        double t3 = loom_cli_now_us();
        if (!rc && !hit)
            rc = loom_fail(LOOM_INVALID_ARGUMENT, "bench cache: step %u missed the cache", i);
        loom_step_params sp = { .pos = i, .step = i, .rows = 1 };
        rc = rc ? rc : loom_rt_replay_plan(rt, plan, &sp, &step);
        double t4 = loom_cli_now_us();
        rc = rc ? rc : loom_rt_wait(rt, step);
        double t5 = loom_cli_now_us();
        loom_plan_release(plan);
        t[0][i] = t1 - t0, t[1][i] = t2 - t1, t[2][i] = t3 - t2, t[3][i] = t4 - t3, t[4][i] = t5 - t0;
    }
    /* Re-recording every step: a new program (descriptor sets, command
     * buffer) from the same optimized graph, submitted and released. */
    rc = rc ? rc : loom_rt_compile(rt, g, NULL, &plan, NULL);
    for (uint32_t i = 0; i < reps && !rc; i++) {
        loom_rt_program *p;
        double t0 = loom_cli_now_us();
        rc = loom_rt_program_create(rt, loom_plan_graph(plan), &p);
        rc = rc ? rc : loom_rt_replay(rt, p, NULL, &step);
        double t1 = loom_cli_now_us();
        rc = rc ? rc : loom_rt_wait(rt, step);
        loom_rt_program_release(p);
        t[5][i] = t1 - t0;
    }
    if (plan)
        loom_plan_release(plan);
    if (!rc) {
        r->n = n;
        r->capture = median(t[0], reps);
        r->hash = median(t[1], reps);
        r->lookup = median(t[2], reps);
        r->submit = median(t[3], reps);
        r->step_cached = median(t[4], reps);
        r->rerecord = median(t[5], reps);
    }
    for (int i = 0; i < 6; i++)
        free(t[i]);
    loom_graph_destroy(g);
    return rc;
}

int loom_bench_cache(int argc, char **argv)
{
    const char *device = NULL;
    uint32_t reps = 200;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = (uint32_t)strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: loom bench cache [--device NAME] [--reps N]\n");
            return 2;
        }
    }
    if (reps < 3)
        reps = 3;
    loom_rt *rt;
    loom_result rc = loom_rt_create(&(loom_rt_desc){ .device = device }, &rt);
    if (rc)
        return loom_cli_fail("bench cache", rc);
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    bufs b = { 0 };
    uint64_t wsize = LOOM_BIND_ALIGN * 4 + (uint64_t)DIM * DIM * 2;
    rc = loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ "w", wsize, LOOM_USAGE_WEIGHT }, &b.w);
    rc = rc ? rc : loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ "x", DIM * 4, LOOM_USAGE_INPUT }, &b.x);
    rc = rc ? rc : loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ "y", DIM * 4, LOOM_USAGE_OUTPUT }, &b.y);
    if (!rc) {   /* small values keep every step finite */
        uint16_t *w = calloc(wsize / 2, 2);
        float x[DIM];
        for (uint32_t i = 0; i < DIM; i++)
            x[i] = 1.0f;
        for (uint64_t i = 0; w && i < wsize / 2; i++)
            w[i] = 0x2000;   /* f16 ~0.0078 */
        rc = w ? loom_rt_buffer_write(rt, b.w, 0, w, wsize) : LOOM_OUT_OF_MEMORY;
        rc = rc ? rc : loom_rt_buffer_write(rt, b.x, 0, x, sizeof x);
        free(w);
    }
    static const uint32_t sizes[] = { 100, 500, 2000 };
    row rows[3] = { 0 };
    for (int i = 0; i < 3 && !rc; i++)
        rc = measure(rt, &b, sizes[i], sizes[i] >= 2000 ? (reps + 3) / 4 : reps, &rows[i]);
    if (!rc) {
        printf("device: %s\n", info.device_name);
        printf("host µs per decode step (median); lookup = encode + XXH3-128 + byte compare on a hit (hash is\n"
               "the same hash timed alone); plan = after fusion; step = capture to GPU completion\n");
        printf("| captured | plan disp | barriers | capture | hash | lookup (hit) | submit | capture+lookup "
               "| step incl. GPU | re-record+submit | re-record / cached submit |\n");
        printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (int i = 0; i < 3; i++) {
            row *r = &rows[i];
            printf("| %u | %u | %u | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1fx |\n", r->n,
                   r->plan_dispatches, r->plan_barriers, r->capture, r->hash, r->lookup, r->submit,
                   r->capture + r->lookup, r->step_cached, r->rerecord, r->rerecord / r->submit);
        }
    }
    loom_rt_buffer_release(b.w);
    loom_rt_buffer_release(b.x);
    loom_rt_buffer_release(b.y);
    loom_rt_destroy(rt);
    return rc ? loom_cli_fail("bench cache", rc) : 0;
}
