/* Op builders: the typed front door to capture. Every builder fills an
 * op_call (views with their binding roles, push constants, workgroup count)
 * after its op-specific shape checks; emit() then applies the checks every
 * op shares (view inside its buffer, alignment, 4-byte sizes, aliasing
 * between written and read views) and appends the dispatch. Ranges are
 * derived from the bindings, so each read or write range is exactly the
 * view's bytes. Workgroup counts here must match the local sizes declared
 * in shaders/. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "internal.h"
#include "loom_ops.h"

/* Local sizes and per-workgroup tiling of the kernels in shaders/. */
#define ELEMWISE_LOCAL   256u   /* copy, mul, add, silu_mul, rope, kv_append, embed */
#define MATVEC_ROWS_PER_WG 4u   /* matvec.glsl: MV_ROWS */
#define ARGMAX_MAX_GROUPS 1024u  /* matvec.glsl MV_ARGMAX: workgroups loop over row blocks */
#define ATTN_MAX_HEAD_DIM 256u  /* attention.comp: one invocation per dim */
#define MAX_GROUPS       65535u /* the Vulkan minimum of maxComputeWorkGroupCount */
#define COPY_MAX_GROUPS  4096u  /* copy.comp strides over the rest */

const char *loom_dtype_name(loom_dtype t)
{
    switch (t) {
    case LOOM_F32: return "f32";
    case LOOM_F16: return "f16";
    case LOOM_U32: return "u32";
    }
    return "?";
}

uint32_t loom_dtype_size(loom_dtype t)
{
    switch (t) {
    case LOOM_F16: return 2;
    case LOOM_F32:
    case LOOM_U32: return 4;
    }
    return 0;
}

/* One view bound to a kernel slot. Read views marked inplace may be the very
 * same view as a written one: the kernel reads each such element before the
 * same invocation overwrites it, or finishes all reads before any write. */
typedef struct op_view {
    const char *name;
    loom_tensor t;
    bool write;
    bool inplace;
    bool rw;                  /* read and written (workspace) */
} op_view;

typedef struct op_call {
    loom_op op;
    const char *kernel;
    bool params;              /* bind the step-parameter buffer at slot 0 */
    op_view v[LOOM_MAX_BINDINGS - 1];
    uint32_t n;
    const void *push;
    uint32_t push_size;
    uint64_t groups;
} op_call;

static uint64_t view_bytes(const loom_tensor *t)
{
    return (uint64_t)t->rows * t->cols * loom_dtype_size((loom_dtype)t->dtype);
}

static bool views_overlap(const loom_tensor *a, const loom_tensor *b)
{
    return a->buffer == b->buffer && a->offset < b->offset + view_bytes(b) && b->offset < a->offset + view_bytes(a);
}

static bool views_equal(const loom_tensor *a, const loom_tensor *b)
{
    return a->buffer == b->buffer && a->offset == b->offset && a->dtype == b->dtype && a->rows == b->rows &&
           a->cols == b->cols;
}

static loom_result check_view(loom_graph *g, const char *op, uint32_t node, const op_view *v)
{
    const loom_tensor *t = &v->t;
    if (t->buffer >= loom_graph_buffer_count(g))
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s.buffer %u does not exist (%u buffers)", node, op,
                         v->name, t->buffer, loom_graph_buffer_count(g));
    if (t->dtype > LOOM_U32)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s.dtype %u is not a loom_dtype", node, op, v->name,
                         t->dtype);
    if (t->rows == 0 || t->cols == 0)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s is %u x %u (empty)", node, op, v->name, t->rows,
                         t->cols);
    if (t->offset % LOOM_BIND_ALIGN)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s.offset %" PRIu64 " is not a multiple of %u", node,
                         op, v->name, t->offset, LOOM_BIND_ALIGN);
    uint64_t bytes = view_bytes(t);
    if (bytes % 4)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s is %" PRIu64 " bytes, not a multiple of 4", node,
                         op, v->name, bytes);
    const loom_buffer *b = loom_graph_buffer(g, t->buffer);
    if (t->offset > b->size || bytes > b->size - t->offset)
        return loom_fail(LOOM_INVALID_ARGUMENT,
                         "node %u (%s): %s [%" PRIu64 ", %" PRIu64 ") exceeds buffer %u '%s' of %" PRIu64 " bytes",
                         node, op, v->name, t->offset, t->offset + bytes, t->buffer,
                         loom_graph_buffer_name(g, t->buffer), b->size);
    if (v->write && b->usage == LOOM_USAGE_PARAMS)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s writes the step-parameter buffer %u", node, op,
                         v->name, t->buffer);
    return LOOM_OK;
}

/* A written view may only coincide exactly with a read view the kernel
 * allows in place; any other overlap would race inside the dispatch. */
static loom_result check_aliasing(const op_call *c, const char *op, uint32_t node)
{
    for (uint32_t i = 0; i < c->n; i++) {
        if (!c->v[i].write)
            continue;
        for (uint32_t j = 0; j < c->n; j++) {
            if (j == i || !views_overlap(&c->v[i].t, &c->v[j].t))
                continue;
            bool ok = !c->v[j].write && c->v[j].inplace && views_equal(&c->v[i].t, &c->v[j].t);
            if (!ok)
                return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s overlaps %s in buffer %u", node, op,
                                 c->v[i].name, c->v[j].name, c->v[i].t.buffer);
        }
    }
    return LOOM_OK;
}

