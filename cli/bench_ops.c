/* `loom bench ops`: how close the MATVEC kernels come to the memory bandwidth
 * a plain copy kernel reaches on the same device in the same run. Each row
 * replays a program of many independent matvecs (no barriers between them)
 * that rotate over enough distinct weight matrices to overflow the GPU's L2
 * cache, times replay + wait on the host after a warm-up, and keeps the best
 * replay. Copy counts bytes read + written; matvec counts weight bytes only
 * (for the block types, the blocks' bytes: scales included).
 * --quick uses small shapes and working sets, for CPU implementations such
 * as lavapipe. --device NAME (repeatable) picks devices; --all takes every
 * device index until one fails to open.
 *
 * Every timed program first runs back to back for at least 1.5 s and until
 * two windows of its replays agree (llama-decode's warm-up rule; not with
 * --quick):
 * the GPU idles at a low clock and reaches its boost clock only under
 * sustained load, and latency-bound work timed cold reads ~3x slow.
 *
 * --isolated times each op as a decode step runs it: alone between two
 * barriers (64 copies on rotating weights, a barrier before each), GPU time
 * per op from timestamps, against its bytes over the copy bandwidth; plus a
 * bare harness, a plain f16 matvec kernel kept here as the yardstick.
 * --isolated --hot runs every op of a row on one weight set, which the L2
 * cache holds where it fits: how much faster a level would be with its
 * weights already in the cache. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "llama_run.h"
#include "loom_ir_edit.h"
#include "loom_ops.h"
#include "loom_runtime.h"

typedef struct bench_cfg {
    uint64_t working_set;   /* bytes of distinct weights (or copy sources) per row */
    uint64_t per_replay;    /* bytes one replay should stream, so timing noise is small */
    uint32_t max_dispatches;
    uint32_t reps;
    uint32_t shapes[4][2];
    double warmup_s;        /* back-to-back replays before timing */
    /* --isolated: dim, ffn, vocab, heads, kv heads, head dim, kv_len */
    uint32_t dim, ffn, vocab, heads, kv_heads, head_dim, kv_len;
    bool hot;               /* --isolated --hot: every op on one weight set */
} bench_cfg;

static const bench_cfg full_cfg = { 256ull << 20, 1ull << 30, 512, 10,
                                    { { 2048, 2048 }, { 8192, 2048 }, { 2048, 8192 }, { 32000, 2048 } }, 1.5,
                                    2048, 8192, 32000, 32, 8, 64, 512, false };
static const bench_cfg quick_cfg = { 4ull << 20, 8ull << 20, 64, 3,
                                     { { 256, 256 }, { 512, 256 }, { 256, 512 }, { 1000, 256 } }, 0.0,
                                     256, 512, 1000, 8, 4, 32, 64, false };

#define ALIGN_UP(x) (((x) + LOOM_BIND_ALIGN - 1) / LOOM_BIND_ALIGN * LOOM_BIND_ALIGN)

