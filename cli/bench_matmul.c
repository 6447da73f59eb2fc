/* `loom bench matmul`: TFLOP/s of MATMUL (y[t] = W x[t], T token rows) in
 * each of its kernel forms — the multi-column matvec (small), the tiled
 * form and, where the device has NV cooperative matrices, the coopmat form —
 * over the 1b decoder's shapes (rows x cols 2048x2048, 512x2048, 5632x2048,
 * 2048x5632) at T = 4, 64 and 512, beside a single-token MATVEC of the same
 * matrix (the floor the small form should stay near at T = 4). Each row
 * replays a program of independent dispatches (no barriers) that rotate
 * over enough copies of the weights to overflow the L2 cache, and keeps the
 * best replay after a 1.5 s warm-up of the GPU clock; weight GB/s counts
 * the weights' bytes (blocks with their scales).
 *
 * First, unless --no-check, every form is held against the CPU reference
 * on 512x2048 at T = 3, 17 and 64 (and MATMUL_ADD, MATMUL_SILU_MUL in the
 * coopmat form): max |got - want| over max |want|, where the coopmat form
 * rounds its inputs to f16 and the others compute in f32.
 *
 * --quick: small shapes for CPU implementations such as lavapipe;
 * --types LIST (default f16,q8_0,q4_k); --smi runs nvidia-smi's name and
 * clock query after the warm-up and after the table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "loom_ir_edit.h"
#include "loom_compiler.h"
#include "loom_ops.h"
#include "loom_ref.h"
#include "loom_runtime.h"

enum { FORM_SMALL, FORM_TILED, FORM_COOP, FORM_MATVEC, N_FORMS };
static const char *const form_names[N_FORMS] = { "small", "tiled", "coop", "matvec1" };

typedef struct mm_bench {
    loom_rt *rt;
    bool coopmat, quick;
    double warmup_s;
    uint64_t working_set;
} mm_bench;

/* Buffers of one measurement; released together. */
typedef struct mm_pool {
    loom_rt_buffer *b[80];
    uint32_t n;
} mm_pool;

static loom_result add_buf(mm_bench *m, mm_pool *p, loom_graph *g, const char *name, uint64_t size,
                           const void *data, uint32_t *id)
{
    loom_rt_buffer *b;
    size = (size + 255) & ~255ull;
    loom_result rc = loom_rt_buffer_create(m->rt, &(loom_rt_buffer_desc){ .name = name, .size = size }, &b);
    if (rc)
        return rc;
    p->b[p->n++] = b;
    if (data && (rc = loom_rt_buffer_write(m->rt, b, 0, data, size)))
        return rc;
    return loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = name, .size = size, .external = loom_rt_buffer_id(b) },
                                 id);
}

static void pool_release(mm_pool *p)
{
    for (uint32_t i = 0; i < p->n; i++)
        loom_rt_buffer_release(p->b[i]);
    p->n = 0;
}

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* The kernel and workgroups of a form (ir/loom_ops.h: LOOM_MATMUL_*); op
 * 0 MATMUL, 1 MATMUL_ADD, 2 MATMUL_SILU_MUL. NULL where there is none. */
/* The op of each op index below (0 MATMUL, 1 MATMUL_ADD, 2 MATMUL_SILU_MUL). */
static const loom_op mm_ops[3] = { LOOM_OP_MATMUL, LOOM_OP_MATMUL_ADD, LOOM_OP_MATMUL_SILU_MUL };

static const char *form_kernel(int form, int op, loom_dtype t, uint32_t rows, uint32_t T, uint32_t *groups)
{
    static const char *const rowname[3][3] = {
        { "matmul", "matmul_tiled", "matmul_coop" },
        { "matmul_add", "matmul_add_tiled", "matmul_add_coop" },
        { "matmul_silu_mul", "matmul_silu_mul_tiled", "matmul_silu_mul_coop" },
    };
    uint64_t g = form == FORM_SMALL ? loom_matmul_small_groups(mm_ops[op], rows, t)
                 : form == FORM_TILED
                     ? ceil_div(rows, LOOM_MATMUL_TILE_ROWS) * ceil_div(T, LOOM_MATMUL_TILE_T)
                     : ceil_div(rows, LOOM_MATMUL_COOP_ROWS) * ceil_div(T, LOOM_MATMUL_COOP_T);
    *groups = (uint32_t)g;
    return loom_form_kernel(rowname[op][form], t, t);
}