/* Element sizes by loom_dtype, for views whose dtype has been checked. */
static const uint8_t dtype_bytes[LOOM_U32 + 1] = { 4, 2, 4 };

/* check_view's conditions in one pass with no message work: emit runs this
 * on every view of every dispatch and asks check_view to say what is wrong
 * only when something is. */
static inline bool view_ok(const loom_graph *g, const op_view *v, uint64_t *bytes)
{
    const loom_tensor *t = &v->t;
    if (t->buffer >= g->buffers.n || t->dtype > LOOM_U32 || t->rows == 0 || t->cols == 0 ||
        t->offset % LOOM_BIND_ALIGN)
        return false;
    *bytes = (uint64_t)t->rows * t->cols * dtype_bytes[t->dtype];
    const loom_buffer *b = &g->buffers.v[t->buffer];
    return *bytes % 4 == 0 && t->offset <= b->size && *bytes <= b->size - t->offset &&
           !(v->write && b->usage == LOOM_USAGE_PARAMS);
}

static loom_result emit(loom_graph *g, const op_call *c, uint32_t *out_node)
{
    uint32_t node = g->nodes.n;
    uint64_t bytes[LOOM_MAX_BINDINGS];
    loom_result rc;
    for (uint32_t i = 0; i < c->n; i++)
        if (!view_ok(g, &c->v[i], &bytes[i]) && (rc = check_view(g, loom_op_name(c->op), node, &c->v[i])))
            return rc;
    bool clash = false;
    for (uint32_t i = 0; i < c->n; i++) {
        if (!c->v[i].write)
            continue;
        const loom_tensor *a = &c->v[i].t;
        for (uint32_t j = 0; j < c->n; j++) {
            const loom_tensor *b = &c->v[j].t;
            clash |= j != i && a->buffer == b->buffer && a->offset < b->offset + bytes[j] &&
                     b->offset < a->offset + bytes[i] &&
                     (c->v[j].write || !c->v[j].inplace || !views_equal(a, b));
        }
    }
    if (clash && (rc = check_aliasing(c, loom_op_name(c->op), node)))
        return rc;
    if (c->groups == 0 || c->groups > MAX_GROUPS)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): needs %" PRIu64 " workgroups, the kernel supports %u",
                         node, loom_op_name(c->op), c->groups, MAX_GROUPS);

    loom_binding b[LOOM_MAX_BINDINGS];
    uint32_t nb = 0;
    if (c->params) {
        uint32_t pid;
        rc = loom_graph_params(g, &pid);
        if (rc)
            return rc;
        b[nb++] = (loom_binding){ .buffer = pid, .slot = 0, .offset = 0, .size = sizeof(loom_step_params),
                                  .access = LOOM_ACCESS_READ };
    }
    for (uint32_t i = 0; i < c->n; i++, nb++)
        b[nb] = (loom_binding){ .buffer = c->v[i].t.buffer, .slot = nb, .offset = c->v[i].t.offset,
                                .size = bytes[i],
                                .access = c->v[i].rw      ? LOOM_ACCESS_RW
                                          : c->v[i].write ? LOOM_ACCESS_WRITE
                                                          : LOOM_ACCESS_READ };
    loom_dispatch_desc d = {
        .kernel = c->kernel, .op = c->op, .groups = { (uint32_t)c->groups, 1, 1 },
        .bindings = b, .n_bindings = nb, .push = c->push, .push_size = c->push_size,
    };
    /* Every kernel name here is a literal (see matvec_kernels). */
    return loom_graph_add_dispatch_lit(g, &d, out_node);
}

/* ---- shared shape checks -------------------------------------------------- */

/* "node 3 (MATVEC): x.cols 100, want 128" */
static loom_result bad(loom_graph *g, loom_op op, const char *field, const char *what, uint64_t value,
                       uint64_t want)
{
    const char *sep = what[0] && what[0] != '.' ? " " : "";
    return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s%s%s %" PRIu64 ", want %" PRIu64,
                     loom_graph_node_count(g), loom_op_name(op), field, sep, what, value, want);
}

static loom_result need_dtype(loom_graph *g, loom_op op, const char *name, const loom_tensor *t, loom_dtype want)
{
    if (t->dtype != (uint32_t)want)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s.dtype is %s, want %s", loom_graph_node_count(g),
                         loom_op_name(op), name, loom_dtype_name((loom_dtype)t->dtype), loom_dtype_name(want));
    return LOOM_OK;
}

/* An f32 row vector of n elements (n == 0: any length). */
static loom_result need_vec(loom_graph *g, loom_op op, const char *name, const loom_tensor *t, uint32_t n)
{
    loom_result rc = need_dtype(g, op, name, t, LOOM_F32);
    if (rc)
        return rc;
    if (t->rows != 1)
        return bad(g, op, name, ".rows", t->rows, 1);
    if (n && t->cols != n)
        return bad(g, op, name, ".cols", t->cols, n);
    if (t->cols == 0)
        return bad(g, op, name, ".cols", 0, 1);
    return LOOM_OK;
}

