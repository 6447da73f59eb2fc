/* Op builders: the typed front door to capture. Every builder fills an
 * op_call (a view per kernel slot, push constants, workgroup count) after
 * its op-specific shape checks; emit() then applies the checks every op
 * shares (view inside its buffer, alignment, 4-byte sizes, aliasing between
 * written and read views) and appends the dispatch. What the kernel is,
 * which slots it writes, how many push bytes it takes and what one
 * workgroup covers come from the op's row of ops.def, which the build
 * checks against the kernels' SPIR-V. Ranges are derived from the
 * bindings, so each read or write range is exactly the view's bytes. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "internal.h"
#include "loom_ops.h"

/* Limits of the kernels in shaders/ that are not a column of ops.def. */
#define ARGMAX_MAX_GROUPS 1024u  /* matvec.glsl MV_ARGMAX: workgroups loop over row blocks */
#define ATTN_MAX_HEAD_DIM 256u  /* attention.comp: one invocation per dim */
#define MAX_GROUPS       65535u /* the Vulkan minimum of maxComputeWorkGroupCount */
#define COPY_MAX_GROUPS  4096u  /* copy.comp strides over the rest */

/* Each dtype's name, elements per block and bytes per block: the one
 * table of them (the kernels' decoders in shaders/quant.glsl follow the
 * same layouts). */
static const struct dtype_row {
    const char *name;
    uint32_t block, bytes;
} dtypes[LOOM_DTYPE_COUNT] = {
    [LOOM_F32] = { "f32", 1, 4 },     [LOOM_F16] = { "f16", 1, 2 },      [LOOM_U32] = { "u32", 1, 4 },
    [LOOM_Q8_0] = { "q8_0", 32, 34 }, [LOOM_Q4_0] = { "q4_0", 32, 18 }, [LOOM_Q4_K] = { "q4_k", 256, 144 },
    [LOOM_Q6_K] = { "q6_k", 256, 210 },
};

const char *loom_dtype_name(loom_dtype t) { return (unsigned)t < LOOM_DTYPE_COUNT ? dtypes[t].name : "?"; }

loom_result loom_dtype_parse(const char *s, loom_dtype *out)
{
    for (uint32_t t = 0; s && t < LOOM_DTYPE_COUNT; t++)
        if (!strcmp(s, dtypes[t].name)) {
            *out = (loom_dtype)t;
            return LOOM_OK;
        }
    return loom_fail(LOOM_NOT_FOUND, "'%s' is not a dtype (f32, f16, u32, q8_0, q4_0, q4_k, q6_k)", s ? s : "");
}

uint32_t loom_dtype_size(loom_dtype t)
{
    return (unsigned)t < LOOM_DTYPE_COUNT && dtypes[t].block == 1 ? dtypes[t].bytes : 0;
}

uint32_t loom_dtype_block(loom_dtype t) { return (unsigned)t < LOOM_DTYPE_COUNT ? dtypes[t].block : 0; }

uint32_t loom_dtype_block_bytes(loom_dtype t) { return (unsigned)t < LOOM_DTYPE_COUNT ? dtypes[t].bytes : 0; }

uint64_t loom_dtype_row_bytes(loom_dtype t, uint64_t cols)
{
    if ((unsigned)t >= LOOM_DTYPE_COUNT || cols % dtypes[t].block)
        return 0;
    return cols / dtypes[t].block * dtypes[t].bytes;
}

uint64_t loom_view_bytes(loom_dtype t, uint64_t rows, uint64_t cols)
{
    uint64_t n = rows * loom_dtype_row_bytes(t, cols);
    return loom_dtype_is_block(t) ? (n + 3) & ~3ull : n;
}

/* The tensor a builder binds to one kernel slot; the slot's name and access
 * are its op kind's (ops.def). A read view marked inplace (as its slot is
 * in ops.def, "(i)"; emit checks the two agree) may be the very
 * same view as a written one: the kernel reads each such element before the
 * same invocation overwrites it, or finishes all reads before any write. */
typedef struct op_view {
    loom_tensor t;
    bool inplace;
} op_view;

/* What a builder fills: the views of every slot after the step parameters,
 * in slot order, the push constants (the op kind's push_size bytes) and the
 * workgroup count. */
typedef struct op_call {
    loom_op op;
    uint8_t variant;          /* the row's kernel: 1 and 3 f16 weights or ATTENTION's wide form,
                                 2 and 3 f16 KV caches or a matmul kind's tiled form */
    bool distinct_reads;      /* one read range per distinct view, not per binding */
    uint8_t wt, wv;           /* block-typed weights (wv: a q/k/v form's Wv; else wt): the kernel is
                                 the variant's form for them (forms.def); 0 for f32/f16 */
    const char *form;         /* else the kernel: a form of forms.def (a literal of its table) */
    op_view v[LOOM_MAX_BINDINGS];
    uint32_t n;
    const void *push;
    uint64_t groups;
} op_call;

static uint64_t view_bytes(const loom_tensor *t) { return loom_view_bytes((loom_dtype)t->dtype, t->rows, t->cols); }

static bool views_overlap(const loom_tensor *a, const loom_tensor *b)
{
    return a->buffer == b->buffer && a->offset < b->offset + view_bytes(b) && b->offset < a->offset + view_bytes(a);
}

static bool views_equal(const loom_tensor *a, const loom_tensor *b)
{
    return a->buffer == b->buffer && a->offset == b->offset && a->dtype == b->dtype && a->rows == b->rows &&
           a->cols == b->cols;
}

static bool writes(const loom_op_slot *s) { return (s->access & LOOM_ACCESS_WRITE) != 0; }

static loom_result check_view(loom_graph *g, const char *op, uint32_t node, const loom_op_slot *s,
                              const op_view *v)
{
    const loom_tensor *t = &v->t;
    if (t->buffer >= loom_graph_buffer_count(g))
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s.buffer %u does not exist (%u buffers)", node, op,
                         s->name, t->buffer, loom_graph_buffer_count(g));
    if (t->dtype >= LOOM_DTYPE_COUNT)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s.dtype %u is not a loom_dtype", node, op, s->name,
                         t->dtype);
    if (t->rows == 0 || t->cols == 0)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s is %u x %u (empty)", node, op, s->name, t->rows,
                         t->cols);
    if (t->cols % loom_dtype_block((loom_dtype)t->dtype))
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s.cols %u is not a whole number of %s blocks of %u",
                         node, op, s->name, t->cols, loom_dtype_name((loom_dtype)t->dtype),
                         loom_dtype_block((loom_dtype)t->dtype));
    if (t->offset % LOOM_BIND_ALIGN)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s.offset %" PRIu64 " is not a multiple of %u", node,
                         op, s->name, t->offset, LOOM_BIND_ALIGN);
    uint64_t bytes = view_bytes(t);
    if (bytes % 4)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s is %" PRIu64 " bytes, not a multiple of 4", node,
                         op, s->name, bytes);
    const loom_buffer *b = loom_graph_buffer(g, t->buffer);
    if (t->offset > b->size || bytes > b->size - t->offset)
        return loom_fail(LOOM_INVALID_ARGUMENT,
                         "node %u (%s): %s [%" PRIu64 ", %" PRIu64 ") exceeds buffer %u '%s' of %" PRIu64 " bytes",
                         node, op, s->name, t->offset, t->offset + bytes, t->buffer,
                         loom_graph_buffer_name(g, t->buffer), b->size);
    if (writes(s) && b->usage == LOOM_USAGE_PARAMS)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s writes the step-parameter buffer %u", node, op,
                         s->name, t->buffer);
    return LOOM_OK;
}

/* A written view may only coincide exactly with a read view the kernel
 * allows in place; any other overlap would race inside the dispatch. */
static loom_result check_aliasing(const op_call *c, const loom_op_slot *s, const char *op, uint32_t node)
{
    for (uint32_t i = 0; i < c->n; i++) {
        if (!writes(&s[i]))
            continue;
        for (uint32_t j = 0; j < c->n; j++) {
            if (j == i || !views_overlap(&c->v[i].t, &c->v[j].t))
                continue;
            bool ok = !writes(&s[j]) && c->v[j].inplace && views_equal(&c->v[i].t, &c->v[j].t);
            if (!ok)
                return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s overlaps %s in buffer %u", node, op,
                                 s[i].name, s[j].name, c->v[i].t.buffer);
        }
    }
    return LOOM_OK;
}

/* check_view's conditions in one pass with no message work: emit runs this
 * on every view of every dispatch and asks check_view to say what is wrong
 * only when something is. */
