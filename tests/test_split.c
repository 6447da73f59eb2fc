/* Weights larger than one binding, on the device under the validation
 * layer. A second runtime is made with a small binding limit (16 KiB, as
 * loom_rt_desc.max_binding_range forces on any device), so the matrices and
 * tables here — tens of KiB, sized for lavapipe — are cut into row blocks by
 * the split pass, and the runtime refuses any binding the pass left larger.
 * Every matvec form, both dtypes, an unfused LM head (norm, matvec, argmax)
 * fused then split, and EMBED over one and over several block nodes must
 * give the CPU reference's results (reference/reference.c) and the very bits
 * of the unsplit run on the default runtime; a limit below one row block is
 * LOOM_LIMIT from the compile, never a validation message. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "loom_ops.h"
#include "loom_ref.h"
#include "loom_runtime.h"
#include "test_rand.h"
#include "runner.h"

#define LIMIT 16384u

static loom_rt *big, *small;   /* the device's binding limit; LIMIT */

static void setup(void)
{
    if (big)
        return;
    loom_result rc = loom_rt_create(&(loom_rt_desc){ .validate = true }, &big);
    ck_assert_msg(rc == LOOM_OK, "loom_rt_create: %s: %s", loom_result_str(rc), loom_last_error());
    rc = loom_rt_create(&(loom_rt_desc){ .validate = true, .max_binding_range = LIMIT }, &small);
    ck_assert_msg(rc == LOOM_OK, "loom_rt_create: %s: %s", loom_result_str(rc), loom_last_error());
    loom_rt_info info;
    loom_rt_get_info(small, &info);
    ck_assert_uint_eq(info.max_binding_range, LIMIT);
    loom_rt_get_info(big, &info);
    ck_assert_uint_ge(info.max_binding_range, 1u << 20);
}

/* ---- inputs ---------------------------------------------------------------- */


/* n elements of dtype t (f32 or f16 bits), scaled. */
static void *random_data(loom_dtype t, uint64_t n, float scale)
{
    void *p = malloc(n * 4 + 4);
    ck_assert_ptr_nonnull(p);
    for (uint64_t i = 0; i < n; i++) {
        float v = uniform() * scale;
        if (t == LOOM_F16)
            ((uint16_t *)p)[i] = loom_f32_to_f16(v);
        else
            ((float *)p)[i] = v;
    }
    return p;
}

/* ---- one graph on one runtime --------------------------------------------- */

#define MAX_BUFS 8

typedef struct run {
    loom_rt *rt;
    loom_graph *g;
    loom_rt_buffer *b[MAX_BUFS];
    uint32_t n;
} run;

static run begin(loom_rt *rt)
{
    run r = { .rt = rt };
    ck_assert_int_eq(loom_graph_create(&(loom_graph_desc){ .name = "split" }, &r.g), LOOM_OK);
    return r;
}

/* A runtime buffer holding data (NULL: NaN poison), declared to the graph;
 * graph buffer ids follow creation order, so the id indexes r->b. */
static uint32_t input(run *r, const char *name, const void *data, uint64_t bytes, loom_usage usage)
{
    ck_assert_uint_lt(r->n, MAX_BUFS);
    uint64_t size = (bytes + 3) & ~3ull;
    loom_rt_buffer *b;
    ck_assert_int_eq(loom_rt_buffer_create(r->rt, &(loom_rt_buffer_desc){ .name = name, .size = size }, &b), LOOM_OK);
    void *tmp = malloc(size);
    ck_assert_ptr_nonnull(tmp);
    memset(tmp, 0xff, size);
    if (data)
        memcpy(tmp, data, bytes);
    ck_assert_int_eq(loom_rt_buffer_write(r->rt, b, 0, tmp, size), LOOM_OK);
    free(tmp);
    uint32_t id;
    ck_assert_int_eq(loom_graph_add_buffer(r->g, &(loom_buffer_desc){ .name = name, .size = size, .usage = usage,
                                                                      .external = loom_rt_buffer_id(b) }, &id),
                     LOOM_OK);
    ck_assert_uint_eq(id, r->n);
    r->b[r->n++] = b;
    return id;
}

/* Compiles through the runtime (its binding limit), replays once, waits.
 * Returns the plan's split node count. */
