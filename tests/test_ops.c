/* Every op of the op library on the device against the CPU reference
 * (reference/reference.c), under the validation layer. Each case draws fresh
 * seeded inputs, poisons its outputs with NaN so an element the kernel
 * forgot fails, and sweeps awkward shapes: n = 1, odd sizes, one row, more
 * rows than workgroups, lengths that are not a multiple of the vector width.
 * Sized for lavapipe (a dispatch costs ~35 µs, all on the CPU). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "loom_ops.h"
#include "loom_passes.h"
#include "loom_ref.h"
#include "loom_runtime.h"
#include "test_rand.h"
#include "runner.h"
#ifdef LOOM_OPS_FUSE_TESTS
#include "loom_compiler.h"
#endif

static loom_rt *rt;

/* ---- tolerance per op (ops.def): |got - want| <= abs + rel * |want| ------ */

/* slack: more allowed on every element (a kernel's stated rounding beyond
 * the op's own; 0 for the op's tolerance alone), and where each is not
 * NULL, each[i] more on element i. */
static void expect_close_slack(loom_op op, const char *what, const float *got, const float *want, uint64_t n,
                               float slack, const float *each)
{
    const loom_op_info *t = loom_op_info_get(op);
    for (uint64_t i = 0; i < n; i++) {
        float lim = t->tol_abs + t->tol_rel * fabsf(want[i]) + slack + (each ? each[i] : 0.0f);
        /* NaN fails: the comparison below is false for it */
        ck_assert_msg(fabsf(got[i] - want[i]) <= lim, "%s %s: element %llu is %.9g, want %.9g (+- %g)",
                      loom_op_name(op), what, (unsigned long long)i, got[i], want[i], lim);
    }
}

static void expect_close(loom_op op, const char *what, const float *got, const float *want, uint64_t n)
{
    expect_close_slack(op, what, got, want, n, 0.0f, NULL);
}

/* ---- inputs ---------------------------------------------------------------- */


static float *rand_f32(uint64_t n, float scale)
{
    float *p = malloc(n * sizeof *p + 4);
    ck_assert_ptr_nonnull(p);
    for (uint64_t i = 0; i < n; i++)
        p[i] = uniform() * scale;
    return p;
}

static uint16_t *rand_f16(uint64_t n)
{
    uint16_t *p = malloc(n * sizeof *p + 4);
    ck_assert_ptr_nonnull(p);
    for (uint64_t i = 0; i < n; i++)
        p[i] = loom_f32_to_f16(uniform());
    return p;
}

static float *alloc_f32(uint64_t n)
{
    float *p = malloc(n * sizeof *p + 4);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* ---- a graph over runtime buffers ----------------------------------------- */

#define MAX_BUFS 12

typedef struct harness {
    loom_graph *g;
    loom_rt_buffer *b[MAX_BUFS];
    uint32_t n;
} harness;

static harness begin(void)
{
    harness h = { 0 };
    ck_assert_int_eq(loom_graph_create(&(loom_graph_desc){ .name = "ops" }, &h.g), LOOM_OK);
    return h;
}

/* A device buffer holding data (NULL: NaN poison, all bits set), declared to
 * the graph; returns the graph buffer id. */
static uint32_t input(harness *h, const char *name, const void *data, uint64_t bytes)
{
    ck_assert_uint_lt(h->n, MAX_BUFS);
    uint64_t size = (bytes + 3) & ~3ull;
    loom_rt_buffer *b;
    ck_assert_int_eq(loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ .name = name, .size = size }, &b), LOOM_OK);
    void *tmp = malloc(size);
    ck_assert_ptr_nonnull(tmp);
    memset(tmp, 0xff, size);
    if (data)
        memcpy(tmp, data, bytes);
    ck_assert_int_eq(loom_rt_buffer_write(rt, b, 0, tmp, size), LOOM_OK);
    free(tmp);
    uint32_t id;
    ck_assert_int_eq(loom_graph_add_buffer(h->g, &(loom_buffer_desc){ .name = name, .size = size,
                                                                      .external = loom_rt_buffer_id(b) }, &id),
                     LOOM_OK);
    h->b[h->n++] = b;
    return id;
}

static uint32_t output(harness *h, const char *name, uint64_t bytes) { return input(h, name, NULL, bytes); }

static void run(harness *h, const loom_step_params *p)
{
    loom_step_params zero = { 0 };
    loom_result rc = loom_rt_run_graph(rt, h->g, p ? p : &zero);
    ck_assert_msg(rc == LOOM_OK, "run: %s: %s", loom_result_str(rc), loom_last_error());
    ck_assert_uint_eq(loom_rt_validation_messages(rt), 0);
}

/* Graph buffer id -> runtime buffer: ids are handed out in creation order. */
static void fetch(harness *h, uint32_t id, void *dst, uint64_t bytes)
{
    ck_assert_uint_lt(id, h->n);
    ck_assert_int_eq(loom_rt_buffer_read(rt, h->b[id], 0, dst, bytes), LOOM_OK);
}

static void end(harness *h)
{
    for (uint32_t i = 0; i < h->n; i++)
        loom_rt_buffer_release(h->b[i]);
    loom_graph_destroy(h->g);
}

static void expect_buffer_slack(harness *h, loom_op op, const char *what, uint32_t id, const float *want, uint64_t n,
                                const float *each)
{
    float *got = alloc_f32(n);
    fetch(h, id, got, n * 4);
    expect_close_slack(op, what, got, want, n, 0.0f, each);
    free(got);
}

static void expect_buffer(harness *h, loom_op op, const char *what, uint32_t id, const float *want, uint64_t n)
{
    expect_buffer_slack(h, op, what, id, want, n, NULL);
}

/* ---- KV caches: f32, or f16 (kh) ------------------------------------------ */

/* A cache of n values, declared as the device holds it: where kh, f16
 * copies, and vals rounded in place to what the kernel will read (NaN
 * stays NaN). */
static uint32_t cache_input(harness *h, const char *name, float *vals, uint64_t n, bool kh)
{
    if (!kh)
        return input(h, name, vals, n * 4);
    uint16_t *p = malloc(n * 2 + 4);
    ck_assert_ptr_nonnull(p);
    for (uint64_t i = 0; i < n; i++) {
        p[i] = loom_f32_to_f16(vals[i]);
        vals[i] = loom_f16_to_f32(p[i]);
    }
    uint32_t id = input(h, name, p, n * 2);
    free(p);
    return id;
}

/* A cache against want; an f16 one against want rounded to f16, within the
 * op's tolerance plus one unit in f16's last place (a kernel value a hair
 * from the reference's may round to the neighbouring f16). */
static void expect_cache(harness *h, loom_op op, const char *what, uint32_t id, const float *want, uint64_t n,
                         bool kh)
{
    if (!kh) {
        expect_buffer(h, op, what, id, want, n);
        return;
    }
    const loom_op_info *t = loom_op_info_get(op);
    uint16_t *got = malloc(n * 2 + 4);
    ck_assert_ptr_nonnull(got);
    fetch(h, id, got, (n * 2 + 3) & ~3ull);
    for (uint64_t i = 0; i < n; i++) {
        float g = loom_f16_to_f32(got[i]), w = loom_f16_to_f32(loom_f32_to_f16(want[i]));
        float lim = t->tol_abs + (t->tol_rel + 0x1p-10f) * fabsf(w) + 0x1p-24f;
        ck_assert_msg(fabsf(g - w) <= lim, "%s %s (f16 cache): element %llu is %.9g, want %.9g (+- %g)",
                      loom_op_name(op), what, (unsigned long long)i, g, w, lim);
    }
    free(got);
}

/* Under the validation layer, unless LOOM_VALIDATE=0 says the machine has
 * none (a GPU machine running the device's own forms: coop_forms below). */
static void setup(void)
{
    if (!rt) {
        const char *v = getenv("LOOM_VALIDATE");
        loom_result rc = loom_rt_create(&(loom_rt_desc){ .validate = !(v && !strcmp(v, "0")) }, &rt);
        ck_assert_msg(rc == LOOM_OK, "loom_rt_create: %s: %s", loom_result_str(rc), loom_last_error());
    }
}

/* On a device with cooperative matrices, the split pass's forms of the
 * graph (the matmul kinds' and ATTENTION_ROWS's coopmat forms, where they
 * apply), so that the device's own kernels meet the reference too; true
 * when the device has them. Elsewhere the graph as built. */
static uint32_t coop_large_cols = 64;   /* the K from which the large tiles are taken, in these tests */
static bool split_k;                     /* loom_pass_ctx.split_k: the split K walk's forms (off in the other cases) */
static bool split_pass;                  /* the split pass without either (its forms on every device) */

static bool coop_forms(loom_graph *g)
{
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
#ifdef LOOM_OPS_FUSE_TESTS
    /* The large tiles from K 64 (coop_large_cols; not
     * LOOM_MATMUL_COOP_L_COLS), so that shapes the reference can afford
     * reach them. With split_k, the split K walk's forms, which the
     * pass takes without cooperative matrices too (the portable tiles'). */
    if (info.coopmat || split_k || split_pass)
        ck_assert_int_eq(loom_pass_split(g, &(loom_pass_ctx){ .coopmat = info.coopmat,
                                                              .coop_large_cols = coop_large_cols,
                                                              .split_k = split_k }),
                         LOOM_OK);
#else
    (void)g;
#endif
    return info.coopmat;
}

/* The argmax forms' workgroups capped at 2 by the split pass, as a GPU's SM
 * count caps them (loom_compile_options.wave_groups; lavapipe reports none,
 * so unsplit its workgroups take one row block each): each workgroup then
 * loops over its row blocks, the path an LM head takes on a GPU. Without
 * the pass in this build, the graph stays as built. */
static void argmax_waves(loom_graph *g)
{
#ifdef LOOM_OPS_FUSE_TESTS
    ck_assert_int_eq(loom_pass_split(g, &(loom_pass_ctx){ .wave_groups = 2 }), LOOM_OK);
#else
    (void)g;
#endif
}

/* ---- elementwise ----------------------------------------------------------- */

static const uint32_t shapes2[][2] = { { 1, 1 }, { 1, 7 }, { 3, 300 }, { 1, 1025 } };

START_TEST(copy)
{
    static const uint32_t words[] = { 1, 3, 4, 5, 1000, 1027 };
    for (size_t s = 0; s < sizeof words / sizeof words[0]; s++) {
        seed(100 + s);
        uint32_t n = words[s];
        float *x = rand_f32(n, 1);
        harness h = begin();
        uint32_t a = input(&h, "a", x, n * 4), b = output(&h, "b", n * 4);
        ck_assert_int_eq(loom_op_copy(h.g, loom_vec(a, n), (loom_tensor){ b, LOOM_U32, 0, 1, n }, NULL), LOOM_OK);
        run(&h, NULL);
        expect_buffer(&h, LOOM_OP_COPY, "dst", b, x, n);
        end(&h);
        free(x);
    }
}
END_TEST

/* STEP_LOG replayed at steps 0..6 into a ring of 3 rows: back 0 puts each
 * step's src in row step % 3, back 1 the step before's (nothing at step
 * 0); n 1 and 70 words (a second workgroup). Rows not yet written keep
 * their poison. */
START_TEST(step_log)
{
    static const uint32_t words[] = { 1, 70 };
    for (size_t s = 0; s < 2; s++)
        for (uint32_t back = 0; back < 2; back++) {
            uint32_t n = words[s];
            harness h = begin();
            uint32_t a = input(&h, "src", NULL, n * 4), d = output(&h, "ring", 3ull * n * 4);
            ck_assert_int_eq(loom_op_step_log(h.g, (loom_tensor){ a, LOOM_U32, 0, 1, n },
                                              (loom_tensor){ d, LOOM_U32, 0, 3, n }, back, NULL),
                             LOOM_OK);
            uint32_t *want = malloc(3ull * n * 4), *got = malloc(3ull * n * 4), *src = malloc(n * 4ull);
            ck_assert(want && got && src);
            memset(want, 0xee, 3ull * n * 4);
            ck_assert_int_eq(loom_rt_buffer_write(rt, h.b[d], 0, want, 3ull * n * 4), LOOM_OK);
            loom_rt_program *p;
            ck_assert_int_eq(loom_rt_program_create(rt, h.g, &p), LOOM_OK);
            uint32_t prev = 0;
            for (uint32_t step = 0; step < 7; step++) {
                for (uint32_t i = 0; i < n; i++)
                    src[i] = step * 1000u + i;
                if (back && step > 0)
                    for (uint32_t i = 0; i < n; i++)
                        want[((step - 1) % 3) * n + i] = prev * 1000u + i;
                /* back 1 reads src before this step writes it: the host
                 * writes the step's src after the replay, as a producer
                 * later in the step would */
                if (!back) {
                    ck_assert_int_eq(loom_rt_buffer_write(rt, h.b[a], 0, src, n * 4ull), LOOM_OK);
                    for (uint32_t i = 0; i < n; i++)
                        want[(step % 3) * n + i] = src[i];
                }
                uint64_t id;
                ck_assert_int_eq(loom_rt_replay(rt, p, &(loom_step_params){ .step = step }, &id), LOOM_OK);
                ck_assert_int_eq(loom_rt_wait(rt, id), LOOM_OK);
                if (back)
                    ck_assert_int_eq(loom_rt_buffer_write(rt, h.b[a], 0, src, n * 4ull), LOOM_OK);
                prev = step;
                fetch(&h, d, got, 3ull * n * 4);
                for (uint32_t i = 0; i < 3 * n; i++)
                    ck_assert_msg(got[i] == want[i], "n %u back %u step %u: word %u is %08x, want %08x", n, back,
                                  step, i, got[i], want[i]);
            }
            ck_assert_uint_eq(loom_rt_validation_messages(rt), 0);
            loom_rt_program_release(p);
            end(&h);
            free(want);
            free(got);
            free(src);
        }
}
END_TEST

static void binary_case(loom_op op, int variant)
{
    for (size_t s = 0; s < sizeof shapes2 / sizeof shapes2[0]; s++) {
        seed(200 + s + 10 * variant);
        uint32_t rows = shapes2[s][0], cols = shapes2[s][1], n = rows * cols;
        float *a = rand_f32(n, 4), *b = rand_f32(n, 2), *want = alloc_f32(n);
        if (op == LOOM_OP_MUL)
            loom_ref_mul(a, b, want, n);
        else if (op == LOOM_OP_ADD)
            loom_ref_add(a, b, want, n);
        else
            loom_ref_silu_mul(a, b, want, n);
        harness h = begin();
        uint32_t ba = input(&h, "a", a, n * 4), bb = input(&h, "b", b, n * 4), by = output(&h, "y", n * 4);
        loom_tensor ta = loom_mat(ba, LOOM_F32, rows, cols), tb = loom_mat(bb, LOOM_F32, rows, cols);
        loom_tensor ty = variant ? ta : loom_mat(by, LOOM_F32, rows, cols);  /* variant 1: in place */
        loom_result rc = op == LOOM_OP_MUL ? loom_op_mul(h.g, ta, tb, ty, NULL)
                       : op == LOOM_OP_ADD ? loom_op_add(h.g, ta, tb, ty, NULL)
                                           : loom_op_silu_mul(h.g, ta, tb, ty, NULL);
        ck_assert_int_eq(rc, LOOM_OK);
        run(&h, NULL);
        expect_buffer(&h, op, "y", variant ? ba : by, want, n);
        end(&h);
        free(a);
        free(b);
        free(want);
    }
}

START_TEST(mul) { binary_case(LOOM_OP_MUL, _i); }
END_TEST
START_TEST(add) { binary_case(LOOM_OP_ADD, _i); }
END_TEST
START_TEST(silu_mul) { binary_case(LOOM_OP_SILU_MUL, _i); }
END_TEST

/* ---- norms ----------------------------------------------------------------- */

static const uint32_t norm_sizes[] = { 1, 7, 256, 1000, 2051 };

/* _i: bit 0 = fused add, bit 1 = multiply by w. In-place on the adds: sum
 * replaces a. */
