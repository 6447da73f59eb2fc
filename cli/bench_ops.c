/* `loom bench ops`: how close the MATVEC kernels come to the memory bandwidth
 * a plain copy kernel reaches on the same device in the same run. Each row
 * replays a program of many independent matvecs (no barriers between them)
 * that rotate over enough distinct weight matrices to overflow the GPU's L2
 * cache, times replay + wait on the host after a warm-up, and keeps the best
 * replay. Copy counts bytes read + written; matvec counts weight bytes only.
 * --quick uses small shapes and working sets, for CPU implementations such
 * as lavapipe. --device NAME (repeatable) picks devices; --all takes every
 * device index until one fails to open. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "loom_ir_edit.h"
#include "loom_ops.h"
#include "loom_runtime.h"

typedef struct bench_cfg {
    uint64_t working_set;   /* bytes of distinct weights (or copy sources) per row */
    uint64_t per_replay;    /* bytes one replay should stream, so timing noise is small */
    uint32_t max_dispatches;
    uint32_t reps;
    uint32_t shapes[4][2];
} bench_cfg;

static const bench_cfg full_cfg = { 256ull << 20, 1ull << 30, 512, 10,
                                    { { 2048, 2048 }, { 8192, 2048 }, { 2048, 8192 }, { 32000, 2048 } } };
static const bench_cfg quick_cfg = { 4ull << 20, 8ull << 20, 64, 3,
                                     { { 256, 256 }, { 512, 256 }, { 256, 512 }, { 1000, 256 } } };

#define ALIGN_UP(x) (((x) + LOOM_BIND_ALIGN - 1) / LOOM_BIND_ALIGN * LOOM_BIND_ALIGN)

/* Buffers the program refers to; released together. */
typedef struct pool {
    loom_rt_buffer *b[80];
    uint32_t n;
} pool;

static loom_result pool_add(loom_rt *rt, pool *p, loom_graph *g, const char *name, uint64_t size, uint32_t *id)
{
    if (p->n == sizeof p->b / sizeof p->b[0])
        return loom_fail(LOOM_LIMIT, "bench ops: too many buffers");
    loom_rt_buffer *b;
    loom_result rc = loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ .name = name, .size = size }, &b);
    if (rc)
        return rc;
    p->b[p->n++] = b;
    return loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = name, .size = size,
                                                         .external = loom_rt_buffer_id(b) }, id);
}

static void pool_release(pool *p)
{
    for (uint32_t i = 0; i < p->n; i++)
        loom_rt_buffer_release(p->b[i]);
    p->n = 0;
}

/* Every node in one concurrency group with no barrier: the dispatches are
 * independent by construction (distinct outputs, shared inputs only read). */
static void schedule_flat(loom_graph *g)
{
    for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
        loom_node *n = loom_graph_node_mut(g, i);
        n->group = 0;
        n->barrier = LOOM_NONE;
    }
    loom_graph_set_scheduled(g, true);
}

/* Best seconds per replay of g over cfg->reps, after two warm-up replays. */
static loom_result time_graph(loom_rt *rt, loom_graph *g, uint32_t reps, double *best)
{
    loom_rt_program *p;
    loom_result rc = loom_rt_program_create(rt, g, &p);
    if (rc)
        return rc;
    *best = 1e30;
    for (uint32_t r = 0; r < reps + 2 && !rc; r++) {
        uint64_t step;
        double t0 = loom_cli_now_us();
        rc = loom_rt_replay(rt, p, NULL, &step);
        if (!rc)
            rc = loom_rt_wait(rt, step);
        double t = (loom_cli_now_us() - t0) * 1e-6;
        if (r >= 2 && t < *best)
            *best = t;
    }
    loom_rt_program_release(p);
    return rc;
}

static uint32_t clampu(uint64_t v, uint32_t lo, uint32_t hi) { return v < lo ? lo : v > hi ? hi : (uint32_t)v; }

/* Copy bandwidth: sources of `chunk` bytes rotating over the working set,
 * each dispatch writing its own destination. */
static loom_result bench_copy(loom_rt *rt, const bench_cfg *cfg, double *gbs)
{
    const uint64_t chunk = cfg->working_set / 8;
    const uint32_t n_src = 8, n_disp = clampu(cfg->per_replay / (2 * chunk), n_src, 32);
    loom_graph *g;
    loom_result rc = loom_graph_create(&(loom_graph_desc){ .name = "bench_copy" }, &g);
    if (rc)
        return rc;
    pool p = { .n = 0 };
    uint32_t src[8], dst = 0;
    for (uint32_t i = 0; i < n_src && !rc; i++)
        rc = pool_add(rt, &p, g, "src", chunk, &src[i]);
    if (!rc)
        rc = pool_add(rt, &p, g, "dst", chunk * n_disp, &dst);
    uint32_t words = (uint32_t)(chunk / 4);
    for (uint32_t j = 0; j < n_disp && !rc; j++)
        rc = loom_op_copy(g, (loom_tensor){ src[j % n_src], LOOM_U32, 0, 1, words },
                          (loom_tensor){ dst, LOOM_U32, chunk * j, 1, words }, NULL);
    double t = 0;
    if (!rc) {
        schedule_flat(g);
        rc = time_graph(rt, g, cfg->reps, &t);
    }
    *gbs = rc ? 0 : 2.0 * chunk * n_disp / t / 1e9;
    pool_release(&p);
    loom_graph_destroy(g);
    return rc;
}

