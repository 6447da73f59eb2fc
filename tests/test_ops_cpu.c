/* Op builders without a GPU: what each builder appends (op kind, kernel,
 * binding slots, exact ranges, push constants, workgroup counts) and what it
 * rejects. The kernels themselves are tested against the CPU reference in
 * test_ops.c. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "loom_ops.h"
#include "runner.h"

typedef struct fixture {
    loom_graph *g;
    uint32_t a, b, c, d, e, w, w16, tok, kc, vc, out;
} fixture;

static uint32_t buf(loom_graph *g, const char *name, uint64_t size)
{
    uint32_t id;
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = name, .size = size }, &id), LOOM_OK);
    return id;
}

static fixture make(void)
{
    fixture f;
    ck_assert_int_eq(loom_graph_create(NULL, &f.g), LOOM_OK);
    f.a = buf(f.g, "a", 4096);
    f.b = buf(f.g, "b", 4096);
    f.c = buf(f.g, "c", 4096);
    f.d = buf(f.g, "d", 4096);
    f.e = buf(f.g, "e", 4096);
    f.w = buf(f.g, "w", 64 * 100 * 4);
    f.w16 = buf(f.g, "w16", 64 * 100 * 2);
    f.tok = buf(f.g, "tok", 16);
    f.kc = buf(f.g, "kc", 32 * 64 * 4);
    f.vc = buf(f.g, "vc", 32 * 64 * 4);
    f.out = buf(f.g, "out", 4);
    return f;
}

static const loom_node *last(const fixture *f)
{
    uint32_t n = loom_graph_node_count(f->g);
    ck_assert_uint_gt(n, 0);
    return loom_graph_node(f->g, n - 1);
}

static void expect_binding(const fixture *f, const loom_node *n, uint32_t slot, uint32_t buffer, uint64_t offset,
                           uint64_t size, uint32_t access)
{
    ck_assert_uint_lt(slot, n->n_bindings);
    const loom_binding *b = &loom_node_bindings(f->g, n)[slot];
    ck_assert_uint_eq(b->slot, slot);
    ck_assert_uint_eq(b->buffer, buffer);
    ck_assert_uint_eq(b->offset, offset);
    ck_assert_uint_eq(b->size, size);
    ck_assert_uint_eq(b->access, access);
}

/* Every range equals a binding of the matching direction, and every binding
 * has its range: ranges are exactly the views. */
static void expect_ranges_are_bindings(const fixture *f, const loom_node *n)
{
    const loom_binding *b = loom_node_bindings(f->g, n);
    uint32_t nr = 0, nw = 0;
    for (uint32_t i = 0; i < n->n_bindings; i++) {
        /* A read-write binding (a kernel's workspace) has both ranges. */
        const loom_range *r[2] = { NULL, NULL };
        if (b[i].access & LOOM_ACCESS_READ)
            r[0] = &loom_node_reads(f->g, n)[nr++];
        if (b[i].access & LOOM_ACCESS_WRITE)
            r[1] = &loom_node_writes(f->g, n)[nw++];
        for (int k = 0; k < 2; k++) {
            if (!r[k])
                continue;
            ck_assert_uint_eq(r[k]->buffer, b[i].buffer);
            ck_assert_uint_eq(r[k]->offset, b[i].offset);
            ck_assert_uint_eq(r[k]->size, b[i].size);
        }
    }
    ck_assert_uint_eq(nr, n->n_reads);
    ck_assert_uint_eq(nw, n->n_writes);
}

static const char *kernel(const fixture *f, const loom_node *n) { return loom_graph_kernel_name(f->g, n->kernel); }

START_TEST(dtypes)
{
    ck_assert_str_eq(loom_dtype_name(LOOM_F32), "f32");
    ck_assert_str_eq(loom_dtype_name(LOOM_F16), "f16");
    ck_assert_str_eq(loom_dtype_name(LOOM_U32), "u32");
    ck_assert_str_eq(loom_dtype_name((loom_dtype)7), "?");
    ck_assert_uint_eq(loom_dtype_size(LOOM_F32), 4);
    ck_assert_uint_eq(loom_dtype_size(LOOM_F16), 2);
    ck_assert_uint_eq(loom_dtype_size(LOOM_U32), 4);
    ck_assert_uint_eq(loom_dtype_size((loom_dtype)7), 0);
}
END_TEST

START_TEST(matvec_shape)
{
    fixture f = make();
    uint32_t id = 99;
    /* 61 rows: not a multiple of the rows a workgroup handles (ops.def). */
    ck_assert_int_eq(loom_op_matvec(f.g, loom_mat(f.w16, LOOM_F16, 61, 100), loom_vec(f.a, 100),
                                    loom_vec_at(f.b, 256, 61), &id), LOOM_OK);
    ck_assert_uint_eq(id, 0);
    const loom_node *n = last(&f);
    ck_assert_uint_eq(n->op, LOOM_OP_MATVEC);
    ck_assert_str_eq(kernel(&f, n), "matvec_f16");
    ck_assert_uint_eq(n->n_bindings, 3);
    expect_binding(&f, n, 0, f.w16, 0, 61 * 100 * 2, LOOM_ACCESS_READ);
    expect_binding(&f, n, 1, f.a, 0, 400, LOOM_ACCESS_READ);
    expect_binding(&f, n, 2, f.b, 256, 61 * 4, LOOM_ACCESS_WRITE);
    expect_ranges_are_bindings(&f, n);
    uint32_t per = loom_op_info_get(LOOM_OP_MATVEC)->per_group;
    ck_assert_uint_gt(per, 1);
    ck_assert_uint_eq(n->groups[0], (61 + per - 1) / per);
    ck_assert_uint_eq(n->groups[1], 1);
    ck_assert_uint_eq(n->groups[2], 1);
    loom_pc_matvec pc;
    ck_assert_uint_eq(n->push_size, sizeof pc);
    memcpy(&pc, loom_node_push(f.g, n), sizeof pc);
    ck_assert_uint_eq(pc.rows, 61);
    ck_assert_uint_eq(pc.cols, 100);

    ck_assert_int_eq(loom_op_matvec_add(f.g, loom_mat(f.w, LOOM_F32, 64, 100), loom_vec(f.a, 100),
                                        loom_vec(f.c, 64), loom_vec(f.c, 64), NULL), LOOM_OK);
    n = last(&f);
    ck_assert_uint_eq(n->op, LOOM_OP_MATVEC_ADD);
    ck_assert_str_eq(kernel(&f, n), "matvec_add_f32");
    ck_assert_uint_eq(n->n_bindings, 4);
    expect_binding(&f, n, 2, f.c, 0, 256, LOOM_ACCESS_READ);
    expect_binding(&f, n, 3, f.c, 0, 256, LOOM_ACCESS_WRITE);
    ck_assert_uint_eq(n->groups[0], 64 / loom_op_info_get(LOOM_OP_MATVEC_ADD)->per_group);

    ck_assert_int_eq(loom_op_matvec_silu_mul(f.g, loom_mat(f.w16, LOOM_F16, 32, 100),
                                             (loom_tensor){ f.w16, LOOM_F16, 6400, 32, 100 }, loom_vec(f.a, 100),
                                             loom_vec(f.d, 32), NULL), LOOM_OK);
    n = last(&f);
    ck_assert_uint_eq(n->op, LOOM_OP_MATVEC_SILU_MUL);
    ck_assert_str_eq(kernel(&f, n), "matvec_silu_mul_f16");
    expect_binding(&f, n, 1, f.w16, 6400, 6400, LOOM_ACCESS_READ);
    expect_ranges_are_bindings(&f, n);
    ck_assert_int_eq(loom_graph_verify(f.g), LOOM_OK);
    loom_graph_destroy(f.g);
}
END_TEST