/* Buffers the program refers to; released together. */
typedef struct pool {
    loom_rt_buffer *b[160];
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

/* The clock warm-up, by llama-decode's rule (loom_llama_warm_end): p
 * replayed back to back in windows of LOOM_LLAMA_WARM_WINDOW replays, each
 * drained, until at least `seconds` have passed and two successive
 * windows' time per replay agree, or WARM_CAP_S have passed (shorter than
 * llama-decode's cap: a run times dozens of programs). A fixed time was
 * not always enough: a freshly started GPU read 15% slow after 1.5 s. What
 * it took is added to warm_spent_s, and a warm-up that ended at the cap
 * counted in warm_unstable (both printed under the tables). */
#define WARM_CAP_S 5.0
static double warm_spent_s;
static uint32_t warm_programs, warm_unstable;

static loom_result warm_sp(loom_rt *rt, loom_rt_program *p, const loom_step_params *sp, double seconds)
{
    if (seconds <= 0)
        return LOOM_OK;
    loom_result rc = LOOM_OK;
    loom_llama_warm w = { .t0 = loom_cli_now_us() };
    for (bool over = false; !rc && !over;) {
        loom_llama_warm_begin(rt, &w);
        for (uint32_t i = 0; i < LOOM_LLAMA_WARM_WINDOW && !rc; i++) {
            uint64_t step;
            rc = loom_rt_replay(rt, p, sp, &step);
        }
        if (!rc)
            rc = loom_rt_wait_idle(rt);
        over = loom_llama_warm_end(rt, &w, LOOM_LLAMA_WARM_WINDOW, seconds, WARM_CAP_S);
    }
    warm_spent_s += (loom_cli_now_us() - w.t0) / 1e6;
    warm_programs++;
    warm_unstable += !w.stable;
    return rc;
}

static loom_result warm(loom_rt *rt, loom_rt_program *p, double seconds) { return warm_sp(rt, p, NULL, seconds); }

/* Best seconds per replay of g over reps, after the warm-up and two more
 * replays. */
static loom_result time_graph(loom_rt *rt, loom_graph *g, uint32_t reps, double warmup_s, double *best)
{
    loom_rt_program *p;
    loom_result rc = loom_rt_program_create(rt, g, &p);
    if (rc)
        return rc;
    if ((rc = warm(rt, p, warmup_s))) {
        loom_rt_program_release(p);
        return rc;
    }
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
        rc = time_graph(rt, g, cfg->reps, cfg->warmup_s, &t);
    }
    *gbs = rc ? 0 : 2.0 * chunk * n_disp / t / 1e9;
    pool_release(&p);
    loom_graph_destroy(g);
    return rc;
}

static loom_result bench_matvec(loom_rt *rt, const bench_cfg *cfg, loom_dtype dt, uint32_t rows, uint32_t cols,
                                double *gbs, uint32_t *out_mats, uint32_t *out_disp)
{
    uint64_t wbytes = (uint64_t)rows * loom_dtype_row_bytes(dt, cols);
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
        rc = time_graph(rt, g, cfg->reps, cfg->warmup_s, &t);
    }
    *gbs = rc ? 0 : (double)wbytes * n_disp / t / 1e9;
    *out_mats = n_mat;
    *out_disp = n_disp;
    pool_release(&p);
    loom_graph_destroy(g);
    return rc;
}

/* ---- isolated ops --------------------------------------------------------- */

/* The yardstick: one subgroup per row, 16-byte weight loads, a subgroup sum.
 * Kept here, apart from the op library, so it does not move when the
 * library's kernels do. cols must be a multiple of 8. */
static const char BARE_MATVEC[] =
    "#version 450\n"
    "#extension GL_KHR_shader_subgroup_basic : require\n"
    "#extension GL_KHR_shader_subgroup_arithmetic : require\n"
    "layout(local_size_x = 256) in;\n"
    "layout(set = 0, binding = 0) readonly buffer W { uvec4 w[]; };\n"
    "layout(set = 0, binding = 1) readonly buffer X { vec4 x[]; };\n"
    "layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };\n"
    "layout(push_constant) uniform Pc { uint rows, cols; } pc;\n"
    "void main() {\n"
    "  uint row = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;\n"
    "  if (row >= pc.rows) return;\n"
    "  uint n8 = pc.cols / 8u, base = row * n8;\n"
    "  float acc = 0.0;\n"
    "  for (uint i = gl_SubgroupInvocationID; i < n8; i += gl_SubgroupSize) {\n"
    "    uvec4 p = w[base + i];\n"
    "    acc += dot(vec4(unpackHalf2x16(p.x), unpackHalf2x16(p.y)), x[2u * i]) +\n"
    "           dot(vec4(unpackHalf2x16(p.z), unpackHalf2x16(p.w)), x[2u * i + 1u]);\n"
    "  }\n"
    "  acc = subgroupAdd(acc);\n"
    "  if (subgroupElect()) y[row] = acc;\n"
    "}\n";

typedef enum iso_kind {
    ISO_MATVEC, ISO_MATVEC_SILU_MUL, ISO_MATVEC_ADD, ISO_ATTENTION, ISO_ARGMAX, ISO_BARE, ISO_NORM_MATVEC, ISO_NORM_SILU_MUL, ISO_NORM_ARGMAX
} iso_kind;