START_TEST(norms)
{
    bool fused_add = _i & 1, with_w = _i & 2;
    loom_op op = fused_add ? (with_w ? LOOM_OP_ADD_RMS_NORM_MUL : LOOM_OP_ADD_RMS_NORM)
                           : (with_w ? LOOM_OP_RMS_NORM_MUL : LOOM_OP_RMS_NORM);
    for (size_t s = 0; s < sizeof norm_sizes / sizeof norm_sizes[0]; s++) {
        seed(300 + s + 16 * _i);
        uint32_t n = norm_sizes[s];
        float eps = 1e-5f;
        float *a = rand_f32(n, 3), *b = rand_f32(n, 1), *w = rand_f32(n, 2);
        float *sum = alloc_f32(n), *want = alloc_f32(n);
        harness h = begin();
        uint32_t ba = input(&h, "a", a, n * 4), bb = input(&h, "b", b, n * 4), bw = input(&h, "w", w, n * 4);
        uint32_t by = output(&h, "y", n * 4);
        loom_result rc;
        if (fused_add) {
            loom_ref_add_rms_norm(a, b, with_w ? w : NULL, sum, want, n, eps);
            rc = with_w ? loom_op_add_rms_norm_mul(h.g, loom_vec(ba, n), loom_vec(bb, n), loom_vec(bw, n),
                                                   loom_vec(ba, n), loom_vec(by, n), eps, NULL)
                        : loom_op_add_rms_norm(h.g, loom_vec(ba, n), loom_vec(bb, n), loom_vec(ba, n),
                                               loom_vec(by, n), eps, NULL);
        } else {
            loom_ref_rms_norm(a, with_w ? w : NULL, want, n, eps);
            rc = with_w ? loom_op_rms_norm_mul(h.g, loom_vec(ba, n), loom_vec(bw, n), loom_vec(by, n), eps, NULL)
                        : loom_op_rms_norm(h.g, loom_vec(ba, n), loom_vec(by, n), eps, NULL);
        }
        ck_assert_int_eq(rc, LOOM_OK);
        run(&h, NULL);
        expect_buffer(&h, op, "y", by, want, n);
        if (fused_add)
            expect_buffer(&h, op, "sum", ba, sum, n);
        end(&h);
        free(a);
        free(b);
        free(w);
        free(sum);
        free(want);
    }
}
END_TEST

/* ---- matvec ---------------------------------------------------------------- */

/* rows x cols: one row; cols below, at and past the vector width; rows not a
 * multiple of the 8 rows a workgroup takes; a long row hitting the unrolled
 * loop and its remainder. */
static const uint32_t mv_shapes[][2] = { { 1, 2 }, { 7, 6 }, { 61, 100 }, { 64, 256 },
                                         { 130, 512 }, { 3, 2056 }, { 257, 40 }, { 512, 512 } };

/* _i: bit 0 = f16, bits 1-2 = 0 plain, 1 add, 2 silu_mul. */
START_TEST(matvec)
{
    loom_dtype dt = (_i & 1) ? LOOM_F16 : LOOM_F32;
    int form = _i >> 1;
    loom_op op = form == 0 ? LOOM_OP_MATVEC : form == 1 ? LOOM_OP_MATVEC_ADD : LOOM_OP_MATVEC_SILU_MUL;
    uint32_t es = loom_dtype_size(dt);
    for (size_t s = 0; s < sizeof mv_shapes / sizeof mv_shapes[0]; s++) {
        seed(400 + s + 32 * _i);
        uint32_t rows = mv_shapes[s][0], cols = mv_shapes[s][1];
        uint64_t nw = (uint64_t)rows * cols;
        void *W = dt == LOOM_F16 ? (void *)rand_f16(nw) : (void *)rand_f32(nw, 1);
        void *U = dt == LOOM_F16 ? (void *)rand_f16(nw) : (void *)rand_f32(nw, 1);
        float *x = rand_f32(cols, 1), *r = rand_f32(rows, 1), *want = alloc_f32(rows);
        if (form == 2)
            loom_ref_matvec_silu_mul(dt, W, U, x, want, rows, cols);
        else
            loom_ref_matvec(dt, W, x, form == 1 ? r : NULL, want, rows, cols);
        harness h = begin();
        uint32_t bw = input(&h, "W", W, nw * es), bu = input(&h, "U", U, nw * es);
        uint32_t bx = input(&h, "x", x, cols * 4), br = input(&h, "r", r, rows * 4);
        uint32_t by = output(&h, "y", rows * 4);
        loom_tensor tw = loom_mat(bw, dt, rows, cols), tu = loom_mat(bu, dt, rows, cols);
        loom_result rc;
        if (form == 0)
            rc = loom_op_matvec(h.g, tw, loom_vec(bx, cols), loom_vec(by, rows), NULL);
        else if (form == 1)  /* in place on the residual, as a decoder layer does */
            rc = loom_op_matvec_add(h.g, tw, loom_vec(bx, cols), loom_vec(br, rows), loom_vec(br, rows), NULL);
        else
            rc = loom_op_matvec_silu_mul(h.g, tw, tu, loom_vec(bx, cols), loom_vec(by, rows), NULL);
        ck_assert_int_eq(rc, LOOM_OK);
        run(&h, NULL);
        char what[48];
        snprintf(what, sizeof what, "%s %ux%u", loom_dtype_name(dt), rows, cols);
        expect_buffer(&h, op, what, form == 1 ? br : by, want, rows);
        end(&h);
        free(W);
        free(U);
        free(x);
        free(r);
        free(want);
    }
}
END_TEST

/* MATVEC_ADD_STAGE (the stage pass's producer): y = W x + r in place on
 * r, t = y * s, and y^2 added into acc's parts, which start from values
 * already there (the parts' total is what counts). _i: f16. Needs float
 * atomic adds (lavapipe has them); a device without is skipped. */
START_TEST(matvec_add_stage)
{
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    if (!info.atomic_float_add)
        return;
    loom_dtype dt = _i ? LOOM_F16 : LOOM_F32;
    const loom_op op = LOOM_OP_MATVEC_ADD_STAGE;
    uint32_t es = loom_dtype_size(dt);
    for (size_t k = 0; k < sizeof mv_shapes / sizeof mv_shapes[0]; k++) {
        seed(450 + k + 16 * _i);
        uint32_t rows = mv_shapes[k][0], cols = mv_shapes[k][1];
        uint64_t nw = (uint64_t)rows * cols;
        void *W = dt == LOOM_F16 ? (void *)rand_f16(nw) : (void *)rand_f32(nw, 1);
        float *x = rand_f32(cols, 1), *r = rand_f32(rows, 1), *g = rand_f32(rows, 1);
        float *acc = rand_f32(LOOM_STAGE_SUM_WORDS, 1), *y = alloc_f32(rows), *t = alloc_f32(rows);
        loom_ref_matvec(dt, W, x, r, y, rows, cols);
        double sum = 0;
        for (uint32_t i = 0; i < LOOM_STAGE_SUM_WORDS; i++)
            sum += acc[i];
        for (uint32_t i = 0; i < rows; i++) {
            t[i] = y[i] * g[i];
            sum += (double)y[i] * y[i];
        }
        harness h = begin();
        uint32_t bw = input(&h, "W", W, nw * es), bx = input(&h, "x", x, cols * 4), br = input(&h, "r", r, rows * 4);
        uint32_t bs = input(&h, "s", g, rows * 4), bt = output(&h, "t", rows * 4);
        uint32_t ba = input(&h, "acc", acc, LOOM_STAGE_SUM_WORDS * 4);
        ck_assert_int_eq(loom_op_matvec_add_stage(h.g, loom_mat(bw, dt, rows, cols), loom_vec(bx, cols),
                                                  loom_vec(br, rows), loom_vec(bs, rows), loom_vec(br, rows),
                                                  loom_vec(bt, rows), loom_vec(ba, LOOM_STAGE_SUM_WORDS), NULL),
                         LOOM_OK);
        run(&h, NULL);
        char what[48];
        snprintf(what, sizeof what, "%s %ux%u", loom_dtype_name(dt), rows, cols);
        expect_buffer(&h, op, what, br, y, rows);
        expect_buffer(&h, op, what, bt, t, rows);
        float *got = alloc_f32(LOOM_STAGE_SUM_WORDS);
        fetch(&h, ba, got, LOOM_STAGE_SUM_WORDS * 4);
        double gs = 0;
        for (uint32_t i = 0; i < LOOM_STAGE_SUM_WORDS; i++)
            gs += got[i];
        ck_assert_msg(fabs(gs - sum) <= 1e-4 * (fabs(sum) + 1), "%s: sum of squares %g, want %g", what, gs, sum);
        end(&h);
        free(got);
        free(W);
        free(x);
        free(r);
        free(g);
        free(acc);
        free(y);
        free(t);
    }
}
END_TEST

START_TEST(zero)
{
    static const uint32_t words[] = { 1, 255, 256, 1025 };
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
        seed(480 + k);
        uint32_t n = words[k];
        float *x = rand_f32(n + 4, 1), *want = alloc_f32(n + 4);
        for (uint32_t i = 0; i < n + 4; i++)
            want[i] = i < n ? 0.0f : x[i];   /* the words past the view stay */
        harness h = begin();
        uint32_t b = input(&h, "y", x, (n + 4) * 4ull);
        ck_assert_int_eq(loom_op_zero(h.g, loom_vec(b, n), NULL), LOOM_OK);
        run(&h, NULL);
        expect_buffer(&h, LOOM_OP_ZERO, "y", b, want, n + 4);
        end(&h);
        free(x);
        free(want);
    }
}
END_TEST

/* ---- embed ----------------------------------------------------------------- */

START_TEST(embed)
{
    loom_dtype dt = (_i & 1) ? LOOM_F16 : LOOM_F32;
    static const uint32_t shapes[][2] = { { 10, 6 }, { 50, 258 }, { 3, 2 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        seed(500 + s + 8 * _i);
        uint32_t vocab = shapes[s][0], dim = shapes[s][1];
        uint64_t n = (uint64_t)vocab * dim;
        void *T = dt == LOOM_F16 ? (void *)rand_f16(n) : (void *)rand_f32(n, 1);
        /* the last slot holds a token past the vocabulary: zeros */
        uint32_t tokens[4] = { vocab - 1, 1, 0, vocab + 3 };
        for (uint32_t ti = 0; ti < 4; ti++) {
            float *want = alloc_f32(dim);
            loom_ref_embed(dt, T, vocab, dim, tokens[ti], want);
            harness h = begin();
            uint32_t bt = input(&h, "table", T, n * loom_dtype_size(dt));
            uint32_t bk = input(&h, "tokens", tokens, sizeof tokens), bo = output(&h, "out", dim * 4);
            ck_assert_int_eq(loom_op_embed(h.g, loom_mat(bt, dt, vocab, dim), bk, ti, loom_vec(bo, dim), NULL),
                             LOOM_OK);
            run(&h, NULL);
            expect_buffer(&h, LOOM_OP_EMBED, loom_dtype_name(dt), bo, want, dim);
            end(&h);
            free(want);
        }
        free(T);
    }
}
END_TEST

/* ---- per-step ops ------------------------------------------------------------ */

START_TEST(rope)
{
    static const uint32_t cases[][3] = { { 1, 2, 0 }, { 4, 16, 5 }, { 3, 64, 77 }, { 32, 64, 300 }, { 2, 6, 1 } };
    for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++) {
        seed(600 + s + 8 * _i);
        uint32_t nh = cases[s][0], hd = cases[s][1], n = nh * hd;
        loom_step_params p = { .pos = cases[s][2], .kv_len = cases[s][2] + 1 };
        float *x = rand_f32(n, 2), *want = alloc_f32(n);
        loom_ref_rope(x, want, nh, hd, 10000.0f, p.pos);
        harness h = begin();
        uint32_t bx = input(&h, "x", x, n * 4), by = output(&h, "y", n * 4);
        uint32_t dst = _i ? bx : by;  /* _i 1: in place */
        ck_assert_int_eq(loom_op_rope(h.g, loom_vec(bx, n), loom_vec(dst, n), nh, hd, 10000.0f, NULL), LOOM_OK);
        run(&h, &p);
        expect_buffer(&h, LOOM_OP_ROPE, "y", dst, want, n);
        end(&h);
        free(x);
        free(want);
    }
}
END_TEST

/* _i 1: f16 caches. */
START_TEST(kv_append)
{
    bool kh = _i == 1;
    loom_dtype cdt = kh ? LOOM_F16 : LOOM_F32;
    static const uint32_t dims[] = { 1, 64, 300 };
    static const uint32_t positions[] = { 0, 5, 7, 8 };  /* 8: past the cache, writes nothing */
    const uint32_t max_seq = 8;
    for (size_t s = 0; s < sizeof dims / sizeof dims[0]; s++)
        for (size_t pi = 0; pi < sizeof positions / sizeof positions[0]; pi++) {
            seed(700 + s * 8 + pi);
            uint32_t dim = dims[s], cn = dim * max_seq;
            float *k = rand_f32(dim, 1), *v = rand_f32(dim, 1), *kc = rand_f32(cn, 1), *vc = rand_f32(cn, 1);
            harness h = begin();
            uint32_t bk = input(&h, "k", k, dim * 4), bv = input(&h, "v", v, dim * 4);
            uint32_t bkc = cache_input(&h, "kc", kc, cn, kh), bvc = cache_input(&h, "vc", vc, cn, kh);
            loom_step_params p = { .pos = positions[pi], .kv_len = positions[pi] + 1 };
            loom_ref_kv_append(k, v, kc, vc, dim, max_seq, p.pos);
            ck_assert_int_eq(loom_op_kv_append(h.g, loom_vec(bk, dim), loom_vec(bv, dim),
                                               loom_mat(bkc, cdt, max_seq, dim), loom_mat(bvc, cdt, max_seq, dim),
                                               NULL), LOOM_OK);
            run(&h, &p);
            expect_cache(&h, LOOM_OP_KV_APPEND, "kcache", bkc, kc, cn, kh);
            expect_cache(&h, LOOM_OP_KV_APPEND, "vcache", bvc, vc, cn, kh);
            end(&h);
            free(k);
            free(v);
            free(kc);
            free(vc);
        }
}
END_TEST

START_TEST(attention)
{
    /* n_heads, n_kv_heads, head_dim, max_seq, kv_len: one position; GQA;
     * head_dim not dividing the workgroup; more rows than one chunk (1024);
     * kv_len past max_seq (clamped); kv_len 0 (zeros). */
    static const uint32_t cases[][5] = { { 1, 1, 1, 4, 1 },   { 4, 2, 16, 8, 5 },       { 8, 8, 64, 32, 32 },
                                         { 6, 2, 96, 40, 33 }, { 2, 1, 128, 2100, 2050 }, { 2, 2, 8, 4, 9 },
                                         { 3, 1, 4, 4, 0 },   { 4, 4, 256, 3, 3 },
                                         /* split over the cache (the narrow kernel: a share per 512
                                          * rows, two passes of f32 rows, one of f16): 4 shares; 2
                                          * shares, one row; 2 full shares; 16 shares longer than a
                                          * share; 3 and 5 shares; one share of two passes */
                                         { 8, 2, 64, 2048, 1400 }, { 4, 1, 32, 1024, 1 }, { 2, 2, 16, 1024, 1024 },
                                         { 1, 1, 32, 9000, 8999 }, { 4, 2, 64, 1536, 1200 }, { 2, 1, 12, 2560, 2400 },
                                         { 8, 2, 64, 512, 400 },
                                         /* f16 caches: a pass of 16 rows an invocation, the last
                                          * 8 behind a test: one row past them, and 14 */
                                         { 4, 1, 64, 512, 257 }, { 4, 2, 64, 512, 270 },
                                         /* scores far past exp's range: only a kernel that
                                          * subtracts the running maximum stays finite */
                                         { 4, 2, 64, 128, 100 }, { 2, 1, 128, 64, 40 } };
    /* (The narrow kernel's vector path: head_dim 64 and 16 fill an
     * invocation's two 16-byte loads, 12 half of them; 3 and 5 shares put a
     * share with no partner in the combine's last paired load.) */
    /* _i 1: f16 caches (the narrow kernel's vector path where head_dim is a
     * multiple of 8, and then 16 rows in flight: a pass is a whole share). */
    bool kh = _i == 1;
    loom_dtype cdt = kh ? LOOM_F16 : LOOM_F32;
    const size_t sharp = sizeof cases / sizeof cases[0] - 2;
    for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++) {
        seed(800 + s + 64 * _i);
        uint32_t nh = cases[s][0], nkv = cases[s][1], hd = cases[s][2], max_seq = cases[s][3];
        loom_step_params p = { .kv_len = cases[s][4], .pos = cases[s][4] ? cases[s][4] - 1 : 0 };
        uint32_t nq = nh * hd, cn = max_seq * nkv * hd;
        float *q = rand_f32(nq, s >= sharp ? 300.0f : 1.0f), *kc = rand_f32(cn, 2), *vc = rand_f32(cn, 1);
        float *want = alloc_f32(nq);
        /* Rows at or past kv_len are not in use: NaN there must not reach
         * the output (the kernel loads them before it knows kv_len). */
        for (uint64_t e = (uint64_t)(p.kv_len < max_seq ? p.kv_len : max_seq) * nkv * hd; e < cn; e++)
            kc[e] = vc[e] = NAN;
        float scale = 1.0f / sqrtf((float)hd);
        harness h = begin();
        uint32_t bq = input(&h, "q", q, nq * 4), bkc = cache_input(&h, "kc", kc, cn, kh);
        uint32_t bvc = cache_input(&h, "vc", vc, cn, kh), bo = output(&h, "out", nq * 4);
        loom_ref_attention(q, kc, vc, want, nh, nkv, hd, max_seq, p.kv_len, scale);
        ck_assert_int_eq(loom_op_attention(h.g, loom_vec(bq, nq), loom_mat(bkc, cdt, max_seq, nkv * hd),
                                           loom_mat(bvc, cdt, max_seq, nkv * hd), loom_vec(bo, nq), nh, nkv,
                                           hd, NULL), LOOM_OK);
        run(&h, &p);
        char what[48];
        snprintf(what, sizeof what, "%s case %zu", kh ? "f16 caches" : "f32 caches", s);
        expect_buffer(&h, LOOM_OP_ATTENTION, what, bo, want, nq);
        end(&h);
        free(q);
        free(kc);
        free(vc);
        free(want);
    }
}
END_TEST