static loom_result need_same_shape(loom_graph *g, loom_op op, const char *name, const loom_tensor *t,
                                   const loom_tensor *ref)
{
    loom_result rc = need_dtype(g, op, name, t, (loom_dtype)ref->dtype);
    if (rc)
        return rc;
    if (t->rows != ref->rows)
        return bad(g, op, name, ".rows", t->rows, ref->rows);
    if (t->cols != ref->cols)
        return bad(g, op, name, ".cols", t->cols, ref->cols);
    return LOOM_OK;
}

/* 1/sqrt(n) without libm, which ir/ does not link. */
static float inv_sqrt(uint32_t n)
{
    double s = n;
    for (int i = 0; i < 64; i++)
        s = 0.5 * (s + n / s);
    return (float)(1.0 / s);
}

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

static loom_pc_n pc_n(uint32_t n) { return (loom_pc_n){ n }; }

/* ATTENTION kernels: attention.comp takes head_dim <= 64 (8 invocations a
 * row, 2 rows each, so 64 rows a pass); attention_wide.comp the rest up to
 * ATTN_MAX_HEAD_DIM (32 a row, 8 rows a pass). */
#define ATTN_NARROW_HEAD_DIM 64u
static uint32_t attn_rows_per_pass(uint32_t head_dim) { return head_dim <= ATTN_NARROW_HEAD_DIM ? 64u : 8u; }

/* Shares of the cache an ATTENTION dispatch splits into: one pass each at
 * the full cache, at most 16 (attention.glsl: MAX_SPLITS). */
static uint32_t attn_splits(uint32_t max_seq, uint32_t head_dim)
{
    uint32_t s = max_seq / attn_rows_per_pass(head_dim);
    return s < 1u ? 1u : s > 16u ? 16u : s;
}

/* A plan-owned STATE buffer for a kernel's own bookkeeping (partial results,
 * completion counters), named after the node it serves. The runtime zeroes
 * it once; kernels leave their counters at zero when they finish. */
static loom_result workspace(loom_graph *g, loom_op op, const char *what, uint64_t bytes, loom_tensor *out)
{
    char name[64];
    snprintf(name, sizeof name, "n%u.%s.%s", loom_graph_node_count(g), loom_op_name(op), what);
    uint32_t id = LOOM_NONE;
    bytes = (bytes + 3) & ~(uint64_t)3;
    loom_result rc = loom_graph_add_buffer(
        g, &(loom_buffer_desc){ .name = name, .size = bytes, .usage = LOOM_USAGE_STATE }, &id);
    *out = (loom_tensor){ id, LOOM_U32, 0, 1, (uint32_t)(bytes / 4) };
    return rc;
}

/* ---- builders ------------------------------------------------------------- */

loom_result loom_op_copy(loom_graph *g, loom_tensor src, loom_tensor dst, uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_copy: graph is NULL");
    if (view_bytes(&src) != view_bytes(&dst))
        return bad(g, LOOM_OP_COPY, "dst", "bytes", view_bytes(&dst), view_bytes(&src));
    uint64_t words = view_bytes(&src) / 4;
    if (words > UINT32_MAX)
        return bad(g, LOOM_OP_COPY, "src", "words", words, UINT32_MAX);
    loom_pc_n pc = pc_n((uint32_t)words);
    uint64_t groups = ceil_div(ceil_div(words, 4), ELEMWISE_LOCAL);
    op_call c = { .op = LOOM_OP_COPY, .kernel = "copy", .n = 2, .push = &pc, .push_size = sizeof pc,
                  .groups = groups < COPY_MAX_GROUPS ? groups : COPY_MAX_GROUPS,
                  .v = { { "src", src, false, true }, { "dst", dst, true, false } } };
    return emit(g, &c, out_node);
}

loom_result loom_op_embed(loom_graph *g, loom_tensor table, uint32_t token_buf, uint32_t token_index,
                          loom_tensor out, uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_embed: graph is NULL");
    const loom_op op = LOOM_OP_EMBED;
    if (table.dtype != LOOM_F32 && table.dtype != LOOM_F16)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (EMBED): table.dtype %s is not f32 or f16",
                         loom_graph_node_count(g), loom_dtype_name((loom_dtype)table.dtype));
    if (table.dtype == LOOM_F16 && table.cols % 2)
        return bad(g, op, "table", ".cols (f16 needs even)", table.cols, table.cols + 1);
    loom_result rc = need_vec(g, op, "out", &out, table.cols);
    if (rc)
        return rc;
    if (token_buf >= loom_graph_buffer_count(g))
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (EMBED): token_buf %u does not exist",
                         loom_graph_node_count(g), token_buf);
    /* The token id is data the GPU may have just written (e.g. by ARGMAX),
     * so the whole token buffer is bound and read: a narrower range would
     * let the plan overlap this read with a write to a neighbouring slot,
     * which the descriptor (and the validation layer) would see. */
    uint64_t tb = loom_graph_buffer(g, token_buf)->size;
    if ((uint64_t)token_index * 4 + 4 > tb)
        return bad(g, op, "token_index", "byte end", (uint64_t)token_index * 4 + 4, tb);
    if (tb / 4 > UINT32_MAX)
        return bad(g, op, "token_buf", "size", tb, (uint64_t)UINT32_MAX * 4);
    loom_tensor tok = { token_buf, LOOM_U32, 0, 1, (uint32_t)(tb / 4) };
    loom_pc_embed pc = { table.cols, table.rows, token_index };
    op_call c = { .op = op, .kernel = table.dtype == LOOM_F16 ? "embed_f16" : "embed_f32", .n = 3,
                  .push = &pc, .push_size = sizeof pc, .groups = ceil_div(table.cols, ELEMWISE_LOCAL),
                  .v = { { "table", table, false, false }, { "token_buf", tok, false, false },
                         { "out", out, true, false } } };
    return emit(g, &c, out_node);
}