typedef struct iso_case {
    const char *name;
    iso_kind kind;
    uint32_t rows, cols;     /* matvecs; ARGMAX: cols = n */
} iso_case;

#define ISO_OPS 64u          /* ops per replay, a barrier before each */

/* Bytes one op must move at least: every input read once, the output
 * written once. */
static uint64_t iso_bytes(const iso_case *c, const bench_cfg *cfg)
{
    uint64_t w = (uint64_t)c->rows * c->cols * 2, x = (uint64_t)c->cols * 4, y = (uint64_t)c->rows * 4;
    uint64_t kvd = (uint64_t)cfg->kv_heads * cfg->head_dim, qd = (uint64_t)cfg->heads * cfg->head_dim;
    switch (c->kind) {
    case ISO_MATVEC:
    case ISO_BARE: return w + x + y;
    case ISO_NORM_MATVEC:
    case ISO_NORM_ARGMAX: return w + 2 * x + y;
    case ISO_NORM_SILU_MUL: return 2 * w + 2 * x + y;
    case ISO_MATVEC_SILU_MUL: return 2 * w + x + y;
    case ISO_MATVEC_ADD: return w + x + 2 * y;
    case ISO_ATTENTION: return 2 * (uint64_t)cfg->kv_len * kvd * 4 + 2 * qd * 4;
    case ISO_ARGMAX: return x + 4;
    }
    return 0;
}

/* Appends op i of the case on weight set j (sets rotate so the weights
 * stream from memory, not the cache); y is the op's own output slice. */
static loom_result iso_append(loom_graph *g, const iso_case *c, const bench_cfg *cfg, const uint32_t *set, uint32_t x,
                              uint32_t y, uint64_t yoff, uint32_t subgroup)
{
    loom_tensor W = loom_mat(set[0], LOOM_F16, c->rows, c->cols);
    loom_tensor xv = loom_vec(x, c->cols), yv = loom_vec_at(y, yoff, c->rows);
    switch (c->kind) {
    case ISO_MATVEC: return loom_op_matvec(g, W, xv, yv, NULL);
    case ISO_MATVEC_SILU_MUL:
        return loom_op_matvec_silu_mul(g, W, loom_mat(set[1], LOOM_F16, c->rows, c->cols), xv, yv, NULL);
    case ISO_MATVEC_ADD: return loom_op_matvec_add(g, W, xv, loom_vec(set[1], c->rows), yv, NULL);
    case ISO_NORM_MATVEC: return loom_op_rms_norm_matvec(g, W, xv, xv, yv, 1e-5f, NULL);
    case ISO_NORM_ARGMAX:
        return loom_op_rms_norm_matvec_argmax(g, W, xv, xv, yv, (loom_tensor){ set[1], LOOM_U32, 0, 1, 1 }, 1e-5f,
                                              NULL);
    case ISO_NORM_SILU_MUL:
        return loom_op_rms_norm_matvec_silu_mul(g, W, loom_mat(set[1], LOOM_F16, c->rows, c->cols), xv, xv, yv, 1e-5f,
                                                NULL);
    case ISO_ATTENTION: {
        uint32_t qd = cfg->heads * cfg->head_dim, kvd = cfg->kv_heads * cfg->head_dim;
        return loom_op_attention(g, loom_vec(x, qd), loom_mat(set[0], LOOM_F32, cfg->kv_len, kvd),
                                 loom_mat(set[1], LOOM_F32, cfg->kv_len, kvd), loom_vec_at(y, yoff, qd), cfg->heads,
                                 cfg->kv_heads, cfg->head_dim, NULL);
    }
    case ISO_ARGMAX: return loom_op_argmax(g, xv, (loom_tensor){ y, LOOM_U32, yoff, 1, 1 }, NULL);
    case ISO_BARE: {
        loom_binding b[3] = {
            { .buffer = set[0], .slot = 0, .size = (uint64_t)c->rows * c->cols * 2, .access = LOOM_ACCESS_READ },
            { .buffer = x, .slot = 1, .size = (uint64_t)c->cols * 4, .access = LOOM_ACCESS_READ },
            { .buffer = y, .slot = 2, .offset = yoff, .size = (uint64_t)c->rows * 4, .access = LOOM_ACCESS_WRITE },
        };
        uint32_t pc[2] = { c->rows, c->cols }, per_group = 256 / (subgroup ? subgroup : 32);
        loom_dispatch_desc d = { .kernel = "bench_bare_matvec_f16", .op = LOOM_OP_OTHER,
                                 .groups = { (c->rows + per_group - 1) / per_group, 1, 1 }, .bindings = b,
                                 .n_bindings = 3, .push = pc, .push_size = sizeof pc };
        return loom_graph_add_dispatch(g, &d, NULL);
    }
    }
    return loom_fail(LOOM_INVALID_ARGUMENT, "bench ops: unknown isolated case");
}