static loom_result bench_matvec(loom_rt *rt, const bench_cfg *cfg, loom_dtype dt, uint32_t rows, uint32_t cols,
                                double *gbs, uint32_t *out_mats, uint32_t *out_disp)
{
    uint64_t wbytes = (uint64_t)rows * cols * loom_dtype_size(dt);
    uint32_t n_mat = clampu((cfg->working_set + wbytes - 1) / wbytes, 2, 64);
    uint32_t n_disp = clampu(cfg->per_replay / wbytes, n_mat, cfg->max_dispatches);
    uint64_t yslice = ALIGN_UP((uint64_t)rows * 4);
    loom_graph *g;
    loom_result rc = loom_graph_create(&(loom_graph_desc){ .name = "bench_matvec" }, &g);
    if (rc)
        return rc;
    pool p = { .n = 0 };
    uint32_t w[64], x = 0, y = 0;
    for (uint32_t i = 0; i < n_mat && !rc; i++)
        rc = pool_add(rt, &p, g, "W", wbytes, &w[i]);
    if (!rc)
        rc = pool_add(rt, &p, g, "x", (uint64_t)cols * 4, &x);
    if (!rc)
        rc = pool_add(rt, &p, g, "y", yslice * n_disp, &y);
    /* Weights are left as allocated: the timing does not depend on values,
     * and filling gigabytes through staging would dominate the run. */
    for (uint32_t j = 0; j < n_disp && !rc; j++)
        rc = loom_op_matvec(g, loom_mat(w[j % n_mat], dt, rows, cols), loom_vec(x, cols),
                            loom_vec_at(y, yslice * j, rows), NULL);
    double t = 0;
    if (!rc) {
        schedule_flat(g);
        rc = time_graph(rt, g, cfg->reps, &t);
    }
    *gbs = rc ? 0 : (double)wbytes * n_disp / t / 1e9;
    *out_mats = n_mat;
    *out_disp = n_disp;
    pool_release(&p);
    loom_graph_destroy(g);
    return rc;
}

static int bench_device(const char *device, const bench_cfg *cfg)
{
    loom_rt *rt;
    loom_result rc = loom_rt_create(&(loom_rt_desc){ .device = device }, &rt);
    if (rc)
        return loom_cli_fail("bench ops", rc);
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    printf("device: %s (subgroup %u)\n", info.device_name, info.subgroup_size);
    double copy_gbs;
    rc = bench_copy(rt, cfg, &copy_gbs);
    if (rc) {
        loom_rt_destroy(rt);
        return loom_cli_fail("bench ops: copy", rc);
    }
    printf("%-12s %-5s %6s %6s %10s %10s %7s\n", "shape", "dtype", "mats", "disp", "GB/s", "copy GB/s", "ratio");
    static const loom_dtype dts[] = { LOOM_F16, LOOM_F32 };
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < 4; s++) {
            uint32_t rows = cfg->shapes[s][0], cols = cfg->shapes[s][1], mats, disp;
            double gbs;
            rc = bench_matvec(rt, cfg, dts[d], rows, cols, &gbs, &mats, &disp);
            char shape[32];
            snprintf(shape, sizeof shape, "%ux%u", rows, cols);
            if (rc) {
                printf("%-12s %-5s failed: %s: %s\n", shape, loom_dtype_name(dts[d]), loom_result_str(rc),
                       loom_last_error());
                continue;
            }
            printf("%-12s %-5s %6u %6u %10.1f %10.1f %6.1f%%\n", shape, loom_dtype_name(dts[d]), mats, disp, gbs,
                   copy_gbs, 100.0 * gbs / copy_gbs);
        }
    loom_rt_destroy(rt);
    return 0;
}

int loom_bench_ops(int argc, char **argv)
{
    const bench_cfg *cfg = &full_cfg;
    const char *devices[16];
    int n_dev = 0;
    bool all = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            cfg = &quick_cfg;
        else if (!strcmp(argv[i], "--all"))
            all = true;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc && n_dev < 16)
            devices[n_dev++] = argv[++i];
        else {
            fprintf(stderr, "usage: loom bench ops [--quick] [--all | --device NAME ...]\n");
            return 2;
        }
    }
    if (all) {
        int rc = 0;
        for (int i = 0; i < 16; i++) {
            char idx[8];
            snprintf(idx, sizeof idx, "%d", i);
            loom_rt *probe;
            if (loom_rt_create(&(loom_rt_desc){ .device = idx }, &probe))
                break;
            loom_rt_destroy(probe);
            rc |= bench_device(idx, cfg);
        }
        return rc;
    }
    if (n_dev == 0)
        return bench_device(NULL, cfg);
    int rc = 0;
    for (int i = 0; i < n_dev; i++)
        rc |= bench_device(devices[i], cfg);
    return rc;
}