/* A weight matrix the matvec kernels can stream: f32 or f16 (even cols). */
static loom_result need_weight(loom_graph *g, loom_op op, const char *name, const loom_tensor *W)
{
    if (W->dtype != LOOM_F32 && W->dtype != LOOM_F16)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s.dtype %s is not f32 or f16",
                         loom_graph_node_count(g), loom_op_name(op), name, loom_dtype_name((loom_dtype)W->dtype));
    if (W->dtype == LOOM_F16 && W->cols % 2)
        return bad(g, op, name, ".cols (f16 needs even)", W->cols, W->cols + 1);
    if (W->rows > MAX_GROUPS * MATVEC_ROWS_PER_WG)
        return bad(g, op, name, ".rows", W->rows, MAX_GROUPS * MATVEC_ROWS_PER_WG);
    return LOOM_OK;
}

static loom_result need_eps(loom_graph *g, loom_op op, float eps)
{
    if (!(eps >= 0.0f) || isinf(eps))
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): eps %g is not a finite value >= 0",
                         loom_graph_node_count(g), loom_op_name(op), (double)eps);
    return LOOM_OK;
}

static loom_result need_theta(loom_graph *g, loom_op op, float theta)
{
    if (!(theta > 0.0f) || isinf(theta))
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): theta %g is not a finite value > 0",
                         loom_graph_node_count(g), loom_op_name(op), (double)theta);
    return LOOM_OK;
}

static loom_result norm_common(loom_graph *g, loom_op op, const char *kernel, const loom_tensor *a,
                               const loom_tensor *b, const loom_tensor *w, const loom_tensor *sum,
                               const loom_tensor *y, float eps, uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "%s: graph is NULL", kernel);
    uint32_t n = a->cols;
    loom_result rc = need_eps(g, op, eps);
    if (!rc)
        rc = need_vec(g, op, b ? "a" : "x", a, 0);
    if (!rc && b)
        rc = need_vec(g, op, "b", b, n);
    if (!rc && w)
        rc = need_vec(g, op, "w", w, n);
    if (!rc && sum)
        rc = need_vec(g, op, "sum", sum, n);
    if (!rc)
        rc = need_vec(g, op, "y", y, n);
    if (rc)
        return rc;
    loom_pc_norm pc = { n, eps };
    op_call c = { .op = op, .kernel = kernel, .push = &pc, .push_size = sizeof pc, .groups = 1 };
    /* One workgroup reduces, then rescales: y may replace x, a or b in place,
     * and sum may replace a or b (each invocation writes only elements it has
     * already read). */
    c.v[c.n++] = (op_view){ b ? "a" : "x", *a, false, true, false };
    if (b)
        c.v[c.n++] = (op_view){ "b", *b, false, true, false };
    if (w)
        c.v[c.n++] = (op_view){ "w", *w, false, true, false };
    if (sum)
        c.v[c.n++] = (op_view){ "sum", *sum, true, false, false };
    c.v[c.n++] = (op_view){ "y", *y, true, false, false };
    return emit(g, &c, out_node);
}

loom_result loom_op_rms_norm(loom_graph *g, loom_tensor x, loom_tensor y, float eps, uint32_t *out_node)
{
    return norm_common(g, LOOM_OP_RMS_NORM, "rms_norm", &x, NULL, NULL, NULL, &y, eps, out_node);
}

loom_result loom_op_rms_norm_mul(loom_graph *g, loom_tensor x, loom_tensor w, loom_tensor y, float eps,
                                 uint32_t *out_node)
{
    return norm_common(g, LOOM_OP_RMS_NORM_MUL, "rms_norm_mul", &x, NULL, &w, NULL, &y, eps, out_node);
}

loom_result loom_op_add_rms_norm(loom_graph *g, loom_tensor a, loom_tensor b, loom_tensor sum, loom_tensor y,
                                 float eps, uint32_t *out_node)
{
    return norm_common(g, LOOM_OP_ADD_RMS_NORM, "add_rms_norm", &a, &b, NULL, &sum, &y, eps, out_node);
}

loom_result loom_op_add_rms_norm_mul(loom_graph *g, loom_tensor a, loom_tensor b, loom_tensor w,
                                     loom_tensor sum, loom_tensor y, float eps, uint32_t *out_node)
{
    return norm_common(g, LOOM_OP_ADD_RMS_NORM_MUL, "add_rms_norm_mul", &a, &b, &w, &sum, &y, eps, out_node);
}