/* GPU µs per op of one isolated case: ISO_OPS ops, a barrier before each. */
static loom_result bench_iso(loom_rt *rt, const bench_cfg *cfg, const iso_case *c, uint32_t subgroup, double *us)
{
    uint64_t kvd = (uint64_t)cfg->kv_heads * cfg->head_dim;
    uint64_t wbytes = c->kind == ISO_ATTENTION ? (uint64_t)cfg->kv_len * kvd * 4
                      : c->kind == ISO_ARGMAX  ? 0
                                               : (uint64_t)c->rows * c->cols * 2;
    uint32_t per_set = c->kind == ISO_MATVEC_SILU_MUL || c->kind == ISO_NORM_SILU_MUL || c->kind == ISO_ATTENTION ? 2
                       : c->kind == ISO_MATVEC_ADD || c->kind == ISO_NORM_ARGMAX ? 2
                       : c->kind == ISO_ARGMAX                                    ? 0
                                                                                  : 1;
    uint32_t n_set = wbytes && !cfg->hot ? clampu((cfg->working_set + wbytes - 1) / wbytes, 2, 64) : 1;
    uint32_t out_n = c->kind == ISO_ATTENTION ? cfg->heads * cfg->head_dim : c->kind == ISO_ARGMAX ? 1 : c->rows;
    uint32_t in_n = c->kind == ISO_ATTENTION ? cfg->heads * cfg->head_dim : c->cols;
    uint64_t yslice = ALIGN_UP((uint64_t)out_n * 4);
    loom_graph *g;
    loom_result rc = loom_graph_create(&(loom_graph_desc){ .name = "bench_isolated" }, &g);
    if (rc)
        return rc;
    pool p = { .n = 0 };
    uint32_t sets[64][2] = { { 0 } }, x = 0, y = 0;
    for (uint32_t i = 0; i < n_set && !rc; i++)
        for (uint32_t k = 0; k < per_set && !rc; k++) {
            uint64_t size = c->kind == ISO_MATVEC_ADD && k == 1 ? (uint64_t)c->rows * 4
                            : c->kind == ISO_NORM_ARGMAX && k == 1 ? 256 : wbytes;
            rc = pool_add(rt, &p, g, k ? "W2" : "W", size, &sets[i][k]);
        }
    if (!rc)
        rc = pool_add(rt, &p, g, "x", (uint64_t)in_n * 4, &x);
    if (!rc)
        rc = pool_add(rt, &p, g, "y", yslice * ISO_OPS, &y);
    for (uint32_t j = 0; j < ISO_OPS && !rc; j++)
        rc = iso_append(g, c, cfg, sets[j % n_set], x, y, yslice * j, subgroup);
    loom_rt_program *prog = NULL;
    if (!rc) {
        /* Unscheduled: the runtime records a barrier before every node. */
        loom_graph_set_scheduled(g, false);
        rc = loom_rt_program_create(rt, g, &prog);
    }
    /* Attention reads the cache up to kv_len from the step parameters. */
    loom_step_params sp = { .pos = cfg->kv_len - 1, .kv_len = cfg->kv_len, .rows = 1 };
    if (!rc)
        rc = warm_sp(rt, prog, &sp, cfg->warmup_s);
    if (!rc)
        rc = loom_rt_wait_idle(rt);
    loom_rt_counters c0, c1;
    double t0;
    loom_rt_collect_timestamps(rt);
    loom_rt_get_counters(rt, &c0);
    uint32_t reps = cfg->reps * 4;
    t0 = loom_cli_now_us();
    for (uint32_t r = 0; r < reps && !rc; r++) {
        uint64_t step;
        rc = loom_rt_replay(rt, prog, &sp, &step);
    }
    if (!rc)
        rc = loom_rt_wait_idle(rt);
    double host = loom_cli_now_us() - t0;
    loom_rt_collect_timestamps(rt);
    loom_rt_get_counters(rt, &c1);
    if (!rc) {
        uint64_t timed = c1.timed_steps - c0.timed_steps;
        double total = timed == reps ? (double)(c1.gpu_ns - c0.gpu_ns) / 1e3 : host;
        *us = total / reps / ISO_OPS;
    }
    loom_rt_program_release(prog);
    pool_release(&p);
    loom_graph_destroy(g);
    return rc;
}