static inline bool view_ok(const loom_graph *g, const loom_op_slot *s, const op_view *v, uint64_t *bytes)
{
    const loom_tensor *t = &v->t;
    if (t->buffer >= g->buffers.n || t->dtype >= LOOM_DTYPE_COUNT || t->rows == 0 || t->cols == 0 ||
        t->offset % LOOM_BIND_ALIGN || t->cols % dtypes[t->dtype].block)
        return false;
    *bytes = view_bytes(t);
    const loom_buffer *b = &g->buffers.v[t->buffer];
    return *bytes % 4 == 0 && t->offset <= b->size && *bytes <= b->size - t->offset &&
           !(writes(s) && b->usage == LOOM_USAGE_PARAMS);
}

/* Every view checked, sized into bytes[]; then the aliasing between them. */
static loom_result check_views(loom_graph *g, const op_call *c, const loom_op_slot *s, uint64_t *bytes)
{
    uint32_t node = g->nodes.n;
    loom_result rc;
    for (uint32_t i = 0; i < c->n; i++)
        if (!view_ok(g, &s[i], &c->v[i], &bytes[i]) && (rc = check_view(g, loom_op_name(c->op), node, &s[i], &c->v[i])))
            return rc;
    bool clash = false;
    for (uint32_t i = 0; i < c->n; i++) {
        if (!writes(&s[i]))
            continue;
        const loom_tensor *a = &c->v[i].t;
        for (uint32_t j = 0; j < c->n; j++) {
            const loom_tensor *b = &c->v[j].t;
            clash |= j != i && a->buffer == b->buffer && a->offset < b->offset + bytes[j] &&
                     b->offset < a->offset + bytes[i] && (writes(&s[j]) || !c->v[j].inplace || !views_equal(a, b));
        }
    }
    return clash ? check_aliasing(c, s, loom_op_name(c->op), node) : LOOM_OK;
}

/* Ranges from bindings as capture derives them, but a view bound to several
 * slots (EMBED_BLOCKS repeats its last block) read once. */
static void distinct_ranges(const loom_binding *b, uint32_t nb, loom_dispatch_desc *d, loom_range *rr,
                            loom_range *ww)
{
    for (uint32_t i = 0; i < nb; i++) {
        loom_range x = { b[i].buffer, 0, b[i].offset, b[i].size };
        bool seen = false;
        for (uint32_t k = 0; k < d->n_reads && !seen; k++)
            seen = rr[k].buffer == x.buffer && rr[k].offset == x.offset && rr[k].size == x.size;
        if ((b[i].access & LOOM_ACCESS_READ) && !seen)
            rr[d->n_reads++] = x;
        if (b[i].access & LOOM_ACCESS_WRITE)
            ww[d->n_writes++] = x;
    }
    d->reads = rr;
    d->writes = ww;
}

static loom_result emit(loom_graph *g, const op_call *c, uint32_t *out_node)
{
    const loom_op_info *info = loom_op_info_get(c->op);
    const loom_op_slot *s = info->slot + info->params;   /* the builder's views */
    uint32_t node = g->nodes.n;
    if (c->n + info->params != info->n_slots)   /* a builder out of step with ops.def */
        return loom_fail(LOOM_UNSUPPORTED, "node %u (%s): %u views for the %u slots of ops.def", node,
                         info->name, c->n + info->params, info->n_slots);
    for (uint32_t i = 0; i < c->n; i++)
        if (c->v[i].inplace != s[i].inplace)
            return loom_fail(LOOM_UNSUPPORTED, "node %u (%s): the builder's in-place %s is not ops.def's", node,
                             info->name, s[i].name);
    uint64_t bytes[LOOM_MAX_BINDINGS];
    loom_result rc = check_views(g, c, s, bytes);
    if (rc)
        return rc;
    if (c->groups == 0 || c->groups > MAX_GROUPS)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): needs %" PRIu64 " workgroups, the kernel supports %u",
                         node, info->name, c->groups, MAX_GROUPS);

    loom_binding b[LOOM_MAX_BINDINGS];
    uint32_t nb = 0;
    if (info->params) {
        uint32_t pid;
        if ((rc = loom_graph_params(g, &pid)))
            return rc;
        b[nb++] = (loom_binding){ .buffer = pid, .slot = 0, .offset = 0, .size = sizeof(loom_step_params),
                                  .access = LOOM_ACCESS_READ };
    }
    for (uint32_t i = 0; i < c->n; i++, nb++)
        b[nb] = (loom_binding){ .buffer = c->v[i].t.buffer, .slot = nb, .offset = c->v[i].t.offset,
                                .size = bytes[i], .access = s[i].access };
    const char *kernel = c->form ? c->form : info->kernel[c->variant];
    if (!kernel)
        return loom_fail(LOOM_UNSUPPORTED, "node %u (%s): the build has no kernel for this form", node, info->name);
    if (c->wt) {
        kernel = loom_form_kernel(loom_form_row(kernel), (loom_dtype)c->wt, (loom_dtype)c->wv);
        if (!kernel)
            return loom_fail(LOOM_UNSUPPORTED, "node %u (%s): no kernel form for %s weights (Wv %s)", node,
                             info->name, loom_dtype_name((loom_dtype)c->wt), loom_dtype_name((loom_dtype)c->wv));
    }
    loom_dispatch_desc d = {
        .kernel = kernel, .op = c->op, .groups = { (uint32_t)c->groups, 1, 1 },
        .bindings = b, .n_bindings = nb, .push = c->push, .push_size = info->push_size,
    };
    loom_range rr[LOOM_MAX_BINDINGS], ww[LOOM_MAX_BINDINGS];
    if (c->distinct_reads)
        distinct_ranges(b, nb, &d, rr, ww);
    /* Kernel names are literals of the op table: the address finds the kernel. */
    return loom_graph_add_dispatch_lit(g, &d, out_node);
}

/* emit for a builder that declared buffers from id `declared` on: when the
 * node is refused, they go too. */
static loom_result emit_owning(loom_graph *g, const op_call *c, uint32_t declared, uint32_t *out_node)
{
    loom_result rc = emit(g, c, out_node);
    if (rc)
        loom_graph_drop_unused_buffers(g, declared, NULL);   /* no node uses them: only memory can fail */
    return rc;
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

/* A float tensor: f32 or f16. KV caches (the kernels' "_kh" forms for f16,
 * whose values are rounded to f16 where they are appended) need no more. */
static loom_result need_float(loom_graph *g, loom_op op, const char *name, const loom_tensor *t)
{
    if (t->dtype != LOOM_F32 && t->dtype != LOOM_F16)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): %s.dtype %s is not f32 or f16",
                         loom_graph_node_count(g), loom_op_name(op), name, loom_dtype_name((loom_dtype)t->dtype));
    return LOOM_OK;
}

/* op_call.wt and .wv for weights of dtype t: the block type, or 0. */
static uint8_t block_of(uint32_t t) { return loom_dtype_is_block((loom_dtype)t) ? (uint8_t)t : 0; }

/* The row of ops.def's kernels for a KV cache's dtype: 2 for f16 (K1C, KFC,
 * K2C), added to the weights' or width's choice of 0 or 1. */
static uint8_t cache_form(const loom_tensor *kcache) { return kcache->dtype == LOOM_F16 ? 2 : 0; }

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

/* Workgroups for `units` of what one workgroup of op covers (ops.def). */
static uint64_t groups_for(loom_op op, uint64_t units) { return ceil_div(units, loom_op_info_get(op)->per_group); }

/* Matrix rows a workgroup of a matvec form covers for weights of dtype t:
 * ops.def's per_group, but MV_QROWS for the block types, the argmax forms
 * included (matvec.glsl: a row of blocks is a few bytes a chunk, and a
 * workgroup needs as many weight bytes in flight as f16's do; 16, not 8,
 * since the integer form quantizes x once a workgroup). */
#define MV_QROWS 16u
static uint32_t rows_per_group(loom_op op, uint32_t t)
{
    return loom_dtype_is_block((loom_dtype)t) ? MV_QROWS : loom_op_info_get(op)->per_group;
}

static loom_pc_n pc_n(uint32_t n) { return (loom_pc_n){ n }; }

/* ATTENTION kernels: attention.comp takes head_dim <= 64 (8 invocations a
 * row, 8 rows each, so 256 rows a pass), attention_wide.comp the rest up
 * to ATTN_MAX_HEAD_DIM (32 a row, 8 rows a pass). A share of the narrow
 * kernel is two passes, 512 rows: the 1b step (512-row cache, so one
 * share: the output written whole, nothing for the gather pass) ran faster
 * that way than with two shares of 256 rows combined by the o-projection. Before
 * the gather pass, four shares of 128 rows beat eight and sixteen. The
 * f16-cache forms ("_kh") take the same shares, each one pass of sixteen
 * rows an invocation (the 1b cache in one trip), faster than f32 caches.
 * Figures: docs/perf-log.md, "Figures moved out of code comments". */
#define ATTN_NARROW_HEAD_DIM 64u
static uint32_t attn_rows_per_share(uint32_t head_dim) { return head_dim <= ATTN_NARROW_HEAD_DIM ? 512u : 8u; }