/* y = f(a, b) elementwise over equal f32 shapes; y may replace a or b. */
static loom_result binary(loom_graph *g, loom_op op, const char *kernel, loom_tensor a, loom_tensor b,
                          loom_tensor y, uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "%s: graph is NULL", kernel);
    loom_result rc = need_dtype(g, op, "a", &a, LOOM_F32);
    if (!rc)
        rc = need_same_shape(g, op, "b", &b, &a);
    if (!rc)
        rc = need_same_shape(g, op, "y", &y, &a);
    if (rc)
        return rc;
    uint64_t n = (uint64_t)a.rows * a.cols;
    if (n > UINT32_MAX)
        return bad(g, op, "a", "elements", n, UINT32_MAX);
    loom_pc_n pc = pc_n((uint32_t)n);
    op_call c = { .op = op, .kernel = kernel, .n = 3, .push = &pc, .push_size = sizeof pc,
                  .groups = ceil_div(n, ELEMWISE_LOCAL),
                  .v = { { "a", a, false, true }, { "b", b, false, true }, { "y", y, true, false } } };
    return emit(g, &c, out_node);
}

loom_result loom_op_mul(loom_graph *g, loom_tensor a, loom_tensor b, loom_tensor y, uint32_t *out_node)
{
    return binary(g, LOOM_OP_MUL, "mul", a, b, y, out_node);
}

loom_result loom_op_add(loom_graph *g, loom_tensor a, loom_tensor b, loom_tensor y, uint32_t *out_node)
{
    return binary(g, LOOM_OP_ADD, "add", a, b, y, out_node);
}

loom_result loom_op_silu_mul(loom_graph *g, loom_tensor a, loom_tensor b, loom_tensor y, uint32_t *out_node)
{
    return binary(g, LOOM_OP_SILU_MUL, "silu_mul", a, b, y, out_node);
}

/* "<base>_f32" / "<base>_f16" for each matvec op, as literals: emit finds
 * kernels by the name's address. */
static const char *matvec_kernel(loom_op op, bool f16)
{
    switch (op) {
    case LOOM_OP_MATVEC_ADD: return f16 ? "matvec_add_f16" : "matvec_add_f32";
    case LOOM_OP_MATVEC_SILU_MUL: return f16 ? "matvec_silu_mul_f16" : "matvec_silu_mul_f32";
    case LOOM_OP_RMS_NORM_MATVEC: return f16 ? "rms_norm_matvec_f16" : "rms_norm_matvec_f32";
    case LOOM_OP_RMS_NORM_MATVEC_SILU_MUL:
        return f16 ? "rms_norm_matvec_silu_mul_f16" : "rms_norm_matvec_silu_mul_f32";
    case LOOM_OP_MATVEC_ARGMAX: return f16 ? "matvec_argmax_f16" : "matvec_argmax_f32";
    case LOOM_OP_RMS_NORM_MATVEC_ARGMAX: return f16 ? "rms_norm_matvec_argmax_f16" : "rms_norm_matvec_argmax_f32";
    case LOOM_OP_RMS_NORM_QKV_ROPE_KV: return f16 ? "rms_norm_qkv_rope_f16" : "rms_norm_qkv_rope_f32";
    default: return f16 ? "matvec_f16" : "matvec_f32";
    }
}

/* The three matvec forms: W (and U for the gated form) rows x cols, f32 or
 * f16; x 1 x cols; r and y 1 x rows. y may replace r, never x. */
static loom_result matvec_common(loom_graph *g, loom_op op, const char *base, const loom_tensor *W,
                                 const loom_tensor *U, const loom_tensor *x, const loom_tensor *r,
                                 const loom_tensor *y, uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "%s: graph is NULL", base);
    const char *wname = U ? "Wg" : "W";
    loom_result rc = need_weight(g, op, wname, W);
    if (!rc && U)
        rc = need_same_shape(g, op, "Wu", U, W);
    if (!rc)
        rc = need_vec(g, op, "x", x, W->cols);
    if (!rc && r)
        rc = need_vec(g, op, "r", r, W->rows);
    if (!rc)
        rc = need_vec(g, op, "y", y, W->rows);
    if (rc)
        return rc;
    loom_pc_matvec pc = { W->rows, W->cols };
    op_call c = { .op = op, .kernel = matvec_kernel(op, W->dtype == LOOM_F16), .push = &pc, .push_size = sizeof pc,
                  .groups = ceil_div(W->rows, MATVEC_ROWS_PER_WG) };
    c.v[c.n++] = (op_view){ wname, *W, false, false, false };
    if (U)
        c.v[c.n++] = (op_view){ "Wu", *U, false, false, false };
    c.v[c.n++] = (op_view){ "x", *x, false, false, false };
    if (r)
        c.v[c.n++] = (op_view){ "r", *r, false, true, false };
    c.v[c.n++] = (op_view){ "y", *y, true, false, false };
    return emit(g, &c, out_node);
}

loom_result loom_op_matvec(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor y, uint32_t *out_node)
{
    return matvec_common(g, LOOM_OP_MATVEC, "matvec", &W, NULL, &x, NULL, &y, out_node);
}