/* ---- reductions over a vector ------------------------------------------------ */

START_TEST(softmax)
{
    static const uint32_t sizes[] = { 1, 5, 256, 1000, 3000 };
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        seed(900 + s);
        uint32_t n = sizes[s];
        /* large logits: exp would overflow without the max subtraction */
        float *x = rand_f32(n, 200), *want = alloc_f32(n);
        x[n / 2] = 150.0f;
        loom_ref_softmax(x, want, n);
        harness h = begin();
        uint32_t bx = input(&h, "x", x, n * 4), by = output(&h, "y", n * 4);
        ck_assert_int_eq(loom_op_softmax(h.g, loom_vec(bx, n), loom_vec(by, n), NULL), LOOM_OK);
        run(&h, NULL);
        expect_buffer(&h, LOOM_OP_SOFTMAX, "y", by, want, n);
        end(&h);
        free(x);
        free(want);
    }
}
END_TEST

START_TEST(argmax)
{
    /* 40000: many rounds of the kernel's unrolled loads */
    static const uint32_t sizes[] = { 1, 7, 1000, 3001, 40000 };
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        seed(1000 + s);
        uint32_t n = sizes[s];
        float *x = rand_f32(n, 1);
        /* a tie for the maximum: the lower index must win, also against a
         * later element of the same invocation's round (index + 3 * 256) */
        x[n - 1] = 5.0f;
        x[n * 2 / 3] = 5.0f;
        if (n > 4000)
            x[n * 2 / 3 + 768] = 5.0f;
        uint32_t want = loom_ref_argmax(x, n);
        ck_assert_uint_eq(want, n * 2 / 3);
        harness h = begin();
        uint32_t bx = input(&h, "x", x, n * 4), bo = output(&h, "out", 4);
        ck_assert_int_eq(loom_op_argmax(h.g, loom_vec(bx, n), (loom_tensor){ bo, LOOM_U32, 0, 1, 1 }, NULL),
                         LOOM_OK);
        run(&h, NULL);
        uint32_t got;
        fetch(&h, bo, &got, 4);
        ck_assert_uint_eq(got, want);
        end(&h);
        free(x);
    }
}
END_TEST


/* ---- fused matvec forms ------------------------------------------------------ */

/* 9000 rows: more blocks of four than the argmax forms have workgroups. */
static const uint32_t fmv_shapes[][2] = { { 1, 2 }, { 7, 6 }, { 61, 100 }, { 130, 512 }, { 3, 2056 }, { 600, 64 }, { 9000, 24 } };

/* _i: bit 0 = f16; bits 1-3: 0 norm+matvec, 1 norm+matvec+silu*mul,
 * 2 matvec+argmax, 3 norm+matvec+argmax, 4 the same with the index logged
 * into a ring of 3 slots (at steps 4 and 5: slots 1 and 2; slot 0 keeps
 * its poison). Each program is replayed twice with different inputs: the
 * argmax's completion counter must be back at zero. */
START_TEST(fused_matvec)
{
    loom_dtype dt = (_i & 1) ? LOOM_F16 : LOOM_F32;
    int form = _i >> 1;
    static const loom_op ops[] = { LOOM_OP_RMS_NORM_MATVEC, LOOM_OP_RMS_NORM_MATVEC_SILU_MUL,
                                   LOOM_OP_MATVEC_ARGMAX, LOOM_OP_RMS_NORM_MATVEC_ARGMAX,
                                   LOOM_OP_RMS_NORM_MATVEC_ARGMAX_LOG };
    loom_op op = ops[form];
    bool norm = form != 2, argmax = form >= 2, log = form == 4;
    uint32_t es = loom_dtype_size(dt);
    const float eps = 1e-5f;
    for (size_t s = 0; s < sizeof fmv_shapes / sizeof fmv_shapes[0]; s++) {
        uint32_t rows = fmv_shapes[s][0], cols = fmv_shapes[s][1];
        uint64_t nw = (uint64_t)rows * cols;
        seed(1200 + s + 64 * _i);
        void *W = dt == LOOM_F16 ? (void *)rand_f16(nw) : (void *)rand_f32(nw, 1);
        void *U = dt == LOOM_F16 ? (void *)rand_f16(nw) : (void *)rand_f32(nw, 1);
        /* A copy of a row far from it: the argmax may tie across
         * workgroups, and the lower index must win. */
        if (rows > 8)
            memcpy((char *)W + (uint64_t)(rows - 1) * cols * es, (char *)W + (uint64_t)(rows / 3) * cols * es,
                   (size_t)cols * es);
        float *gw = rand_f32(cols, 1);
        harness h = begin();
        uint32_t bw = input(&h, "W", W, nw * es), bu = input(&h, "U", U, nw * es);
        uint32_t bx = input(&h, "x", NULL, cols * 4), bg = input(&h, "g", gw, cols * 4);
        uint32_t by = output(&h, "y", rows * 4), bo = output(&h, "out", 4), br = output(&h, "ring", 12);
        loom_tensor tw = loom_mat(bw, dt, rows, cols), tu = loom_mat(bu, dt, rows, cols);
        loom_tensor tx = loom_vec(bx, cols), tg = loom_vec(bg, cols), ty = loom_vec(by, rows);
        loom_tensor to = { bo, LOOM_U32, 0, 1, 1 };
        loom_result rc = form == 0   ? loom_op_rms_norm_matvec(h.g, tw, tx, tg, ty, eps, NULL)
                         : form == 1 ? loom_op_rms_norm_matvec_silu_mul(h.g, tw, tu, tx, tg, ty, eps, NULL)
                         : form == 2 ? loom_op_matvec_argmax(h.g, tw, tx, ty, to, NULL)
                         : form == 3 ? loom_op_rms_norm_matvec_argmax(h.g, tw, tx, tg, ty, to, eps, NULL)
                                     : loom_op_rms_norm_matvec_argmax_log(h.g, tw, tx, tg, ty, to,
                                                                          (loom_tensor){ br, LOOM_U32, 0, 3, 1 }, eps,
                                                                          NULL);
        ck_assert_msg(rc == LOOM_OK, "%s", loom_last_error());
        if (argmax)
            argmax_waves(h.g);
        loom_rt_program *p;
        ck_assert_int_eq(loom_rt_program_create(rt, h.g, &p), LOOM_OK);
        uint32_t ring_poison[3] = { 0xdeadbeefu, 0xdeadbeefu, 0xdeadbeefu };
        ck_assert_int_eq(loom_rt_buffer_write(rt, h.b[br], 0, ring_poison, sizeof ring_poison), LOOM_OK);
        for (int rep = 0; rep < 2; rep++) {
            float *x = rand_f32(cols, 3), *want = alloc_f32(rows), *poison = alloc_f32(rows);
            memset(poison, 0xff, rows * 4);
            ck_assert_int_eq(loom_rt_buffer_write(rt, h.b[bx], 0, x, cols * 4), LOOM_OK);
            ck_assert_int_eq(loom_rt_buffer_write(rt, h.b[by], 0, poison, rows * 4), LOOM_OK);
            if (form == 1)
                loom_ref_rms_norm_matvec_silu_mul(dt, W, U, x, gw, want, rows, cols, eps);
            else if (norm)
                loom_ref_rms_norm_matvec(dt, W, x, gw, want, rows, cols, eps);
            else
                loom_ref_matvec(dt, W, x, NULL, want, rows, cols);
            uint64_t step;
            ck_assert_int_eq(loom_rt_replay(rt, p, &(loom_step_params){ .step = 4 + (uint32_t)rep }, &step), LOOM_OK);
            ck_assert_int_eq(loom_rt_wait(rt, step), LOOM_OK);
            ck_assert_uint_eq(loom_rt_validation_messages(rt), 0);
            char what[48];
            snprintf(what, sizeof what, "%s %ux%u rep %d", loom_dtype_name(dt), rows, cols, rep);
            expect_buffer(&h, op, what, by, want, rows);
            if (argmax) {
                /* the GPU's own logits decide (rounding may order near ties) */
                float *got = alloc_f32(rows);
                fetch(&h, by, got, rows * 4);
                uint32_t idx;
                fetch(&h, bo, &idx, 4);
                ck_assert_uint_eq(idx, loom_ref_argmax(got, rows));
                if (rows > 8 && loom_ref_argmax(want, rows) == rows / 3)
                    ck_assert_uint_eq(idx, rows / 3);
                if (log) {
                    uint32_t ring[3];
                    fetch(&h, br, ring, sizeof ring);
                    ck_assert_uint_eq(ring[1 + rep], idx);
                    ck_assert_uint_eq(ring[0], 0xdeadbeefu);
                    if (rep == 0)
                        ck_assert_uint_eq(ring[2], 0xdeadbeefu);
                }
                free(got);
            }
            free(x);
            free(want);
            free(poison);
        }
        loom_rt_program_release(p);
        end(&h);
        free(W);
        free(U);
        free(gw);
    }
}
END_TEST

/* The q/k/v forms' outputs against the reference: b and want are x (the
 * EMBED-fed form writes it), q, and the k and v caches. */
static void qkv_expect(harness *h, bool embed, const char *what, const uint32_t b[4], const float *const want[4],
                       uint32_t cols, uint32_t qr, uint32_t cn, bool kh)
{
    loom_op op = embed ? LOOM_OP_EMBED_RMS_NORM_QKV_ROPE_KV : LOOM_OP_RMS_NORM_QKV_ROPE_KV;
    if (embed)
        expect_buffer(h, op, what, b[0], want[0], cols);
    expect_buffer(h, op, what, b[1], want[1], qr);
    expect_cache(h, op, what, b[2], want[2], cn, kh);
    expect_cache(h, op, what, b[3], want[3], cn, kh);
}

static void free_all(void *const *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(p[i]);
}

/* n_heads, n_kv_heads, head_dim, cols, max_seq, pos: the smallest head; GQA;
 * a position past the cache (the caches stay untouched); f16's scalar path
 * (cols not a multiple of 8); more heads than workgroups of one matrix. */
static const uint32_t qkv_cases[][6] = { { 1, 1, 4, 6, 4, 1 },     { 4, 2, 16, 100, 8, 7 }, { 8, 2, 64, 256, 16, 20 },
                                         { 3, 3, 8, 2056, 5, 0 }, { 2, 1, 128, 64, 3, 2 } };

/* _i bit 0: f16 weights; bit 1: the EMBED-fed form, x the row of a 5-row
 * table picked by a token at index 1 of its buffer (token 5, past the
 * table, in one case: x is zeros), and x itself written; bit 2: f16
 * caches. */
START_TEST(qkv_rope_kv)
{
    loom_dtype dt = (_i & 1) ? LOOM_F16 : LOOM_F32;
    bool embed = (_i & 2) != 0, kh = (_i & 4) != 0;
    loom_dtype cdt = kh ? LOOM_F16 : LOOM_F32;
    uint32_t es = loom_dtype_size(dt);
    const float eps = 1e-5f, theta = 10000.0f;
    const uint32_t vocab = 5;
    for (size_t s = 0; s < sizeof qkv_cases / sizeof qkv_cases[0]; s++) {
        const uint32_t *c = qkv_cases[s];
        uint32_t nh = c[0], nkv = c[1], hd = c[2], cols = c[3], max_seq = c[4], pos = c[5];
        uint32_t qr = nh * hd, kr = nkv * hd, cn = max_seq * kr;
        seed(1300 + s + 16 * _i);
        void *Wq = dt == LOOM_F16 ? (void *)rand_f16((uint64_t)qr * cols) : (void *)rand_f32((uint64_t)qr * cols, 1);
        void *Wk = dt == LOOM_F16 ? (void *)rand_f16((uint64_t)kr * cols) : (void *)rand_f32((uint64_t)kr * cols, 1);
        void *Wv = dt == LOOM_F16 ? (void *)rand_f16((uint64_t)kr * cols) : (void *)rand_f32((uint64_t)kr * cols, 1);
        void *table = dt == LOOM_F16 ? (void *)rand_f16((uint64_t)vocab * cols)
                                     : (void *)rand_f32((uint64_t)vocab * cols, 2);
        uint32_t tokens[2] = { 0xffffffffu, s == 3 ? vocab : (uint32_t)(s * 2 + 1) % vocab };
        float *x = rand_f32(cols, 2), *gw = rand_f32(cols, 1), *kc = rand_f32(cn, 1), *vc = rand_f32(cn, 1);
        float *want_q = alloc_f32(qr), *want_kc = alloc_f32(cn), *want_vc = alloc_f32(cn);
        harness h = begin();
        uint32_t bkc = cache_input(&h, "kc", kc, cn, kh), bvc = cache_input(&h, "vc", vc, cn, kh);
        memcpy(want_kc, kc, cn * 4);
        memcpy(want_vc, vc, cn * 4);
        if (embed)
            loom_ref_embed(dt, table, vocab, cols, tokens[1], x);
        loom_ref_rms_norm_qkv_rope_kv(dt, x, gw, Wq, Wk, Wv, want_q, want_kc, want_vc, qr, kr, cols, hd, max_seq,
                                      theta, eps, pos);
        uint32_t bx = embed ? output(&h, "x", cols * 4) : input(&h, "x", x, cols * 4), bg = input(&h, "g", gw, cols * 4);
        uint32_t bq = input(&h, "Wq", Wq, (uint64_t)qr * cols * es), bk = input(&h, "Wk", Wk, (uint64_t)kr * cols * es);
        uint32_t bv = input(&h, "Wv", Wv, (uint64_t)kr * cols * es), by = output(&h, "q", qr * 4);
        loom_tensor tq = loom_mat(bq, dt, qr, cols), tk = loom_mat(bk, dt, kr, cols), tv = loom_mat(bv, dt, kr, cols);
        loom_tensor tkc = loom_mat(bkc, cdt, max_seq, kr), tvc = loom_mat(bvc, cdt, max_seq, kr);
        loom_result rc;
        if (embed) {
            uint32_t bt = input(&h, "table", table, (uint64_t)vocab * cols * es);
            uint32_t btok = input(&h, "tokens", tokens, sizeof tokens);
            rc = loom_op_embed_rms_norm_qkv_rope_kv(h.g, loom_mat(bt, dt, vocab, cols), btok, 1, loom_vec(bg, cols), tq,
                                                    tk, tv, loom_vec(bx, cols), loom_vec(by, qr), tkc, tvc, hd, theta,
                                                    eps, NULL);
        } else {
            rc = loom_op_rms_norm_qkv_rope_kv(h.g, loom_vec(bx, cols), loom_vec(bg, cols), tq, tk, tv,
                                              loom_vec(by, qr), tkc, tvc, hd, theta, eps, NULL);
        }
        ck_assert_msg(rc == LOOM_OK, "%s", loom_last_error());
        run(&h, &(loom_step_params){ .pos = pos, .kv_len = pos + 1 });
        char what[64];
        snprintf(what, sizeof what, "%s%s%s case %zu", loom_dtype_name(dt), embed ? " embed" : "",
                 kh ? " f16 caches" : "", s);
        qkv_expect(&h, embed, what, (const uint32_t[]){ bx, by, bkc, bvc },
                   (const float *const[]){ x, want_q, want_kc, want_vc }, cols, qr, cn, kh);
        end(&h);
        free_all((void *[]){ Wq, Wk, Wv, table, x, gw, kc, vc, want_q, want_kc, want_vc }, 11);
    }
}
END_TEST