/* Shares of the cache an ATTENTION dispatch splits into, at most 16
 * (attention.glsl: MAX_SPLITS). */
static uint32_t attn_splits(uint32_t max_seq, uint32_t head_dim)
{
    uint32_t s = max_seq / attn_rows_per_share(head_dim);
    return s < 1u ? 1u : s > 16u ? 16u : s;
}

/* A plan-owned STATE buffer for a kernel's own bookkeeping (partial results,
 * completion counters), named after the node it serves. The runtime zeroes
 * it once; kernels leave their counters at zero when they finish. A builder
 * that declared workspaces emits through emit_owning, so a refused view
 * leaves none behind. */
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
    uint64_t groups = groups_for(LOOM_OP_COPY, words);
    op_call c = { .op = LOOM_OP_COPY, .n = 2, .push = &pc,
                  .groups = groups < COPY_MAX_GROUPS ? groups : COPY_MAX_GROUPS,
                  .v = { { src, true }, { dst, false } } };
    return emit(g, &c, out_node);
}

loom_result loom_op_step_log(loom_graph *g, loom_tensor src, loom_tensor dst, uint32_t back, uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_step_log: graph is NULL");
    const loom_op op = LOOM_OP_STEP_LOG;
    uint64_t n = (uint64_t)src.rows * src.cols;
    if (loom_dtype_size((loom_dtype)src.dtype) != 4)
        return bad(g, op, "src", "element bytes", loom_dtype_size((loom_dtype)src.dtype), 4);
    if (n == 0 || n > UINT32_MAX)
        return bad(g, op, "src", "elements", n, n ? UINT32_MAX : 1);
    if (dst.dtype != src.dtype)
        return need_dtype(g, op, "dst", &dst, (loom_dtype)src.dtype);
    if (dst.cols != n)
        return bad(g, op, "dst", ".cols (src's elements)", dst.cols, n);
    if (dst.rows == 0)
        return bad(g, op, "dst", ".rows", 0, 1);
    if (views_overlap(&src, &dst))
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): src overlaps dst in buffer %u",
                         loom_graph_node_count(g), loom_op_name(op), dst.buffer);
    loom_pc_step_log pc = { (uint32_t)n, dst.rows, back };
    op_call c = { .op = op, .n = 2, .push = &pc, .groups = groups_for(op, n),
                  .v = { { src, false }, { dst, false } } };
    return emit(g, &c, out_node);
}

/* An embedding table, or any matrix the kernels read by rows: f32, f16
 * with an even row length (a row starts on a packed pair), or a block type
 * (rows of whole blocks). */
static loom_result need_table(loom_graph *g, loom_op op, const char *name, const loom_tensor *t)
{
    if (loom_dtype_is_block((loom_dtype)t->dtype))
        return LOOM_OK;   /* rows of whole blocks: check_view's rule */
    loom_result rc = need_float(g, op, name, t);
    if (rc)
        return rc;
    if (t->dtype == LOOM_F16 && t->cols % 2)
        return bad(g, op, name, ".cols (f16 needs even)", t->cols, t->cols + 1);
    return LOOM_OK;
}

/* The token buffer an EMBED reads. The token id is data the GPU may have
 * just written (e.g. by ARGMAX), so the whole buffer is bound and read: a
 * narrower range would let the plan overlap this read with a write to a
 * neighbouring slot, which the descriptor (and the validation layer) would
 * see. */
static loom_result token_view(loom_graph *g, loom_op op, uint32_t token_buf, uint32_t token_index,
                              loom_tensor *out)
{
    if (token_buf >= loom_graph_buffer_count(g))
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): token_buf %u does not exist",
                         loom_graph_node_count(g), loom_op_name(op), token_buf);
    uint64_t tb = loom_graph_buffer(g, token_buf)->size;
    if ((uint64_t)token_index * 4 + 4 > tb)
        return bad(g, op, "token_index", "byte end", (uint64_t)token_index * 4 + 4, tb);
    if (tb / 4 > UINT32_MAX)
        return bad(g, op, "token_buf", "size", tb, (uint64_t)UINT32_MAX * 4);
    *out = (loom_tensor){ token_buf, LOOM_U32, 0, 1, (uint32_t)(tb / 4) };
    return LOOM_OK;
}

loom_result loom_op_embed(loom_graph *g, loom_tensor table, uint32_t token_buf, uint32_t token_index,
                          loom_tensor out, uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_embed: graph is NULL");
    const loom_op op = LOOM_OP_EMBED;
    loom_tensor tok;
    loom_result rc = need_table(g, op, "table", &table);
    if (!rc)
        rc = need_vec(g, op, "out", &out, table.cols);
    if (!rc)
        rc = token_view(g, op, token_buf, token_index, &tok);
    if (rc)
        return rc;
    loom_pc_embed pc = { table.cols, table.rows, token_index };
    op_call c = { .op = op, .variant = table.dtype == LOOM_F16, .wt = block_of(table.dtype),
                  .wv = block_of(table.dtype), .n = 3, .push = &pc,
                  .groups = groups_for(op, table.cols), .v = { { table, false }, { tok, false }, { out, false } } };
    return emit(g, &c, out_node);
}

/* The blocks of an EMBED_BLOCKS node: one table's consecutive rows, every
 * block but the last as long as the first; *rows gets their sum. */
static loom_result need_blocks(loom_graph *g, const loom_tensor *tables, uint32_t n, uint64_t *rows)
{
    static const char *const names[LOOM_EMBED_MAX_BLOCKS] = { "tables[0]", "tables[1]", "tables[2]", "tables[3]",
                                                              "tables[4]", "tables[5]", "tables[6]" };
    const loom_op op = LOOM_OP_EMBED_BLOCKS;
    if (!tables || n == 0 || n > LOOM_EMBED_MAX_BLOCKS)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (EMBED_BLOCKS): %u table blocks%s, want 1 to %u",
                         loom_graph_node_count(g), n, tables ? "" : " (NULL)", LOOM_EMBED_MAX_BLOCKS);
    const loom_tensor *t0 = &tables[0];
    loom_result rc = need_table(g, op, names[0], t0);
    *rows = 0;
    for (uint32_t i = 0; i < n && !rc; i++) {
        const loom_tensor *t = &tables[i];
        if (t->dtype != t0->dtype)
            rc = need_dtype(g, op, names[i], t, (loom_dtype)t0->dtype);
        else if (t->cols != t0->cols)
            rc = bad(g, op, names[i], ".cols", t->cols, t0->cols);
        else if (i + 1 == n ? t->rows > t0->rows : t->rows != t0->rows)
            rc = bad(g, op, names[i], ".rows", t->rows, t0->rows);
        *rows += t->rows;
    }
    return rc;
}

loom_result loom_op_embed_blocks(loom_graph *g, const loom_tensor *tables, uint32_t n_tables, uint32_t first,
                                 uint32_t total, uint32_t token_buf, uint32_t token_index, loom_tensor out,
                                 uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_embed_blocks: graph is NULL");
    const loom_op op = LOOM_OP_EMBED_BLOCKS;
    uint64_t rows = 0;
    loom_tensor tok;
    loom_result rc = need_blocks(g, tables, n_tables, &rows);
    if (!rc && (uint64_t)first + rows > total)
        rc = bad(g, op, "first + rows", "", (uint64_t)first + rows, total);
    if (!rc)
        rc = need_vec(g, op, "out", &out, tables[0].cols);
    if (!rc)
        rc = token_view(g, op, token_buf, token_index, &tok);
    if (rc)
        return rc;
    loom_pc_embed_blocks pc = { tables[0].cols, (uint32_t)rows, token_index, tables[0].rows, first, total };
    op_call c = { .op = op, .variant = tables[0].dtype == LOOM_F16, .wt = block_of(tables[0].dtype),
                  .wv = block_of(tables[0].dtype), .distinct_reads = true,
                  .n = LOOM_EMBED_MAX_BLOCKS + 2, .push = &pc, .groups = groups_for(op, tables[0].cols) };
    for (uint32_t i = 0; i < LOOM_EMBED_MAX_BLOCKS; i++)
        c.v[i] = (op_view){ tables[i < n_tables ? i : n_tables - 1], false };
    c.v[LOOM_EMBED_MAX_BLOCKS] = (op_view){ tok, false };
    c.v[LOOM_EMBED_MAX_BLOCKS + 1] = (op_view){ out, false };
    return emit(g, &c, out_node);
}