loom_result loom_op_matvec_add(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor r, loom_tensor y,
                               uint32_t *out_node)
{
    return matvec_common(g, LOOM_OP_MATVEC_ADD, "matvec_add", &W, NULL, &x, &r, &y, out_node);
}

loom_result loom_op_matvec_silu_mul(loom_graph *g, loom_tensor Wg, loom_tensor Wu, loom_tensor x, loom_tensor y,
                                    uint32_t *out_node)
{
    return matvec_common(g, LOOM_OP_MATVEC_SILU_MUL, "matvec_silu_mul", &Wg, &Wu, &x, NULL, &y, out_node);
}

loom_result loom_op_rope(loom_graph *g, loom_tensor x, loom_tensor y, uint32_t n_heads, uint32_t head_dim,
                         float theta, uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_rope: graph is NULL");
    const loom_op op = LOOM_OP_ROPE;
    if (n_heads == 0)
        return bad(g, op, "n_heads", "", 0, 1);
    if (head_dim == 0 || head_dim % 2)
        return bad(g, op, "head_dim (even, > 0)", "", head_dim, head_dim + 1);
    loom_result rc = need_theta(g, op, theta);
    if (rc)
        return rc;
    uint64_t n = (uint64_t)n_heads * head_dim;
    if (n > UINT32_MAX)
        return bad(g, op, "n_heads * head_dim", "", n, UINT32_MAX);
    rc = need_vec(g, op, "x", &x, (uint32_t)n);
    if (!rc)
        rc = need_vec(g, op, "y", &y, (uint32_t)n);
    if (rc)
        return rc;
    loom_pc_rope pc = { n_heads, head_dim, theta };
    op_call c = { .op = op, .kernel = "rope", .params = true, .n = 2, .push = &pc, .push_size = sizeof pc,
                  .groups = ceil_div(n / 2, ELEMWISE_LOCAL),
                  .v = { { "x", x, false, true }, { "y", y, true, false } } };
    return emit(g, &c, out_node);
}

loom_result loom_op_kv_append(loom_graph *g, loom_tensor k, loom_tensor v, loom_tensor kcache,
                              loom_tensor vcache, uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_kv_append: graph is NULL");
    const loom_op op = LOOM_OP_KV_APPEND;
    loom_result rc = need_vec(g, op, "k", &k, 0);
    if (!rc)
        rc = need_vec(g, op, "v", &v, k.cols);
    if (!rc)
        rc = need_dtype(g, op, "kcache", &kcache, LOOM_F32);
    if (!rc && kcache.cols != k.cols)
        rc = bad(g, op, "kcache", ".cols", kcache.cols, k.cols);
    if (!rc)
        rc = need_same_shape(g, op, "vcache", &vcache, &kcache);
    if (rc)
        return rc;
    loom_pc_kv pc = { k.cols, kcache.rows };
    op_call c = { .op = op, .kernel = "kv_append", .params = true, .n = 4, .push = &pc, .push_size = sizeof pc,
                  .groups = ceil_div(k.cols, ELEMWISE_LOCAL),
                  .v = { { "k", k, false, false }, { "v", v, false, false }, { "kcache", kcache, true, false },
                         { "vcache", vcache, true, false } } };
    return emit(g, &c, out_node);
}

loom_result loom_op_attention(loom_graph *g, loom_tensor q, loom_tensor kcache, loom_tensor vcache,
                              loom_tensor out, uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim,
                              uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_attention: graph is NULL");
    const loom_op op = LOOM_OP_ATTENTION;
    if (n_heads == 0)
        return bad(g, op, "n_heads", "", 0, 1);
    if (n_kv_heads == 0 || n_heads % n_kv_heads)
        return bad(g, op, "n_kv_heads (divides n_heads)", "", n_kv_heads, 1);
    if (head_dim == 0 || head_dim > ATTN_MAX_HEAD_DIM)
        return bad(g, op, "head_dim", "", head_dim, ATTN_MAX_HEAD_DIM);
    uint64_t nq = (uint64_t)n_heads * head_dim, nkv = (uint64_t)n_kv_heads * head_dim;
    if (nq > UINT32_MAX)
        return bad(g, op, "n_heads * head_dim", "", nq, UINT32_MAX);
    loom_result rc = need_vec(g, op, "q", &q, (uint32_t)nq);
    if (!rc)
        rc = need_dtype(g, op, "kcache", &kcache, LOOM_F32);
    if (!rc && kcache.cols != nkv)
        rc = bad(g, op, "kcache", ".cols", kcache.cols, nkv);
    if (!rc)
        rc = need_same_shape(g, op, "vcache", &vcache, &kcache);
    if (!rc)
        rc = need_vec(g, op, "out", &out, (uint32_t)nq);
    if (rc)
        return rc;
    uint32_t splits = attn_splits(kcache.rows, head_dim);
    loom_pc_attn pc = { n_heads, n_kv_heads, head_dim, kcache.rows, inv_sqrt(head_dim), splits };
    loom_tensor part, count;
    if ((rc = workspace(g, op, "part", (uint64_t)n_heads * splits * (head_dim + 2) * 4, &part)) ||
        (rc = workspace(g, op, "count", (uint64_t)n_heads * 4, &count)))
        return rc;
    op_call c = { .op = op, .kernel = head_dim <= ATTN_NARROW_HEAD_DIM ? "attention" : "attention_wide", .params = true, .n = 6, .push = &pc, .push_size = sizeof pc,
                  .groups = (uint64_t)n_heads * splits,
                  .v = { { "q", q, false, true, false }, { "kcache", kcache, false, false, false },
                         { "vcache", vcache, false, false, false }, { "out", out, true, false, false },
                         { "part", part, true, false, true }, { "count", count, true, false, true } } };
    return emit(g, &c, out_node);
}