/* ---- block-typed weights (Q8_0, Q4_0, Q4_K, Q6_K) -------------------------- */

static const loom_dtype BLOCK_TYPES[] = { LOOM_Q8_0, LOOM_Q4_0, LOOM_Q4_K, LOOM_Q6_K };
#define N_BLOCK_TYPES 4
#define N_BLOCK_FORMS 11

/* Byte offset of a block's f16 d (GGUF's layouts): Q6_K keeps it last. */
static uint32_t block_d_at(loom_dtype t) { return t == LOOM_Q6_K ? 208 : 0; }

/* rows x cols weights of type t as a frontend writes them: random values
 * quantized a row at a time, then block 0's d set to 0 and block 1's to a
 * subnormal f16 (scales a quantizer can write for tiny rows), so the
 * kernels meet them. */
static uint8_t *rand_blocks(loom_dtype t, uint32_t rows, uint32_t cols, float scale)
{
    uint64_t rb = loom_dtype_row_bytes(t, cols), nb = (uint64_t)rows * cols / loom_dtype_block(t);
    uint8_t *w = malloc(rb * rows + 4);
    float *v = rand_f32(cols, scale);
    ck_assert_ptr_nonnull(w);
    for (uint32_t r = 0; r < rows; r++) {
        for (uint32_t c = 0; c < cols; c++)
            v[c] = uniform() * scale;
        ck_assert_int_eq(loom_quantize_row(t, v, cols, w + r * rb), LOOM_OK);
    }
    uint32_t bb = loom_dtype_block_bytes(t), d = block_d_at(t);
    w[d] = w[d + 1] = 0;
    if (nb > 1) {
        w[bb + d] = 3;
        w[bb + d + 1] = 0;
    }
    free(v);
    return w;
}

/* Shapes: one block of 256 in a row (a whole K-quant row), odd block
 * counts, a row count past a workgroup's, rows of 3 blocks of 32. */
static const uint32_t blk_shapes[][2] = { { 1, 256 }, { 5, 768 }, { 130, 2304 }, { 257, 512 }, { 3, 96 } };

/* The x and g the references take to model a block-typed kernel: on a
 * device with integer dot products the kernels quantize their input (x, or
 * x * g in a norm form) to int8 per block of 32, and the references are
 * given that input (loom_ref_quantize_x8): x itself, or for a norm form g'
 * = Q(x * g) / x, so that x * g' is the quantized input while the norm's
 * scale still comes from x. Without them, x and g as they are. The caller
 * frees *xr and *gr. */
static void block_model_x(const float *x, const float *g, uint32_t cols, bool norm, float **xr, float **gr)
{
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    *xr = alloc_f32(cols);
    *gr = alloc_f32(cols);
    memcpy(*xr, x, cols * sizeof(float));
    memcpy(*gr, g, cols * sizeof(float));
    if (!info.int_dot)
        return;
    if (!norm) {
        loom_ref_quantize_x8(x, NULL, cols, *xr);
        return;
    }
    float *q = alloc_f32(cols);
    loom_ref_quantize_x8(x, g, cols, q);
    for (uint32_t i = 0; i < cols; i++)
        (*gr)[i] = x[i] != 0.0f ? q[i] / x[i] : 0.0f;
    free(q);
}

/* One matvec form over block-typed weights against the CPU reference, which
 * decodes the same bytes (loom_dequantize_row). */
static void block_matvec_case(loom_dtype t, int form, uint32_t rows, uint32_t cols, uint64_t sd)
{
    static const loom_op ops[] = { LOOM_OP_MATVEC, LOOM_OP_MATVEC_ADD, LOOM_OP_MATVEC_SILU_MUL,
                                   LOOM_OP_MATVEC_ADD_STAGE, LOOM_OP_RMS_NORM_MATVEC,
                                   LOOM_OP_RMS_NORM_MATVEC_SILU_MUL, LOOM_OP_MATVEC_ARGMAX,
                                   LOOM_OP_RMS_NORM_MATVEC_ARGMAX };
    const loom_op op = ops[form];
    const float eps = 1e-5f;
    seed(sd);
    uint64_t wb = loom_dtype_row_bytes(t, cols) * rows;
    uint8_t *W = rand_blocks(t, rows, cols, 1), *U = rand_blocks(t, rows, cols, 1);
    float *x = rand_f32(cols, 1), *r = rand_f32(rows, 1), *gw = rand_f32(cols, 1), *s = rand_f32(rows, 1);
    float *want = alloc_f32(rows), *t_want = alloc_f32(rows), *xr, *gr;
    block_model_x(x, gw, cols, form == 4 || form == 5 || form == 7, &xr, &gr);
    switch (form) {
    case 0: case 6: loom_ref_matvec(t, W, xr, NULL, want, rows, cols); break;
    case 1: case 3: loom_ref_matvec(t, W, xr, r, want, rows, cols); break;
    case 2: loom_ref_matvec_silu_mul(t, W, U, xr, want, rows, cols); break;
    case 5: loom_ref_rms_norm_matvec_silu_mul(t, W, U, x, gr, want, rows, cols, eps); break;
    default: loom_ref_rms_norm_matvec(t, W, x, gr, want, rows, cols, eps); break;
    }
    free(xr);
    free(gr);
    for (uint32_t i = 0; i < rows; i++)
        t_want[i] = want[i] * s[i];
    harness h = begin();
    uint32_t bw = input(&h, "W", W, wb), bu = input(&h, "U", U, wb), bx = input(&h, "x", x, cols * 4);
    uint32_t br = input(&h, "r", r, rows * 4), bg = input(&h, "g", gw, cols * 4), bs = input(&h, "s", s, rows * 4);
    uint32_t by = output(&h, "y", rows * 4), bo = output(&h, "out", 4), bt = output(&h, "t", rows * 4);
    uint32_t ba = output(&h, "acc", LOOM_STAGE_SUM_WORDS * 4);
    loom_tensor tw = loom_mat(bw, t, rows, cols), tu = loom_mat(bu, t, rows, cols), tx = loom_vec(bx, cols);
    loom_tensor ty = loom_vec(by, rows), tg = loom_vec(bg, cols), to = { bo, LOOM_U32, 0, 1, 1 };
    loom_result rc = LOOM_OK;
    switch (form) {
    case 0: rc = loom_op_matvec(h.g, tw, tx, ty, NULL); break;
    case 1: rc = loom_op_matvec_add(h.g, tw, tx, loom_vec(br, rows), loom_vec(br, rows), NULL); break;
    case 2: rc = loom_op_matvec_silu_mul(h.g, tw, tu, tx, ty, NULL); break;
    case 3: {
        float zero[LOOM_STAGE_SUM_WORDS] = { 0 };
        ck_assert_int_eq(loom_rt_buffer_write(rt, h.b[ba], 0, zero, sizeof zero), LOOM_OK);
        rc = loom_op_matvec_add_stage(h.g, tw, tx, loom_vec(br, rows), loom_vec(bs, rows), loom_vec(br, rows),
                                      loom_vec(bt, rows), loom_vec(ba, LOOM_STAGE_SUM_WORDS), NULL);
        break;
    }
    case 4: rc = loom_op_rms_norm_matvec(h.g, tw, tx, tg, ty, eps, NULL); break;
    case 5: rc = loom_op_rms_norm_matvec_silu_mul(h.g, tw, tu, tx, tg, ty, eps, NULL); break;
    case 6: rc = loom_op_matvec_argmax(h.g, tw, tx, ty, to, NULL); break;
    default: rc = loom_op_rms_norm_matvec_argmax(h.g, tw, tx, tg, ty, to, eps, NULL); break;
    }
    ck_assert_msg(rc == LOOM_OK, "%s", loom_last_error());
    if (form >= 6)
        argmax_waves(h.g);
    run(&h, NULL);
    char what[64];
    snprintf(what, sizeof what, "%s %ux%u", loom_dtype_name(t), rows, cols);
    expect_buffer(&h, op, what, form == 1 || form == 3 ? br : by, want, rows);
    if (form == 3)
        expect_buffer(&h, op, what, bt, t_want, rows);
    if (form >= 6) {
        float *got = alloc_f32(rows);
        fetch(&h, by, got, rows * 4);
        uint32_t idx;
        fetch(&h, bo, &idx, 4);
        ck_assert_uint_eq(idx, loom_ref_argmax(got, rows));
        free(got);
    }
    end(&h);
    free(W);
    free(U);
    free(x);
    free(r);
    free(gw);
    free(s);
    free(want);
    free(t_want);
}

/* The q/k/v form (form 8; 9 fed by EMBED, its table of Wq's type; 10
 * EMBED alone), f16 caches on odd shapes. */
static void block_qkv_case(loom_dtype t, int form, size_t k, uint64_t sd)
{
    static const uint32_t cases[][5] = { { 4, 2, 64, 512, 8 }, { 8, 8, 32, 256, 4 } };
    uint32_t nh = cases[k][0], nkv = cases[k][1], hd = cases[k][2], cols = cases[k][3], max_seq = cases[k][4];
    uint32_t qr = nh * hd, kr = nkv * hd, cn = max_seq * kr, pos = max_seq - 3, vocab = 7;
    bool embed = form >= 9, kh = k == 1;
    loom_dtype cdt = kh ? LOOM_F16 : LOOM_F32;
    const float eps = 1e-5f, theta = 10000.0f;
    seed(sd);
    uint64_t rb = loom_dtype_row_bytes(t, cols);
    uint8_t *Wq = rand_blocks(t, qr, cols, 1), *Wk = rand_blocks(t, kr, cols, 1), *Wv = rand_blocks(t, kr, cols, 1);
    uint8_t *table = rand_blocks(t, vocab, cols, 2);
    uint32_t tokens[2] = { 0xffffffffu, 1 + (uint32_t)k };
    float *x = rand_f32(cols, 2), *gw = rand_f32(cols, 1), *kc = rand_f32(cn, 1), *vc = rand_f32(cn, 1);
    float *want_q = alloc_f32(qr), *want_kc = alloc_f32(cn), *want_vc = alloc_f32(cn);
    harness h = begin();
    char what[64];
    snprintf(what, sizeof what, "%s case %zu", loom_dtype_name(t), k);
    if (embed)
        loom_ref_embed(t, table, vocab, cols, tokens[1], x);
    uint32_t bt = input(&h, "table", table, vocab * rb), btok = input(&h, "tokens", tokens, sizeof tokens);
    if (form == 10) {
        uint32_t bo = output(&h, "out", cols * 4);
        ck_assert_int_eq(loom_op_embed(h.g, loom_mat(bt, t, vocab, cols), btok, 1, loom_vec(bo, cols), NULL), LOOM_OK);
        run(&h, NULL);
        expect_buffer(&h, LOOM_OP_EMBED, what, bo, x, cols);
    } else {
        uint32_t bkc = cache_input(&h, "kc", kc, cn, kh), bvc = cache_input(&h, "vc", vc, cn, kh);
        memcpy(want_kc, kc, cn * 4);
        memcpy(want_vc, vc, cn * 4);
        float *xr, *gr;
        block_model_x(x, gw, cols, true, &xr, &gr);
        loom_ref_rms_norm_qkv_rope_kv(t, x, gr, Wq, Wk, Wv, want_q, want_kc, want_vc, qr, kr, cols, hd, max_seq,
                                      theta, eps, pos);
        free(xr);
        free(gr);
        uint32_t bx = embed ? output(&h, "x", cols * 4) : input(&h, "x", x, cols * 4);
        uint32_t bg = input(&h, "g", gw, cols * 4), bq = input(&h, "Wq", Wq, qr * rb);
        uint32_t bk = input(&h, "Wk", Wk, kr * rb), bv = input(&h, "Wv", Wv, kr * rb), by = output(&h, "q", qr * 4);
        loom_tensor tq = loom_mat(bq, t, qr, cols), tk = loom_mat(bk, t, kr, cols), tv = loom_mat(bv, t, kr, cols);
        loom_tensor tkc = loom_mat(bkc, cdt, max_seq, kr), tvc = loom_mat(bvc, cdt, max_seq, kr);
        loom_result rc = embed ? loom_op_embed_rms_norm_qkv_rope_kv(h.g, loom_mat(bt, t, vocab, cols), btok, 1,
                                                                   loom_vec(bg, cols), tq, tk, tv, loom_vec(bx, cols),
                                                                   loom_vec(by, qr), tkc, tvc, hd, theta, eps, NULL)
                               : loom_op_rms_norm_qkv_rope_kv(h.g, loom_vec(bx, cols), loom_vec(bg, cols), tq, tk, tv,
                                                              loom_vec(by, qr), tkc, tvc, hd, theta, eps, NULL);
        ck_assert_msg(rc == LOOM_OK, "%s", loom_last_error());
        run(&h, &(loom_step_params){ .pos = pos, .kv_len = pos + 1 });
        qkv_expect(&h, embed, what, (const uint32_t[]){ bx, by, bkc, bvc },
                   (const float *const[]){ x, want_q, want_kc, want_vc }, cols, qr, cn, kh);
    }
    end(&h);
    free_all((void *[]){ Wq, Wk, Wv, table, x, gw, kc, vc, want_q, want_kc, want_vc }, 11);
}

/* _i: type * N_BLOCK_FORMS + form (block_matvec_case's 0-7, then the
 * q/k/v, EMBED-fed q/k/v and EMBED forms). */
START_TEST(blocks)
{
    loom_dtype t = BLOCK_TYPES[_i / N_BLOCK_FORMS];
    int form = _i % N_BLOCK_FORMS;
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    if (form == 3 && !info.atomic_float_add)
        return;
    if (form >= 8) {
        for (size_t k = 0; k < 2; k++)
            block_qkv_case(t, form, k, 1500 + 8 * (uint64_t)_i + k);
        return;
    }
    for (size_t k = 0; k < sizeof blk_shapes / sizeof blk_shapes[0]; k++)
        if (blk_shapes[k][1] % loom_dtype_block(t) == 0)
            block_matvec_case(t, form, blk_shapes[k][0], blk_shapes[k][1], 1400 + 8 * (uint64_t)_i + k);
}
END_TEST

/* Quantized stage: a block-typed residual projection stages the next norm's
 * input t = x * g as int8 quads of 16 rows (MV_TQ), and the norm, block-
 * typed, reads them as its x (MV_PRE MV_XQ) — the stage pass's choice, run
 * here on the builders' two nodes. The reference quantizes its own t per
 * 16 (loom_ref_quantize_blocks) and multiplies that; where the device's t
 * lands on the other side of a code's rounding boundary than the host's,
 * one code moves by one step, so each row may differ by one step times
 * its largest weight. Shapes: quads that are not whole blocks of 32
 * (96, 160 rows), several row blocks of the norm, mixed types. _i: the
 * case. */
static const struct {
    loom_dtype p, n;
    uint32_t rows, cols, out;
} tq_cases[] = {
    { LOOM_Q4_K, LOOM_Q4_K, 512, 256, 40 }, { LOOM_Q4_K, LOOM_Q6_K, 256, 512, 17 },
    { LOOM_Q8_0, LOOM_Q8_0, 96, 64, 5 },     { LOOM_Q4_0, LOOM_Q8_0, 160, 32, 33 },
    { LOOM_Q8_0, LOOM_Q4_0, 224, 96, 18 },   { LOOM_Q6_K, LOOM_Q4_0, 256, 256, 16 },
    { LOOM_Q6_K, LOOM_Q4_K, 768, 256, 3 },
};
#define N_TQ_CASES (sizeof tq_cases / sizeof tq_cases[0])