/* A weight matrix the matvec kernels can stream: f32 or f16 (even cols). */
static loom_result need_weight(loom_graph *g, loom_op op, const char *name, const loom_tensor *W)
{
    loom_result rc = need_table(g, op, name, W);   /* the same dtype and row rules */
    if (rc)
        return rc;
    /* The matvec forms' rows a workgroup; 0 for the matmul kinds, whose
     * workgroup counts emit() checks. */
    uint32_t per = loom_op_info_get(op)->per_group ? rows_per_group(op, W->dtype) : 0;
    if (per && W->rows > MAX_GROUPS * per)
        return bad(g, op, name, ".rows", W->rows, MAX_GROUPS * per);
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

static loom_result norm_common(loom_graph *g, loom_op op, const loom_tensor *a, const loom_tensor *b,
                               const loom_tensor *w, const loom_tensor *sum, const loom_tensor *y, float eps,
                               uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "%s: graph is NULL", loom_op_name(op));
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
    op_call c = { .op = op, .push = &pc, .groups = 1 };
    /* One workgroup reduces, then rescales: y may replace x, a or b in place,
     * and sum may replace a or b (each invocation writes only elements it has
     * already read). */
    c.v[c.n++] = (op_view){ *a, true };
    if (b)
        c.v[c.n++] = (op_view){ *b, true };
    if (w)
        c.v[c.n++] = (op_view){ *w, true };
    if (sum)
        c.v[c.n++] = (op_view){ *sum, false };
    c.v[c.n++] = (op_view){ *y, false };
    return emit(g, &c, out_node);
}

loom_result loom_op_rms_norm(loom_graph *g, loom_tensor x, loom_tensor y, float eps, uint32_t *out_node)
{
    return norm_common(g, LOOM_OP_RMS_NORM, &x, NULL, NULL, NULL, &y, eps, out_node);
}

loom_result loom_op_rms_norm_mul(loom_graph *g, loom_tensor x, loom_tensor w, loom_tensor y, float eps,
                                 uint32_t *out_node)
{
    return norm_common(g, LOOM_OP_RMS_NORM_MUL, &x, NULL, &w, NULL, &y, eps, out_node);
}

loom_result loom_op_add_rms_norm(loom_graph *g, loom_tensor a, loom_tensor b, loom_tensor sum, loom_tensor y,
                                 float eps, uint32_t *out_node)
{
    return norm_common(g, LOOM_OP_ADD_RMS_NORM, &a, &b, NULL, &sum, &y, eps, out_node);
}

loom_result loom_op_add_rms_norm_mul(loom_graph *g, loom_tensor a, loom_tensor b, loom_tensor w,
                                     loom_tensor sum, loom_tensor y, float eps, uint32_t *out_node)
{
    return norm_common(g, LOOM_OP_ADD_RMS_NORM_MUL, &a, &b, &w, &sum, &y, eps, out_node);
}

/* y = f(a, b) elementwise over equal f32 shapes; y may replace a or b. */
static loom_result binary(loom_graph *g, loom_op op, loom_tensor a, loom_tensor b, loom_tensor y,
                          uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "%s: graph is NULL", loom_op_name(op));
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
    op_call c = { .op = op, .n = 3, .push = &pc, .groups = groups_for(op, n),
                  .v = { { a, true }, { b, true }, { y, false } } };
    return emit(g, &c, out_node);
}

loom_result loom_op_mul(loom_graph *g, loom_tensor a, loom_tensor b, loom_tensor y, uint32_t *out_node)
{
    return binary(g, LOOM_OP_MUL, a, b, y, out_node);
}

loom_result loom_op_add(loom_graph *g, loom_tensor a, loom_tensor b, loom_tensor y, uint32_t *out_node)
{
    return binary(g, LOOM_OP_ADD, a, b, y, out_node);
}

loom_result loom_op_silu_mul(loom_graph *g, loom_tensor a, loom_tensor b, loom_tensor y, uint32_t *out_node)
{
    return binary(g, LOOM_OP_SILU_MUL, a, b, y, out_node);
}

/* The three matvec forms: W (and U for the gated form) rows x cols, f32 or
 * f16; x 1 x cols; r and y 1 x rows. y may replace r, never x. */
static loom_result matvec_stage(loom_graph *g, loom_op op, const loom_tensor *W, const loom_tensor *U,
                                const loom_tensor *x, const loom_tensor *r, const loom_tensor *s,
                                const loom_tensor *y, const loom_tensor *t, const loom_tensor *acc,
                                uint32_t *out_node);

static loom_result matvec_common(loom_graph *g, loom_op op, const loom_tensor *W, const loom_tensor *U,
                                 const loom_tensor *x, const loom_tensor *r, const loom_tensor *y, uint32_t *out_node)
{
    return matvec_stage(g, op, W, U, x, r, NULL, y, NULL, NULL, out_node);
}

/* The matrices of a product form: W, or Wg and Wu of one dtype and shape. */
static loom_result need_weights(loom_graph *g, loom_op op, const loom_tensor *W, const loom_tensor *U)
{
    loom_result rc = need_weight(g, op, U ? "Wg" : "W", W);
    if (!rc && U)
        rc = need_same_shape(g, op, "Wu", U, W);
    return rc;
}

static loom_result matvec_stage(loom_graph *g, loom_op op, const loom_tensor *W, const loom_tensor *U,
                                const loom_tensor *x, const loom_tensor *r, const loom_tensor *s,
                                const loom_tensor *y, const loom_tensor *t, const loom_tensor *acc,
                                uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "%s: graph is NULL", loom_op_name(op));
    loom_result rc = need_weights(g, op, W, U);
    if (!rc)
        rc = need_vec(g, op, "x", x, W->cols);
    if (!rc && r)
        rc = need_vec(g, op, "r", r, W->rows);
    if (!rc && s)
        rc = need_vec(g, op, "s", s, W->rows);
    if (!rc)
        rc = need_vec(g, op, "y", y, W->rows);
    if (!rc && t)
        rc = need_vec(g, op, "t", t, W->rows);
    if (!rc && acc)
        rc = need_vec(g, op, "acc", acc, LOOM_STAGE_SUM_WORDS);
    if (rc)
        return rc;
    loom_pc_matvec pc = { W->rows, W->cols };
    op_call c = { .op = op, .variant = W->dtype == LOOM_F16, .wt = block_of(W->dtype), .wv = block_of(W->dtype),
                  .push = &pc, .groups = ceil_div(W->rows, rows_per_group(op, W->dtype)) };
    c.v[c.n++] = (op_view){ *W, false };
    if (U)
        c.v[c.n++] = (op_view){ *U, false };
    c.v[c.n++] = (op_view){ *x, false };
    if (r)
        c.v[c.n++] = (op_view){ *r, true };
    if (s)
        c.v[c.n++] = (op_view){ *s, false };
    c.v[c.n++] = (op_view){ *y, false };
    if (t)
        c.v[c.n++] = (op_view){ *t, false };
    if (acc)
        c.v[c.n++] = (op_view){ *acc, false };
    return emit(g, &c, out_node);
}

loom_result loom_op_matvec(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor y, uint32_t *out_node)
{
    return matvec_common(g, LOOM_OP_MATVEC, &W, NULL, &x, NULL, &y, out_node);
}

loom_result loom_op_matvec_add(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor r, loom_tensor y,
                               uint32_t *out_node)
{
    return matvec_common(g, LOOM_OP_MATVEC_ADD, &W, NULL, &x, &r, &y, out_node);
}

loom_result loom_op_matvec_add_stage(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor r, loom_tensor s,
                                     loom_tensor y, loom_tensor t, loom_tensor acc, uint32_t *out_node)
{
    return matvec_stage(g, LOOM_OP_MATVEC_ADD_STAGE, &W, NULL, &x, &r, &s, &y, &t, &acc, out_node);
}

loom_result loom_op_zero(loom_graph *g, loom_tensor y, uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_zero: graph is NULL");
    uint64_t words = view_bytes(&y) / 4;
    if (words == 0 || words > UINT32_MAX)
        return bad(g, LOOM_OP_ZERO, "y", "words", words, words ? UINT32_MAX : 1);
    loom_pc_n pc = pc_n((uint32_t)words);
    op_call c = { .op = LOOM_OP_ZERO, .n = 1, .push = &pc, .groups = groups_for(LOOM_OP_ZERO, words),
                  .v = { { y, false } } };
    return emit(g, &c, out_node);
}

loom_result loom_op_matvec_silu_mul(loom_graph *g, loom_tensor Wg, loom_tensor Wu, loom_tensor x, loom_tensor y,
                                    uint32_t *out_node)
{
    return matvec_common(g, LOOM_OP_MATVEC_SILU_MUL, &Wg, &Wu, &x, NULL, &y, out_node);
}