static uint32_t execute(run *r, const loom_step_params *params)
{
    loom_plan *plan = NULL;
    loom_result rc = loom_rt_compile(r->rt, r->g, NULL, &plan, NULL);
    ck_assert_msg(rc == LOOM_OK, "compile: %s: %s", loom_result_str(rc), loom_last_error());
    uint64_t step;
    loom_step_params zero = { 0 };
    rc = loom_rt_replay_plan(r->rt, plan, params ? params : &zero, &step);
    ck_assert_msg(rc == LOOM_OK, "replay: %s: %s", loom_result_str(rc), loom_last_error());
    ck_assert_int_eq(loom_rt_wait(r->rt, step), LOOM_OK);
    uint32_t cut = loom_plan_get_stats(plan)->split_nodes;
    loom_plan_release(plan);
    ck_assert_uint_eq(loom_rt_validation_messages(r->rt), 0);
    return cut;
}

static void fetch(run *r, uint32_t id, void *dst, uint64_t bytes)
{
    ck_assert_int_eq(loom_rt_buffer_read(r->rt, r->b[id], 0, dst, bytes), LOOM_OK);
}

static void end(run *r)
{
    for (uint32_t i = 0; i < r->n; i++)
        loom_rt_buffer_release(r->b[i]);
    loom_graph_destroy(r->g);
}

/* ---- the matvec forms ------------------------------------------------------ */

typedef struct mv_case {
    loom_op op;
    loom_dtype dt;
    uint32_t rows, cols;
    void *W, *U;
    float *x, *g, *r;
} mv_case;

typedef struct mv_result {
    float *y;
    uint32_t argmax;
    uint32_t split_nodes;
} mv_result;

static bool has_argmax(loom_op op) { return op == LOOM_OP_MATVEC_ARGMAX || op == LOOM_OP_RMS_NORM_MATVEC_ARGMAX; }

/* Captures c's op as a frontend would (MATVEC_ADD in place on the
 * residual), runs it on rt and reads y (the residual for MATVEC_ADD) and the
 * argmax. */
static mv_result run_form(loom_rt *rt, const mv_case *c)
{
    uint64_t wb = (uint64_t)c->rows * c->cols * loom_dtype_size(c->dt);
    run r = begin(rt);
    uint32_t w = input(&r, "W", c->W, wb, LOOM_USAGE_WEIGHT), u = input(&r, "U", c->U, wb, LOOM_USAGE_WEIGHT);
    uint32_t x = input(&r, "x", c->x, c->cols * 4ull, LOOM_USAGE_INPUT);
    uint32_t g = input(&r, "g", c->g, c->cols * 4ull, LOOM_USAGE_WEIGHT);
    uint32_t res = input(&r, "r", c->r, c->rows * 4ull, LOOM_USAGE_STATE);
    uint32_t y = input(&r, "y", NULL, c->rows * 4ull, LOOM_USAGE_OUTPUT);
    uint32_t out = input(&r, "out", NULL, 4, LOOM_USAGE_OUTPUT);
    loom_tensor W = loom_mat(w, c->dt, c->rows, c->cols), U = loom_mat(u, c->dt, c->rows, c->cols);
    loom_tensor X = loom_vec(x, c->cols), Gw = loom_vec(g, c->cols), R = loom_vec(res, c->rows);
    loom_tensor Y = loom_vec(y, c->rows), O = { out, LOOM_U32, 0, 1, 1 };
    loom_result rc;
    switch (c->op) {
    case LOOM_OP_MATVEC: rc = loom_op_matvec(r.g, W, X, Y, NULL); break;
    case LOOM_OP_MATVEC_ADD: rc = loom_op_matvec_add(r.g, W, X, R, R, NULL); break;
    case LOOM_OP_MATVEC_SILU_MUL: rc = loom_op_matvec_silu_mul(r.g, W, U, X, Y, NULL); break;
    case LOOM_OP_RMS_NORM_MATVEC: rc = loom_op_rms_norm_matvec(r.g, W, X, Gw, Y, 1e-5f, NULL); break;
    case LOOM_OP_RMS_NORM_MATVEC_SILU_MUL:
        rc = loom_op_rms_norm_matvec_silu_mul(r.g, W, U, X, Gw, Y, 1e-5f, NULL);
        break;
    case LOOM_OP_MATVEC_ARGMAX: rc = loom_op_matvec_argmax(r.g, W, X, Y, O, NULL); break;
    default: rc = loom_op_rms_norm_matvec_argmax(r.g, W, X, Gw, Y, O, 1e-5f, NULL); break;
    }
    ck_assert_int_eq(rc, LOOM_OK);
    mv_result m = { .y = malloc(c->rows * 4ull) };
    ck_assert_ptr_nonnull(m.y);
    m.split_nodes = execute(&r, NULL);
    fetch(&r, c->op == LOOM_OP_MATVEC_ADD ? res : y, m.y, c->rows * 4ull);
    if (has_argmax(c->op))
        fetch(&r, out, &m.argmax, 4);
    end(&r);
    return m;
}