START_TEST(stage_quant)
{
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    if (!info.atomic_float_add)
        return;   /* no stage pass on such a device */
    const loom_dtype tp = tq_cases[_i].p, tn = tq_cases[_i].n;
    const uint32_t R = tq_cases[_i].rows, C = tq_cases[_i].cols, N = tq_cases[_i].out;
    const float eps = 1e-5f;
    seed(1700 + (uint64_t)_i);
    uint8_t *Wp = rand_blocks(tp, R, C, 1), *Wn = rand_blocks(tn, N, R, 1);
    float *a = rand_f32(C, 1), *r = rand_f32(R, 1), *g = rand_f32(R, 1), *x = alloc_f32(R), *tq = alloc_f32(R);
    float *want = alloc_f32(N), *each = alloc_f32(N), *ar, *gr;
    block_model_x(a, a, C, false, &ar, &gr);
    loom_ref_matvec(tp, Wp, ar, r, x, R, C);
    loom_ref_quantize_blocks(x, g, R, 16, tq);
    double ss = 0;
    for (uint32_t i = 0; i < R; i++)
        ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / R + eps));
    loom_ref_matvec(tn, Wn, tq, NULL, want, N, R);
    float *wrow = alloc_f32(R);
    for (uint32_t i = 0; i < N; i++) {
        want[i] *= scale;
        ck_assert_int_eq(loom_dequantize_row(tn, Wn + i * loom_dtype_row_bytes(tn, R), R, wrow), LOOM_OK);
        float step = 0;
        for (uint32_t q = 0; q < R; q += 16) {
            float amax = 0, wmax = 0;
            for (uint32_t k = q; k < q + 16; k++) {
                amax = fmaxf(amax, fabsf(x[k] * g[k]));
                wmax = fmaxf(wmax, fabsf(wrow[k]));
            }
            step = fmaxf(step, wmax * amax / 127.0f);
        }
        each[i] = 1.01f * scale * step;
    }
    harness h = begin();
    uint32_t bwp = input(&h, "Wp", Wp, loom_dtype_row_bytes(tp, C) * R);
    uint32_t bwn = input(&h, "Wn", Wn, loom_dtype_row_bytes(tn, R) * N);
    uint32_t ba = input(&h, "a", a, C * 4), bx = input(&h, "x", r, R * 4), bg = input(&h, "g", g, R * 4);
    uint32_t by = output(&h, "y", N * 4);
    ck_assert_int_eq(loom_op_matvec_add(h.g, loom_mat(bwp, tp, R, C), loom_vec(ba, C), loom_vec(bx, R),
                                        loom_vec(bx, R), NULL),
                     LOOM_OK);
    ck_assert_int_eq(loom_op_rms_norm_matvec(h.g, loom_mat(bwn, tn, N, R), loom_vec(bx, R), loom_vec(bg, R),
                                             loom_vec(by, N), eps, NULL),
                     LOOM_OK);
    ck_assert_int_eq(loom_pass_stage(h.g, &(loom_pass_ctx){ 0 }), LOOM_OK);
    ck_assert_uint_eq(loom_graph_node_count(h.g), 3);
    ck_assert_ptr_nonnull(strstr(loom_graph_kernel_name(h.g, loom_graph_node(h.g, 1)->kernel), "_tq_"));
    ck_assert_ptr_nonnull(strstr(loom_graph_kernel_name(h.g, loom_graph_node(h.g, 2)->kernel), "_pre_xq_"));
    run(&h, NULL);
    char what[64];
    snprintf(what, sizeof what, "%s %ux%u -> %s %ux%u", loom_dtype_name(tp), R, C, loom_dtype_name(tn), N, R);
    expect_buffer(&h, LOOM_OP_MATVEC_ADD, what, bx, x, R);
    expect_buffer_slack(&h, LOOM_OP_RMS_NORM_MATVEC, what, by, want, N, each);
    end(&h);
    free(Wp);
    free(Wn);
    free(a);
    free(r);
    free(g);
    free(x);
    free(tq);
    free(want);
    free(each);
    free(ar);
    free(gr);
    free(wrow);
}
END_TEST

/* A NaN scale poisons its row and no other: the kernels must not turn a
 * broken block into plausible numbers. _i: the type. */
START_TEST(blocks_nan)
{
    loom_dtype t = BLOCK_TYPES[_i];
    const uint32_t rows = 6, cols = 512;
    seed(1600 + (uint64_t)_i);
    uint64_t rb = loom_dtype_row_bytes(t, cols);
    uint8_t *W = rand_blocks(t, rows, cols, 1);
    uint32_t d = block_d_at(t);
    W[2 * rb + d] = 0x00;
    W[2 * rb + d + 1] = 0x7e;   /* f16 NaN in row 2's first block */
    float *x = rand_f32(cols, 1), *want = alloc_f32(rows), *got = alloc_f32(rows), *xr, *gr;
    block_model_x(x, x, cols, false, &xr, &gr);
    loom_ref_matvec(t, W, xr, NULL, want, rows, cols);
    free(xr);
    free(gr);
    harness h = begin();
    uint32_t bw = input(&h, "W", W, rows * rb), bx = input(&h, "x", x, cols * 4), by = output(&h, "y", rows * 4);
    ck_assert_int_eq(loom_op_matvec(h.g, loom_mat(bw, t, rows, cols), loom_vec(bx, cols), loom_vec(by, rows), NULL),
                     LOOM_OK);
    run(&h, NULL);
    fetch(&h, by, got, rows * 4);
    ck_assert_msg(isnan(got[2]) && isnan(want[2]), "%s: row 2 is %g (reference %g), want NaN", loom_dtype_name(t),
                  got[2], want[2]);
    want[2] = got[2] = 0;
    expect_close(LOOM_OP_MATVEC, loom_dtype_name(t), got, want, rows);
    end(&h);
    free(W);
    free(x);
    free(want);
    free(got);
}
END_TEST

/* ---- matrix products over T token rows ------------------------------------ */

/* Weights of type t, rows x cols, as a frontend stores them. */
static void *rand_weights(loom_dtype t, uint32_t rows, uint32_t cols)
{
    uint64_t n = (uint64_t)rows * cols;
    if (t == LOOM_F32)
        return rand_f32(n, 1);
    if (t == LOOM_F16)
        return rand_f16(n);
    return rand_blocks(t, rows, cols, 1);
}

static const loom_dtype MM_TYPES[] = { LOOM_F32, LOOM_F16, LOOM_Q8_0, LOOM_Q4_0, LOOM_Q4_K, LOOM_Q6_K };
#define N_MM_TYPES 6
/* T: both sides of LOOM_MATMUL_SMALL_T (the multi-column form's passes of 4
 * token rows, and the tiled form's 64-row tiles: one partial, one whole). */
static const uint32_t mm_T[] = { 2, 3, 16, 17, 64 };

/* v rounded to f16 and back, as a kernel staging it as f16 has it. */
static void round_f16(const float *v, float *out, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        out[i] = loom_f16_to_f32(loom_f32_to_f16(v[i]));
}

/* W (rows x cols of dtype t) decoded to f32, each weight rounded to f16. */
static void weights_f16(loom_dtype t, const void *W, float *out, uint32_t rows, uint32_t cols)
{
    uint64_t rb = loom_dtype_row_bytes(t, cols);
    for (uint32_t i = 0; i < rows; i++)
        ck_assert_int_eq(loom_dequantize_row(t, (const uint8_t *)W + i * rb, cols, out + (uint64_t)i * cols), LOOM_OK);
    round_f16(out, out, (uint64_t)rows * cols);
}

/* What the coopmat form may differ by beyond the op's tolerance, an
 * allowance for each output (slack[t * rows + i]). Its inputs are the
 * reference's (both round to nearest f16), but it sums the products in
 * another order (by 16-column steps of the tensor units, slices of the
 * tile), and each f32 addition rounds by up to 2^-24 of the running sum:
 * a few of those at every scale, taken as rel (sum |w x|), rel 2^-21 for
 * inputs the reference shares (more where x is computed on the device and
 * may round to another f16). Where g is
 * nearly cancelled that is more than the op's tolerance relative to y, and
 * silu(g) u carries it on: |silu'(g)| |u| dg + |silu(g)| du, |silu'| <
 * 1.1. (An NVIDIA H100 read an error of 2^-24.2 sum |u x| in u, times
 * silu(g) = 13.6, at one output of a Q6_K 67 x 768 product.) */
static float *coop_slack(bool silu, const float *w, const float *u, const float *x, uint32_t rows, uint32_t cols,
                         uint32_t T, double rel)
{
    float *slack = alloc_f32((uint64_t)T * rows);
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t i = 0; i < rows; i++) {
            const float *xr = x + (uint64_t)t * cols, *wr = w + (uint64_t)i * cols, *ur = u + (uint64_t)i * cols;
            double g = 0, ga = 0, v = 0, va = 0;
            for (uint32_t c = 0; c < cols; c++) {
                g += (double)wr[c] * xr[c];
                ga += fabs((double)wr[c] * xr[c]);
                v += (double)ur[c] * xr[c];
                va += fabs((double)ur[c] * xr[c]);
            }
            double dg = rel * ga, du = rel * va;
            slack[(uint64_t)t * rows + i] =
                (float)(silu ? 1.1 * fabs(v) * dg + fabs(g / (1 + exp(-g))) * du + dg * du : dg);
        }
    return slack;
}

/* The x the reference takes for a block-typed matmul form on kernel k: on
 * a device with integer dot products the multi-column forms' integer code
 * quantizes each token row per block of 32 (loom_ref_quantize_x8); the
 * tiled forms and every other device take x as it is. The caller frees it. */
static float *small_model_x(loom_dtype dt, const char *k, const float *x, uint32_t cols, uint32_t T)
{
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    float *xr = alloc_f32((uint64_t)T * cols);
    memcpy(xr, x, (uint64_t)T * cols * sizeof(float));
    if (info.int_dot && loom_dtype_block(dt) > 1 && !strstr(k, "_tiled") && !strstr(k, "_coop"))
        for (uint32_t t = 0; t < T; t++)
            loom_ref_quantize_x8(x + (uint64_t)t * cols, NULL, cols, xr + (uint64_t)t * cols);
    return xr;
}

/* One matmul form (0 MATMUL, 1 MATMUL_ADD, 2 MATMUL_SILU_MUL) against the
 * reference: y poisoned with NaN, so a row or token row the kernel skips
 * fails; MATMUL_ADD in place on r for odd T. */
/* With normed, x is the output of a T-row norm of a random vector (the
 * reference takes the norm's CPU result), as the prefill's q/k/v products
 * read theirs: on a device with cooperative matrices the split pass then
 * passes it as f16 (rms_norm_mul_rows_y16 and the reader's _x16 form). */
static void matmul_case_x(loom_dtype dt, int form, uint32_t rows, uint32_t cols, uint32_t T, uint64_t sd,
                          const char *want_form, bool normed)
{
    static const loom_op ops[] = { LOOM_OP_MATMUL, LOOM_OP_MATMUL_ADD, LOOM_OP_MATMUL_SILU_MUL };
    const loom_op op = ops[form];
    seed(sd);
    uint64_t wb = loom_view_bytes(dt, rows, cols), ny = (uint64_t)T * rows;
    void *W = rand_weights(dt, rows, cols), *U = rand_weights(dt, rows, cols);
    float *x = rand_f32((uint64_t)T * cols, 1), *r = rand_f32(ny, 1), *want = alloc_f32(ny);
    float *xin = NULL, *gn = NULL;
    bool in_place = form == 1 && T % 2;
    harness h = begin();
    uint32_t bw = input(&h, "W", W, wb), bu = input(&h, "U", U, wb), bx;
    uint32_t br = input(&h, "r", r, ny * 4), by = output(&h, "y", ny * 4);
    if (normed) {
        xin = rand_f32((uint64_t)T * cols, 2);
        gn = rand_f32(cols, 1);
        loom_ref_rms_norm_mul_rows(xin, gn, x, cols, T, 1e-5f);
        uint32_t bi = input(&h, "xin", xin, (uint64_t)T * cols * 4), bg = input(&h, "gn", gn, cols * 4);
        /* A plan buffer, the last one (the harness's ids stay its buffers'). */
        ck_assert_int_eq(loom_graph_add_buffer(h.g, &(loom_buffer_desc){ .name = "x", .size = (uint64_t)T * cols * 4 },
                                               &bx),
                         LOOM_OK);
        ck_assert_int_eq(loom_op_rms_norm_mul_rows(h.g, loom_mat(bi, LOOM_F32, T, cols), loom_vec(bg, cols),
                                                   loom_mat(bx, LOOM_F32, T, cols), 1e-5f, NULL),
                         LOOM_OK);
    } else {
        bx = input(&h, "x", x, (uint64_t)T * cols * 4);
    }
    loom_tensor tw = loom_mat(bw, dt, rows, cols), tu = loom_mat(bu, dt, rows, cols);
    loom_tensor tx = loom_mat(bx, LOOM_F32, T, cols), tr = loom_mat(br, LOOM_F32, T, rows);
    loom_tensor ty = in_place ? tr : loom_mat(by, LOOM_F32, T, rows);
    loom_result rc = form == 0   ? loom_op_matmul(h.g, tw, tx, ty, NULL)
                     : form == 1 ? loom_op_matmul_add(h.g, tw, tx, tr, ty, NULL)
                                 : loom_op_matmul_silu_mul(h.g, tw, tu, tx, ty, NULL);
    ck_assert_msg(rc == LOOM_OK, "%s", loom_last_error());
    uint32_t mm = normed ? 1 : 0;   /* the matmul's node */
    float *slack = NULL;
    bool coop = coop_forms(h.g) && strstr(loom_graph_kernel_name(h.g, loom_graph_node(h.g, mm)->kernel), "_coop");
    if (want_form) {
        const char *k = loom_graph_kernel_name(h.g, loom_graph_node(h.g, mm)->kernel);
        ck_assert_msg(strstr(k, want_form), "%ux%u T=%u: kernel %s, want its %s form", rows, cols, T, k, want_form);
    }
    if (coop) {
        /* The coopmat form multiplies f16 inputs: x and the (decoded)
         * weights rounded to f16, products summed in f32. The reference
         * takes the same inputs. */
        float *x16 = alloc_f32((uint64_t)T * cols), *w16 = alloc_f32((uint64_t)rows * cols);
        float *u16 = alloc_f32((uint64_t)rows * cols);
        round_f16(x, x16, (uint64_t)T * cols);
        weights_f16(dt, W, w16, rows, cols);
        weights_f16(dt, U, u16, rows, cols);
        if (form == 2)
            loom_ref_matmul_silu_mul(LOOM_F32, w16, u16, x16, want, rows, cols, T);
        else
            loom_ref_matmul(LOOM_F32, w16, x16, form == 1 ? r : NULL, want, rows, cols, T);
        /* A norm's x, computed on the device, may round to the f16 next
         * to the reference's: one step of f16 (2^-10 of a value) more. */
        slack = coop_slack(form == 2, w16, u16, x16, rows, cols, T, normed ? 0x1p-21 + 0x1p-10 : 0x1p-21);
        free_all((void *[]){ x16, w16, u16 }, 3);
    } else {
        float *xr = small_model_x(dt, loom_graph_kernel_name(h.g, loom_graph_node(h.g, mm)->kernel), x, cols, T);
        if (form == 2)
            loom_ref_matmul_silu_mul(dt, W, U, xr, want, rows, cols, T);
        else
            loom_ref_matmul(dt, W, xr, form == 1 ? r : NULL, want, rows, cols, T);
        free(xr);
    }
    char what[80];
    snprintf(what, sizeof what, "%s %ux%u T=%u%s%s", loom_dtype_name(dt), rows, cols, T, in_place ? " in place" : "",
             coop ? " (coopmat)" : "");
    if (split_k && !in_place) {
        /* One program, two dispatches, y poisoned before each: a counter
         * the first left behind would leave the second's y unwritten. */
        loom_rt_program *p;
        ck_assert_int_eq(loom_rt_program_create(rt, h.g, &p), LOOM_OK);
        float *poison = alloc_f32(ny);
        memset(poison, 0xff, ny * 4);
        for (int k = 0; k < 2; k++) {
            uint64_t step;
            ck_assert_int_eq(loom_rt_buffer_write(rt, h.b[by], 0, poison, ny * 4), LOOM_OK);
            ck_assert_int_eq(loom_rt_replay(rt, p, &(loom_step_params){ 0 }, &step), LOOM_OK);
            ck_assert_int_eq(loom_rt_wait(rt, step), LOOM_OK);
            ck_assert_uint_eq(loom_rt_validation_messages(rt), 0);
            expect_buffer_slack(&h, op, what, by, want, ny, slack);
        }
        loom_rt_program_release(p);
        free(poison);
    } else {
        run(&h, NULL);
        expect_buffer_slack(&h, op, what, in_place ? br : by, want, ny, slack);
    }
    free(slack);
    end(&h);
    free_all((void *[]){ W, U, x, r, want, xin, gn }, 7);
}

static void matmul_case(loom_dtype dt, int form, uint32_t rows, uint32_t cols, uint32_t T, uint64_t sd,
                        const char *want_form)
{
    matmul_case_x(dt, form, rows, cols, T, sd, want_form, false);
}

/* _i: type * 3 + form. Rows past a multiple of every form's rows (4, 64);
 * f32 and f16 rows of 100 (read element by element) and of 160 (chunks of
 * 8); block rows of 3 blocks. */