/* The shape checks ROPE and ROPE_ROWS share; *n the elements of a row. */
static loom_result rope_shape(loom_graph *g, loom_op op, uint32_t n_heads, uint32_t head_dim, float theta,
                              uint32_t *n)
{
    if (n_heads == 0)
        return bad(g, op, "n_heads", "", 0, 1);
    if (head_dim == 0 || head_dim % 2)
        return bad(g, op, "head_dim (even, > 0)", "", head_dim, head_dim + 1);
    loom_result rc = need_theta(g, op, theta);
    if (rc)
        return rc;
    uint64_t elems = (uint64_t)n_heads * head_dim;
    if (elems > UINT32_MAX)
        return bad(g, op, "n_heads * head_dim", "", elems, UINT32_MAX);
    *n = (uint32_t)elems;
    return LOOM_OK;
}

/* The caches KV_APPEND, ATTENTION and their T-row forms take: f32 or f16,
 * rows of cols elements, vcache the shape of kcache. */
static loom_result need_caches(loom_graph *g, loom_op op, const loom_tensor *kcache, const loom_tensor *vcache,
                               uint64_t cols)
{
    loom_result rc = need_float(g, op, "kcache", kcache);
    if (!rc && kcache->cols != cols)
        rc = bad(g, op, "kcache", ".cols", kcache->cols, cols);
    if (!rc)
        rc = need_same_shape(g, op, "vcache", vcache, kcache);
    return rc;
}

/* The head counts ATTENTION and ATTENTION_ROWS take; *nq the elements of a
 * query row, *nkv of a cache row. */
static loom_result attn_heads(loom_graph *g, loom_op op, uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim,
                              uint32_t *nq, uint64_t *nkv)
{
    if (n_heads == 0)
        return bad(g, op, "n_heads", "", 0, 1);
    if (n_kv_heads == 0 || n_heads % n_kv_heads)
        return bad(g, op, "n_kv_heads (divides n_heads)", "", n_kv_heads, 1);
    if (head_dim == 0 || head_dim > ATTN_MAX_HEAD_DIM)
        return bad(g, op, "head_dim", "", head_dim, ATTN_MAX_HEAD_DIM);
    uint64_t q = (uint64_t)n_heads * head_dim;
    if (q > UINT32_MAX)
        return bad(g, op, "n_heads * head_dim", "", q, UINT32_MAX);
    *nq = (uint32_t)q;
    *nkv = (uint64_t)n_kv_heads * head_dim;
    return LOOM_OK;
}

loom_result loom_op_rope(loom_graph *g, loom_tensor x, loom_tensor y, uint32_t n_heads, uint32_t head_dim,
                         float theta, uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_rope: graph is NULL");
    const loom_op op = LOOM_OP_ROPE;
    uint32_t n = 0;
    loom_result rc = rope_shape(g, op, n_heads, head_dim, theta, &n);
    if (rc)
        return rc;
    rc = need_vec(g, op, "x", &x, (uint32_t)n);
    if (!rc)
        rc = need_vec(g, op, "y", &y, (uint32_t)n);
    if (rc)
        return rc;
    loom_pc_rope pc = { n_heads, head_dim, theta };
    op_call c = { .op = op, .n = 2, .push = &pc, .groups = groups_for(op, n), .v = { { x, true }, { y, false } } };
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
        rc = need_caches(g, op, &kcache, &vcache, k.cols);
    if (rc)
        return rc;
    loom_pc_kv pc = { k.cols, kcache.rows };
    op_call c = { .op = op, .variant = cache_form(&kcache), .n = 4, .push = &pc,
                  .groups = groups_for(op, k.cols),
                  .v = { { k, false }, { v, false }, { kcache, false }, { vcache, false } } };
    return emit(g, &c, out_node);
}

loom_result loom_op_attention(loom_graph *g, loom_tensor q, loom_tensor kcache, loom_tensor vcache,
                              loom_tensor out, uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim,
                              uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_attention: graph is NULL");
    const loom_op op = LOOM_OP_ATTENTION;
    uint32_t nq = 0;
    uint64_t nkv = 0;
    loom_result rc = attn_heads(g, op, n_heads, n_kv_heads, head_dim, &nq, &nkv);
    if (!rc)
        rc = need_vec(g, op, "q", &q, nq);
    if (!rc)
        rc = need_caches(g, op, &kcache, &vcache, nkv);
    if (!rc)
        rc = need_vec(g, op, "out", &out, (uint32_t)nq);
    if (rc)
        return rc;
    uint32_t splits = attn_splits(kcache.rows, head_dim);
    loom_pc_attn pc = { n_heads, n_kv_heads, head_dim, kcache.rows, inv_sqrt(head_dim), splits };
    loom_tensor part, count;
    /* Per head: the shares' (max, sum) pairs padded to 16 bytes, then their
     * partial outputs (attention.glsl). */
    uint64_t head_block = ((2u * splits + 3u) & ~3u) + (uint64_t)splits * head_dim;
    uint32_t declared = loom_graph_buffer_count(g);
    if ((rc = workspace(g, op, "part", (uint64_t)n_heads * head_block * 4, &part)) ||
        (rc = workspace(g, op, "count", (uint64_t)n_heads * 4, &count)))
        return loom_graph_drop_unused_buffers(g, declared, NULL), rc;
    op_call c = { .op = op, .variant = (head_dim > ATTN_NARROW_HEAD_DIM) + cache_form(&kcache),
                  .n = 6, .push = &pc,
                  .groups = (uint64_t)n_heads * splits,
                  .v = { { q, true }, { kcache, false }, { vcache, false }, { out, false }, { part, false },
                         { count, false } } };
    return emit_owning(g, &c, declared, out_node);
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
    op_call c = { .op = LOOM_OP_SOFTMAX, .n = 2, .push = &pc, .groups = 1, .v = { { x, true }, { y, false } } };
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
    op_call c = { .op = LOOM_OP_ARGMAX, .n = 2, .push = &pc, .groups = 1, .v = { { x, false }, { out, false } } };
    return emit(g, &c, out_node);
}

/* ---- fused matvec forms --------------------------------------------------- */

/* The norm-folded and argmax forms: W (and Wu) rows x cols; x and g 1 x
 * cols; y 1 x rows; out one u32. Nothing written may overlap what is read:
 * every workgroup reads all of x. */
static loom_result norm_matvec_common(loom_graph *g, loom_op op, const loom_tensor *W, const loom_tensor *U,
                                      const loom_tensor *x, const loom_tensor *gw, const loom_tensor *y,
                                      const loom_tensor *out, const loom_tensor *ring, float eps, uint32_t *out_node)
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
    if (!rc && ring)
        rc = need_dtype(g, op, "ring", ring, LOOM_U32);
    if (!rc && ring && ring->cols != 1)
        rc = bad(g, op, "ring", ".cols", ring->cols, 1);
    if (!rc && ring && ring->rows == 0)
        rc = bad(g, op, "ring", ".rows", 0, 1);
    if (!rc && ring && (views_overlap(ring, out) || views_overlap(ring, y)))
        rc = loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): ring overlaps out or y in buffer %u",
                       loom_graph_node_count(g), loom_op_name(op), ring->buffer);
    if (rc)
        return rc;
    uint64_t groups = ceil_div(W->rows, rows_per_group(op, W->dtype));
    /* The argmax forms loop over row blocks (matvec.glsl), so that the
     * per-workgroup publish-and-count tail is paid by few workgroups. */
    if (out && groups > ARGMAX_MAX_GROUPS)
        groups = ARGMAX_MAX_GROUPS;
    loom_pc_norm_matvec pc = { W->rows, W->cols, eps };
    loom_pc_norm_matvec_log pcl = { W->rows, W->cols, eps, ring ? ring->rows : 0 };
    op_call c = { .op = op, .variant = W->dtype == LOOM_F16, .wt = block_of(W->dtype), .wv = block_of(W->dtype),
                  .push = ring ? (const void *)&pcl : &pc,
                  .groups = groups };
    c.v[c.n++] = (op_view){ *W, false };
    if (U)
        c.v[c.n++] = (op_view){ *U, false };
    c.v[c.n++] = (op_view){ *x, false };
    if (gw)
        c.v[c.n++] = (op_view){ *gw, false };
    c.v[c.n++] = (op_view){ *y, false };
    uint32_t declared = loom_graph_buffer_count(g);
    if (out) {
        loom_tensor part, count;
        if ((rc = workspace(g, op, "part", groups * 8, &part)) || (rc = workspace(g, op, "count", 4, &count)))
            return loom_graph_drop_unused_buffers(g, declared, NULL), rc;
        c.v[c.n++] = (op_view){ *out, false };
        c.v[c.n++] = (op_view){ part, false };
        c.v[c.n++] = (op_view){ count, false };
    }
    if (ring)
        c.v[c.n++] = (op_view){ *ring, false };
    return emit_owning(g, &c, declared, out_node);
}

loom_result loom_op_rms_norm_matvec(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor gw, loom_tensor y,
                                    float eps, uint32_t *out_node)
{
    return norm_matvec_common(g, LOOM_OP_RMS_NORM_MATVEC, &W, NULL, &x, &gw, &y, NULL, NULL, eps, out_node);
}