static void reference(const mv_case *c, float *y)
{
    switch (c->op) {
    case LOOM_OP_MATVEC:
    case LOOM_OP_MATVEC_ARGMAX: loom_ref_matvec(c->dt, c->W, c->x, NULL, y, c->rows, c->cols); break;
    case LOOM_OP_MATVEC_ADD: loom_ref_matvec(c->dt, c->W, c->x, c->r, y, c->rows, c->cols); break;
    case LOOM_OP_MATVEC_SILU_MUL: loom_ref_matvec_silu_mul(c->dt, c->W, c->U, c->x, y, c->rows, c->cols); break;
    case LOOM_OP_RMS_NORM_MATVEC_SILU_MUL:
        loom_ref_rms_norm_matvec_silu_mul(c->dt, c->W, c->U, c->x, c->g, y, c->rows, c->cols, 1e-5f);
        break;
    default: loom_ref_rms_norm_matvec(c->dt, c->W, c->x, c->g, y, c->rows, c->cols, 1e-5f); break;
    }
}

static void expect_close(const char *what, const float *got, const float *want, uint32_t n, float tol)
{
    for (uint32_t i = 0; i < n; i++)
        ck_assert_msg(fabsf(got[i] - want[i]) <= tol + tol * fabsf(want[i]), "%s: element %u is %.9g, want %.9g",
                      what, i, got[i], want[i]);
}

static const loom_op forms[] = {
    LOOM_OP_MATVEC, LOOM_OP_MATVEC_ADD, LOOM_OP_MATVEC_SILU_MUL, LOOM_OP_RMS_NORM_MATVEC,
    LOOM_OP_RMS_NORM_MATVEC_SILU_MUL, LOOM_OP_MATVEC_ARGMAX, LOOM_OP_RMS_NORM_MATVEC_ARGMAX,
};

/* _i: the form. Both dtypes; rows over several blocks with a short last
 * one (a single row in 129 x 64); a row length on the vector path and one
 * (42) on the scalar path. */
START_TEST(matvec_forms)
{
    static const uint32_t shapes[][2] = { { 300, 64 }, { 260, 42 }, { 129, 64 } };
    loom_op op = forms[_i];
    for (int dt = 0; dt < 2; dt++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            seed(1000 + 10 * _i + 3 * s + dt);
            mv_case c = { .op = op, .dt = dt ? LOOM_F16 : LOOM_F32, .rows = shapes[s][0], .cols = shapes[s][1] };
            uint64_t n = (uint64_t)c.rows * c.cols;
            c.W = random_data(c.dt, n, 1);
            c.U = random_data(c.dt, n, 1);
            c.x = random_data(LOOM_F32, c.cols, 1);
            c.g = random_data(LOOM_F32, c.cols, 2);
            c.r = random_data(LOOM_F32, c.rows, 1);
            float *want = malloc(c.rows * 4ull);
            reference(&c, want);
            mv_result whole = run_form(big, &c), split = run_form(small, &c);
            char what[64];
            snprintf(what, sizeof what, "%s %s %ux%u", loom_op_name(op), loom_dtype_name(c.dt), c.rows, c.cols);
            ck_assert_msg(whole.split_nodes == 0 && split.split_nodes == 1, "%s: split %u / %u nodes", what,
                          whole.split_nodes, split.split_nodes);
            expect_close(what, split.y, want, c.rows, 2e-4f);
            /* The blocks run the same kernel over the same rows: the same bits. */
            ck_assert_msg(memcmp(split.y, whole.y, c.rows * 4ull) == 0, "%s: split and whole runs differ", what);
            if (has_argmax(op)) {
                ck_assert_uint_eq(split.argmax, loom_ref_argmax(split.y, c.rows));
                ck_assert_uint_eq(split.argmax, whole.argmax);
            }
            free(whole.y);
            free(split.y);
            free(want);
            free(c.W), free(c.U), free(c.x), free(c.g), free(c.r);
        }
}
END_TEST