START_TEST(matmul)
{
    loom_dtype dt = MM_TYPES[_i / 3];
    int form = _i % 3;
    uint32_t blk = loom_dtype_block(dt);
    uint32_t shapes[2][2] = { { 67, blk > 1 ? 3 * blk : 100 }, { 130, 160 } };
    for (size_t s = 0; s < (blk > 1 ? 1u : 2u); s++)
        for (size_t k = 0; k < sizeof mm_T / sizeof mm_T[0]; k++)
            matmul_case(dt, form, shapes[s][0], shapes[s][1], mm_T[k], 1700 + 64 * (uint64_t)_i + 8 * s + k, NULL);
    /* x a T-row norm's output (f16 between them on a coopmat device) */
    matmul_case_x(dt, form, shapes[0][0], shapes[0][1], 17, 1700 + 64 * (uint64_t)_i + 20, NULL, true);
    /* the block types' integer form: x of two segments (4096 + 512 of each
     * token row), three token rows of a pass of four (where the device
     * has it: the float form's f32 sums of 4608 products stray past the
     * op's tolerance, and it has no segments to test) */
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    if (blk > 1 && info.int_dot)
        matmul_case(dt, form, 40, 4608, 3, 1700 + 64 * (uint64_t)_i + 21, NULL);
}
END_TEST

/* The multi-column forms past 65535 workgroups of their rows
 * (LOOM_MATMUL_SMALL_ROWS; the gated FFN's LOOM_MATMUL_SMALL_GATED_ROWS):
 * the builder caps them there, Vulkan's minimum limit, and the workgroups
 * loop over the row blocks left; the last rows are checked. _i: MATMUL,
 * MATMUL_SILU_MUL. */
START_TEST(matmul_row_blocks)
{
    uint32_t per = _i ? LOOM_MATMUL_SMALL_GATED_ROWS : LOOM_MATMUL_SMALL_ROWS;
    matmul_case(LOOM_F32, _i ? 2 : 0, 65535u * per + 2 * per + 1, 8, 2, 1800 + (uint64_t)_i, NULL);
}
END_TEST

/* The multi-column form's layouts that the split pass picks by shape: an
 * f16 MATMUL of LOOM_MATMUL_SMALL_R2_ROWS rows or more at 2 rows a
 * subgroup (MM_R2; rows past a workgroup's 16, token rows past a pass of
 * 4: 1 and 5; rows of 100, read element by element, and of 160), on every
 * device; and on a device with cooperative matrices the narrow form
 * (MM_NARROW) from LOOM_MATMUL_NARROW_FROM_T token rows, each matmul kind
 * (16 rows a workgroup, the gated FFN 8; K of a segment and a half). */
START_TEST(matmul_small_layouts)
{
#ifndef LOOM_OPS_FUSE_TESTS
    return;   /* the split pass is not in this build */
#endif
    split_pass = true;
    uint32_t rows = LOOM_MATMUL_SMALL_R2_ROWS + 21;
    matmul_case(LOOM_F16, 0, rows, 160, 5, 2200, "_r2_");
    matmul_case(LOOM_F16, 0, rows, 100, 1, 2201, "_r2_");
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    if (info.coopmat) {
        uint32_t T = LOOM_MATMUL_NARROW_FROM_T;
        for (int form = 0; form < 3; form++) {
            matmul_case(LOOM_F16, form, 16 * 9, 768, T, 2202 + 4 * (uint64_t)form, "_coop_narrow_");
            matmul_case(LOOM_F16, form, 16 * 9, 768, LOOM_MATMUL_SMALL_T - 3, 2203 + 4 * (uint64_t)form,
                        "_coop_narrow_");
            matmul_case_x(LOOM_F16, form, 16 * 5, 160, LOOM_MATMUL_SMALL_T, 2204 + 4 * (uint64_t)form,
                          "_coop_narrow_", true);
        }
    }
    split_pass = false;
}
END_TEST

/* The large-tile cooperative-matrix forms (MM_L), on a device that has
 * them: shapes of enough tiles that the split pass takes each, with a
 * partial tile of rows and of token rows; K of several slices (32 columns
 * each). _i: type * 3 + form (MATMUL, MATMUL_ADD, MATMUL_SILU_MUL; not
 * f32, which keeps the tiled form). The gated FFN's large tiles (64 rows
 * of each matrix) read a norm's output as f16 too. */
START_TEST(matmul_large)
{
    loom_dtype dt = MM_TYPES[1 + _i / 3];
    int form = _i % 3;
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    if (!info.coopmat)
        return;   /* the forms need cooperative matrices: test_ops' matmul cases cover the rest */
    uint32_t blk = loom_dtype_block(dt), cols = blk == 1 ? 160 : blk == 32 ? 96 : 256;
    uint32_t lrows = LOOM_MATMUL_COOP_L_ROWS;
    /* At least LOOM_MATMUL_COOP_L_FROM tiles of 128 token rows at T 300
     * (3 tiles), of 64 at T 100 (2 tiles, and too few of 128). */
    uint32_t tiles128 = (LOOM_MATMUL_COOP_L_FROM + 2) / 3, tiles64 = (LOOM_MATMUL_COOP_L_FROM + 1) / 2;
    if (form == 2) {
        uint32_t grows = LOOM_MATMUL_COOP_LS_ROWS * tiles128 - 6;
        matmul_case(dt, form, grows, cols, 300, 1900 + 8 * (uint64_t)_i, "_coop_l_");
        matmul_case_x(dt, form, grows, cols, 300, 1901 + 8 * (uint64_t)_i, "_coop_l_x16_", true);
        return;
    }
    matmul_case(dt, form, lrows * tiles128 - 5, cols, 300, 1900 + 4 * (uint64_t)_i, "_coop_l_");
    matmul_case(dt, form, lrows * tiles64 - 3, cols, 100, 1901 + 4 * (uint64_t)_i, "_coop_l64_");
    /* x a norm's output, passed as f16: the large forms' _x16, and the
     * small ones' (K split where the tiles are few, not where many). */
    matmul_case_x(dt, form, lrows * tiles128 - 5, cols, 300, 1902 + 4 * (uint64_t)_i, "_coop_l_x16_", true);
    matmul_case_x(dt, form, lrows * tiles64 - 3, cols, 100, 1903 + 4 * (uint64_t)_i, "_coop_l64_x16_", true);
    matmul_case_x(dt, form, 67, cols, 100, 1904 + 4 * (uint64_t)_i, "_coop_ks_x16_", true);
    coop_large_cols = UINT32_MAX;   /* the small tiles, not split: as at K below LOOM_MATMUL_COOP_L_COLS */
    matmul_case_x(dt, form, LOOM_MATMUL_COOP_ROWS * LOOM_MATMUL_COOP_KS_BELOW / 2 - 7, cols, 100,
                  1905 + 4 * (uint64_t)_i, "_coop_x16_", true);
    coop_large_cols = 64;
}
END_TEST

/* The split K walk (MM_SK; on unless LOOM_DISABLE_SPLIT_K): the portable tiles' form
 * without cooperative matrices (lavapipe: rows past a tile, token rows past
 * a tile, K of an odd count of 32-column slices, and of two whose second is
 * partial), the large tiles' where the device has them
 * (64 to 127 tiles of 128 by 128: the pass's range). Each case runs one
 * program twice (matmul_case_x). _i: type * 2 + form (MATMUL, MATMUL_ADD;
 * f32 only without cooperative matrices: it keeps the portable tiles). */
START_TEST(matmul_split_k)
{
    loom_dtype dt = MM_TYPES[_i / 2];
    int form = _i % 2;
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
#ifndef LOOM_OPS_FUSE_TESTS
    return;   /* the split pass is not in this build */
#endif
    uint32_t blk = loom_dtype_block(dt);
    split_k = true;
    if (info.coopmat) {
        if (dt != LOOM_F32) {
            uint32_t cols = blk == 1 ? 160 : blk == 32 ? 96 : 256, rows = LOOM_MATMUL_COOP_L_ROWS * 22 - 5;
            matmul_case(dt, form, rows, cols, 300, 2100 + 8 * (uint64_t)_i, "_coop_l_sk_");
            matmul_case_x(dt, form, rows, cols, 300, 2101 + 8 * (uint64_t)_i, "_coop_l_sk_x16_", true);
        }
    } else {
        uint32_t k3 = blk > 1 ? 3 * blk : 96;   /* 3 slices, or blocks */
        matmul_case(dt, form, 67, k3, 17, 2100 + 8 * (uint64_t)_i, "_tiled_sk_");
        matmul_case(dt, form, 130, blk > 1 ? 2 * blk : 160, 100, 2101 + 8 * (uint64_t)_i, "_tiled_sk_");
        if (blk == 1)   /* two slices, the second of 8 columns */
            matmul_case(dt, form, 65, 40, 64, 2102 + 8 * (uint64_t)_i, "_tiled_sk_");
    }
    split_k = false;
}
END_TEST

/* A NaN scale poisons its row in every token row, and nothing else, in
 * both forms. _i: the block type. */
START_TEST(matmul_nan)
{
    loom_dtype t = BLOCK_TYPES[_i];
    const uint32_t rows = 6, cols = 512;
    uint64_t rb = loom_dtype_row_bytes(t, cols);
    static const uint32_t Ts[] = { 3, 17 };
    for (size_t k = 0; k < 2; k++) {
        uint32_t T = Ts[k];
        seed(1800 + 4 * (uint64_t)_i + k);
        uint8_t *W = rand_blocks(t, rows, cols, 1);
        uint32_t d = block_d_at(t);
        W[2 * rb + d] = 0x00;
        W[2 * rb + d + 1] = 0x7e;   /* f16 NaN in row 2's first block */
        float *x = rand_f32((uint64_t)T * cols, 1), *want = alloc_f32(T * rows), *got = alloc_f32(T * rows);
        harness h = begin();
        uint32_t bw = input(&h, "W", W, rows * rb), bx = input(&h, "x", x, (uint64_t)T * cols * 4);
        uint32_t by = output(&h, "y", (uint64_t)T * rows * 4);
        ck_assert_int_eq(loom_op_matmul(h.g, loom_mat(bw, t, rows, cols), loom_mat(bx, LOOM_F32, T, cols),
                                        loom_mat(by, LOOM_F32, T, rows), NULL), LOOM_OK);
        float *xr = small_model_x(t, loom_graph_kernel_name(h.g, loom_graph_node(h.g, 0)->kernel), x, cols, T);
        loom_ref_matmul(t, W, xr, NULL, want, rows, cols, T);
        free(xr);
        run(&h, NULL);
        fetch(&h, by, got, (uint64_t)T * rows * 4);
        for (uint32_t j = 0; j < T; j++) {
            float *g = got + j * rows, *w = want + j * rows;
            ck_assert_msg(isnan(g[2]) && isnan(w[2]), "%s T=%u: token row %u, row 2 is %g (reference %g), want NaN",
                          loom_dtype_name(t), T, j, g[2], w[2]);
            g[2] = w[2] = 0;
        }
        expect_close(LOOM_OP_MATMUL, loom_dtype_name(t), got, want, (uint64_t)T * rows);
        end(&h);
        free_all((void *[]){ W, x, want, got }, 4);
    }
}
END_TEST

/* One attention program replayed at growing kv_len: the per-head counters of
 * the in-dispatch combine must be back at zero after every replay. */
START_TEST(attention_replays)
{
    const uint32_t nh = 4, nkv = 2, hd = 32, max_seq = 128, nq = nh * hd, cn = max_seq * nkv * hd;
    seed(1400);
    float *q = rand_f32(nq, 1), *kc = rand_f32(cn, 2), *vc = rand_f32(cn, 1), *want = alloc_f32(nq);
    harness h = begin();
    uint32_t bq = input(&h, "q", q, nq * 4), bkc = input(&h, "kc", kc, cn * 4), bvc = input(&h, "vc", vc, cn * 4);
    uint32_t bo = output(&h, "out", nq * 4);
    ck_assert_int_eq(loom_op_attention(h.g, loom_vec(bq, nq), loom_mat(bkc, LOOM_F32, max_seq, nkv * hd),
                                       loom_mat(bvc, LOOM_F32, max_seq, nkv * hd), loom_vec(bo, nq), nh, nkv, hd,
                                       NULL), LOOM_OK);
    loom_rt_program *p;
    ck_assert_int_eq(loom_rt_program_create(rt, h.g, &p), LOOM_OK);
    static const uint32_t lens[] = { 1, 37, 128, 5, 100 };
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        uint64_t step;
        loom_step_params sp = { .kv_len = lens[i], .pos = lens[i] - 1 };
        ck_assert_int_eq(loom_rt_replay(rt, p, &sp, &step), LOOM_OK);
        ck_assert_int_eq(loom_rt_wait(rt, step), LOOM_OK);
        loom_ref_attention(q, kc, vc, want, nh, nkv, hd, max_seq, lens[i], 1.0f / sqrtf((float)hd));
        expect_buffer(&h, LOOM_OP_ATTENTION, "replay", bo, want, nq);
    }
    ck_assert_uint_eq(loom_rt_validation_messages(rt), 0);
    loom_rt_program_release(p);
    end(&h);
    free(q);
    free(kc);
    free(vc);
    free(want);
}
END_TEST

/* ---- fusion: the fused plan computes what the captured chain computes ----- */

#ifdef LOOM_OPS_FUSE_TESTS
enum { FUSE_ADD_NORM_MUL, FUSE_MATVEC_SILU, FUSE_NORM_MUL, FUSE_ADD_NORM, FUSE_MATVEC_ADD, FUSE_RULES };

static const loom_op fused_op[FUSE_RULES] = { LOOM_OP_ADD_RMS_NORM_MUL, LOOM_OP_MATVEC_SILU_MUL,
                                              LOOM_OP_RMS_NORM_MUL, LOOM_OP_ADD_RMS_NORM, LOOM_OP_MATVEC_ADD };

static uint32_t scratch(harness *h, const char *name, uint64_t bytes)
{
    uint32_t id;
    ck_assert_int_eq(loom_graph_add_buffer(h->g, &(loom_buffer_desc){ .name = name, .size = bytes,
                                                                       .usage = LOOM_USAGE_SCRATCH }, &id),
                     LOOM_OK);
    return id;
}

static bool plan_has(const loom_plan *plan, loom_op op)
{
    const loom_graph *pg = loom_plan_graph(plan);
    for (uint32_t i = 0; i < loom_graph_node_count(pg); i++)
        if (loom_graph_node(pg, i)->op == op)
            return true;
    return false;
}

/* Compiles h's graph with the given switches, runs the plan graph and
 * returns the output buffer (y, n floats). */
static float *run_plan(harness *h, uint32_t disable, uint32_t y, uint32_t n, loom_op expect, bool fused)
{
    loom_plan *plan;
    loom_result rc = loom_compile(h->g, &(loom_compile_options){ .disable = disable }, &plan);
    ck_assert_msg(rc == LOOM_OK, "compile: %s: %s", loom_result_str(rc), loom_last_error());
    ck_assert_msg(plan_has(plan, expect) == fused, "plan %s %s", fused ? "lacks" : "has", loom_op_name(expect));
    loom_rt_program *p;
    rc = loom_rt_program_create(rt, loom_plan_graph(plan), &p);
    ck_assert_msg(rc == LOOM_OK, "program: %s: %s", loom_result_str(rc), loom_last_error());
    uint64_t step;
    ck_assert_int_eq(loom_rt_replay(rt, p, &(loom_step_params){ 0 }, &step), LOOM_OK);
    ck_assert_int_eq(loom_rt_wait(rt, step), LOOM_OK);
    ck_assert_uint_eq(loom_rt_validation_messages(rt), 0);
    loom_rt_program_release(p);
    loom_plan_release(plan);
    float *got = alloc_f32(n);
    fetch(h, y, got, (uint64_t)n * 4);
    return got;
}