static loom_result bench_isolated(loom_rt *rt, const bench_cfg *cfg, double copy_gbs, uint32_t subgroup)
{
    loom_result rc = loom_rt_kernel_glsl(rt, "bench_bare_matvec_f16", BARE_MATVEC);
    if (rc)
        return rc;
    const uint32_t d = cfg->dim, f = cfg->ffn;
    const iso_case cases[] = {
        { "MATVEC", ISO_MATVEC, d, d },         { "MATVEC", ISO_MATVEC, f, d },
        { "MATVEC", ISO_MATVEC, d, f },         { "MATVEC", ISO_MATVEC, cfg->vocab, d },
        { "MATVEC_SILU_MUL", ISO_MATVEC_SILU_MUL, f, d }, { "MATVEC_ADD", ISO_MATVEC_ADD, d, d },
        { "NORM_MATVEC", ISO_NORM_MATVEC, d, d },  { "NORM_SILU_MUL", ISO_NORM_SILU_MUL, f, d },
        { "NORM_MATVEC", ISO_NORM_MATVEC, cfg->vocab, d }, { "NORM_ARGMAX", ISO_NORM_ARGMAX, cfg->vocab, d },
        { "ATTENTION", ISO_ATTENTION, 0, 0 },   { "ARGMAX", ISO_ARGMAX, 1, cfg->vocab },
        { "bare harness", ISO_BARE, d, d },     { "near-empty", ISO_BARE, 4096, 8 },
    };
    printf("isolated: %u ops per replay, a barrier before each, GPU time per op; floor = bytes / copy %.0f GB/s\n",
           ISO_OPS, copy_gbs);
    printf("%-16s %-22s %10s %10s %10s %7s\n", "op", "shape", "us/op", "MB", "floor us", "share");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const iso_case *c = &cases[i];
        char shape[48];
        if (c->kind == ISO_ATTENTION)
            snprintf(shape, sizeof shape, "%u/%u heads x %u, kv %u", cfg->heads, cfg->kv_heads, cfg->head_dim,
                     cfg->kv_len);
        else if (c->kind == ISO_ARGMAX)
            snprintf(shape, sizeof shape, "%u", c->cols);
        else
            snprintf(shape, sizeof shape, "%ux%u f16", c->rows, c->cols);
        double us = 0;
        rc = bench_iso(rt, cfg, c, subgroup, &us);
        if (rc) {
            printf("%-16s %-22s failed: %s: %s\n", c->name, shape, loom_result_str(rc), loom_last_error());
            continue;
        }
        double bytes = (double)iso_bytes(c, cfg), floor_us = bytes / (copy_gbs * 1e3);
        printf("%-16s %-22s %10.2f %10.2f %10.2f %6.0f%%\n", c->name, shape, us, bytes / 1e6, floor_us,
               100.0 * floor_us / us);
    }
    return LOOM_OK;
}