loom_result loom_op_rms_norm_matvec_silu_mul(loom_graph *g, loom_tensor Wg, loom_tensor Wu, loom_tensor x,
                                             loom_tensor gw, loom_tensor y, float eps, uint32_t *out_node)
{
    return norm_matvec_common(g, LOOM_OP_RMS_NORM_MATVEC_SILU_MUL, &Wg, &Wu, &x, &gw, &y, NULL, NULL, eps, out_node);
}

loom_result loom_op_matvec_argmax(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor y, loom_tensor out,
                                  uint32_t *out_node)
{
    return norm_matvec_common(g, LOOM_OP_MATVEC_ARGMAX, &W, NULL, &x, NULL, &y, &out, NULL, 0.0f, out_node);
}

loom_result loom_op_rms_norm_matvec_argmax(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor gw,
                                           loom_tensor y, loom_tensor out, float eps, uint32_t *out_node)
{
    return norm_matvec_common(g, LOOM_OP_RMS_NORM_MATVEC_ARGMAX, &W, NULL, &x, &gw, &y, &out, NULL, eps, out_node);
}

loom_result loom_op_rms_norm_matvec_argmax_log(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor gw,
                                               loom_tensor y, loom_tensor out, loom_tensor ring, float eps,
                                               uint32_t *out_node)
{
    return norm_matvec_common(g, LOOM_OP_RMS_NORM_MATVEC_ARGMAX_LOG, &W, NULL, &x, &gw, &y, &out, &ring, eps,
                              out_node);
}

/* The checks of the q/k/v form and its EMBED-fed form (x is then the
 * embedding row it writes); *pc for both. */
static loom_result qkv_check(loom_graph *g, loom_op op, loom_tensor x, loom_tensor gw, loom_tensor Wq,
                             loom_tensor Wk, loom_tensor Wv, loom_tensor q, loom_tensor kcache, loom_tensor vcache,
                             uint32_t head_dim, float theta, float eps, loom_pc_qkv *pc)
{
    /* Pairs (i, i + head_dim/2) are taken rows_per_group / 2 to a workgroup
     * (matvec.glsl): with head_dim a multiple of 2 rows_per_group (4; 16
     * for block types) a workgroup never straddles a head or a matrix. */
    uint32_t hd_unit = 2 * rows_per_group(op, Wq.dtype);
    if (head_dim == 0 || head_dim % hd_unit)
        return bad(g, op, "head_dim (a multiple of 2 rows a workgroup)", "", head_dim,
                   (head_dim / hd_unit + 1) * hd_unit);
    loom_result rc = need_theta(g, op, theta);
    if (!rc)
        rc = need_weight(g, op, "Wq", &Wq);
    if (!rc)
        rc = need_weight(g, op, "Wk", &Wk);
    if (!rc && Wk.dtype != Wq.dtype)
        rc = need_dtype(g, op, "Wk", &Wk, (loom_dtype)Wq.dtype);
    if (!rc && Wk.cols != Wq.cols)
        rc = bad(g, op, "Wk", ".cols", Wk.cols, Wq.cols);
    /* Wv of Wk's type, or Q6_K beside Q4_K (as Q4_K_M files have it). */
    if (!rc && Wv.dtype != Wk.dtype && !(Wk.dtype == LOOM_Q4_K && Wv.dtype == LOOM_Q6_K))
        rc = need_dtype(g, op, "Wv", &Wv, (loom_dtype)Wk.dtype);
    if (!rc && Wv.rows != Wk.rows)
        rc = bad(g, op, "Wv", ".rows", Wv.rows, Wk.rows);
    if (!rc && Wv.cols != Wk.cols)
        rc = bad(g, op, "Wv", ".cols", Wv.cols, Wk.cols);
    if (!rc && Wq.rows % head_dim)
        rc = bad(g, op, "Wq", ".rows (a multiple of head_dim)", Wq.rows, head_dim);
    if (!rc && Wk.rows % head_dim)
        rc = bad(g, op, "Wk", ".rows (a multiple of head_dim)", Wk.rows, head_dim);
    uint64_t rows = (uint64_t)Wq.rows + 2ull * Wk.rows;
    if (!rc && ceil_div(rows, rows_per_group(op, Wq.dtype)) > MAX_GROUPS)
        rc = bad(g, op, "Wq.rows + 2 Wk.rows", "", rows, (uint64_t)MAX_GROUPS * rows_per_group(op, Wq.dtype));
    if (!rc)
        rc = need_vec(g, op, "x", &x, Wq.cols);
    if (!rc)
        rc = need_vec(g, op, "g", &gw, Wq.cols);
    if (!rc)
        rc = need_eps(g, op, eps);
    if (!rc)
        rc = need_vec(g, op, "q", &q, Wq.rows);
    if (!rc)
        rc = need_float(g, op, "kcache", &kcache);
    if (!rc && kcache.cols != Wk.rows)
        rc = bad(g, op, "kcache", ".cols", kcache.cols, Wk.rows);
    if (!rc)
        rc = need_same_shape(g, op, "vcache", &vcache, &kcache);
    *pc = (loom_pc_qkv){ Wq.rows, Wk.rows, Wq.cols, eps, head_dim, kcache.rows, theta };
    return rc;
}

/* Workgroups of a q/k/v form: its rows are q's, then k's and v's. */
static uint64_t qkv_groups(loom_op op, const loom_pc_qkv *pc, uint32_t wt)
{
    return ceil_div((uint64_t)pc->q_rows + 2ull * pc->kv_rows, rows_per_group(op, wt));
}

loom_result loom_op_rms_norm_qkv_rope_kv(loom_graph *g, loom_tensor x, loom_tensor gw, loom_tensor Wq,
                                         loom_tensor Wk, loom_tensor Wv, loom_tensor q, loom_tensor kcache,
                                         loom_tensor vcache, uint32_t head_dim, float theta, float eps,
                                         uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_rms_norm_qkv_rope_kv: graph is NULL");
    const loom_op op = LOOM_OP_RMS_NORM_QKV_ROPE_KV;
    loom_pc_qkv pc;
    loom_result rc = qkv_check(g, op, x, gw, Wq, Wk, Wv, q, kcache, vcache, head_dim, theta, eps, &pc);
    if (rc)
        return rc;
    op_call c = { .op = op, .variant = (Wq.dtype == LOOM_F16) + cache_form(&kcache), .wt = block_of(Wq.dtype),
                  .wv = block_of(Wv.dtype), .n = 8,
                  .push = &pc, .groups = qkv_groups(op, &pc, Wq.dtype),
                  .v = { { x, false }, { gw, false }, { Wq, false }, { Wk, false }, { Wv, false }, { q, false },
                         { kcache, false }, { vcache, false } } };
    return emit(g, &c, out_node);
}

loom_result loom_op_embed_rms_norm_qkv_rope_kv(loom_graph *g, loom_tensor table, uint32_t token_buf,
                                               uint32_t token_index, loom_tensor gw, loom_tensor Wq, loom_tensor Wk,
                                               loom_tensor Wv, loom_tensor x, loom_tensor q, loom_tensor kcache,
                                               loom_tensor vcache, uint32_t head_dim, float theta, float eps,
                                               uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_embed_rms_norm_qkv_rope_kv: graph is NULL");
    const loom_op op = LOOM_OP_EMBED_RMS_NORM_QKV_ROPE_KV;
    loom_tensor tok;
    loom_pc_embed_qkv pc = { .vocab = table.rows, .token_index = token_index };
    loom_result rc = qkv_check(g, op, x, gw, Wq, Wk, Wv, q, kcache, vcache, head_dim, theta, eps, &pc.qkv);
    if (!rc)
        rc = need_table(g, op, "table", &table);
    if (!rc && table.dtype != Wq.dtype)
        rc = need_dtype(g, op, "table", &table, (loom_dtype)Wq.dtype);
    if (!rc && table.cols != Wq.cols)
        rc = bad(g, op, "table", ".cols", table.cols, Wq.cols);
    if (!rc)
        rc = token_view(g, op, token_buf, token_index, &tok);
    if (rc)
        return rc;
    op_call c = { .op = op, .variant = (Wq.dtype == LOOM_F16) + cache_form(&kcache), .wt = block_of(Wq.dtype),
                  .wv = block_of(Wv.dtype), .n = 10,
                  .push = &pc, .groups = qkv_groups(op, &pc.qkv, Wq.dtype),
                  .v = { { table, false }, { tok, false }, { gw, false }, { Wq, false }, { Wk, false }, { Wv, false },
                         { q, false }, { kcache, false }, { vcache, false }, { x, false } } };
    return emit(g, &c, out_node);
}

/* ---- T-row ops (multi-token steps) ---------------------------------------- */