START_TEST(fuse)
{
    const uint32_t n = 300, rows = 61, cols = 100;
    const float eps = 1e-5f;
    seed(1100 + _i);
    float *a = rand_f32(n, 2), *b = rand_f32(n, 1), *w = rand_f32(n, 1), *x = rand_f32(cols, 1);
    float *r = rand_f32(rows, 1), *tmp = alloc_f32(n), *want = alloc_f32(n);
    uint16_t *W = rand_f16((uint64_t)rows * cols), *U = rand_f16((uint64_t)rows * cols);
    harness h = begin();
    /* runtime buffers first, so graph ids index h.b */
    uint32_t ba = input(&h, "a", a, n * 4), bb = input(&h, "b", b, n * 4), bw = input(&h, "w", w, n * 4);
    uint32_t bx = input(&h, "x", x, cols * 4), br = input(&h, "r", r, rows * 4);
    uint32_t bW = input(&h, "W", W, (uint64_t)rows * cols * 2), bU = input(&h, "U", U, (uint64_t)rows * cols * 2);
    uint32_t by = output(&h, "y", n * 4);
    uint32_t s1 = scratch(&h, "s1", n * 4), s2 = scratch(&h, "s2", n * 4);
    loom_tensor tW = loom_mat(bW, LOOM_F16, rows, cols), tU = loom_mat(bU, LOOM_F16, rows, cols);
    uint32_t len = n;
    switch (_i) {
    case FUSE_ADD_NORM_MUL:
        ck_assert_int_eq(loom_op_add(h.g, loom_vec(ba, n), loom_vec(bb, n), loom_vec(s1, n), NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_rms_norm(h.g, loom_vec(s1, n), loom_vec(s2, n), eps, NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_mul(h.g, loom_vec(s2, n), loom_vec(bw, n), loom_vec(by, n), NULL), LOOM_OK);
        loom_ref_add_rms_norm(a, b, w, tmp, want, n, eps);
        break;
    case FUSE_MATVEC_SILU:
        len = rows;
        ck_assert_int_eq(loom_op_matvec(h.g, tW, loom_vec(bx, cols), loom_vec(s1, rows), NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_matvec(h.g, tU, loom_vec(bx, cols), loom_vec(s2, rows), NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_silu_mul(h.g, loom_vec(s1, rows), loom_vec(s2, rows), loom_vec(by, rows), NULL),
                         LOOM_OK);
        loom_ref_matvec_silu_mul(LOOM_F16, W, U, x, want, rows, cols);
        break;
    case FUSE_NORM_MUL:
        ck_assert_int_eq(loom_op_rms_norm(h.g, loom_vec(ba, n), loom_vec(s1, n), eps, NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_mul(h.g, loom_vec(s1, n), loom_vec(bw, n), loom_vec(by, n), NULL), LOOM_OK);
        loom_ref_rms_norm(a, w, want, n, eps);
        break;
    case FUSE_ADD_NORM:
        ck_assert_int_eq(loom_op_add(h.g, loom_vec(ba, n), loom_vec(bb, n), loom_vec(s1, n), NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_rms_norm(h.g, loom_vec(s1, n), loom_vec(by, n), eps, NULL), LOOM_OK);
        loom_ref_add_rms_norm(a, b, NULL, tmp, want, n, eps);
        break;
    default:
        len = rows;
        ck_assert_int_eq(loom_op_matvec(h.g, tW, loom_vec(bx, cols), loom_vec(s1, rows), NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_add(h.g, loom_vec(s1, rows), loom_vec(br, rows), loom_vec(by, rows), NULL),
                         LOOM_OK);
        loom_ref_matvec(LOOM_F16, W, x, r, want, rows, cols);
        break;
    }
    float *plain = run_plan(&h, LOOM_DISABLE_FUSE, by, len, fused_op[_i], false);
    float *fused = run_plan(&h, 0, by, len, fused_op[_i], true);
    expect_close(fused_op[_i], "unfused", plain, want, len);
    expect_close(fused_op[_i], "fused", fused, want, len);
    expect_close(fused_op[_i], "fused vs unfused", fused, plain, len);
    end(&h);
    free(plain);
    free(fused);
    free(a);
    free(b);
    free(w);
    free(x);
    free(r);
    free(tmp);
    free(want);
    free(W);
    free(U);
}
END_TEST
#endif

/* ---- T-row ops (multi-token steps) ----------------------------------------- *
 * Every case runs at T in rows_T with pos > 0 and params.rows < T, so there
 * are padding rows, and poisons what the op must not read or write. */

static const uint32_t rows_T[] = { 2, 3, 16, 17, 64 };
#define N_ROWS_T (sizeof rows_T / sizeof rows_T[0])

/* Real rows of a case at T: always fewer than T, at least 1. */
static uint32_t real_rows(uint32_t T) { return T - 1 - T / 3; }

static loom_step_params rows_params(uint32_t pos, uint32_t rows)
{
    return (loom_step_params){ .pos = pos, .rows = rows, .kv_len = pos + rows };
}

/* RMS_NORM_QKV_ROPE_KV_ROWS against the reference: every weight type (and
 * Q4_K with a Q6_K Wv, Q4_K_M's mix), f32 and f16 caches, T of 2, 3 and 16
 * (passes of 4 token rows: one short, one partial, four whole) with fewer
 * real rows than T, a real row past max_seq and padding rows inside the
 * cache: q for every row, cache rows for the real ones inside the cache
 * alone. f32 and f16 rows of 196
 * columns (x, g and the weights read element by element), block rows of
 * two blocks and of 4608 columns. _i: type (QR_TYPES) * 2 + f16 caches. */
static const loom_dtype QR_TYPES[][2] = { { LOOM_F32, LOOM_F32 },   { LOOM_F16, LOOM_F16 },
                                          { LOOM_Q8_0, LOOM_Q8_0 }, { LOOM_Q4_0, LOOM_Q4_0 },
                                          { LOOM_Q4_K, LOOM_Q4_K }, { LOOM_Q6_K, LOOM_Q6_K },
                                          { LOOM_Q4_K, LOOM_Q6_K } };
#define N_QR_TYPES 7

START_TEST(qkv_rope_kv_rows)
{
    loom_dtype t = QR_TYPES[_i / 2][0], tv = QR_TYPES[_i / 2][1];
    bool kh = _i % 2;
    uint32_t blk = loom_dtype_block(t);
    const uint32_t nh = 4, nkv = 2, hd = 64, max_seq = 24, qr = nh * hd, kr = nkv * hd;
    const uint32_t cn = max_seq * kr;
    const float eps = 1e-5f, theta = 10000.0f;
    static const uint32_t Ts[] = { 2, 3, 16, 3 };
    for (size_t k = 0; k < (blk > 1 ? 4u : 3u); k++) {
        /* T 2: its real row the cache's last; T 3: its real row past the
         * cache; T 16: real rows 12 .. 21, padding rows 22 .. 27, two of
         * them inside the cache (which they must not write). Block types
         * also rows of 4608 (the integer form's x in two segments). */
        uint32_t cols = k == 3 ? 4608 : blk > 1 ? 2 * (blk > 32 ? blk : 256) : 196;
        uint32_t T = Ts[k], rows = real_rows(T), pos = T == 2 ? max_seq - 1 : T == 3 ? max_seq : 12;
        seed(2100 + 16 * (uint64_t)_i + k);
        void *Wq = rand_weights(t, qr, cols), *Wk = rand_weights(t, kr, cols), *Wv = rand_weights(tv, kr, cols);
        float *x = rand_f32((uint64_t)T * cols, 2), *gw = rand_f32(cols, 1);
        float *kc = rand_f32(cn, 1), *vc = rand_f32(cn, 1);
        float *want_q = alloc_f32((uint64_t)T * qr), *want_kc = alloc_f32(cn), *want_vc = alloc_f32(cn);
        memcpy(want_kc, kc, cn * 4);
        memcpy(want_vc, vc, cn * 4);
        if (blk > 1) {
            /* A token row at a time: on a device with integer dot products
             * the kernel quantizes each row's x * g (block_model_x); a
             * padding row's cache writes go to a copy nobody reads. */
            float *pad_kc = alloc_f32(cn), *pad_vc = alloc_f32(cn);
            for (uint32_t r = 0; r < T; r++) {
                float *xr, *gr;
                block_model_x(x + (uint64_t)r * cols, gw, cols, true, &xr, &gr);
                loom_ref_rms_norm_qkv_rope_kv_rows(t, tv, xr, gr, Wq, Wk, Wv, want_q + (uint64_t)r * qr,
                                                   r < rows ? want_kc : pad_kc, r < rows ? want_vc : pad_vc, qr, kr,
                                                   cols, hd, max_seq, theta, eps, pos + r, 1, 1);
                free_all((void *[]){ xr, gr }, 2);
            }
            free_all((void *[]){ pad_kc, pad_vc }, 2);
        } else {
            loom_ref_rms_norm_qkv_rope_kv_rows(t, tv, x, gw, Wq, Wk, Wv, want_q, want_kc, want_vc, qr, kr, cols, hd,
                                               max_seq, theta, eps, pos, rows, T);
        }
        harness h = begin();
        loom_dtype cdt = kh ? LOOM_F16 : LOOM_F32;
        uint32_t bkc = cache_input(&h, "kc", kc, cn, kh), bvc = cache_input(&h, "vc", vc, cn, kh);
        uint32_t bx = input(&h, "x", x, (uint64_t)T * cols * 4), bg = input(&h, "g", gw, cols * 4);
        uint32_t bq = input(&h, "Wq", Wq, loom_view_bytes(t, qr, cols));
        uint32_t bk = input(&h, "Wk", Wk, loom_view_bytes(t, kr, cols));
        uint32_t bv = input(&h, "Wv", Wv, loom_view_bytes(tv, kr, cols));
        uint32_t by = output(&h, "q", (uint64_t)T * qr * 4);
        loom_result rc = loom_op_rms_norm_qkv_rope_kv_rows(
            h.g, loom_mat(bx, LOOM_F32, T, cols), loom_vec(bg, cols), loom_mat(bq, t, qr, cols),
            loom_mat(bk, t, kr, cols), loom_mat(bv, tv, kr, cols), loom_mat(by, LOOM_F32, T, qr),
            loom_mat(bkc, cdt, max_seq, kr), loom_mat(bvc, cdt, max_seq, kr), hd, theta, eps, NULL);
        ck_assert_msg(rc == LOOM_OK, "%s", loom_last_error());
        loom_step_params p = rows_params(pos, rows);
        run(&h, &p);
        char what[96];
        snprintf(what, sizeof what, "%s (Wv %s) %u cols T=%u rows %u pos %u", loom_dtype_name(t), loom_dtype_name(tv),
                 cols, T, rows, pos);
        const loom_op op = LOOM_OP_RMS_NORM_QKV_ROPE_KV_ROWS;
        expect_buffer(&h, op, what, by, want_q, (uint64_t)T * qr);
        expect_cache(&h, op, what, bkc, want_kc, cn, kh);
        expect_cache(&h, op, what, bvc, want_vc, cn, kh);
        end(&h);
        free_all((void *[]){ Wq, Wk, Wv, x, gw, kc, vc, want_q, want_kc, want_vc }, 10);
    }
}
END_TEST

/* _i: the table's dtype, f32, f16, q8_0, q4_k. */
START_TEST(embed_rows)
{
    static const loom_dtype dts[] = { LOOM_F32, LOOM_F16, LOOM_Q8_0, LOOM_Q4_K };
    loom_dtype dt = dts[_i];
    uint32_t vocab = 11, dim = dt == LOOM_Q4_K ? 256 : dt == LOOM_Q8_0 ? 64 : 258;
    for (size_t s = 0; s < N_ROWS_T; s++) {
        seed(3000 + s + 16 * _i);
        uint32_t T = rows_T[s], rows = real_rows(T), pos = 3 + (uint32_t)s;
        /* the prompt: pos + rows tokens, one of them past the table (zeros),
         * and one more token the step must not take (a padding row's) */
        uint32_t n_tok = pos + rows + 1, *tok = malloc(n_tok * 4);
        ck_assert_ptr_nonnull(tok);
        for (uint32_t i = 0; i < n_tok; i++)
            tok[i] = (uint32_t)((uniform() + 1.0f) * 0.5f * vocab) % vocab;
        tok[pos + rows / 2] = vocab + 2;
        uint64_t n = (uint64_t)vocab * dim, bytes = loom_view_bytes(dt, vocab, dim);
        float *src = rand_f32(n, 1), *want = alloc_f32((uint64_t)T * dim);
        void *table = src;
        if (dt != LOOM_F32) {
            table = calloc(1, bytes + 4);
            ck_assert_ptr_nonnull(table);
            if (dt == LOOM_F16)
                for (uint64_t i = 0; i < n; i++)
                    ((uint16_t *)table)[i] = loom_f32_to_f16(src[i]);
            else
                ck_assert_int_eq(loom_quantize_row(dt, src, n, table), LOOM_OK);
        }
        loom_ref_embed_rows(dt, table, vocab, dim, tok, n_tok, pos, rows, T, want);
        harness h = begin();
        uint32_t bt = input(&h, "table", table, bytes), bk = input(&h, "tokens", tok, n_tok * 4);
        uint32_t bo = output(&h, "out", (uint64_t)T * dim * 4);
        ck_assert_int_eq(loom_op_embed_rows(h.g, loom_mat(bt, dt, vocab, dim), (loom_tensor){ bk, LOOM_U32, 0, 1, n_tok },
                                            loom_mat(bo, LOOM_F32, T, dim), NULL),
                         LOOM_OK);
        loom_step_params p = rows_params(pos, rows);
        run(&h, &p);
        char what[48];
        snprintf(what, sizeof what, "%s T %u", loom_dtype_name(dt), T);
        expect_buffer(&h, LOOM_OP_EMBED_ROWS, what, bo, want, (uint64_t)T * dim);
        end(&h);
        if (table != src)
            free(table);
        free(src);
        free(want);
        free(tok);
    }
}
END_TEST

/* _i 1: in place. Every row is normalised, padding rows too. */
START_TEST(rms_norm_mul_rows)
{
    for (size_t s = 0; s < N_ROWS_T; s++) {
        seed(3100 + s + 16 * _i);
        uint32_t T = rows_T[s], n = s % 2 ? 7 : 300;
        float eps = 1e-5f;
        float *x = rand_f32((uint64_t)T * n, 3), *w = rand_f32(n, 2), *want = alloc_f32((uint64_t)T * n);
        /* rows of very different scale: a kernel mixing rows fails */
        for (uint32_t t = 0; t < T; t++)
            for (uint32_t i = 0; i < n; i++)
                x[(uint64_t)t * n + i] *= (float)(1 + t % 5);
        loom_ref_rms_norm_mul_rows(x, w, want, n, T, eps);
        harness h = begin();
        uint32_t bx = input(&h, "x", x, (uint64_t)T * n * 4), bw = input(&h, "w", w, n * 4);
        uint32_t by = _i ? bx : output(&h, "y", (uint64_t)T * n * 4);
        ck_assert_int_eq(loom_op_rms_norm_mul_rows(h.g, loom_mat(bx, LOOM_F32, T, n), loom_vec(bw, n),
                                                   loom_mat(by, LOOM_F32, T, n), eps, NULL),
                         LOOM_OK);
        loom_step_params p = rows_params(4, real_rows(T));
        run(&h, &p);
        expect_buffer(&h, LOOM_OP_RMS_NORM_MUL_ROWS, "y", by, want, (uint64_t)T * n);
        end(&h);
        free(x);
        free(w);
        free(want);
    }
}
END_TEST

/* rms_norm_mul_rows_y16 (NORM_Y16: the split pass's form of a T-row norm
 * whose output only coopmat forms read) beside the plain form in one
 * graph: its f16 pairs are the plain form's values rounded to f16, to the
 * bit (the same f32 operations, both rounding to nearest even). Rows of
 * even lengths: 300 and 2 (one pair), 2048 (eight pairs an invocation). */
START_TEST(rms_norm_mul_rows_y16)
{
    static const uint32_t lens[] = { 300, 2, 2048 };
    for (size_t s = 0; s < N_ROWS_T; s++) {
        seed(3150 + s);
        uint32_t T = rows_T[s], n = lens[s % 3];
        float *x = rand_f32((uint64_t)T * n, 3), *w = rand_f32(n, 2), *y = alloc_f32((uint64_t)T * n);
        for (uint32_t t = 0; t < T; t++)
            for (uint32_t i = 0; i < n; i++)
                x[(uint64_t)t * n + i] *= (float)(1 + t % 5);
        uint16_t *yh = malloc((uint64_t)T * n * 2);
        ck_assert_ptr_nonnull(yh);
        harness h = begin();
        uint32_t bx = input(&h, "x", x, (uint64_t)T * n * 4), bw = input(&h, "w", w, n * 4);
        uint32_t by = output(&h, "y", (uint64_t)T * n * 4), bh = output(&h, "yh", (uint64_t)T * n * 4);
        uint32_t id;
        ck_assert_int_eq(loom_op_rms_norm_mul_rows(h.g, loom_mat(bx, LOOM_F32, T, n), loom_vec(bw, n),
                                                   loom_mat(by, LOOM_F32, T, n), 1e-5f, &id),
                         LOOM_OK);
        const loom_node *nd = loom_graph_node(h.g, id);
        loom_binding b[3];
        memcpy(b, loom_node_bindings(h.g, nd), sizeof b);
        uint8_t push[64];
        ck_assert_uint_le(nd->push_size, sizeof push);
        memcpy(push, loom_node_push(h.g, nd), nd->push_size);
        ck_assert_uint_eq(b[2].buffer, by);
        b[2].buffer = bh;
        ck_assert_int_eq(loom_graph_add_dispatch(h.g, &(loom_dispatch_desc){ .kernel = "rms_norm_mul_rows_y16",
                                                                          .op = LOOM_OP_RMS_NORM_MUL_ROWS,
                                                                          .groups = { nd->groups[0], 1, 1 },
                                                                          .bindings = b, .n_bindings = 3,
                                                                          .push = push, .push_size = nd->push_size },
                                                 NULL),
                         LOOM_OK);
        loom_step_params p = rows_params(4, real_rows(T));
        run(&h, &p);
        fetch(&h, by, y, (uint64_t)T * n * 4);
        fetch(&h, bh, yh, (uint64_t)T * n * 2);
        for (uint64_t e = 0; e < (uint64_t)T * n; e++)
            ck_assert_msg(yh[e] == loom_f32_to_f16(y[e]), "T %u, n %u: element %llu is f16 0x%04x, want 0x%04x (%g)", T,
                          n, (unsigned long long)e, yh[e], loom_f32_to_f16(y[e]), y[e]);
        end(&h);
        free_all((void *[]){ x, w, y, yh }, 4);
    }
}
END_TEST

/* _i 1: in place. Row t at pos + t: a kernel rotating every row at pos
 * (or at pos + t + 1) fails on every row but one. */
START_TEST(rope_rows)
{
    for (size_t s = 0; s < N_ROWS_T; s++) {
        seed(3200 + s + 16 * _i);
        uint32_t T = rows_T[s], nh = s % 2 ? 3 : 2, hd = s % 2 ? 16 : 64, n = nh * hd, pos = 9 + 50 * (uint32_t)s;
        float *x = rand_f32((uint64_t)T * n, 2), *want = alloc_f32((uint64_t)T * n);
        loom_ref_rope_rows(x, want, nh, hd, 10000.0f, pos, T);
        harness h = begin();
        uint32_t bx = input(&h, "x", x, (uint64_t)T * n * 4);
        uint32_t by = _i ? bx : output(&h, "y", (uint64_t)T * n * 4);
        ck_assert_int_eq(loom_op_rope_rows(h.g, loom_mat(bx, LOOM_F32, T, n), loom_mat(by, LOOM_F32, T, n), nh, hd,
                                           10000.0f, NULL),
                         LOOM_OK);
        loom_step_params p = rows_params(pos, real_rows(T));
        run(&h, &p);
        expect_buffer(&h, LOOM_OP_ROPE_ROWS, "y", by, want, (uint64_t)T * n);
        end(&h);
        free(x);
        free(want);
    }
}
END_TEST

/* _i 1: f16 caches. The padding rows of k and v are NaN and the cache rows
 * past the step hold old values: writing either fails. The last case runs
 * past max_seq (those rows are dropped). */
START_TEST(kv_append_rows)
{
    bool kh = _i == 1;
    loom_dtype cdt = kh ? LOOM_F16 : LOOM_F32;
    const uint32_t dim = 24, max_seq = 80;
    for (size_t s = 0; s < N_ROWS_T; s++) {
        seed(3300 + s + 16 * _i);
        uint32_t T = rows_T[s], rows = real_rows(T), pos = s + 1 == N_ROWS_T ? 50 : 5 + (uint32_t)s;
        uint64_t kn = (uint64_t)T * dim, cn = (uint64_t)max_seq * dim;
        float *k = rand_f32(kn, 1), *v = rand_f32(kn, 1), *kc = rand_f32(cn, 1), *vc = rand_f32(cn, 1);
        for (uint64_t e = (uint64_t)rows * dim; e < kn; e++)
            k[e] = v[e] = NAN;
        harness h = begin();
        uint32_t bk = input(&h, "k", k, kn * 4), bv = input(&h, "v", v, kn * 4);
        uint32_t bkc = cache_input(&h, "kc", kc, cn, kh), bvc = cache_input(&h, "vc", vc, cn, kh);
        loom_ref_kv_append_rows(k, v, kc, vc, dim, max_seq, pos, rows);
        ck_assert_int_eq(loom_op_kv_append_rows(h.g, loom_mat(bk, LOOM_F32, T, dim), loom_mat(bv, LOOM_F32, T, dim),
                                                loom_mat(bkc, cdt, max_seq, dim), loom_mat(bvc, cdt, max_seq, dim),
                                                NULL),
                         LOOM_OK);
        loom_step_params p = rows_params(pos, rows);
        run(&h, &p);
        expect_cache(&h, LOOM_OP_KV_APPEND_ROWS, "kcache", bkc, kc, cn, kh);
        expect_cache(&h, LOOM_OP_KV_APPEND_ROWS, "vcache", bvc, vc, cn, kh);
        end(&h);
        free(k);
        free(v);
        free(kc);
        free(vc);
    }
}
END_TEST

/* _i 1: f16 caches. T up to LOOM_ATTN_ROWS_FEW_T takes the few-query form
 * (the decode attention's kernel, a workgroup a query vector and share),
 * larger T the tiled form. Heads, kv heads and head_dim: GQA groups of 2 and 4 and
 * one kv head for all, and every tile shape of the kernel (head_dim 16 and
 * 64: 32 queries a tile, several keys an invocation; 128: one key; 256:
 * a key's dims split over invocations; 24 and 80: not powers of two). On a
 * device with cooperative matrices, f16 caches of head_dim 64 and 128 with
 * at least 64 query vectors a kv head take the cooperative-matrix form (the
 * split pass's): T 64 of groups of 2, and T 16, 17 and 64 of groups of 4
 * (17: a last workgroup of 4 queries). The
 * cache rows past the step are NaN, so a query row that looks one key past
 * its causal limit fails on the last real row, and every other row's
 * output changes; the padding rows' output must be finite. */
START_TEST(attention_rows)
{
    static const uint32_t cases[][3] = { { 4, 2, 64 }, { 8, 2, 16 }, { 2, 1, 128 }, { 2, 2, 256 },
                                         { 6, 3, 24 }, { 3, 1, 80 }, { 8, 2, 64 } };
    bool kh = _i == 1;
    loom_dtype cdt = kh ? LOOM_F16 : LOOM_F32;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t s = 0; s <= N_ROWS_T; s++) {
            seed(3400 + c * 8 + s + 128 * _i);
            /* and a verification step whose rows are all real, on the
             * few-query form: each row's own causal limit counts */
            uint32_t nh = cases[c][0], nkv = cases[c][1], hd = cases[c][2];
            uint32_t T = s < N_ROWS_T ? rows_T[s] : LOOM_ATTN_ROWS_FEW_T, rows = s < N_ROWS_T ? real_rows(T) : T;
            uint32_t pos = 1 + (uint32_t)(c + s) % 7 * 5, max_seq = pos + T + 3;
            uint64_t nq = (uint64_t)nh * hd, cn = (uint64_t)max_seq * nkv * hd;
            /* sharp scores in one case: only a running maximum stays finite */
            float *q = rand_f32(T * nq, c == 1 ? 40.0f : 1.0f), *kc = rand_f32(cn, 2), *vc = rand_f32(cn, 1);
            float *want = alloc_f32(T * nq), *got = alloc_f32(T * nq);
            for (uint64_t e = (uint64_t)(pos + rows) * nkv * hd; e < cn; e++)
                kc[e] = vc[e] = NAN;
            float scale = 1.0f / sqrtf((float)hd);
            harness h = begin();
            uint32_t bq = input(&h, "q", q, T * nq * 4), bkc = cache_input(&h, "kc", kc, cn, kh);
            uint32_t bvc = cache_input(&h, "vc", vc, cn, kh), bo = output(&h, "out", T * nq * 4);
            ck_assert_int_eq(loom_op_attention_rows(h.g, loom_mat(bq, LOOM_F32, T, (uint32_t)nq),
                                                    loom_mat(bkc, cdt, max_seq, nkv * hd),
                                                    loom_mat(bvc, cdt, max_seq, nkv * hd),
                                                    loom_mat(bo, LOOM_F32, T, (uint32_t)nq), nh, nkv, hd, NULL),
                             LOOM_OK);
            /* On a device with cooperative matrices the split pass's form,
             * where it takes one (f16 caches, head_dim 64 or 128, enough
             * queries a kv head); the portable form elsewhere. */
            bool coop = false;
            const char *form = loom_graph_kernel_name(h.g, loom_graph_node(h.g, 0)->kernel);
            ck_assert_msg((strstr(form, "_few") != NULL) == (T <= LOOM_ATTN_ROWS_FEW_T), "%s at T %u", form, T);
            if (coop_forms(h.g)) {
                bool want_coop = kh && (hd == 64 || hd == 128) && T * (nh / nkv) >= LOOM_ATTN_ROWS_COOP_Q;
                const char *k = loom_graph_kernel_name(h.g, loom_graph_node(h.g, 0)->kernel);
                ck_assert_msg((coop = strstr(k, "_coop") != NULL) == want_coop, "%s with T %u, head_dim %u", k, T,
                              hd);
            }
            /* The coopmat form scores f16(q * scale) against the f16 keys
             * (the reference takes that q), and weighs V by the weights
             * rounded to f16 (each within 2^-11 of its own), against their
             * sum in f32: the output moves by at most 2^-11 of the largest
             * |v|, which the comparison allows on top. */
            float *qr = alloc_f32(T * nq), slack = 0;
            for (uint64_t e = 0; e < T * nq; e++)
                qr[e] = coop ? loom_f16_to_f32(loom_f32_to_f16(q[e] * scale)) / scale : q[e];
            for (uint64_t e = 0; coop && e < (uint64_t)(pos + rows) * nkv * hd; e++)
                slack = fmaxf(slack, 0x1p-11f * fabsf(vc[e]));
            loom_ref_attention_rows(qr, kc, vc, want, nh, nkv, hd, max_seq, pos, rows, T, scale);
            /* One program, a step one position earlier first: where a tile's
             * walk is split into shares, the second replay's output is
             * combined only if the first left the tile's counter at zero. */
            loom_rt_program *prog;
            ck_assert_int_eq(loom_rt_program_create(rt, h.g, &prog), LOOM_OK);
            for (uint32_t r = 0; r < 2; r++) {
                loom_step_params p = rows_params(pos - 1 + r, rows);
                uint64_t step;
                ck_assert_int_eq(loom_rt_replay(rt, prog, &p, &step), LOOM_OK);
                ck_assert_int_eq(loom_rt_wait(rt, step), LOOM_OK);
            }
            ck_assert_uint_eq(loom_rt_validation_messages(rt), 0);
            loom_rt_program_release(prog);
            fetch(&h, bo, got, T * nq * 4);
            char what[64];
            snprintf(what, sizeof what, "%s %u/%u heads of %u, T %u%s", kh ? "f16 caches" : "f32 caches", nh, nkv,
                     hd, T, coop ? " (coopmat)" : "");
            expect_close_slack(LOOM_OP_ATTENTION_ROWS, what, got, want, rows * nq, slack, NULL);
            free(qr);
            for (uint64_t e = rows * nq; e < T * nq; e++)
                ck_assert_msg(isfinite(got[e]), "%s: padding element %llu is %g", what, (unsigned long long)e,
                              got[e]);
            end(&h);
            free(q);
            free(kc);
            free(vc);
            free(want);
            free(got);
        }
}
END_TEST

START_TEST(row_pick)
{
    for (size_t s = 0; s < N_ROWS_T; s++) {
        seed(3500 + s);
        uint32_t T = rows_T[s], n = s % 2 ? 5 : 300, rows = real_rows(T);
        float *x = rand_f32((uint64_t)T * n, 1), *want = alloc_f32(n);
        loom_ref_row_pick(x, want, n, rows, T);
        harness h = begin();
        uint32_t bx = input(&h, "x", x, (uint64_t)T * n * 4), by = output(&h, "y", n * 4);
        ck_assert_int_eq(loom_op_row_pick(h.g, loom_mat(bx, LOOM_F32, T, n), loom_vec(by, n), NULL), LOOM_OK);
        loom_step_params p = rows_params(7, rows);
        run(&h, &p);
        expect_buffer(&h, LOOM_OP_ROW_PICK, "y", by, want, n);
        end(&h);
        free(x);
        free(want);
    }
}
END_TEST

/* Ties to the lowest index, as ARGMAX; each row's maximum elsewhere. */
START_TEST(argmax_rows)
{
    for (size_t s = 0; s < N_ROWS_T; s++) {
        seed(3600 + s);
        uint32_t T = rows_T[s], n = s % 2 ? 7 : 3001;
        float *x = rand_f32((uint64_t)T * n, 1);
        for (uint32_t t = 0; t < T; t++) {
            float *r = x + (uint64_t)t * n;
            r[(t * 37u) % n] = 5.0f + (float)t;
            r[n - 1] = 5.0f + (float)t;   /* a tie, at a higher index unless it is the same */
        }
        uint32_t *want = malloc(T * 4), *got = malloc(T * 4);
        ck_assert(want && got);
        loom_ref_argmax_rows(x, want, n, T);
        harness h = begin();
        uint32_t bx = input(&h, "x", x, (uint64_t)T * n * 4), bo = output(&h, "out", T * 4);
        ck_assert_int_eq(loom_op_argmax_rows(h.g, loom_mat(bx, LOOM_F32, T, n), (loom_tensor){ bo, LOOM_U32, 0, 1, T },
                                             NULL),
                         LOOM_OK);
        loom_step_params p = rows_params(2, real_rows(T));
        run(&h, &p);
        fetch(&h, bo, got, T * 4);
        for (uint32_t t = 0; t < T; t++)
            ck_assert_msg(got[t] == want[t] && want[t] == (t * 37u) % n, "T %u row %u: %u, want %u", T, t, got[t],
                          want[t]);
        end(&h);
        free(x);
        free(want);
        free(got);
    }
}
END_TEST

static Suite *ops_suite(void)
{
    Suite *s = suite_create("ops");
    struct { const char *name; const TTest *test; int n; } cases[] = {
        { "copy", copy, 1 },         { "mul", mul, 2 },         { "add", add, 2 },
        { "silu_mul", silu_mul, 2 }, { "norms", norms, 4 },     { "matvec", matvec, 6 },
        { "embed", embed, 2 },       { "rope", rope, 2 },       { "kv_append", kv_append, 2 },
        { "attention", attention, 2 }, { "softmax", softmax, 1 }, { "argmax", argmax, 1 },
        { "fused_matvec", fused_matvec, 10 }, { "qkv_rope_kv", qkv_rope_kv, 8 },
        { "attention_replays", attention_replays, 1 }, { "matvec_add_stage", matvec_add_stage, 2 },
        { "zero", zero, 1 },         { "step_log", step_log, 1 },
        { "blocks", blocks, N_BLOCK_TYPES * N_BLOCK_FORMS }, { "blocks_nan", blocks_nan, N_BLOCK_TYPES },
        { "embed_rows", embed_rows, 4 }, { "rms_norm_mul_rows", rms_norm_mul_rows, 2 },
        { "rope_rows", rope_rows, 2 },   { "kv_append_rows", kv_append_rows, 2 },
        { "rms_norm_mul_rows_y16", rms_norm_mul_rows_y16, 1 },
        { "attention_rows", attention_rows, 2 }, { "row_pick", row_pick, 1 }, { "argmax_rows", argmax_rows, 1 },
        { "matmul", matmul, N_MM_TYPES * 3 }, { "matmul_large", matmul_large, (N_MM_TYPES - 1) * 3 },
        { "matmul_split_k", matmul_split_k, N_MM_TYPES * 2 },
        { "matmul_row_blocks", matmul_row_blocks, 2 }, { "matmul_small_layouts", matmul_small_layouts, 1 },
        { "qkv_rope_kv_rows", qkv_rope_kv_rows, N_QR_TYPES * 2 },
        { "matmul_nan", matmul_nan, N_BLOCK_TYPES }, { "stage_quant", stage_quant, (int)N_TQ_CASES },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_loop_test(tc, cases[i].test, 0, cases[i].n);
        suite_add_tcase(s, tc);
    }
#ifdef LOOM_OPS_FUSE_TESTS
    TCase *tc = tcase_create("fuse");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_loop_test(tc, fuse, 0, FUSE_RULES);
    suite_add_tcase(s, tc);
#endif
    return s;
}

static void release_device(void) { loom_rt_destroy(rt); }

void loom_test_register(loom_test_runner *r, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    loom_test_add_suite(r, ops_suite());
    /* one device for the whole run: no fork per test */
    loom_test_no_fork(r);
    loom_test_at_end(r, release_device);
}