/* One dispatch of a form: W (and U), x, (r,) y bound whole. */
static loom_result add_node(loom_graph *g, const char *kernel, int op, uint32_t groups, const uint32_t *bufs,
                            const uint64_t *sizes, uint32_t nb, const loom_pc_matmul *pc)
{
    loom_binding b[5];
    for (uint32_t i = 0; i < nb; i++)
        b[i] = (loom_binding){ .buffer = bufs[i], .slot = i, .offset = 0, .size = sizes[i],
                               .access = i + 1 == nb ? LOOM_ACCESS_WRITE : LOOM_ACCESS_READ };
    loom_dispatch_desc d = { .kernel = kernel, .op = mm_ops[op], .groups = { groups, 1, 1 }, .bindings = b,
                             .n_bindings = nb, .push = pc, .push_size = sizeof *pc };
    return loom_graph_add_dispatch(g, &d, NULL);
}

static void schedule_flat(loom_graph *g)
{
    for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
        loom_node *n = loom_graph_node_mut(g, i);
        n->group = 0;
        n->barrier = LOOM_NONE;
    }
    loom_graph_set_scheduled(g, true);
}

static loom_result run_once(mm_bench *m, loom_graph *g)
{
    loom_rt_program *p = NULL;
    loom_result rc = loom_rt_program_create(m->rt, g, &p);
    uint64_t step;
    if (!rc && !(rc = loom_rt_replay(m->rt, p, NULL, &step)))
        rc = loom_rt_wait(m->rt, step);
    if (p)
        loom_rt_program_release(p);
    return rc;
}

/* Best seconds of a replay of g, after warmup_s back to back. */
static loom_result time_graph(mm_bench *m, loom_graph *g, double warmup_s, double *best)
{
    loom_rt_program *p;
    loom_result rc = loom_rt_program_create(m->rt, g, &p);
    if (rc)
        return rc;
    double t0 = loom_cli_now_us();
    while (!rc && loom_cli_now_us() - t0 < warmup_s * 1e6) {
        uint64_t step;
        rc = loom_rt_replay(m->rt, p, NULL, &step);
    }
    if (!rc)
        rc = loom_rt_wait_idle(m->rt);
    *best = 1e30;
    for (uint32_t r = 0; r < (m->quick ? 3u : 7u) && !rc; r++) {
        uint64_t step;
        double s = loom_cli_now_us();
        rc = loom_rt_replay(m->rt, p, NULL, &step);
        if (!rc)
            rc = loom_rt_wait(m->rt, step);
        double t = (loom_cli_now_us() - s) * 1e-6;
        if (r >= 2 && t < *best)
            *best = t;
    }
    loom_rt_program_release(p);
    return rc;
}

/* Random weights of type t, rows x cols, as a frontend stores them. */
static void *make_weights(loom_dtype t, uint32_t rows, uint32_t cols, uint64_t *bytes)
{
    *bytes = loom_view_bytes(t, rows, cols);
    uint8_t *w = calloc(1, *bytes + 256);
    float *v = malloc((size_t)cols * sizeof *v);
    if (!w || !v) {
        free(w);
        free(v);
        return NULL;
    }
    uint64_t rb = loom_dtype_row_bytes(t, cols);
    uint32_t s = 12345;
    for (uint32_t r = 0; r < rows; r++) {
        for (uint32_t c = 0; c < cols; c++) {
            s = s * 1664525u + 1013904223u;
            v[c] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 0.25f;
        }
        if (t == LOOM_F32)
            memcpy(w + r * rb, v, rb);
        else if (t == LOOM_F16)
            for (uint32_t c = 0; c < cols; c++)
                ((uint16_t *)(void *)(w + r * rb))[c] = loom_f32_to_f16(v[c]);
        else
            loom_quantize_row(t, v, cols, w + r * rb);
    }
    free(v);
    return w;
}