/* MATMUL's builders pick the form by T (LOOM_MATMUL_SMALL_T), count the
 * form's workgroups, bind the views whole and reject what is not a T-row
 * product, naming the field. */
START_TEST(matmul_shape)
{
    fixture f = make();
    uint32_t x = buf(f.g, "mx", 64 * 100 * 4), y = buf(f.g, "my", 64 * 64 * 4), q = buf(f.g, "mq", 61 * 144);
    loom_tensor w16 = loom_mat(f.w16, LOOM_F16, 61, 100);
    static const uint32_t Ts[] = { 1, 2, 16, 17, 64 };
    for (size_t k = 0; k < sizeof Ts / sizeof Ts[0]; k++) {
        uint32_t T = Ts[k];
        ck_assert_int_eq(loom_op_matmul(f.g, w16, loom_mat(x, LOOM_F32, T, 100), loom_mat(y, LOOM_F32, T, 61), NULL),
                         LOOM_OK);
        const loom_node *n = last(&f);
        bool tiled = T > LOOM_MATMUL_SMALL_T;
        ck_assert_uint_eq(n->op, LOOM_OP_MATMUL);
        ck_assert_str_eq(kernel(&f, n), tiled ? "matmul_tiled_f16" : "matmul_f16");
        ck_assert_uint_eq(n->groups[0], tiled ? (T + LOOM_MATMUL_TILE_T - 1) / LOOM_MATMUL_TILE_T
                                              : (61 + LOOM_MATMUL_SMALL_ROWS - 1) / LOOM_MATMUL_SMALL_ROWS);
        expect_binding(&f, n, 0, f.w16, 0, 61 * 100 * 2, LOOM_ACCESS_READ);
        expect_binding(&f, n, 1, x, 0, (uint64_t)T * 400, LOOM_ACCESS_READ);
        expect_binding(&f, n, 2, y, 0, (uint64_t)T * 61 * 4, LOOM_ACCESS_WRITE);
        expect_ranges_are_bindings(&f, n);
        loom_pc_matmul pc;
        ck_assert_uint_eq(n->push_size, sizeof pc);
        memcpy(&pc, loom_node_push(f.g, n), sizeof pc);
        ck_assert_uint_eq(pc.rows, 61);
        ck_assert_uint_eq(pc.cols, 100);
        ck_assert_uint_eq(pc.T, T);
    }
    /* Block weights, in place on the residual, and the gated form. */
    loom_tensor wq = loom_mat(q, LOOM_Q4_K, 61, 256), x256 = loom_mat(x, LOOM_F32, 20, 256);
    ck_assert_int_eq(loom_op_matmul_add(f.g, wq, x256, loom_mat(y, LOOM_F32, 20, 61), loom_mat(y, LOOM_F32, 20, 61),
                                        NULL), LOOM_OK);
    ck_assert_str_eq(kernel(&f, last(&f)), "matmul_add_tiled_q4_k");
    ck_assert_int_eq(loom_op_matmul_silu_mul(f.g, wq, wq, loom_mat(x, LOOM_F32, 3, 256), loom_mat(y, LOOM_F32, 3, 61),
                                             NULL), LOOM_OK);
    ck_assert_str_eq(kernel(&f, last(&f)), "matmul_silu_mul_q4_k");
    ck_assert_uint_eq(last(&f)->n_bindings, 4);
    ck_assert_int_eq(loom_graph_verify(f.g), LOOM_OK);
    uint32_t before = loom_graph_node_count(f.g);
    loom_tensor tx = loom_mat(x, LOOM_F32, 4, 100), ty = loom_mat(y, LOOM_F32, 4, 61);
    loom_result rcs[] = {
        loom_op_matmul(f.g, w16, loom_mat(x, LOOM_F32, 4, 99), ty, NULL),                 /* x.cols */
        loom_op_matmul(f.g, w16, tx, loom_mat(y, LOOM_F32, 5, 61), NULL),                 /* y.rows: T */
        loom_op_matmul(f.g, w16, tx, loom_mat(y, LOOM_F32, 4, 60), NULL),                 /* y.cols: W.rows */
        loom_op_matmul(f.g, w16, loom_mat(x, LOOM_F16, 4, 100), ty, NULL),                /* x.dtype */
        loom_op_matmul(f.g, w16, tx, loom_mat(x, LOOM_F32, 4, 61), NULL),                 /* y overlaps x */
        loom_op_matmul(f.g, loom_mat(f.w16, LOOM_F16, 61, 99), loom_mat(x, LOOM_F32, 4, 99), ty, NULL), /* odd f16 */
        loom_op_matmul_add(f.g, w16, tx, loom_mat(f.c, LOOM_F32, 3, 61), ty, NULL),       /* r.rows */
        loom_op_matmul_silu_mul(f.g, w16, loom_mat(f.w, LOOM_F32, 61, 100), tx, ty, NULL), /* Wu.dtype */
        loom_op_matmul(NULL, w16, tx, ty, NULL),                                          /* no graph */
    };
    for (size_t i = 0; i < sizeof rcs / sizeof rcs[0]; i++)
        ck_assert_msg(rcs[i] == LOOM_INVALID_ARGUMENT, "case %zu: %s", i, loom_result_str(rcs[i]));
    ck_assert_uint_eq(loom_graph_node_count(f.g), before);
    loom_graph_destroy(f.g);
}
END_TEST