/* The argmax forms' workgroups loop over row blocks; the split pass caps
 * them at loom_compile_options.wave_groups (one wave of the device). Capped
 * hard (5 workgroups for 250 blocks, each taking 50 in turn; 7, taking
 * 35 or 36), the logits and the token are the reference's and the whole
 * run's bits; a cap at or above the builder's count leaves it. _i: 0
 * MATVEC_ARGMAX, 1 RMS_NORM_MATVEC_ARGMAX. */
START_TEST(argmax_wave_cap)
{
    const uint32_t rows = 1000, cols = 64;   /* 4 rows a workgroup: 250 */
    loom_op op = _i ? LOOM_OP_RMS_NORM_MATVEC_ARGMAX : LOOM_OP_MATVEC_ARGMAX;
    for (int dt = 0; dt < 2; dt++) {
        seed(7000 + 10 * _i + dt);
        mv_case c = { .op = op, .dt = dt ? LOOM_F16 : LOOM_F32, .rows = rows, .cols = cols };
        c.W = random_data(c.dt, (uint64_t)rows * cols, 1);
        c.x = random_data(LOOM_F32, cols, 1);
        c.g = random_data(LOOM_F32, cols, 2);
        float *want = malloc(rows * 4ull), *got = malloc(rows * 4ull), *first = malloc(rows * 4ull);
        reference(&c, want);
        static const uint32_t caps[] = { 0, 5, 7, 250, 4096 };
        uint32_t first_arg = 0;
        for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++) {
            run r = begin(big);
            uint32_t w = input(&r, "W", c.W, (uint64_t)rows * cols * loom_dtype_size(c.dt), LOOM_USAGE_WEIGHT);
            uint32_t x = input(&r, "x", c.x, cols * 4ull, LOOM_USAGE_INPUT);
            uint32_t g = input(&r, "g", c.g, cols * 4ull, LOOM_USAGE_WEIGHT);
            uint32_t y = input(&r, "y", NULL, rows * 4ull, LOOM_USAGE_OUTPUT);
            uint32_t out = input(&r, "out", NULL, 4, LOOM_USAGE_OUTPUT);
            loom_tensor W = loom_mat(w, c.dt, rows, cols), Y = loom_vec(y, rows), O = { out, LOOM_U32, 0, 1, 1 };
            ck_assert_int_eq(_i ? loom_op_rms_norm_matvec_argmax(r.g, W, loom_vec(x, cols), loom_vec(g, cols), Y, O,
                                                                 1e-5f, NULL)
                                : loom_op_matvec_argmax(r.g, W, loom_vec(x, cols), Y, O, NULL),
                             LOOM_OK);
            loom_compile_options o = { .wave_groups = caps[k] };
            loom_plan *plan;
            ck_assert_int_eq(loom_rt_compile(big, r.g, &o, &plan, NULL), LOOM_OK);
            const loom_graph *pg = loom_plan_graph(plan);
            uint32_t groups = 0;
            for (uint32_t i = 0; i < loom_graph_node_count(pg); i++)
                if (loom_graph_node(pg, i)->op == (uint32_t)op)
                    groups = loom_graph_node(pg, i)->groups[0];
            ck_assert_uint_eq(groups, caps[k] && caps[k] < 250 ? caps[k] : 250);
            uint64_t step;
            loom_step_params zero = { 0 };
            ck_assert_int_eq(loom_rt_replay_plan(big, plan, &zero, &step), LOOM_OK);
            ck_assert_int_eq(loom_rt_wait(big, step), LOOM_OK);
            ck_assert_uint_eq(loom_rt_validation_messages(big), 0);
            loom_plan_release(plan);
            uint32_t arg;
            fetch(&r, y, got, rows * 4ull);
            fetch(&r, out, &arg, 4);
            expect_close("argmax_wave_cap", got, want, rows, 2e-4f);
            ck_assert_uint_eq(arg, loom_ref_argmax(got, rows));
            if (k == 0) {
                memcpy(first, got, rows * 4ull);
                first_arg = arg;
            } else {
                ck_assert_msg(memcmp(first, got, rows * 4ull) == 0, "cap %u: the logits differ", caps[k]);
                ck_assert_uint_eq(arg, first_arg);
            }
            end(&r);
        }
        free(want), free(got), free(first);
        free(c.W), free(c.x), free(c.g);
    }
}
END_TEST