/* An f32 T x n matrix of a T-token step (T == 0 or n == 0: any). */
static loom_result need_rows(loom_graph *g, loom_op op, const char *name, const loom_tensor *t, uint32_t T,
                             uint32_t n)
{
    loom_result rc = need_dtype(g, op, name, t, LOOM_F32);
    if (rc)
        return rc;
    if (T && t->rows != T)
        return bad(g, op, name, ".rows (T)", t->rows, T);
    if (n && t->cols != n)
        return bad(g, op, name, ".cols", t->cols, n);
    return LOOM_OK;
}

loom_result loom_op_rms_norm_qkv_rope_kv_rows(loom_graph *g, loom_tensor x, loom_tensor gw, loom_tensor Wq,
                                              loom_tensor Wk, loom_tensor Wv, loom_tensor q, loom_tensor kcache,
                                              loom_tensor vcache, uint32_t head_dim, float theta, float eps,
                                              uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_rms_norm_qkv_rope_kv_rows: graph is NULL");
    const loom_op op = LOOM_OP_RMS_NORM_QKV_ROPE_KV_ROWS;
    /* The decode form's checks on one row of x and q, then the rows. */
    loom_tensor x1 = x, q1 = q;
    x1.rows = q1.rows = 1;
    loom_pc_qkv_rows pc;
    loom_result rc = qkv_check(g, op, x1, gw, Wq, Wk, Wv, q1, kcache, vcache, head_dim, theta, eps, &pc.qkv);
    if (!rc && (x.rows == 0 || x.rows > LOOM_MATMUL_SMALL_T))
        rc = bad(g, op, "x", ".rows (T, 1 to LOOM_MATMUL_SMALL_T)", x.rows, LOOM_MATMUL_SMALL_T);
    if (!rc)
        rc = need_rows(g, op, "x", &x, x.rows, Wq.cols);
    if (!rc)
        rc = need_rows(g, op, "q", &q, x.rows, Wq.rows);
    if (rc)
        return rc;
    pc.T = x.rows;
    /* A workgroup a RoPE pair (rows i and i + head_dim / 2 of a head), up
     * to 65535 of them; past that they loop (matmul.glsl, MM_QKV). */
    op_call c = { .op = op, .variant = (Wq.dtype == LOOM_F16) + cache_form(&kcache), .wt = block_of(Wq.dtype),
                  .wv = block_of(Wv.dtype), .n = 8, .push = &pc,
                  .groups = loom_matmul_small_groups(op, pc.qkv.q_rows + 2 * pc.qkv.kv_rows, (loom_dtype)Wq.dtype),
                  .v = { { x, false }, { gw, false }, { Wq, false }, { Wk, false }, { Wv, false }, { q, false },
                         { kcache, false }, { vcache, false } } };
    return emit(g, &c, out_node);
}

loom_result loom_op_embed_rows(loom_graph *g, loom_tensor table, loom_tensor tokens, loom_tensor out,
                               uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_embed_rows: graph is NULL");
    const loom_op op = LOOM_OP_EMBED_ROWS;
    loom_result rc = need_table(g, op, "table", &table);
    if (!rc)
        rc = need_dtype(g, op, "tokens", &tokens, LOOM_U32);
    if (!rc && tokens.rows != 1)
        rc = bad(g, op, "tokens", ".rows", tokens.rows, 1);
    if (!rc)
        rc = need_rows(g, op, "out", &out, 0, table.cols);
    if (rc)
        return rc;
    /* The kernel takes the vocabulary from the table's binding and the
     * prompt's length from the tokens': neither is a push constant. */
    loom_pc_embed_rows pc = { table.cols, out.rows };
    op_call c = { .op = op, .variant = table.dtype == LOOM_F16, .wt = block_of(table.dtype),
                  .wv = block_of(table.dtype), .n = 3, .push = &pc,
                  .groups = (uint64_t)out.rows * groups_for(op, table.cols),
                  .v = { { table, false }, { tokens, false }, { out, false } } };
    return emit(g, &c, out_node);
}

loom_result loom_op_rms_norm_mul_rows(loom_graph *g, loom_tensor x, loom_tensor w, loom_tensor y, float eps,
                                      uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_rms_norm_mul_rows: graph is NULL");
    const loom_op op = LOOM_OP_RMS_NORM_MUL_ROWS;
    loom_result rc = need_eps(g, op, eps);
    if (!rc)
        rc = need_rows(g, op, "x", &x, 0, 0);
    if (!rc)
        rc = need_vec(g, op, "w", &w, x.cols);
    if (!rc)
        rc = need_rows(g, op, "y", &y, x.rows, x.cols);
    if (rc)
        return rc;
    loom_pc_norm_rows pc = { x.cols, eps, x.rows };
    /* A workgroup a row: it reads its row whole before it writes, so y may be x. */
    op_call c = { .op = op, .n = 3, .push = &pc, .groups = groups_for(op, x.rows),
                  .v = { { x, true }, { w, true }, { y, false } } };
    return emit(g, &c, out_node);
}

loom_result loom_op_rope_rows(loom_graph *g, loom_tensor x, loom_tensor y, uint32_t n_heads, uint32_t head_dim,
                              float theta, uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_rope_rows: graph is NULL");
    const loom_op op = LOOM_OP_ROPE_ROWS;
    uint32_t n = 0;
    loom_result rc = rope_shape(g, op, n_heads, head_dim, theta, &n);
    if (rc)
        return rc;
    rc = need_rows(g, op, "x", &x, 0, (uint32_t)n);
    if (!rc)
        rc = need_rows(g, op, "y", &y, x.rows, (uint32_t)n);
    if (rc)
        return rc;
    loom_pc_rope_rows pc = { n_heads, head_dim, theta, x.rows };
    op_call c = { .op = op, .n = 2, .push = &pc, .groups = groups_for(op, (uint64_t)x.rows * n),
                  .v = { { x, true }, { y, false } } };
    return emit(g, &c, out_node);
}

loom_result loom_op_kv_append_rows(loom_graph *g, loom_tensor k, loom_tensor v, loom_tensor kcache,
                                   loom_tensor vcache, uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_kv_append_rows: graph is NULL");
    const loom_op op = LOOM_OP_KV_APPEND_ROWS;
    loom_result rc = need_rows(g, op, "k", &k, 0, 0);
    if (!rc)
        rc = need_rows(g, op, "v", &v, k.rows, k.cols);
    if (!rc)
        rc = need_caches(g, op, &kcache, &vcache, k.cols);
    if (rc)
        return rc;
    loom_pc_kv_rows pc = { k.cols, kcache.rows, k.rows };
    op_call c = { .op = op, .variant = cache_form(&kcache), .n = 4, .push = &pc,
                  .groups = groups_for(op, (uint64_t)k.rows * k.cols),
                  .v = { { k, false }, { v, false }, { kcache, false }, { vcache, false } } };
    return emit(g, &c, out_node);
}

/* ATTENTION_ROWS tiles (attention_rows.glsl): a workgroup takes NB query
 * vectors (consecutive (row, head) pairs of one kv head's group) against key
 * tiles of NB cache rows, NB the largest power of two with NB * head_dim <=
 * 2048 floats, at most 32: the q, K and V tiles are 8 KiB of shared memory
 * each, within the 32 KiB every device offers. */
static uint32_t attn_rows_tile(uint32_t head_dim)
{
    uint32_t nb = 32;
    while (nb > 1 && nb * head_dim > 2048)
        nb /= 2;
    return nb;
}

/* Shares of the cache a query tile's walk is split into: enough that the
 * dispatch has about ATTN_ROWS_SPLIT_GROUPS workgroups where its query
 * tiles are few (a verification step of 4 rows on `1b` is 8 tiles, one a kv
 * head, each walking the whole cache alone), at most ATTN_ROWS_MAX_SPLITS
 * (attention_rows.glsl's MAX_SPLITS), and no more than the full cache has
 * tiles. */
#define ATTN_ROWS_SPLIT_GROUPS 128u
#define ATTN_ROWS_MAX_SPLITS 16u
static uint32_t attn_rows_splits(uint64_t tiles, uint32_t max_seq, uint32_t nb)
{
    uint64_t s = (ATTN_ROWS_SPLIT_GROUPS + tiles - 1) / tiles, most = ((uint64_t)max_seq + nb - 1) / nb;
    s = s < most ? s : most;
    s = s < ATTN_ROWS_MAX_SPLITS ? s : ATTN_ROWS_MAX_SPLITS;
    return s < 1 ? 1u : (uint32_t)s;
}

/* The few-query form (attention.glsl with ATT_ROWS, T <=
 * LOOM_ATTN_ROWS_FEW_T): the decode ATTENTION's kernel over the T rows'
 * query vectors as T x n_heads heads, a workgroup a (vector, share), the
 * shares and their workspaces as the decode's (loom_op_attention). */