/* What the warm-ups of one device's programs took (warm_sp's rule). */
static void print_warmup(void)
{
    if (warm_programs)
        printf("warm-up: %.1f s over %u programs (%u stopped at the %.0f s cap before two windows of %u replays "
               "agreed within %.0f%%)\n",
               warm_spent_s, warm_programs, warm_unstable, WARM_CAP_S, LOOM_LLAMA_WARM_WINDOW,
               100.0 * LOOM_LLAMA_WARM_AGREE);
    warm_spent_s = 0;
    warm_programs = warm_unstable = 0;
}

/* --dtype NAME (repeatable): the weight types of the bandwidth table; all
 * of them by default. */
static loom_dtype only_dts[8];
static size_t n_only;

static int bench_device(const char *device, const bench_cfg *cfg, bool isolated)
{
    loom_rt *rt;
    loom_result rc = loom_rt_create(&(loom_rt_desc){ .device = device, .timestamps = true }, &rt);
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
    if (isolated) {
        rc = bench_isolated(rt, cfg, copy_gbs, info.subgroup_size);
        print_warmup();
        int status = rc ? loom_cli_fail("bench ops: isolated", rc) : loom_cli_validation(rt, "bench ops");
        loom_rt_destroy(rt);
        return status;
    }
    printf("%-12s %-5s %6s %6s %10s %10s %7s\n", "shape", "dtype", "mats", "disp", "GB/s", "copy GB/s", "ratio");
    static const loom_dtype all_dts[] = { LOOM_F16, LOOM_F32, LOOM_Q8_0, LOOM_Q4_0, LOOM_Q4_K, LOOM_Q6_K };
    const loom_dtype *dts = n_only ? only_dts : all_dts;
    size_t n_dts = n_only ? n_only : sizeof all_dts / sizeof all_dts[0];
    for (size_t d = 0; d < n_dts; d++)
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
    print_warmup();
    int status = loom_cli_validation(rt, "bench ops");
    loom_rt_destroy(rt);
    return status;
}

int loom_bench_ops(int argc, char **argv)
{
    const bench_cfg *cfg = &full_cfg;
    const char *devices[16];
    int n_dev = 0;
    bool all = false, isolated = false, hot = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            cfg = &quick_cfg;
        else if (!strcmp(argv[i], "--isolated"))
            isolated = true;
        else if (!strcmp(argv[i], "--hot"))
            hot = true;
        else if (!strcmp(argv[i], "--all"))
            all = true;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc && n_dev < 16)
            devices[n_dev++] = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            loom_dtype dt;
            if (loom_dtype_parse(argv[++i], &dt) != LOOM_OK || dt == LOOM_U32) {
                fprintf(stderr, "bench ops: --dtype %s: not one of f16, f32, q8_0, q4_0, q4_k, q6_k\n", argv[i]);
                return 2;
            }
            if (n_only == sizeof only_dts / sizeof only_dts[0]) {
                fprintf(stderr, "bench ops: more than %zu --dtype\n", sizeof only_dts / sizeof only_dts[0]);
                return 2;
            }
            only_dts[n_only++] = dt;
        } else {
            fprintf(stderr, "usage: loom bench ops [--quick] [--isolated [--hot]] [--dtype NAME ...] "
                            "[--all | --device NAME ...]\n");
            return 2;
        }
    }
    /* --hot: every op on one weight set, so they come from the L2 cache
     * where they fit in it: against the rotating sets, what a level would
     * gain from weights already in the cache. */
    static bench_cfg hot_cfg;
    if (hot) {
        if (!isolated) {
            fprintf(stderr, "bench ops: --hot goes with --isolated\n");
            return 2;
        }
        hot_cfg = *cfg;
        hot_cfg.hot = true;
        cfg = &hot_cfg;
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
            rc |= bench_device(idx, cfg, isolated);
        }
        return rc;
    }
    if (n_dev == 0)
        return bench_device(NULL, cfg, isolated);
    int rc = 0;
    for (int i = 0; i < n_dev; i++)
        rc |= bench_device(devices[i], cfg, isolated);
    return rc;
}