loom_result loom_op_softmax(loom_graph *g, loom_tensor x, loom_tensor y, uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_softmax: graph is NULL");
    loom_result rc = need_vec(g, LOOM_OP_SOFTMAX, "x", &x, 0);
    if (!rc)
        rc = need_vec(g, LOOM_OP_SOFTMAX, "y", &y, x.cols);
    if (rc)
        return rc;
    loom_pc_n pc = pc_n(x.cols);
    op_call c = { .op = LOOM_OP_SOFTMAX, .kernel = "softmax", .n = 2, .push = &pc, .push_size = sizeof pc,
                  .groups = 1, .v = { { "x", x, false, true }, { "y", y, true, false } } };
    return emit(g, &c, out_node);
}

loom_result loom_op_argmax(loom_graph *g, loom_tensor x, loom_tensor out, uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_argmax: graph is NULL");
    loom_result rc = need_vec(g, LOOM_OP_ARGMAX, "x", &x, 0);
    if (!rc)
        rc = need_dtype(g, LOOM_OP_ARGMAX, "out", &out, LOOM_U32);
    if (!rc && (uint64_t)out.rows * out.cols != 1)
        rc = bad(g, LOOM_OP_ARGMAX, "out", "elements", (uint64_t)out.rows * out.cols, 1);
    if (rc)
        return rc;
    loom_pc_n pc = pc_n(x.cols);
    op_call c = { .op = LOOM_OP_ARGMAX, .kernel = "argmax", .n = 2, .push = &pc, .push_size = sizeof pc,
                  .groups = 1, .v = { { "x", x, false, false }, { "out", out, true, false } } };
    return emit(g, &c, out_node);
}

/* ---- fused matvec forms --------------------------------------------------- */

/* The norm-folded and argmax forms: W (and Wu) rows x cols; x and g 1 x
 * cols; y 1 x rows; out one u32. Nothing written may overlap what is read:
 * every workgroup reads all of x. */
static loom_result norm_matvec_common(loom_graph *g, loom_op op, const loom_tensor *W, const loom_tensor *U,
                                      const loom_tensor *x, const loom_tensor *gw, const loom_tensor *y,
                                      const loom_tensor *out, float eps, uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "%s: graph is NULL", loom_op_name(op));
    const char *wname = U ? "Wg" : "W";
    loom_result rc = need_weight(g, op, wname, W);
    if (!rc && U)
        rc = need_same_shape(g, op, "Wu", U, W);
    if (!rc)
        rc = need_vec(g, op, "x", x, W->cols);
    if (!rc && gw)
        rc = need_vec(g, op, "g", gw, W->cols);
    if (!rc && gw)
        rc = need_eps(g, op, eps);
    if (!rc)
        rc = need_vec(g, op, "y", y, W->rows);
    if (!rc && out)
        rc = need_dtype(g, op, "out", out, LOOM_U32);
    if (!rc && out && (uint64_t)out->rows * out->cols != 1)
        rc = bad(g, op, "out", "elements", (uint64_t)out->rows * out->cols, 1);
    if (rc)
        return rc;
    uint64_t groups = ceil_div(W->rows, MATVEC_ROWS_PER_WG);
    /* The argmax forms loop over row blocks (matvec.glsl), so that the
     * per-workgroup publish-and-count tail is paid by few workgroups. */
    if (out && groups > ARGMAX_MAX_GROUPS)
        groups = ARGMAX_MAX_GROUPS;
    loom_pc_norm_matvec pc = { W->rows, W->cols, eps };
    op_call c = { .op = op, .kernel = matvec_kernel(op, W->dtype == LOOM_F16), .push = &pc,
                  .push_size = gw ? sizeof pc : sizeof(loom_pc_matvec), .groups = groups };
    c.v[c.n++] = (op_view){ wname, *W, false, false, false };
    if (U)
        c.v[c.n++] = (op_view){ "Wu", *U, false, false, false };
    c.v[c.n++] = (op_view){ "x", *x, false, false, false };
    if (gw)
        c.v[c.n++] = (op_view){ "g", *gw, false, false, false };
    c.v[c.n++] = (op_view){ "y", *y, true, false, false };
    if (out) {
        loom_tensor part, count;
        if ((rc = workspace(g, op, "part", groups * 8, &part)) || (rc = workspace(g, op, "count", 4, &count)))
            return rc;
        c.v[c.n++] = (op_view){ "out", *out, true, false, false };
        c.v[c.n++] = (op_view){ "part", part, true, false, true };
        c.v[c.n++] = (op_view){ "count", count, true, false, true };
    }
    return emit(g, &c, out_node);
}