static float *make_x(uint64_t n, uint32_t seed)
{
    float *x = malloc(n * sizeof *x + 4);
    for (uint64_t i = 0; x && i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
    return x;
}

/* ---- correctness -------------------------------------------------------- */

/* max |got - want| / max |want| of one form and op against the reference. */
static loom_result check_one(mm_bench *m, loom_dtype t, int form, int op, uint32_t rows, uint32_t cols, uint32_t T,
                             double *err)
{
    uint64_t wb;
    void *W = make_weights(t, rows, cols, &wb), *U = make_weights(t, rows, cols, &wb);
    float *x = make_x((uint64_t)T * cols, 7), *r = make_x((uint64_t)T * rows, 9);
    float *want = malloc((uint64_t)T * rows * 4 + 4), *got = malloc((uint64_t)T * rows * 4 + 4);
    loom_graph *g = NULL;
    mm_pool p = { .n = 0 };
    loom_result rc = (!W || !U || !x || !r || !want || !got) ? LOOM_OUT_OF_MEMORY
                                                              : loom_graph_create(&(loom_graph_desc){ .name = "check" }, &g);
    uint32_t ids[5], groups, nb = 0;
    uint64_t sizes[5];
    const char *k = form_kernel(form, op, t, rows, T, &groups);
    if (!rc && !k)
        rc = LOOM_NOT_FOUND;
    if (!rc)
        rc = add_buf(m, &p, g, "W", wb, W, &ids[nb]);
    sizes[nb++] = wb;
    if (!rc && op == 2) {
        rc = add_buf(m, &p, g, "U", wb, U, &ids[nb]);
        sizes[nb++] = wb;
    }
    if (!rc)
        rc = add_buf(m, &p, g, "x", (uint64_t)T * cols * 4, x, &ids[nb]);
    sizes[nb++] = (uint64_t)T * cols * 4;
    if (!rc && op == 1) {
        rc = add_buf(m, &p, g, "r", (uint64_t)T * rows * 4, r, &ids[nb]);
        sizes[nb++] = (uint64_t)T * rows * 4;
    }
    if (!rc)
        rc = add_buf(m, &p, g, "y", (uint64_t)T * rows * 4, NULL, &ids[nb]);
    sizes[nb++] = (uint64_t)T * rows * 4;
    loom_pc_matmul pc = { rows, cols, T };
    if (!rc)
        rc = add_node(g, k, op, groups, ids, sizes, nb, &pc);
    if (!rc)
        rc = run_once(m, g);
    if (!rc)
        rc = loom_rt_buffer_read(m->rt, p.b[p.n - 1], 0, got, (uint64_t)T * rows * 4);
    if (!rc) {
        if (op == 2)
            loom_ref_matmul_silu_mul(t, W, U, x, want, rows, cols, T);
        else
            loom_ref_matmul(t, W, x, op == 1 ? r : NULL, want, rows, cols, T);
        double dmax = 0, wmax = 0;
        for (uint64_t i = 0; i < (uint64_t)T * rows; i++) {
            double d = fabs((double)got[i] - want[i]);
            dmax = d > dmax || isnan(d) ? d : dmax;
            wmax = fabs(want[i]) > wmax ? fabs(want[i]) : wmax;
        }
        *err = dmax / (wmax > 0 ? wmax : 1);
    }
    pool_release(&p);
    loom_graph_destroy(g);
    free(W);
    free(U);
    free(x);
    free(r);
    free(want);
    free(got);
    return rc;
}

/* The builder's MATMUL_SILU_MUL at T = 100 through loom_rt_compile: the
 * plan's kernel (the coopmat form where the device has it) and its error
 * against the reference. */
static int check_plan(mm_bench *m, loom_dtype t)
{
    const uint32_t rows = 300, cols = 512, T = 100;
    uint64_t wb;
    void *W = make_weights(t, rows, cols, &wb), *U = make_weights(t, rows, cols, &wb);
    float *x = make_x((uint64_t)T * cols, 5), *want = malloc((uint64_t)T * rows * 4), *got = malloc((uint64_t)T * rows * 4);
    loom_graph *g = NULL;
    loom_plan *plan = NULL;
    mm_pool p = { .n = 0 };
    uint32_t bw, bu, bx, by;
    loom_result rc = loom_graph_create(&(loom_graph_desc){ .name = "plan" }, &g);
    if (!rc)
        rc = add_buf(m, &p, g, "W", wb, W, &bw);
    if (!rc)
        rc = add_buf(m, &p, g, "U", wb, U, &bu);
    if (!rc)
        rc = add_buf(m, &p, g, "x", (uint64_t)T * cols * 4, x, &bx);
    if (!rc)
        rc = add_buf(m, &p, g, "y", (uint64_t)T * rows * 4, NULL, &by);
    if (!rc)
        rc = loom_op_matmul_silu_mul(g, loom_mat(bw, t, rows, cols), loom_mat(bu, t, rows, cols),
                                     loom_mat(bx, LOOM_F32, T, cols), loom_mat(by, LOOM_F32, T, rows), NULL);
    if (!rc)
        rc = loom_rt_compile(m->rt, g, NULL, &plan, NULL);
    if (!rc)
        rc = run_once(m, (loom_graph *)loom_plan_graph(plan));
    if (!rc)
        rc = loom_rt_buffer_read(m->rt, p.b[3], 0, got, (uint64_t)T * rows * 4);
    double dmax = 0, wmax = 0;
    if (!rc) {
        loom_ref_matmul_silu_mul(t, W, U, x, want, rows, cols, T);
        for (uint64_t i = 0; i < (uint64_t)T * rows; i++) {
            double d = fabs((double)got[i] - want[i]);
            dmax = d > dmax || isnan(d) ? d : dmax;
            wmax = fabs(want[i]) > wmax ? fabs(want[i]) : wmax;
        }
        const loom_graph *pg = loom_plan_graph(plan);
        printf("  plan: %s %ux%u T=%u MATMUL_SILU_MUL -> %s, error %.3g\n", loom_dtype_name(t), rows, cols, T,
               loom_graph_kernel_name(pg, loom_graph_node(pg, 0)->kernel), dmax / (wmax > 0 ? wmax : 1));
    } else {
        printf("  plan: %s: %s: %s\n", loom_dtype_name(t), loom_result_str(rc), loom_last_error());
    }
    if (plan)
        loom_plan_release(plan);
    pool_release(&p);
    loom_graph_destroy(g);
    free(W);
    free(U);
    free(x);
    free(want);
    free(got);
    return rc || dmax / (wmax > 0 ? wmax : 1) > 4e-3;
}

static int check_all(mm_bench *m, const loom_dtype *types, uint32_t n_types)
{
    static const uint32_t Ts[] = { 3, 17, 64 };
    uint32_t rows = m->quick ? 130 : 512, cols = m->quick ? 256 : 2048;
    int bad = 0;
    printf("check: %ux%u, max |got - want| / max |want|\n", rows, cols);
    for (uint32_t i = 0; i < n_types; i++)
        bad |= check_plan(m, types[i]);
    for (uint32_t i = 0; i < n_types; i++)
        for (int form = FORM_SMALL; form <= FORM_COOP; form++)
            for (int op = 0; op < 3; op++) {
                if ((form == FORM_COOP && !m->coopmat) || (op && form != FORM_COOP && !m->quick))
                    continue;
                for (size_t k = 0; k < sizeof Ts / sizeof Ts[0]; k++) {
                    double err = 0;
                    uint32_t g;
                    if (!form_kernel(form, op, types[i], rows, Ts[k], &g))
                        continue;
                    loom_result rc = check_one(m, types[i], form, op, rows, cols, Ts[k], &err);
                    /* f16 inputs: a few units of f16's last place over sums of 2048 */
                    double lim = form == FORM_COOP ? 4e-3 : 1e-5;
                    bool ok = !rc && err <= lim;
                    bad |= !ok;
                    printf("  %-5s %-6s %-15s T=%-3u %.3g%s\n", loom_dtype_name(types[i]), form_names[form],
                           op == 0 ? "MATMUL" : op == 1 ? "MATMUL_ADD" : "MATMUL_SILU_MUL", Ts[k], err,
                           rc ? " (failed to run)" : ok ? "" : "  <-- over the bound");
                    if (rc)
                        fprintf(stderr, "    %s: %s\n", loom_result_str(rc), loom_last_error());
                }
            }
    return bad;
}

/* ---- timing ------------------------------------------------------------- */

/* Seconds a dispatch of form takes, best of the replays: n dispatches
 * rotating over copies of the weights. */
static loom_result time_form(mm_bench *m, loom_dtype t, int form, uint32_t rows, uint32_t cols, uint32_t T,
                             const void *W, uint64_t wb, const float *x, double warmup, double *sec)
{
    uint32_t groups;
    const char *k = form == FORM_MATVEC ? loom_form_kernel("matvec", t, t) : form_kernel(form, 0, t, rows, T, &groups);
    if (form == FORM_MATVEC)
        groups = (uint32_t)ceil_div(rows, loom_dtype_is_block(t) ? 8 : 2);   /* ir/ops.c rows_per_group */
    if (!k)
        return LOOM_NOT_FOUND;
    uint32_t tt = form == FORM_MATVEC ? 1 : T;
    double flops = 2.0 * rows * cols * tt;
    double est = fmax((double)wb / 2.5e12, flops / (form == FORM_COOP ? 150e12 : form == FORM_TILED ? 20e12 : 5e12));
    uint32_t n = m->quick ? 2 : (uint32_t)fmin(256, fmax(4, ceil(3e-3 / est)));
    uint32_t copies = (uint32_t)fmin(n, fmax(1, ceil((double)m->working_set / wb)));
    loom_graph *g = NULL;
    mm_pool p = { .n = 0 };
    loom_result rc = loom_graph_create(&(loom_graph_desc){ .name = "bench" }, &g);
    uint32_t wid[64], xid = 0, yid = 0;
    if (copies > 64)
        copies = 64;
    for (uint32_t c = 0; c < copies && !rc; c++)
        rc = add_buf(m, &p, g, "W", wb, W, &wid[c]);
    if (!rc)
        rc = add_buf(m, &p, g, "x", (uint64_t)tt * cols * 4, x, &xid);
    if (!rc)
        rc = add_buf(m, &p, g, "y", (uint64_t)tt * rows * 4, NULL, &yid);
    loom_pc_matmul pc = { rows, cols, tt };
    for (uint32_t i = 0; i < n && !rc; i++) {
        uint32_t ids[3] = { wid[i % copies], xid, yid };
        uint64_t sizes[3] = { wb, (uint64_t)tt * cols * 4, (uint64_t)tt * rows * 4 };
        if (form == FORM_MATVEC) {
            loom_tensor tw = loom_mat(wid[i % copies], t, rows, cols);
            rc = loom_op_matvec(g, tw, loom_vec(xid, cols), loom_vec(yid, rows), NULL);
        } else {
            rc = add_node(g, k, 0, groups, ids, sizes, 3, &pc);
        }
    }
    /* Outputs overlap (the same y): no barriers between them, by design. */
    if (!rc)
        schedule_flat(g);
    double best = 0;
    if (!rc)
        rc = time_graph(m, g, warmup, &best);
    *sec = best / n;
    pool_release(&p);
    loom_graph_destroy(g);
    return rc;
}

static void smi(const char *when)
{
    printf("nvidia-smi (%s): ", when);
    fflush(stdout);
    if (system("nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader") != 0)
        printf("(none)\n");
    fflush(stdout);
}

static int bench(mm_bench *m, const loom_dtype *types, uint32_t n_types, bool use_smi)
{
    static const uint32_t full[4][2] = { { 2048, 2048 }, { 512, 2048 }, { 5632, 2048 }, { 2048, 5632 } };
    static const uint32_t quick[2][2] = { { 256, 256 }, { 130, 512 } };
    static const uint32_t Ts[] = { 4, 64, 512 }, quick_Ts[] = { 4, 64 };
    uint32_t n_shapes = m->quick ? 2 : 4, n_T = m->quick ? 2 : 3;
    double warm = m->warmup_s;
    bool warmed = false;
    printf("\n%-5s %-10s %4s %-7s %10s %9s %9s\n", "type", "rows x cols", "T", "form", "us", "TFLOP/s", "W GB/s");
    for (uint32_t i = 0; i < n_types; i++)
        for (uint32_t s = 0; s < n_shapes; s++) {
            uint32_t rows = m->quick ? quick[s][0] : full[s][0], cols = m->quick ? quick[s][1] : full[s][1];
            uint64_t wb;
            void *W = make_weights(types[i], rows, cols, &wb);
            float *x = make_x((uint64_t)512 * cols, 3);
            for (uint32_t k = 0; k < n_T && W && x; k++) {
                uint32_t T = m->quick ? quick_Ts[k] : Ts[k];
                for (int form = FORM_SMALL; form < N_FORMS; form++) {
                    if ((form == FORM_COOP && !m->coopmat) || (form == FORM_MATVEC && T != 4) ||
                        (form == FORM_SMALL && T > 64))
                        continue;
                    double sec;
                    loom_result rc = time_form(m, types[i], form, rows, cols, T, W, wb, x, warmed ? 0.05 : warm, &sec);
                    if (!warmed && use_smi)
                        smi("after the warm-up");
                    warmed = true;
                    if (rc == LOOM_NOT_FOUND)
                        continue;
                    if (rc) {   /* say so and go on: the other forms still tell something */
                        printf("%-5s %ux%u T=%u %s: %s: %s\n", loom_dtype_name(types[i]), rows, cols, T,
                               form_names[form], loom_result_str(rc), loom_last_error());
                        if (rc == LOOM_DEVICE_LOST) {
                            free(W);
                            free(x);
                            return 1;
                        }
                        continue;
                    }
                    uint32_t tt = form == FORM_MATVEC ? 1 : T;
                    char shape[24];
                    snprintf(shape, sizeof shape, "%ux%u", rows, cols);
                    printf("%-5s %-10s %4u %-7s %10.2f %9.2f %9.1f\n", loom_dtype_name(types[i]), shape, tt,
                           form_names[form], sec * 1e6, 2.0 * rows * cols * tt / sec * 1e-12, wb / sec * 1e-9);
                    fflush(stdout);
                }
            }
            free(W);
            free(x);
        }
    if (use_smi)
        smi("after the table");
    return 0;
}

int loom_bench_matmul(int argc, char **argv)
{
    mm_bench m = { .warmup_s = 1.5, .working_set = 256ull << 20 };
    loom_dtype types[8] = { LOOM_F16, LOOM_Q8_0, LOOM_Q4_K };
    uint32_t n_types = 3;
    bool check = true, use_smi = false;
    const char *device = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            m.quick = true;
            m.warmup_s = 0;
            m.working_set = 4ull << 20;
        } else if (!strcmp(argv[i], "--no-check")) {
            check = false;
        } else if (!strcmp(argv[i], "--smi")) {
            use_smi = true;
        } else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            device = argv[++i];
        } else if (!strcmp(argv[i], "--types") && i + 1 < argc) {
            n_types = 0;
            char list[128];
            snprintf(list, sizeof list, "%s", argv[++i]);
            for (char *tok = strtok(list, ","); tok && n_types < 8; tok = strtok(NULL, ","))
                if (loom_dtype_parse(tok, &types[n_types]) == LOOM_OK && types[n_types] != LOOM_U32)
                    n_types++;
        } else {
            fprintf(stderr, "usage: loom bench matmul [--quick] [--no-check] [--smi] [--types f16,q8_0,...] "
                            "[--device NAME]\n");
            return 2;
        }
    }
    loom_result rc = loom_rt_create(&(loom_rt_desc){ .device = device }, &m.rt);
    if (rc)
        return loom_cli_fail("bench matmul", rc);
    loom_rt_info info;
    loom_rt_get_info(m.rt, &info);
    m.coopmat = info.coopmat;
    printf("device: %s (subgroup %u, cooperative matrices %s)\n", info.device_name, info.subgroup_size,
           m.coopmat ? "yes" : "no");
    int bad = check ? check_all(&m, types, n_types) : 0;
    int r = bench(&m, types, n_types, use_smi);
    r |= loom_cli_validation(m.rt, "bench matmul");
    loom_rt_destroy(m.rt);
    return r ? r : bad;
}