START_TEST(per_step_ops_bind_params)
{
    fixture f = make();
    ck_assert_int_eq(loom_op_rope(f.g, loom_vec(f.a, 64), loom_vec(f.b, 64), 4, 16, 10000.0f, NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_kv_append(f.g, loom_vec(f.b, 64), loom_vec(f.c, 64), loom_mat(f.kc, LOOM_F32, 32, 64),
                                       loom_mat(f.vc, LOOM_F32, 32, 64), NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_attention(f.g, loom_vec(f.d, 128), loom_mat(f.kc, LOOM_F32, 32, 64),
                                       loom_mat(f.vc, LOOM_F32, 32, 64), loom_vec(f.e, 128), 8, 4, 16, NULL),
                     LOOM_OK);
    uint32_t params;
    ck_assert_int_eq(loom_graph_params(f.g, &params), LOOM_OK);
    for (uint32_t i = 0; i < 3; i++) {
        const loom_node *n = loom_graph_node(f.g, i);
        expect_binding(&f, n, 0, params, 0, sizeof(loom_step_params), LOOM_ACCESS_READ);
        expect_ranges_are_bindings(&f, n);
    }
    const loom_node *rope = loom_graph_node(f.g, 0);
    ck_assert_str_eq(kernel(&f, rope), "rope");
    ck_assert_uint_eq(rope->groups[0], 1);
    /* KV_APPEND writes and ATTENTION reads the whole caches. */
    const loom_node *kv = loom_graph_node(f.g, 1);
    ck_assert_uint_eq(kv->n_writes, 2);
    ck_assert_uint_eq(loom_node_writes(f.g, kv)[0].size, 32 * 64 * 4);
    ck_assert_uint_eq(loom_node_writes(f.g, kv)[1].buffer, f.vc);
    const loom_node *at = loom_graph_node(f.g, 2);
    ck_assert_str_eq(kernel(&f, at), "attention");
    ck_assert_uint_eq(at->groups[0], 8);   /* 8 heads x 1 share of the 32 rows */
    expect_binding(&f, at, 2, f.kc, 0, 32 * 64 * 4, LOOM_ACCESS_READ);
    loom_pc_attn pc;
    memcpy(&pc, loom_node_push(f.g, at), sizeof pc);
    ck_assert_uint_eq(pc.n_kv_heads, 4);
    ck_assert_uint_eq(pc.max_seq, 32);
    ck_assert_float_eq_tol(pc.scale, 0.25f, 1e-7f);
    ck_assert_int_eq(loom_graph_verify(f.g), LOOM_OK);
    loom_graph_destroy(f.g);
}
END_TEST

START_TEST(small_ops)
{
    fixture f = make();
    ck_assert_int_eq(loom_op_embed(f.g, loom_mat(f.w16, LOOM_F16, 64, 100), f.tok, 3, loom_vec(f.a, 100), NULL),
                     LOOM_OK);
    const loom_node *n = last(&f);
    ck_assert_str_eq(kernel(&f, n), "embed_f16");
    expect_binding(&f, n, 1, f.tok, 0, 16, LOOM_ACCESS_READ);
    loom_pc_embed pe;
    memcpy(&pe, loom_node_push(f.g, n), sizeof pe);
    ck_assert_uint_eq(pe.dim, 100);
    ck_assert_uint_eq(pe.vocab, 64);
    ck_assert_uint_eq(pe.token_index, 3);

    ck_assert_int_eq(loom_op_add_rms_norm_mul(f.g, loom_vec(f.a, 100), loom_vec(f.b, 100), loom_vec(f.c, 100),
                                              loom_vec(f.a, 100), loom_vec(f.d, 100), 1e-5f, NULL), LOOM_OK);
    n = last(&f);
    ck_assert_str_eq(kernel(&f, n), "add_rms_norm_mul");
    ck_assert_uint_eq(n->n_bindings, 5);
    ck_assert_uint_eq(n->n_writes, 2);
    ck_assert_uint_eq(n->groups[0], 1);
    expect_binding(&f, n, 3, f.a, 0, 400, LOOM_ACCESS_WRITE);
    loom_pc_norm pn;
    memcpy(&pn, loom_node_push(f.g, n), sizeof pn);
    ck_assert_uint_eq(pn.n, 100);
    ck_assert_float_eq(pn.eps, 1e-5f);

    /* 3 x 300 elementwise: 900 elements, four workgroups of 256. */
    ck_assert_int_eq(loom_op_silu_mul(f.g, loom_mat(f.a, LOOM_F32, 3, 300), loom_mat(f.b, LOOM_F32, 3, 300),
                                      loom_mat(f.b, LOOM_F32, 3, 300), NULL), LOOM_OK);
    n = last(&f);
    ck_assert_uint_eq(n->groups[0], 4);
    ck_assert_uint_eq(((const loom_pc_n *)(const void *)loom_node_push(f.g, n))->n, 900);

    ck_assert_int_eq(loom_op_copy(f.g, loom_vec(f.a, 5), (loom_tensor){ f.b, LOOM_U32, 512, 1, 5 }, NULL), LOOM_OK);
    n = last(&f);
    ck_assert_str_eq(kernel(&f, n), "copy");
    expect_binding(&f, n, 1, f.b, 512, 20, LOOM_ACCESS_WRITE);

    ck_assert_int_eq(loom_op_argmax(f.g, loom_vec(f.a, 1000), (loom_tensor){ f.out, LOOM_U32, 0, 1, 1 }, NULL),
                     LOOM_OK);
    ck_assert_int_eq(loom_op_softmax(f.g, loom_vec(f.a, 1), loom_vec(f.a, 1), NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_rms_norm(f.g, loom_vec(f.a, 7), loom_vec(f.e, 7), 0.0f, NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_rms_norm_mul(f.g, loom_vec(f.a, 7), loom_vec(f.b, 7), loom_vec(f.e, 7), 1e-6f, NULL),
                     LOOM_OK);
    ck_assert_int_eq(loom_op_add_rms_norm(f.g, loom_vec(f.a, 7), loom_vec(f.b, 7), loom_vec(f.b, 7),
                                          loom_vec(f.e, 7), 1e-6f, NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_mul(f.g, loom_vec(f.a, 7), loom_vec(f.b, 7), loom_vec(f.a, 7), NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_add(f.g, loom_vec(f.a, 7), loom_vec(f.b, 7), loom_vec(f.b, 7), NULL), LOOM_OK);
    ck_assert_int_eq(loom_graph_verify(f.g), LOOM_OK);
    loom_graph_destroy(f.g);
}
END_TEST

/* Each case must fail with LOOM_INVALID_ARGUMENT and leave the graph as it
 * was. The loop index names the case in a failure. */
START_TEST(rejects_bad_shapes)
{
    fixture f = make();
    loom_graph *g = f.g;
    loom_tensor v100 = loom_vec(f.a, 100), m16 = loom_mat(f.w16, LOOM_F16, 64, 100);
    loom_tensor out = { f.out, LOOM_U32, 0, 1, 1 };
    loom_tensor kc = loom_mat(f.kc, LOOM_F32, 32, 64), vc = loom_mat(f.vc, LOOM_F32, 32, 64);
    loom_tensor tok4 = { f.tok, LOOM_U32, 0, 1, 4 }, r4 = loom_mat(f.a, LOOM_F32, 4, 64);
    loom_tensor q4 = loom_mat(f.a, LOOM_F32, 4, 128);
    loom_result rcs[] = {
        loom_op_matvec(g, m16, loom_vec(f.a, 99), loom_vec(f.b, 64), NULL),            /* x length */
        loom_op_matvec(g, m16, v100, loom_vec(f.b, 63), NULL),                         /* y length */
        loom_op_matvec(g, loom_mat(f.w16, LOOM_F16, 64, 99), loom_vec(f.a, 99), loom_vec(f.b, 64), NULL), /* odd f16 */
        loom_op_matvec(g, loom_mat(f.w16, LOOM_U32, 16, 100), v100, loom_vec(f.b, 16), NULL), /* dtype */
        loom_op_matvec(g, loom_mat(f.w16, LOOM_F16, 65, 100), v100, loom_vec(f.b, 65), NULL), /* past buffer */
        loom_op_matvec(g, (loom_tensor){ f.w16, LOOM_F16, 128, 8, 100 }, v100, loom_vec(f.b, 8), NULL), /* align */
        loom_op_matvec(g, m16, v100, loom_vec(f.a, 64), NULL),                         /* y overlaps x */
        loom_op_matvec(g, m16, (loom_tensor){ f.a, LOOM_F32, 0, 2, 50 }, loom_vec(f.b, 64), NULL), /* x 2-D */
        loom_op_matvec(g, m16, v100, loom_vec(999, 64), NULL),                         /* no such buffer */
        loom_op_matvec_add(g, m16, v100, loom_vec(f.c, 63), loom_vec(f.b, 64), NULL),  /* r length */
        loom_op_matvec_silu_mul(g, m16, loom_mat(f.w, LOOM_F32, 64, 100), v100, loom_vec(f.b, 64), NULL),
        loom_op_add(g, v100, loom_vec(f.b, 101), loom_vec(f.c, 100), NULL),
        loom_op_add(g, v100, loom_vec(f.b, 100), loom_vec_at(f.a, 256, 100), NULL),    /* partial overlap */
        loom_op_mul(g, v100, loom_vec(f.b, 100), (loom_tensor){ f.c, LOOM_F16, 0, 1, 100 }, NULL),
        loom_op_mul(g, loom_vec(f.a, 0), loom_vec(f.b, 0), loom_vec(f.c, 0), NULL),    /* empty */
        loom_op_copy(g, loom_vec(f.a, 4), loom_vec(f.b, 5), NULL),
        loom_op_copy(g, (loom_tensor){ f.a, LOOM_F16, 0, 1, 3 }, (loom_tensor){ f.b, LOOM_F16, 0, 1, 3 }, NULL),
        loom_op_rms_norm(g, v100, loom_vec(f.b, 99), 1e-5f, NULL),
        loom_op_rms_norm(g, v100, loom_vec(f.b, 100), -1.0f, NULL),                    /* eps */
        loom_op_rms_norm_mul(g, v100, loom_vec(f.c, 10), loom_vec(f.b, 100), 1e-5f, NULL),
        loom_op_add_rms_norm(g, v100, loom_vec(f.b, 100), loom_vec(f.c, 100), loom_vec(f.c, 100), 1e-5f, NULL),
        loom_op_embed(g, m16, f.tok, 4, v100, NULL),                                   /* token past buffer */
        loom_op_embed(g, m16, f.tok, 0, loom_vec(f.b, 64), NULL),                      /* out length */
        loom_op_embed(g, m16, 999, 0, v100, NULL),
        loom_op_rope(g, loom_vec(f.a, 64), loom_vec(f.b, 64), 4, 15, 1e4f, NULL),      /* odd head_dim */
        loom_op_rope(g, loom_vec(f.a, 64), loom_vec(f.b, 64), 2, 16, 1e4f, NULL),      /* n mismatch */
        loom_op_rope(g, loom_vec(f.a, 64), loom_vec(f.b, 64), 4, 16, 0.0f, NULL),      /* theta */
        loom_op_kv_append(g, loom_vec(f.a, 63), loom_vec(f.b, 63), kc, vc, NULL),
        loom_op_kv_append(g, loom_vec(f.a, 64), loom_vec(f.b, 64), kc, loom_mat(f.vc, LOOM_F32, 31, 64), NULL),
        loom_op_attention(g, loom_vec(f.a, 128), kc, vc, loom_vec(f.b, 128), 8, 3, 16, NULL), /* GQA ratio */
        loom_op_attention(g, loom_vec(f.a, 96), kc, vc, loom_vec(f.b, 96), 6, 4, 16, NULL),
        loom_op_attention(g, loom_vec(f.a, 128), kc, vc, loom_vec(f.b, 128), 8, 4, 8, NULL), /* cache width */
        loom_op_attention(g, loom_vec(f.a, 128), kc, vc, loom_vec(f.kc, 128), 8, 4, 16, NULL), /* out in cache */
        loom_op_softmax(g, v100, loom_vec(f.b, 50), NULL),
        loom_op_argmax(g, v100, loom_vec(f.out, 1), NULL),                             /* out not u32 */
        loom_op_argmax(g, v100, (loom_tensor){ f.b, LOOM_U32, 0, 1, 2 }, NULL),
        loom_op_step_log(g, (loom_tensor){ f.a, LOOM_F16, 0, 1, 2 }, (loom_tensor){ f.b, LOOM_F16, 0, 3, 2 }, 0,
                         NULL),                                                        /* 16-bit words */
        loom_op_step_log(g, loom_vec(f.a, 4), loom_mat(f.b, LOOM_F32, 3, 5), 0, NULL), /* row length */
        loom_op_step_log(g, loom_vec(f.a, 4), loom_mat(f.b, LOOM_F32, 0, 4), 0, NULL), /* no rows */
        loom_op_step_log(g, loom_vec(f.a, 4), (loom_tensor){ f.b, LOOM_U32, 0, 3, 4 }, 1, NULL), /* dtype */
        loom_op_step_log(g, loom_vec(f.a, 4), loom_mat(f.a, LOOM_F32, 3, 4), 0, NULL), /* dst over src */
        loom_op_step_log(g, loom_vec(f.a, 0), loom_mat(f.b, LOOM_F32, 3, 0), 0, NULL), /* empty */
        loom_op_rms_norm_matvec_argmax_log(g, m16, v100, loom_vec(f.c, 100), loom_vec(f.b, 64), out,
                                           loom_mat(f.d, LOOM_F32, 3, 1), 1e-5f, NULL), /* ring not u32 */
        loom_op_rms_norm_matvec_argmax_log(g, m16, v100, loom_vec(f.c, 100), loom_vec(f.b, 64), out,
                                           (loom_tensor){ f.d, LOOM_U32, 0, 3, 2 }, 1e-5f, NULL), /* ring cols */
        loom_op_rms_norm_matvec_argmax_log(g, m16, v100, loom_vec(f.c, 100), loom_vec(f.b, 64), out,
                                           (loom_tensor){ f.out, LOOM_U32, 0, 1, 1 }, 1e-5f, NULL), /* ring is out */
        /* T-row ops: a 4-token step */
        loom_op_embed_rows(g, m16, tok4, loom_mat(f.b, LOOM_F32, 4, 99), NULL),       /* out cols */
        loom_op_embed_rows(g, m16, loom_vec(f.tok, 4), loom_mat(f.b, LOOM_F32, 4, 100), NULL), /* tokens f32 */
        loom_op_embed_rows(g, m16, (loom_tensor){ f.tok, LOOM_U32, 0, 2, 2 }, loom_mat(f.b, LOOM_F32, 4, 100),
                           NULL),                                                      /* tokens 2-D */
        loom_op_rms_norm_mul_rows(g, r4, loom_vec(f.c, 64), loom_mat(f.b, LOOM_F32, 3, 64), 1e-5f, NULL), /* y rows */
        loom_op_rms_norm_mul_rows(g, r4, loom_vec(f.c, 63), loom_mat(f.b, LOOM_F32, 4, 64), 1e-5f, NULL), /* w */
        loom_op_rms_norm_mul_rows(g, r4, loom_vec(f.c, 64), loom_mat(f.b, LOOM_F32, 4, 64), NAN, NULL), /* eps */
        loom_op_rope_rows(g, r4, loom_mat(f.b, LOOM_F32, 4, 64), 4, 15, 1e4f, NULL),  /* odd head_dim */
        loom_op_rope_rows(g, r4, loom_mat(f.b, LOOM_F32, 2, 64), 4, 16, 1e4f, NULL),  /* y rows */
        loom_op_rope_rows(g, r4, loom_mat(f.b, LOOM_F32, 4, 64), 2, 16, 1e4f, NULL),  /* n mismatch */
        loom_op_kv_append_rows(g, r4, loom_mat(f.b, LOOM_F32, 3, 64), kc, vc, NULL),  /* v rows */
        loom_op_kv_append_rows(g, loom_mat(f.a, LOOM_F32, 4, 63), loom_mat(f.b, LOOM_F32, 4, 63), kc, vc, NULL),
        loom_op_kv_append_rows(g, r4, loom_mat(f.b, LOOM_F32, 4, 64), kc, loom_mat(f.vc, LOOM_F16, 32, 64), NULL),
        loom_op_attention_rows(g, q4, kc, vc, loom_mat(f.b, LOOM_F32, 4, 128), 8, 3, 16, NULL), /* GQA ratio */
        loom_op_attention_rows(g, q4, kc, vc, loom_mat(f.b, LOOM_F32, 3, 128), 8, 4, 16, NULL), /* out rows */
        loom_op_attention_rows(g, q4, kc, vc, loom_mat(f.b, LOOM_F32, 4, 128), 8, 4, 8, NULL),  /* cache width */
        loom_op_attention_rows(g, q4, kc, vc, loom_mat(f.b, LOOM_F32, 4, 128), 8, 4, 0, NULL),  /* head_dim */
        loom_op_attention_rows(g, (loom_tensor){ f.a, LOOM_F16, 0, 4, 128 }, kc, vc, loom_mat(f.b, LOOM_F32, 4, 128),
                               8, 4, 16, NULL),                                        /* q f16 */
        loom_op_attention_rows(g, q4, kc, vc, loom_mat(f.kc, LOOM_F32, 4, 128), 8, 4, 16, NULL), /* out in cache */
        loom_op_row_pick(g, r4, loom_vec(f.b, 63), NULL),                             /* y length */
        loom_op_row_pick(g, r4, loom_mat(f.b, LOOM_F32, 2, 64), NULL),                /* y 2-D */
        loom_op_argmax_rows(g, r4, loom_vec(f.b, 4), NULL),                           /* out not u32 */
        loom_op_argmax_rows(g, r4, (loom_tensor){ f.b, LOOM_U32, 0, 1, 3 }, NULL),    /* out length */
    };
    for (size_t i = 0; i < sizeof rcs / sizeof rcs[0]; i++) {
        ck_assert_msg(rcs[i] == LOOM_INVALID_ARGUMENT, "case %zu gave %s", i, loom_result_str(rcs[i]));
    }
    ck_assert_uint_eq(loom_graph_node_count(g), 0);
    ck_assert_int_eq(loom_op_argmax(NULL, v100, out, NULL), LOOM_INVALID_ARGUMENT);
    loom_graph_destroy(g);
}
END_TEST

/* The T-row ops on good shapes: the step parameters at slot 0 where the
 * kernel reads pos or rows, and the workgroups the kernels expect. */
START_TEST(row_ops_append)
{
    fixture f = make();
    loom_graph *g = f.g;
    uint32_t params;
    loom_tensor r4 = loom_mat(f.a, LOOM_F32, 4, 64), y4 = loom_mat(f.b, LOOM_F32, 4, 64);
    loom_tensor kc = loom_mat(f.kc, LOOM_F32, 32, 64), vc = loom_mat(f.vc, LOOM_F32, 32, 64);
    ck_assert_int_eq(loom_op_embed_rows(g, loom_mat(f.w16, LOOM_F16, 64, 100), (loom_tensor){ f.tok, LOOM_U32, 0, 1, 4 },
                                        loom_mat(f.b, LOOM_F32, 4, 100), NULL), LOOM_OK);
    ck_assert_int_eq(loom_graph_params(g, &params), LOOM_OK);
    expect_binding(&f, last(&f), 0, params, 0, sizeof(loom_step_params), LOOM_ACCESS_READ);
    ck_assert_uint_eq(last(&f)->groups[0], 4);   /* a row of workgroups a token row */
    ck_assert_int_eq(loom_op_rms_norm_mul_rows(g, r4, loom_vec(f.c, 64), r4, 1e-5f, NULL), LOOM_OK);   /* in place */
    ck_assert_uint_eq(last(&f)->groups[0], 4);
    ck_assert_int_eq(loom_op_rope_rows(g, r4, r4, 4, 16, 1e4f, NULL), LOOM_OK);
    expect_binding(&f, last(&f), 0, params, 0, sizeof(loom_step_params), LOOM_ACCESS_READ);
    ck_assert_int_eq(loom_op_kv_append_rows(g, r4, y4, kc, vc, NULL), LOOM_OK);
    expect_binding(&f, last(&f), 3, f.kc, 0, 32 * 64 * 4, LOOM_ACCESS_WRITE);
    /* 8 heads of 16 over 4 kv heads, 4 rows: the few-query form, a
     * workgroup a query vector (the 32-row cache is one share) */
    ck_assert_int_eq(loom_op_attention_rows(g, loom_mat(f.c, LOOM_F32, 4, 128), kc, vc, loom_mat(f.d, LOOM_F32, 4, 128),
                                            8, 4, 16, NULL), LOOM_OK);
    ck_assert_uint_eq(last(&f)->groups[0], 32);
    ck_assert_str_eq(loom_graph_kernel_name(g, last(&f)->kernel), "attention_few");
    /* 9 rows of 4 heads over 4 kv heads: the tiled form, a tile a kv head */
    ck_assert_int_eq(loom_op_attention_rows(g, loom_mat(f.c, LOOM_F32, 9, 64), kc, vc, loom_mat(f.d, LOOM_F32, 9, 64),
                                            4, 4, 16, NULL), LOOM_OK);
    ck_assert_uint_eq(last(&f)->groups[0], 4);
    ck_assert_str_eq(loom_graph_kernel_name(g, last(&f)->kernel), "attention_rows");
    ck_assert(!loom_op_reorderable(LOOM_OP_ATTENTION_ROWS));
    ck_assert_int_eq(loom_op_row_pick(g, r4, loom_vec(f.e, 64), NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_argmax_rows(g, r4, (loom_tensor){ f.e, LOOM_U32, 0, 1, 4 }, NULL), LOOM_OK);
    ck_assert_uint_eq(last(&f)->groups[0], 4);
    ck_assert_int_eq(loom_graph_verify(g), LOOM_OK);
    loom_graph_destroy(g);
}
END_TEST

START_TEST(params_buffer_is_never_written)
{
    fixture f = make();
    uint32_t params;
    ck_assert_int_eq(loom_graph_params(f.g, &params), LOOM_OK);
    ck_assert_int_eq(loom_op_copy(f.g, loom_vec(f.a, 4), loom_vec(params, 4), NULL), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_op_copy(f.g, loom_vec(params, 4), loom_vec(f.a, 4), NULL), LOOM_OK);
    loom_graph_destroy(f.g);
}
END_TEST

/* ---- the push decoder: loom_op_args_of reads back each builder's arguments */

static uint32_t n_fresh;

/* A tensor in a buffer of its own, so that no two views of a test node
 * overlap whatever the builder allows. */
static loom_tensor fresh(loom_graph *g, loom_dtype dt, uint32_t rows, uint32_t cols)
{
    char name[32];
    snprintf(name, sizeof name, "t%u", n_fresh++);
    uint64_t bytes = dt == LOOM_U32 ? (uint64_t)rows * cols * 4 : loom_view_bytes(dt, rows, cols);
    return (loom_tensor){ buf(g, name, bytes), (uint32_t)dt, 0, rows, cols };
}

/* The last node is a want->op whose decoded arguments are exactly want's. */
static void expect_args(loom_graph *g, loom_op op, loom_op_args want, uint64_t *seen)
{
    uint32_t id = loom_graph_node_count(g) - 1;
    const char *name = loom_op_name(op);
    ck_assert_msg(loom_graph_node(g, id)->op == (uint32_t)op, "%s: not the node appended", name);
    loom_op_args got;
    ck_assert_int_eq(loom_op_args_of(g, id, &got), LOOM_OK);
    if (op == LOOM_OP_ATTENTION || op == LOOM_OP_ATTENTION_ROWS) {   /* the builder picks the shares */
        ck_assert_msg(got.splits >= 1 && got.splits <= 16, "%s: splits %u", name, got.splits);
        want.splits = got.splits;
    }
#define SAME(f) ck_assert_msg(got.f == want.f, "%s: " #f " %g, the builder's %g", name, (double)got.f, (double)want.f)
    SAME(n); SAME(rows); SAME(cols); SAME(eps); SAME(theta); SAME(scale);
    SAME(heads); SAME(kv_heads); SAME(head_dim); SAME(max_seq); SAME(splits);
    SAME(q_rows); SAME(kv_rows); SAME(vocab); SAME(token_index);
    SAME(block_rows); SAME(first); SAME(total); SAME(slots); SAME(back); SAME(T);
#undef SAME
    *seen |= 1ull << op;
}

START_TEST(op_args_read_back)
{
    _Static_assert(LOOM_OP_COUNT <= 64, "one bit an op kind");
    loom_graph *g;
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    uint64_t seen = 0;
    const uint32_t C = 64, R = 32, V = 10, T = 3, H = 4, KVH = 2, D = 16, S = 16;
    const float eps = 1e-5f, theta = 10000.0f, scale = 0.25f;   /* 1 / sqrt(D) */
#define F(r, c) fresh(g, LOOM_F32, r, c)
#define U(r, c) fresh(g, LOOM_U32, r, c)
#define OK(call) ck_assert_int_eq(call, LOOM_OK)
    uint32_t tok = buf(g, "tok", 16);
    loom_tensor Wq = F(H * D, C), Wk = F(KVH * D, C), Wv = F(KVH * D, C), table = F(V, C);
    loom_tensor kc = F(S, KVH * D), vc = F(S, KVH * D);

    OK(loom_op_copy(g, F(1, 8), F(1, 8), NULL));
    expect_args(g, LOOM_OP_COPY, (loom_op_args){ .n = 8 }, &seen);
    OK(loom_op_step_log(g, F(1, 4), F(5, 4), 1, NULL));
    expect_args(g, LOOM_OP_STEP_LOG, (loom_op_args){ .n = 4, .slots = 5, .back = 1 }, &seen);
    OK(loom_op_embed(g, table, tok, 2, F(1, C), NULL));
    expect_args(g, LOOM_OP_EMBED, (loom_op_args){ .cols = C, .vocab = V, .token_index = 2 }, &seen);
    loom_tensor blocks[2] = { F(5, C), F(3, C) };
    OK(loom_op_embed_blocks(g, blocks, 2, 2, V, tok, 1, F(1, C), NULL));
    expect_args(g, LOOM_OP_EMBED_BLOCKS,
                (loom_op_args){ .cols = C, .vocab = 8, .token_index = 1, .block_rows = 5, .first = 2, .total = V },
                &seen);
    OK(loom_op_rms_norm(g, F(1, C), F(1, C), eps, NULL));
    expect_args(g, LOOM_OP_RMS_NORM, (loom_op_args){ .n = C, .eps = eps }, &seen);
    OK(loom_op_rms_norm_mul(g, F(1, C), F(1, C), F(1, C), eps, NULL));
    expect_args(g, LOOM_OP_RMS_NORM_MUL, (loom_op_args){ .n = C, .eps = eps }, &seen);
    OK(loom_op_mul(g, F(1, C), F(1, C), F(1, C), NULL));
    expect_args(g, LOOM_OP_MUL, (loom_op_args){ .n = C }, &seen);
    OK(loom_op_add(g, F(1, C), F(1, C), F(1, C), NULL));
    expect_args(g, LOOM_OP_ADD, (loom_op_args){ .n = C }, &seen);
    OK(loom_op_add_rms_norm(g, F(1, C), F(1, C), F(1, C), F(1, C), eps, NULL));
    expect_args(g, LOOM_OP_ADD_RMS_NORM, (loom_op_args){ .n = C, .eps = eps }, &seen);
    OK(loom_op_add_rms_norm_mul(g, F(1, C), F(1, C), F(1, C), F(1, C), F(1, C), eps, NULL));
    expect_args(g, LOOM_OP_ADD_RMS_NORM_MUL, (loom_op_args){ .n = C, .eps = eps }, &seen);
    OK(loom_op_matvec(g, F(R, C), F(1, C), F(1, R), NULL));
    expect_args(g, LOOM_OP_MATVEC, (loom_op_args){ .rows = R, .cols = C }, &seen);
    OK(loom_op_matvec_add(g, F(R, C), F(1, C), F(1, R), F(1, R), NULL));
    expect_args(g, LOOM_OP_MATVEC_ADD, (loom_op_args){ .rows = R, .cols = C }, &seen);
    OK(loom_op_matvec_add_stage(g, F(R, C), F(1, C), F(1, R), F(1, R), F(1, R), F(1, R),
                                F(1, LOOM_STAGE_SUM_WORDS), NULL));
    expect_args(g, LOOM_OP_MATVEC_ADD_STAGE, (loom_op_args){ .rows = R, .cols = C }, &seen);
    OK(loom_op_zero(g, F(1, 16), NULL));
    expect_args(g, LOOM_OP_ZERO, (loom_op_args){ .n = 16 }, &seen);
    OK(loom_op_silu_mul(g, F(1, C), F(1, C), F(1, C), NULL));
    expect_args(g, LOOM_OP_SILU_MUL, (loom_op_args){ .n = C }, &seen);
    OK(loom_op_matvec_silu_mul(g, F(R, C), F(R, C), F(1, C), F(1, R), NULL));
    expect_args(g, LOOM_OP_MATVEC_SILU_MUL, (loom_op_args){ .rows = R, .cols = C }, &seen);
    OK(loom_op_rope(g, F(1, H * D), F(1, H * D), H, D, theta, NULL));
    expect_args(g, LOOM_OP_ROPE, (loom_op_args){ .heads = H, .head_dim = D, .theta = theta }, &seen);
    OK(loom_op_kv_append(g, F(1, KVH * D), F(1, KVH * D), kc, vc, NULL));
    expect_args(g, LOOM_OP_KV_APPEND, (loom_op_args){ .n = KVH * D, .max_seq = S }, &seen);
    OK(loom_op_attention(g, F(1, H * D), kc, vc, F(1, H * D), H, KVH, D, NULL));
    expect_args(g, LOOM_OP_ATTENTION,
                (loom_op_args){ .heads = H, .kv_heads = KVH, .head_dim = D, .max_seq = S, .scale = scale }, &seen);
    OK(loom_op_softmax(g, F(1, C), F(1, C), NULL));
    expect_args(g, LOOM_OP_SOFTMAX, (loom_op_args){ .n = C }, &seen);
    OK(loom_op_argmax(g, F(1, C), U(1, 1), NULL));
    expect_args(g, LOOM_OP_ARGMAX, (loom_op_args){ .n = C }, &seen);

    OK(loom_op_embed_rows(g, table, U(1, 8), F(T, C), NULL));
    expect_args(g, LOOM_OP_EMBED_ROWS, (loom_op_args){ .cols = C, .T = T }, &seen);
    OK(loom_op_rms_norm_mul_rows(g, F(T, C), F(1, C), F(T, C), eps, NULL));
    expect_args(g, LOOM_OP_RMS_NORM_MUL_ROWS, (loom_op_args){ .n = C, .eps = eps, .T = T }, &seen);
    OK(loom_op_rope_rows(g, F(T, H * D), F(T, H * D), H, D, theta, NULL));
    expect_args(g, LOOM_OP_ROPE_ROWS, (loom_op_args){ .heads = H, .head_dim = D, .theta = theta, .T = T }, &seen);
    OK(loom_op_kv_append_rows(g, F(T, KVH * D), F(T, KVH * D), kc, vc, NULL));
    expect_args(g, LOOM_OP_KV_APPEND_ROWS, (loom_op_args){ .n = KVH * D, .max_seq = S, .T = T }, &seen);
    OK(loom_op_attention_rows(g, F(T, H * D), kc, vc, F(T, H * D), H, KVH, D, NULL));
    expect_args(g, LOOM_OP_ATTENTION_ROWS,
                (loom_op_args){ .heads = H, .kv_heads = KVH, .head_dim = D, .max_seq = S, .scale = scale, .T = T },
                &seen);
    OK(loom_op_row_pick(g, F(T, C), F(1, C), NULL));
    expect_args(g, LOOM_OP_ROW_PICK, (loom_op_args){ .n = C, .T = T }, &seen);
    OK(loom_op_argmax_rows(g, F(T, C), U(1, T), NULL));
    expect_args(g, LOOM_OP_ARGMAX_ROWS, (loom_op_args){ .n = C, .T = T }, &seen);

    OK(loom_op_rms_norm_matvec(g, F(R, C), F(1, C), F(1, C), F(1, R), eps, NULL));
    expect_args(g, LOOM_OP_RMS_NORM_MATVEC, (loom_op_args){ .rows = R, .cols = C, .eps = eps }, &seen);
    OK(loom_op_rms_norm_matvec_silu_mul(g, F(R, C), F(R, C), F(1, C), F(1, C), F(1, R), eps, NULL));
    expect_args(g, LOOM_OP_RMS_NORM_MATVEC_SILU_MUL, (loom_op_args){ .rows = R, .cols = C, .eps = eps }, &seen);
    OK(loom_op_matvec_argmax(g, F(R, C), F(1, C), F(1, R), U(1, 1), NULL));
    expect_args(g, LOOM_OP_MATVEC_ARGMAX, (loom_op_args){ .rows = R, .cols = C }, &seen);
    OK(loom_op_rms_norm_matvec_argmax(g, F(R, C), F(1, C), F(1, C), F(1, R), U(1, 1), eps, NULL));
    expect_args(g, LOOM_OP_RMS_NORM_MATVEC_ARGMAX, (loom_op_args){ .rows = R, .cols = C, .eps = eps }, &seen);
    OK(loom_op_rms_norm_matvec_argmax_log(g, F(R, C), F(1, C), F(1, C), F(1, R), U(1, 1), U(5, 1), eps, NULL));
    expect_args(g, LOOM_OP_RMS_NORM_MATVEC_ARGMAX_LOG,
                (loom_op_args){ .rows = R, .cols = C, .eps = eps, .slots = 5 }, &seen);
    OK(loom_op_rms_norm_qkv_rope_kv(g, F(1, C), F(1, C), Wq, Wk, Wv, F(1, H * D), kc, vc, D, theta, eps, NULL));
    loom_op_args qkv = { .q_rows = H * D, .kv_rows = KVH * D, .cols = C, .eps = eps, .head_dim = D,
                         .max_seq = S, .theta = theta };
    expect_args(g, LOOM_OP_RMS_NORM_QKV_ROPE_KV, qkv, &seen);
    OK(loom_op_embed_rms_norm_qkv_rope_kv(g, table, tok, 3, F(1, C), Wq, Wk, Wv, F(1, C), F(1, H * D), kc, vc, D,
                                          theta, eps, NULL));
    qkv.vocab = V;
    qkv.token_index = 3;
    expect_args(g, LOOM_OP_EMBED_RMS_NORM_QKV_ROPE_KV, qkv, &seen);

    OK(loom_op_rms_norm_qkv_rope_kv_rows(g, F(T, C), F(1, C), Wq, Wk, Wv, F(T, H * D), kc, vc, D, theta, eps, NULL));
    loom_op_args qkv_rows = { .q_rows = H * D, .kv_rows = KVH * D, .cols = C, .eps = eps, .head_dim = D,
                              .max_seq = S, .theta = theta, .T = T };
    expect_args(g, LOOM_OP_RMS_NORM_QKV_ROPE_KV_ROWS, qkv_rows, &seen);
    OK(loom_op_matmul(g, F(R, C), F(T, C), F(T, R), NULL));
    expect_args(g, LOOM_OP_MATMUL, (loom_op_args){ .rows = R, .cols = C, .T = T }, &seen);
    OK(loom_op_matmul_add(g, F(R, C), F(T, C), F(T, R), F(T, R), NULL));
    expect_args(g, LOOM_OP_MATMUL_ADD, (loom_op_args){ .rows = R, .cols = C, .T = T }, &seen);
    OK(loom_op_matmul_silu_mul(g, F(R, C), F(R, C), F(T, C), F(T, R), NULL));
    expect_args(g, LOOM_OP_MATMUL_SILU_MUL, (loom_op_args){ .rows = R, .cols = C, .T = T }, &seen);
#undef OK
#undef U
#undef F
    /* Every kind with a builder; OTHER has no push constants. */
    for (uint32_t op = 0; op < LOOM_OP_COUNT; op++)
        ck_assert_msg(op == LOOM_OP_OTHER || (seen >> op & 1u), "%s: no builder read back", loom_op_name((loom_op)op));
    loom_op_args a;
    ck_assert_int_eq(loom_op_args_read(LOOM_OP_OTHER, NULL, 0, &a), LOOM_OK);
    loom_graph_destroy(g);
}
END_TEST

/* The q/k/v form over a few token rows: each refusal names its field, a
 * T past LOOM_MATMUL_SMALL_T included, and nothing is added. */
START_TEST(qkv_rows_refused)
{
    loom_graph *g;
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    const uint32_t C = 64, H = 4, KVH = 2, D = 16, S = 16, T = 4;
    const float eps = 1e-5f, theta = 10000.0f;
#define F(r, c) fresh(g, LOOM_F32, r, c)
    loom_tensor Wq = F(H * D, C), Wk = F(KVH * D, C), Wv = F(KVH * D, C), g1 = F(1, C);
    loom_tensor kc = F(S, KVH * D), vc = F(S, KVH * D);
    uint32_t big = LOOM_MATMUL_SMALL_T + 1;
#define REFUSED(call, field)                                                                                  \
    do {                                                                                                      \
        loom_result rc_ = (call);                                                                             \
        ck_assert_msg(rc_ == LOOM_INVALID_ARGUMENT && strstr(loom_last_error(), field), "%s: %s (%s)", field, \
                      loom_result_str(rc_), loom_last_error());                                               \
    } while (0)
    REFUSED(loom_op_rms_norm_qkv_rope_kv_rows(g, F(big, C), g1, Wq, Wk, Wv, F(big, H * D), kc, vc, D, theta, eps, NULL),
            "x.rows (T");
    loom_tensor x0 = F(1, C), q0 = F(1, H * D);
    x0.rows = q0.rows = 0;
    REFUSED(loom_op_rms_norm_qkv_rope_kv_rows(g, x0, g1, Wq, Wk, Wv, q0, kc, vc, D, theta, eps, NULL), "x.rows (T");
    REFUSED(loom_op_rms_norm_qkv_rope_kv_rows(g, F(T, C), g1, Wq, Wk, Wv, F(T - 1, H * D), kc, vc, D, theta, eps, NULL),
            "q.rows");
    REFUSED(loom_op_rms_norm_qkv_rope_kv_rows(g, F(T, C - 1), g1, Wq, Wk, Wv, F(T, H * D), kc, vc, D, theta, eps, NULL),
            "x.cols");
    REFUSED(loom_op_rms_norm_qkv_rope_kv_rows(g, F(T, C), g1, Wq, Wk, Wv, F(T, H * D + 1), kc, vc, D, theta, eps, NULL),
            "q.cols");
    REFUSED(loom_op_rms_norm_qkv_rope_kv_rows(g, F(T, C), g1, Wq, Wk, F(KVH * D + 1, C), F(T, H * D), kc, vc, D, theta,
                                              eps, NULL),
            "Wv.rows");
    REFUSED(loom_op_rms_norm_qkv_rope_kv_rows(g, F(T, C), g1, Wq, Wk, Wv, F(T, H * D), kc, vc, 6, theta, eps, NULL),
            "head_dim");
    REFUSED(loom_op_rms_norm_qkv_rope_kv_rows(g, fresh(g, LOOM_F16, T, C), g1, Wq, Wk, Wv, F(T, H * D), kc, vc, D,
                                              theta, eps, NULL),
            "x.dtype");
#undef REFUSED
#undef F
    ck_assert_uint_eq(loom_graph_node_count(g), 0);
    loom_graph_destroy(g);
}
END_TEST

/* Bytes not of the op's layout, an op out of range, a barrier or a node
 * out of range: LOOM_INVALID_ARGUMENT and all zeros. */
START_TEST(op_args_refused)
{
    const uint32_t words[4] = { 7, 8, 9, 10 };
    loom_op_args a, zero;
    memset(&zero, 0, sizeof zero);
    ck_assert_int_eq(loom_op_args_read(LOOM_OP_MATVEC, words, 8, &a), LOOM_OK);
    ck_assert_uint_eq(a.rows, 7);
    ck_assert_uint_eq(a.cols, 8);
    ck_assert_int_eq(loom_op_args_read(LOOM_OP_MATVEC, words, 12, &a), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(memcmp(&a, &zero, sizeof a), 0);
    ck_assert_int_eq(loom_op_args_read(LOOM_OP_MATVEC, words, 4, &a), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_op_args_read(LOOM_OP_MATVEC, NULL, 8, &a), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_op_args_read(LOOM_OP_OTHER, words, 4, &a), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_op_args_read(LOOM_OP_COUNT, words, 4, &a), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_op_args_read(LOOM_OP_MATVEC, words, 8, NULL), LOOM_INVALID_ARGUMENT);
    fixture f = make();
    ck_assert_int_eq(loom_graph_add_barrier(f.g, NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_args_of(f.g, 0, &a), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_op_args_of(f.g, 1, &a), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(memcmp(&a, &zero, sizeof a), 0);
    loom_graph_destroy(f.g);
}
END_TEST

/* Every row of ops.def is well formed: what the layout check at build time
 * cannot see (it compares only rows that name a kernel, and never the
 * dump or test columns). */
START_TEST(op_table_rows)
{
    const loom_op_info *in = loom_op_info_get((loom_op)_i);
    ck_assert_ptr_nonnull(in);
    const char *op = in->name;
    loom_op back;
    ck_assert_msg(in->op == (loom_op)_i && loom_op_from_name(op, &back) && back == in->op, "%s: name", op);
    ck_assert_msg(in->reorderable == loom_op_reorderable(in->op), "%s: reorderable", op);
    ck_assert_msg((in->kernel[0] == NULL) == (in->n_slots == 0) && (in->kernel[0] == NULL) == (in->kernel[1] == NULL),
                  "%s: a kernel and its slots go together", op);
    ck_assert_msg((in->kernel[2] == NULL) == (in->kernel[3] == NULL) && (!in->kernel[2] || in->kernel[0]),
                  "%s: the f16-cache forms go together, beside the f32 ones", op);
    ck_assert_msg(in->push_size % 4 == 0 && in->push_size <= LOOM_MAX_PUSH, "%s: push %u", op, in->push_size);
    ck_assert_msg(in->tol_abs >= 0 && in->tol_rel >= 0 && in->tol_abs < 1 && in->tol_rel < 1, "%s: tolerance", op);
    uint32_t writable = 0;
    for (uint32_t s = 0; s < in->n_slots; s++) {
        const loom_op_slot *sl = &in->slot[s];
        ck_assert_msg(sl->name[0] && (strcmp(sl->name, "params") || (s == 0 && sl->access == LOOM_ACCESS_READ)),
                      "%s: slot %u '%s'", op, s, sl->name);
        for (uint32_t t = 0; t < s; t++)
            ck_assert_msg(strcmp(in->slot[t].name, sl->name), "%s: slots %u and %u are both '%s'", op, t, s,
                          sl->name);
        writable |= (sl->access & LOOM_ACCESS_WRITE) ? 1u << s : 0;
    }
    ck_assert_msg(writable == in->writable && (in->n_slots == 0 || writable), "%s: written slots", op);
    /* "#rrggbb", one colour per op kind so the same op looks the same in
     * every dump and no two look alike. */
    ck_assert_msg(strlen(in->colour) == 7 && in->colour[0] == '#' && strspn(in->colour + 1, "0123456789abcdef") == 6,
                  "%s: colour '%s'", op, in->colour);
    for (int o = 0; o < _i; o++)
        ck_assert_msg(strcmp(loom_op_info_get((loom_op)o)->colour, in->colour), "%s: colour of %s", op,
                      loom_op_name((loom_op)o));
}
END_TEST

static Suite *ops_builders_suite(void)
{
    Suite *s = suite_create("ops-builders");
    TCase *tc = tcase_create("dtypes");
    tcase_add_test(tc, dtypes);
    suite_add_tcase(s, tc);
    tc = tcase_create("append");
    tcase_add_test(tc, matvec_shape);
    tcase_add_test(tc, matmul_shape);
    tcase_add_test(tc, per_step_ops_bind_params);
    tcase_add_test(tc, small_ops);
    tcase_add_test(tc, row_ops_append);
    suite_add_tcase(s, tc);
    tc = tcase_create("reject");
    tcase_add_test(tc, rejects_bad_shapes);
    tcase_add_test(tc, params_buffer_is_never_written);
    suite_add_tcase(s, tc);
    tc = tcase_create("table");
    tcase_add_loop_test(tc, op_table_rows, 0, LOOM_OP_COUNT);
    tcase_add_test(tc, op_args_read_back);
    tcase_add_test(tc, op_args_refused);
    tcase_add_test(tc, qkv_rows_refused);
    suite_add_tcase(s, tc);
    return s;
}

void loom_test_register(loom_test_runner *r, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    loom_test_add_suite(r, ops_builders_suite());
}