/* An LM head captured unfused (RMS_NORM, MUL by the norm weight, MATVEC,
 * ARGMAX), as the example decoder captures it: fused into
 * RMS_NORM_MATVEC_ARGMAX, then split into norm-folded blocks and an
 * ARGMAX. The logits and the token match the reference and the whole run. */
START_TEST(lm_head_unfused)
{
    const uint32_t vocab = 1000, dim = 64;
    seed(77);
    uint16_t *W = random_data(LOOM_F16, (uint64_t)vocab * dim, 1);
    float *x = random_data(LOOM_F32, dim, 3), *gw = random_data(LOOM_F32, dim, 2);
    float *want = malloc(vocab * 4), got[2][1000];
    uint32_t token[2], cut[2];
    loom_ref_rms_norm_matvec(LOOM_F16, W, x, gw, want, vocab, dim, 1e-5f);
    for (int k = 0; k < 2; k++) {
        run r = begin(k ? small : big);
        uint32_t w = input(&r, "out", W, (uint64_t)vocab * dim * 2, LOOM_USAGE_WEIGHT);
        uint32_t bx = input(&r, "x", x, dim * 4, LOOM_USAGE_INPUT), bg = input(&r, "g", gw, dim * 4, LOOM_USAGE_WEIGHT);
        uint32_t t = input(&r, "t", NULL, dim * 4, LOOM_USAGE_SCRATCH), n = input(&r, "n", NULL, dim * 4,
                                                                                    LOOM_USAGE_SCRATCH);
        uint32_t logits = input(&r, "logits", NULL, vocab * 4, LOOM_USAGE_OUTPUT);
        uint32_t am = input(&r, "argmax", NULL, 4, LOOM_USAGE_OUTPUT);
        ck_assert_int_eq(loom_op_rms_norm(r.g, loom_vec(bx, dim), loom_vec(t, dim), 1e-5f, NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_mul(r.g, loom_vec(t, dim), loom_vec(bg, dim), loom_vec(n, dim), NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_matvec(r.g, loom_mat(w, LOOM_F16, vocab, dim), loom_vec(n, dim),
                                        loom_vec(logits, vocab), NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_argmax(r.g, loom_vec(logits, vocab), (loom_tensor){ am, LOOM_U32, 0, 1, 1 }, NULL),
                         LOOM_OK);
        cut[k] = execute(&r, NULL);
        fetch(&r, logits, got[k], vocab * 4);
        fetch(&r, am, &token[k], 4);
        end(&r);
    }
    ck_assert_uint_eq(cut[0], 0);
    ck_assert_uint_eq(cut[1], 1);
    expect_close("lm head", got[1], want, vocab, 2e-4f);
    ck_assert(memcmp(got[0], got[1], sizeof got[0]) == 0);
    ck_assert_uint_eq(token[1], loom_ref_argmax(got[1], vocab));
    ck_assert_uint_eq(token[0], token[1]);
    free(W), free(x), free(gw), free(want);
}
END_TEST

/* ---- EMBED ----------------------------------------------------------------- */

/* _i: the case. Tokens at the first and last row, on both sides of block
 * and node boundaries, and past the vocabulary (zeros). */
START_TEST(embed)
{
    static const struct { loom_dtype t; uint32_t vocab, dim; } cases[] = {
        { LOOM_F32, 1000, 64 },   /* 63-row blocks, three nodes of up to 7 */
        { LOOM_F16, 300, 128 },   /* five 64-row blocks, one node */
        { LOOM_F16, 1000, 66 },   /* 132-byte rows: 64-row blocks, three nodes */
    };
    const loom_dtype t = cases[_i].t;
    const uint32_t vocab = cases[_i].vocab, dim = cases[_i].dim;
    uint32_t tokens[] = { 0, 62, 63, 64, 127, 128, 440, 441, vocab - 1, vocab, vocab + 5000 };
    const uint32_t nt = sizeof tokens / sizeof tokens[0];
    seed(500 + _i);
    void *T = random_data(t, (uint64_t)vocab * dim, 1);
    float *want = malloc(dim * 4ull), *got[2] = { malloc(dim * 4ull), malloc(dim * 4ull) };
    for (uint32_t ti = 0; ti < nt; ti++) {
        loom_ref_embed(t, T, vocab, dim, tokens[ti], want);
        uint32_t cut[2];
        for (int k = 0; k < 2; k++) {
            run r = begin(k ? small : big);
            uint32_t table = input(&r, "table", T, (uint64_t)vocab * dim * loom_dtype_size(t), LOOM_USAGE_WEIGHT);
            uint32_t tok = input(&r, "tokens", tokens, sizeof tokens, LOOM_USAGE_INPUT);
            uint32_t out = input(&r, "out", NULL, dim * 4ull, LOOM_USAGE_OUTPUT);   /* NaN: a missed write shows */
            ck_assert_int_eq(loom_op_embed(r.g, loom_mat(table, t, vocab, dim), tok, ti, loom_vec(out, dim), NULL),
                             LOOM_OK);
            cut[k] = execute(&r, NULL);
            fetch(&r, out, got[k], dim * 4ull);
            end(&r);
        }
        ck_assert_uint_eq(cut[0], 0);
        ck_assert_uint_eq(cut[1], 1);
        ck_assert_msg(memcmp(got[1], want, dim * 4ull) == 0, "%s vocab %u: token %u differs from the reference",
                      loom_dtype_name(t), vocab, tokens[ti]);
        ck_assert(memcmp(got[0], got[1], dim * 4ull) == 0);
    }
    free(T), free(want), free(got[0]), free(got[1]);
}
END_TEST

/* ---- limits ---------------------------------------------------------------- */

/* A limit below one row block (64 rows of 256 bytes here) fails the compile
 * with LOOM_LIMIT; an unsplit graph with a binding above the runtime's limit
 * fails program creation with LOOM_LIMIT. Neither reaches the device. */
START_TEST(too_small)
{
    seed(9);
    const uint32_t rows = 300, cols = 64;
    void *W = random_data(LOOM_F32, (uint64_t)rows * cols, 1);
    run r = begin(small);
    uint32_t w = input(&r, "W", W, (uint64_t)rows * cols * 4, LOOM_USAGE_WEIGHT);
    uint32_t x = input(&r, "x", NULL, cols * 4, LOOM_USAGE_INPUT), y = input(&r, "y", NULL, rows * 4,
                                                                             LOOM_USAGE_OUTPUT);
    ck_assert_int_eq(loom_op_matvec(r.g, loom_mat(w, LOOM_F32, rows, cols), loom_vec(x, cols), loom_vec(y, rows), NULL),
                     LOOM_OK);
    loom_plan *plan = (loom_plan *)1;
    loom_compile_options o = { .max_binding_range = 64 * 256 - 4 };
    ck_assert_int_eq(loom_rt_compile(small, r.g, &o, &plan, NULL), LOOM_LIMIT);
    ck_assert_ptr_null(plan);
    ck_assert_int_eq(loom_rt_run_graph(small, r.g, NULL), LOOM_LIMIT);
    /* The runtime's own limit, below a row block, fails the same way. */
    o.max_binding_range = 0;
    loom_rt *tiny = NULL;
    ck_assert_int_eq(loom_rt_create(&(loom_rt_desc){ .validate = true, .max_binding_range = 4096 }, &tiny), LOOM_OK);
    loom_graph *g = NULL;
    ck_assert_int_eq(loom_graph_clone(r.g, &g), LOOM_OK);
    ck_assert_int_eq(loom_rt_compile(tiny, g, &o, &plan, NULL), LOOM_LIMIT);
    ck_assert_uint_eq(loom_rt_validation_messages(tiny), 0);
    loom_graph_destroy(g);
    loom_rt_destroy(tiny);
    ck_assert_uint_eq(loom_rt_validation_messages(small), 0);
    end(&r);
    free(W);
}
END_TEST

static void release_devices(void)
{
    loom_rt_destroy(big);
    loom_rt_destroy(small);
    big = small = NULL;
}

static Suite *split_suite(void)
{
    Suite *s = suite_create("split");
    TCase *tc = tcase_create("blocks");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_loop_test(tc, matvec_forms, 0, (int)(sizeof forms / sizeof forms[0]));
    tcase_add_loop_test(tc, argmax_wave_cap, 0, 2);
    tcase_add_test(tc, lm_head_unfused);
    tcase_add_loop_test(tc, embed, 0, 3);
    tcase_add_test(tc, too_small);
    suite_add_tcase(s, tc);
    return s;
}

void loom_test_register(loom_test_runner *r, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    loom_test_add_suite(r, split_suite());
    /* two devices for the whole run: no fork per test */
    loom_test_no_fork(r);
    loom_test_at_end(r, release_devices);
}