loom_result loom_op_rms_norm_matvec(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor gw, loom_tensor y,
                                    float eps, uint32_t *out_node)
{
    return norm_matvec_common(g, LOOM_OP_RMS_NORM_MATVEC, &W, NULL, &x, &gw, &y, NULL, eps, out_node);
}

loom_result loom_op_rms_norm_matvec_silu_mul(loom_graph *g, loom_tensor Wg, loom_tensor Wu, loom_tensor x,
                                             loom_tensor gw, loom_tensor y, float eps, uint32_t *out_node)
{
    return norm_matvec_common(g, LOOM_OP_RMS_NORM_MATVEC_SILU_MUL, &Wg, &Wu, &x, &gw, &y, NULL, eps, out_node);
}

loom_result loom_op_matvec_argmax(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor y, loom_tensor out,
                                  uint32_t *out_node)
{
    return norm_matvec_common(g, LOOM_OP_MATVEC_ARGMAX, &W, NULL, &x, NULL, &y, &out, 0.0f, out_node);
}

loom_result loom_op_rms_norm_matvec_argmax(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor gw,
                                           loom_tensor y, loom_tensor out, float eps, uint32_t *out_node)
{
    return norm_matvec_common(g, LOOM_OP_RMS_NORM_MATVEC_ARGMAX, &W, NULL, &x, &gw, &y, &out, eps, out_node);
}

loom_result loom_op_rms_norm_qkv_rope_kv(loom_graph *g, loom_tensor x, loom_tensor gw, loom_tensor Wq,
                                         loom_tensor Wk, loom_tensor Wv, loom_tensor q, loom_tensor kcache,
                                         loom_tensor vcache, uint32_t head_dim, float theta, float eps,
                                         uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_rms_norm_qkv_rope_kv: graph is NULL");
    const loom_op op = LOOM_OP_RMS_NORM_QKV_ROPE_KV;
    /* Pairs (i, i + head_dim/2) are taken two to a workgroup (matvec.glsl),
     * so a workgroup never straddles a head or a matrix. */
    if (head_dim == 0 || head_dim % 4)
        return bad(g, op, "head_dim (multiple of 4)", "", head_dim, (head_dim / 4 + 1) * 4);
    loom_result rc = need_theta(g, op, theta);
    if (!rc)
        rc = need_weight(g, op, "Wq", &Wq);
    if (!rc)
        rc = need_weight(g, op, "Wk", &Wk);
    if (!rc && Wk.dtype != Wq.dtype)
        rc = need_dtype(g, op, "Wk", &Wk, (loom_dtype)Wq.dtype);
    if (!rc && Wk.cols != Wq.cols)
        rc = bad(g, op, "Wk", ".cols", Wk.cols, Wq.cols);
    if (!rc)
        rc = need_same_shape(g, op, "Wv", &Wv, &Wk);
    if (!rc && Wq.rows % head_dim)
        rc = bad(g, op, "Wq", ".rows (a multiple of head_dim)", Wq.rows, head_dim);
    if (!rc && Wk.rows % head_dim)
        rc = bad(g, op, "Wk", ".rows (a multiple of head_dim)", Wk.rows, head_dim);
    if (!rc && (uint64_t)Wq.rows + 2ull * Wk.rows > (uint64_t)MAX_GROUPS * MATVEC_ROWS_PER_WG)
        rc = bad(g, op, "Wq.rows + 2 Wk.rows", "", (uint64_t)Wq.rows + 2ull * Wk.rows,
                 (uint64_t)MAX_GROUPS * MATVEC_ROWS_PER_WG);
    if (!rc)
        rc = need_vec(g, op, "x", &x, Wq.cols);
    if (!rc)
        rc = need_vec(g, op, "g", &gw, Wq.cols);
    if (!rc)
        rc = need_eps(g, op, eps);
    if (!rc)
        rc = need_vec(g, op, "q", &q, Wq.rows);
    if (!rc)
        rc = need_dtype(g, op, "kcache", &kcache, LOOM_F32);
    if (!rc && kcache.cols != Wk.rows)
        rc = bad(g, op, "kcache", ".cols", kcache.cols, Wk.rows);
    if (!rc)
        rc = need_same_shape(g, op, "vcache", &vcache, &kcache);
    if (rc)
        return rc;
    loom_pc_qkv pc = { Wq.rows, Wk.rows, Wq.cols, eps, head_dim, kcache.rows, theta };
    op_call c = { .op = op, .kernel = matvec_kernel(op, Wq.dtype == LOOM_F16), .params = true, .n = 8,
                  .push = &pc, .push_size = sizeof pc,
                  .groups = ((uint64_t)Wq.rows + 2ull * Wk.rows) / MATVEC_ROWS_PER_WG,
                  .v = { { "x", x, false, false, false }, { "g", gw, false, false, false },
                         { "Wq", Wq, false, false, false }, { "Wk", Wk, false, false, false },
                         { "Wv", Wv, false, false, false }, { "q", q, true, false, false },
                         { "kcache", kcache, true, false, false }, { "vcache", vcache, true, false, false } } };
    return emit(g, &c, out_node);
}