static loom_result attention_rows_few(loom_graph *g, const loom_tensor *q, const loom_tensor *kcache,
                                      const loom_tensor *vcache, const loom_tensor *out, uint32_t n_heads,
                                      uint32_t n_kv_heads, uint32_t head_dim, uint32_t *out_node)
{
    const loom_op op = LOOM_OP_ATTENTION_ROWS;
    uint32_t splits = attn_splits(kcache->rows, head_dim);
    uint64_t vectors = (uint64_t)q->rows * n_heads;
    loom_pc_attn_rows pc = { n_heads, n_kv_heads, head_dim, kcache->rows, inv_sqrt(head_dim), splits, q->rows };
    uint64_t head_block = ((2u * splits + 3u) & ~3u) + (uint64_t)splits * head_dim;
    const char *decode = loom_op_info_get(LOOM_OP_ATTENTION)->kernel[(head_dim > ATTN_NARROW_HEAD_DIM) +
                                                                     cache_form(kcache)];
    loom_tensor part, count;
    uint32_t declared = loom_graph_buffer_count(g);
    loom_result rc;
    if ((rc = workspace(g, op, "part", vectors * head_block * 4, &part)) ||
        (rc = workspace(g, op, "count", vectors * 4, &count)))
        return loom_graph_drop_unused_buffers(g, declared, NULL), rc;
    op_call c = { .op = op, .form = loom_form_variant(decode, "ATT_ROWS", NULL), .n = 6, .push = &pc,
                  .groups = vectors * splits,
                  .v = { { *q, false }, { *kcache, false }, { *vcache, false }, { *out, false }, { part, false },
                         { count, false } } };
    return emit_owning(g, &c, declared, out_node);
}

loom_result loom_op_attention_rows(loom_graph *g, loom_tensor q, loom_tensor kcache, loom_tensor vcache,
                                   loom_tensor out, uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim,
                                   uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_attention_rows: graph is NULL");
    const loom_op op = LOOM_OP_ATTENTION_ROWS;
    uint32_t nq = 0;
    uint64_t nkv = 0;
    loom_result rc = attn_heads(g, op, n_heads, n_kv_heads, head_dim, &nq, &nkv);
    if (!rc)
        rc = need_rows(g, op, "q", &q, 0, nq);
    if (!rc)
        rc = need_caches(g, op, &kcache, &vcache, nkv);
    if (!rc)
        rc = need_rows(g, op, "out", &out, q.rows, (uint32_t)nq);
    if (rc)
        return rc;
    if (q.rows <= LOOM_ATTN_ROWS_FEW_T)
        return attention_rows_few(g, &q, &kcache, &vcache, &out, n_heads, n_kv_heads, head_dim, out_node);
    uint64_t per_kv = (uint64_t)q.rows * (n_heads / n_kv_heads);
    uint32_t nb = attn_rows_tile(head_dim);
    uint64_t tiles = (uint64_t)n_kv_heads * ceil_div(per_kv, nb);
    uint32_t splits = attn_rows_splits(tiles, kcache.rows, nb);
    loom_pc_attn_rows pc = { n_heads, n_kv_heads, head_dim, kcache.rows, inv_sqrt(head_dim), splits, q.rows };
    /* Split, each share's (max, sum, output) of every query vector, and a
     * completion counter a query tile; one split needs neither (a word
     * each, so that every form binds the same slots). */
    loom_tensor part, count;
    uint64_t part_words = splits > 1 ? (uint64_t)n_heads * q.rows * splits * (head_dim + 2u) : 1;
    uint32_t declared = loom_graph_buffer_count(g);
    if ((rc = workspace(g, op, "part", part_words * 4, &part)) ||
        (rc = workspace(g, op, "count", (splits > 1 ? tiles : 1) * 4, &count)))
        return loom_graph_drop_unused_buffers(g, declared, NULL), rc;
    op_call c = { .op = op, .variant = cache_form(&kcache), .n = 6, .push = &pc, .groups = tiles * splits,
                  .v = { { q, false }, { kcache, false }, { vcache, false }, { out, false }, { part, false },
                         { count, false } } };
    return emit_owning(g, &c, declared, out_node);
}

loom_result loom_op_row_pick(loom_graph *g, loom_tensor x, loom_tensor y, uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_row_pick: graph is NULL");
    const loom_op op = LOOM_OP_ROW_PICK;
    loom_result rc = need_rows(g, op, "x", &x, 0, 0);
    if (!rc)
        rc = need_vec(g, op, "y", &y, x.cols);
    if (rc)
        return rc;
    loom_pc_rows_n pc = { x.cols, x.rows };
    op_call c = { .op = op, .n = 2, .push = &pc, .groups = groups_for(op, x.cols),
                  .v = { { x, false }, { y, false } } };
    return emit(g, &c, out_node);
}

loom_result loom_op_argmax_rows(loom_graph *g, loom_tensor x, loom_tensor out, uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_op_argmax_rows: graph is NULL");
    const loom_op op = LOOM_OP_ARGMAX_ROWS;
    loom_result rc = need_rows(g, op, "x", &x, 0, 0);
    if (!rc)
        rc = need_dtype(g, op, "out", &out, LOOM_U32);
    if (!rc && (uint64_t)out.rows * out.cols != x.rows)
        rc = bad(g, op, "out", "elements", (uint64_t)out.rows * out.cols, x.rows);
    if (rc)
        return rc;
    loom_pc_rows_n pc = { x.cols, x.rows };
    op_call c = { .op = op, .n = 2, .push = &pc, .groups = groups_for(op, x.rows),
                  .v = { { x, false }, { out, false } } };
    return emit(g, &c, out_node);
}

/* ---- matrix products over T token rows ------------------------------------ */

/* Workgroups of a matmul form over rows x T (ops.def's KT variants: 0 and
 * 1 the multi-column matvec, 2 and 3 the tiled form). */
static uint64_t matmul_groups(loom_op op, uint32_t rows, uint32_t T, bool tiled, loom_dtype w)
{
    if (!tiled)
        return loom_matmul_small_groups(op, rows, w);
    return ceil_div(rows, LOOM_MATMUL_TILE_ROWS) * ceil_div(T, LOOM_MATMUL_TILE_T);
}

/* The three matmul forms: W (and U) rows x cols; x T x cols; r and y T x
 * rows. y may replace r, never x: every workgroup reads x. */
static loom_result matmul_common(loom_graph *g, loom_op op, const loom_tensor *W, const loom_tensor *U,
                                 const loom_tensor *x, const loom_tensor *r, const loom_tensor *y,
                                 uint32_t *out_node)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "%s: graph is NULL", loom_op_name(op));
    loom_result rc = need_weights(g, op, W, U);
    if (!rc)
        rc = need_dtype(g, op, "x", x, LOOM_F32);
    if (!rc && x->cols != W->cols)
        rc = bad(g, op, "x", ".cols", x->cols, W->cols);
    if (!rc && r)
        rc = need_rows(g, op, "r", r, x->rows, W->rows);
    if (!rc)
        rc = need_rows(g, op, "y", y, x->rows, W->rows);
    if (rc)
        return rc;
    uint32_t T = x->rows;
    bool tiled = T > LOOM_MATMUL_SMALL_T;
    loom_pc_matmul pc = { W->rows, W->cols, T };
    op_call c = { .op = op, .variant = (uint8_t)((W->dtype == LOOM_F16) + 2 * tiled), .wt = block_of(W->dtype),
                  .wv = block_of(W->dtype), .push = &pc, .groups = matmul_groups(op, W->rows, T, tiled, (loom_dtype)W->dtype) };
    c.v[c.n++] = (op_view){ *W, false };
    if (U)
        c.v[c.n++] = (op_view){ *U, false };
    c.v[c.n++] = (op_view){ *x, false };
    if (r)
        c.v[c.n++] = (op_view){ *r, true };
    c.v[c.n++] = (op_view){ *y, false };
    return emit(g, &c, out_node);
}

loom_result loom_op_matmul(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor y, uint32_t *out_node)
{
    return matmul_common(g, LOOM_OP_MATMUL, &W, NULL, &x, NULL, &y, out_node);
}

loom_result loom_op_matmul_add(loom_graph *g, loom_tensor W, loom_tensor x, loom_tensor r, loom_tensor y,
                               uint32_t *out_node)
{
    return matmul_common(g, LOOM_OP_MATMUL_ADD, &W, NULL, &x, &r, &y, out_node);
}

loom_result loom_op_matmul_silu_mul(loom_graph *g, loom_tensor Wg, loom_tensor Wu, loom_tensor x, loom_tensor y,
                                    uint32_t *out_node)
{
    return matmul_common(g, LOOM_OP_MATMUL_SILU_MUL, &Wg, &Wu, &x, NULL, &y, out_node);
}
