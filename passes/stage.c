/* stage: a fused RMS norm (RMS_NORM_MATVEC and its forms) reads, in every
 * one of its invocations, a chunk of x and the same chunk of its gain g, to
 * sum x^2 and scale x; those two vector loads beside the weights are a
 * measurable part of the 1b decode step, where one uniform scalar load
 * costs nothing measurable (figures: docs/perf-log.md). The norm's input x was written
 * one level earlier by a MATVEC_ADD (the residual add of an attention or
 * FFN block), whose workgroup writing x[i] can do that work once: this pass
 * makes the producer a MATVEC_ADD_STAGE, which also writes t = x * g and
 * adds x^2 into an accumulator with float atomics, and binds the norm's
 * kernel form that reads t and the accumulator (the *_pre kernels,
 * MV_PRE) in place of x and g. One ZERO node, first in the graph, clears
 * the accumulators each step; reorder puts it in the first level. It stands
 * for no captured node (fused 0): it carries the first producer's capture
 * index for messages only, so a plan claims each captured node once and
 * reads back from JSON.
 *
 * A norm node N (RMS_NORM_MATVEC, RMS_NORM_MATVEC_SILU_MUL,
 * RMS_NORM_MATVEC_ARGMAX and its _LOG form, RMS_NORM_QKV_ROPE_KV as their
 * builders lay them out) is staged when the last node before it that writes
 * any byte of its x is a builder-made MATVEC_ADD whose y is exactly x, g has
 * as many f32 elements as y, and no node between the two writes g. A producer
 * stages one gain: a second norm of the same x with the same g binding shares
 * t and the accumulator (the row blocks of a split LM head), one with another
 * g keeps reading x and g. Runs after split (a row block of a producer writes
 * part of x only, so it is never the producer here) and before reorder;
 * clears any schedule. The kernels need float atomic adds: loom_rt_compile
 * sets LOOM_DISABLE_STAGE on devices without them.
 *
 * With LOOM_ENABLE_HALF_STAGE, a producer whose weights are f16, whose y
 * has an even number of rows and whose every staged norm has f16 weights
 * stores t as f16 (its MV_T16 form), and those norms read it so (their
 * MV_PRE MV_X16 forms, *_pre_x16_*). t keeps its f32 size. "f16" here and
 * below: weights read in chunks of 8, f16 or a block type (forms.def).
 *
 * A producer with block-typed weights (16 rows a workgroup) whose every
 * staged norm has block-typed weights stores t quantized, as the norms'
 * integer forms read x (its MV_TQ form, *_tq_*: per 16 rows, int8 codes
 * and a scale), and those norms read it so (MV_PRE MV_XQ, *_pre_xq_*):
 * no workgroup of theirs quantizes x itself (the 1b Q4_K_M decode step
 * 876.7 -> 679.0 us on an H200: docs/perf-log.md, "x quantized by its
 * producer"). Not with half stage, which is for f16 weights. t keeps its
 * f32 size (the quads take 1.5 bytes an element).
 *
 * With LOOM_ENABLE_HALF_ACT, last: a gated FFN (RMS_NORM_MATVEC_SILU_MUL,
 * any of its forms, f16 weights, not a row block) or an ATTENTION with the
 * wide kernel, whose output is a plan buffer of an even length that
 * exactly one other node touches — a MATVEC_ADD or MATVEC_ADD_STAGE form
 * with f16 weights, not a row block, reading it whole as x — writes it as
 * f16 pairs (*_y16_f16, MV_Y16; attention_wide_o16, ATT_O16) and that
 * reader reads it so (*_x16_f16, MV_X16). The buffer keeps its f32 size.
 *
 * With LOOM_ENABLE_LONG_ROWS, after that: a producer on the plain f16
 * kernel (form matvec_add_stage) whose rows are at least LONG_MIN_CHUNKS 16-byte
 * chunks (two per invocation) takes its two-chunks-a-trip form
 * (matvec_add_stage_long_f16, MV_LONG). */
#include <stdio.h>
#include <string.h>
#include "internal.h"
#include "loom_ops.h"

#define STAGE_SCAN_LIMIT 256u   /* nodes walked back from a norm to its producer */
#define SITE_BYTES (LOOM_STAGE_SUM_WORDS * 4u)   /* one accumulator, a multiple of LOOM_BIND_ALIGN */

static bool is_norm(uint32_t op)
{
    return op == LOOM_OP_RMS_NORM_MATVEC || op == LOOM_OP_RMS_NORM_MATVEC_SILU_MUL ||
           op == LOOM_OP_RMS_NORM_MATVEC_ARGMAX || op == LOOM_OP_RMS_NORM_QKV_ROPE_KV ||
           op == LOOM_OP_RMS_NORM_MATVEC_ARGMAX_LOG;
}

/* A staged producer: where it is, the gain it applies, its t and its
 * accumulator (SITE_BYTES of the graph's one accumulator buffer, site k at
 * k * SITE_BYTES). */
typedef struct staged {
    uint32_t prod;
    loom_binding gain;
    uint32_t t;
    uint32_t site;
    bool t16;          /* t stored as f16 */
    bool tq;           /* t stored quantized per 16 rows (MV_TQ) */
} staged;

typedef struct stage_state {
    loom_graph *g;
    const loom_allocator *a;
    uint32_t n;
    uint32_t *repl;    /* node -> the node that replaces it, or LOOM_NONE */
    uint32_t *prod;    /* norm node -> its staged producer's entry in st, or LOOM_NONE */
    staged *st;        /* at most one per node */
    uint32_t n_st;
    uint32_t acc;      /* the accumulator buffer */
} stage_state;

static loom_tensor vec_at(const loom_binding *b)
{
    return (loom_tensor){ b->buffer, LOOM_F32, b->offset, 1, (uint32_t)(b->size / 4) };
}

/* The producer of norm nd's x (at pos), if it may stage nd's gain; else
 * LOOM_NONE. */
static uint32_t producer_of(const stage_state *s, uint32_t pos, const loom_node *nd)
{
    const loom_graph *g = s->g;
    bool f16;
    const loom_binding *x = pass_named(g, nd, "x"), *gw = pass_named(g, nd, "g");
    if (!pass_builder_made(g, nd, &f16) || !x || !gw || gw->size != x->size)
        return LOOM_NONE;
    uint32_t stop = pos > STAGE_SCAN_LIMIT ? pos - STAGE_SCAN_LIMIT : 0;
    for (uint32_t i = pos; i-- > stop;) {
        const loom_node *p = loom_graph_node(g, i);
        if (p->type != LOOM_NODE_DISPATCH)
            return LOOM_NONE;   /* a sentinel: nothing crosses it */
        if (pass_writes(g, p, gw))
            return LOOM_NONE;
        if (!pass_writes(g, p, x))
            continue;
        const loom_binding *y = pass_named(g, p, "y");
        if (p->op != LOOM_OP_MATVEC_ADD || !pass_builder_made(g, p, &f16) || !y || !loom_binding_same(y, x) ||
            (p->flags & LOOM_NODE_SPLIT))
            return LOOM_NONE;
        return i;
    }
    return LOOM_NONE;
}

/* The entry of producer prod for gain gw: the one made before, or a new
 * one. LOOM_NONE when prod already stages another gain. */
static uint32_t entry_of(stage_state *s, uint32_t prod, const loom_binding *gw)
{
    for (uint32_t i = 0; i < s->n_st; i++)
        if (s->st[i].prod == prod)
            return loom_binding_same(&s->st[i].gain, gw) ? i : LOOM_NONE;
    s->st[s->n_st] = (staged){ .prod = prod, .gain = *gw, .t = LOOM_NONE, .site = s->n_st, .t16 = true,
                               .tq = true };
    return s->n_st++;
}

static loom_tensor acc_of(const stage_state *s, const staged *e)
{
    return (loom_tensor){ s->acc, LOOM_F32, (uint64_t)e->site * SITE_BYTES, 1, LOOM_STAGE_SUM_WORDS };
}

/* What half_act renames (forms.def): writers of a vector (a gated FFN's
 * forms gaining MV_Y16; the wide attention gaining ATT_O16, since gather,
 * after this pass, takes the narrow one) and readers of it as x (the
 * residual forms gaining MV_X16). The kernel's f16-output or f16-x form,
 * or NULL. */
static const char *act_half(const loom_graph *g, const loom_node *nd, bool writer, const char **slot)
{
    if (nd->type != LOOM_NODE_DISPATCH)
        return NULL;
    const char *k = loom_graph_kernel_name(g, nd->kernel);
    if (loom_form_has(k, "MV_Y16") || loom_form_has(k, "MV_X16") || loom_form_has(k, "ATT_O16"))
        return NULL;
    if (writer && nd->op == LOOM_OP_RMS_NORM_MATVEC_SILU_MUL && !loom_form_has(k, "MV_TAG")) {
        *slot = "y";
        return loom_form_variant(k, "MV_Y16", NULL);
    }
    if (writer && nd->op == LOOM_OP_ATTENTION && loom_form_has(k, "TPR=32u")) {
        *slot = "out";
        return loom_form_variant(k, "ATT_O16", NULL);
    }
    if (!writer && (nd->op == LOOM_OP_MATVEC_ADD || nd->op == LOOM_OP_MATVEC_ADD_STAGE) &&
        !loom_form_has(k, "MV_TAG") && !loom_form_has(k, "MV_LONG"))
        return loom_form_variant(k, "MV_X16", NULL);
    return NULL;
}

/* The one reader of node f's output y that may read it as f16, or
 * LOOM_NONE. */
static uint32_t act_reader(const loom_graph *g, uint32_t f, const loom_binding *y)
{
    uint32_t found = LOOM_NONE, n = loom_graph_node_count(g);
    for (uint32_t i = 0; i < n; i++) {
        const loom_node *nd = loom_graph_node(g, i);
        if (i == f || nd->type != LOOM_NODE_DISPATCH || !(pass_reads(g, nd, y) || pass_writes(g, nd, y)))
            continue;
        const loom_binding *x = pass_named(g, nd, "x");
        if (found != LOOM_NONE || pass_writes(g, nd, y) || (nd->flags & LOOM_NODE_SPLIT) ||
            !act_half(g, nd, false, NULL) || !x || !loom_binding_same(x, y))
            return LOOM_NONE;
        const loom_range *r = loom_node_reads(g, nd);
        for (uint32_t k = 0; k < nd->n_reads; k++)
            if (loom_range_meets(&r[k], y) && !pass_same_range(&r[k], y))
                return LOOM_NONE;
        found = i;
    }
    return found;
}

/* The two-chunks-a-trip producers (LOOM_ENABLE_LONG_ROWS; see the top).
 * Rows whose length is not a multiple of the vector width run the scalar
 * path, which MV_LONG leaves as it is: those keep the plain form. */
#define LONG_MIN_CHUNKS 512u   /* 2 x matvec.glsl's WG: a second chunk for every invocation */
static loom_result long_row(loom_graph *g, uint32_t i, uint32_t *repl, uint32_t *count, const void *arg)
{
    (void)arg;
    const loom_node *nd = loom_graph_node(g, i);
    loom_op_args pc;
    const char *k = nd->type == LOOM_NODE_DISPATCH ? loom_graph_kernel_name(g, nd->kernel) : NULL;
    const char *row = loom_form_row(k), *to = loom_form_variant(k, "MV_LONG", NULL);
    if (!k || nd->op != LOOM_OP_MATVEC_ADD_STAGE || loom_op_args_of(g, i, &pc) || !row ||
        strcmp(row, "matvec_add_stage") || !to)
        return LOOM_OK;
    if (pc.cols % 8 || pc.cols / 8 < LONG_MIN_CHUNKS)
        return LOOM_OK;
    loom_result rc = pass_retarget(g, i, to, &repl[i]);
    *count += !rc;
    return rc;
}

/* The f16 activations (LOOM_ENABLE_HALF_ACT; see the top): writer i and
 * its one reader. */
static loom_result half_act(loom_graph *g, uint32_t i, uint32_t *repl, uint32_t *count, const void *arg)
{
    (void)arg;
    const loom_node *f = loom_graph_node(g, i);
    const char *slot = NULL, *fk = act_half(g, f, true, &slot);
    if (!fk || (f->flags & LOOM_NODE_SPLIT))
        return LOOM_OK;
    const loom_binding *yb = pass_named(g, f, slot);
    if (!yb || !pass_plan_buffer(g, yb->buffer) || (yb->size / 4) % 2 || yb->size % 4)
        return LOOM_OK;
    const loom_binding y = *yb;
    const loom_range *w = loom_node_writes(g, f);
    bool whole = true;
    for (uint32_t k = 0; k < f->n_writes; k++)
        whole &= !loom_range_meets(&w[k], &y) || pass_same_range(&w[k], &y);
    uint32_t d = whole ? act_reader(g, i, &y) : LOOM_NONE;
    if (d == LOOM_NONE || repl[d] != d)
        return LOOM_OK;
    const char *dk = act_half(g, loom_graph_node(g, d), false, NULL);
    loom_result rc = pass_retarget(g, i, fk, &repl[i]);
    if (!rc)
        rc = pass_retarget(g, d, dk, &repl[d]);
    *count += !rc;
    return rc;
}

/* Appends e's MATVEC_ADD_STAGE (and its t) in place of its producer. */
static loom_result build_producer(stage_state *s, staged *e)
{
    loom_graph *g = s->g;
    const loom_node *p = loom_graph_node(g, e->prod);
    loom_binding W = *pass_named(g, p, "W"), x = *pass_named(g, p, "x"), r = *pass_named(g, p, "r"), y = *pass_named(g, p, "y");
    loom_op_args pc;
    if (loom_op_args_of(g, e->prod, &pc))
        return loom_fail(LOOM_UNSUPPORTED, "stage: node %u: push constants not as its builder lays them out", e->prod);
    char name[64];
    snprintf(name, sizeof name, "n%u.stage.%s", e->prod, loom_graph_buffer_name(g, e->gain.buffer));
    loom_result rc = loom_graph_add_buffer(
        g, &(loom_buffer_desc){ .name = name, .size = e->gain.size, .usage = LOOM_USAGE_SCRATCH }, &e->t);
    if (rc)
        return rc;
    loom_tensor Wt = { W.buffer, pass_weight_dtype(g, p), W.offset, pc.rows, pc.cols };
    loom_binding tb = { .buffer = e->t, .offset = 0, .size = e->gain.size };
    uint32_t id, before = loom_graph_node_count(g);
    rc = loom_op_matvec_add_stage(g, Wt, vec_at(&x), vec_at(&r), vec_at(&e->gain), vec_at(&y), vec_at(&tb),
                                  acc_of(s, e), &id);
    if (rc) {
        if (loom_graph_node_count(g) != before)
            return loom_fail(rc, "stage: the builder failed after appending a node");
        return loom_fail_wrap(rc, "stage: node %u (MATVEC_ADD)", e->prod);
    }
    /* the append may have moved the nodes: look prod up again */
    if ((rc = pass_same_members(g, loom_graph_node(g, e->prod), id)))
        return rc;
    /* The builder's node (its kernel writes t as f32) is left out of the
     * plan by the permutation: only its copy is listed. */
    const char *add = e->t16 ? "MV_T16" : e->tq ? "MV_TQ" : NULL;
    const char *to = add ? loom_form_variant(loom_graph_kernel_name(g, loom_graph_node(g, id)->kernel), add, NULL)
                         : NULL;
    if (add && (rc = to ? pass_retarget(g, id, to, &id)
                        : loom_fail(LOOM_UNSUPPORTED, "stage: no %s form", e->t16 ? "t16" : "tq")))
        return loom_fail_wrap(rc, "stage: node %u (MATVEC_ADD)", e->prod);
    s->repl[e->prod] = id;
    return LOOM_OK;
}

/* Appends norm node pos again as its *_pre kernel form: slot x bound to
 * e's t, slot g to e's accumulator. */
static loom_result rebind(stage_state *s, uint32_t pos, const staged *e)
{
    loom_graph *g = s->g;
    const loom_node *nd = loom_graph_node(g, pos);
    loom_binding b[LOOM_MAX_BINDINGS];
    loom_range r[2 * LOOM_MAX_BINDINGS];
    uint8_t push[LOOM_MAX_PUSH];
    const loom_binding ox = *pass_named(g, nd, "x"), og = *pass_named(g, nd, "g");
    const loom_binding nx = { .buffer = e->t, .offset = 0, .size = ox.size };
    const loom_tensor at = acc_of(s, e);
    const loom_binding ng = { .buffer = s->acc, .offset = at.offset, .size = SITE_BYTES };
    uint32_t nb = nd->n_bindings, nr = nd->n_reads, nw = nd->n_writes;
    memcpy(b, loom_node_bindings(g, nd), nb * sizeof *b);
    memcpy(r, loom_node_reads(g, nd), (nr + nw) * sizeof *r);
    memcpy(push, loom_node_push(g, nd), nd->push_size);
    for (uint32_t i = 0; i < nb; i++) {
        const loom_binding *to = loom_binding_same(&b[i], &ox) ? &nx : loom_binding_same(&b[i], &og) ? &ng : NULL;
        if (to) {
            b[i].buffer = to->buffer;
            b[i].offset = to->offset;
            b[i].size = to->size;
        }
    }
    for (uint32_t i = 0; i < nr; i++) {
        const loom_binding *to = pass_same_range(&r[i], &ox) ? &nx : pass_same_range(&r[i], &og) ? &ng : NULL;
        if (to) {
            r[i].buffer = to->buffer;
            r[i].offset = to->offset;
            r[i].size = to->size;
        }
    }
    /* "rms_norm_matvec_f16" -> "rms_norm_matvec_pre_f16" (t16: "..._pre_x16_f16";
     * tq: "rms_norm_matvec_pre_xq_q4_k") */
    const char *k = loom_graph_kernel_name(g, nd->kernel);
    const char *kernel = loom_form_variant(k, e->t16 ? "MV_PRE MV_X16" : e->tq ? "MV_PRE MV_XQ" : "MV_PRE", NULL);
    if (!kernel)
        return loom_fail(LOOM_UNSUPPORTED, "stage: node %u: kernel %s has no staged form", pos, k);
    uint32_t id;
    loom_result rc = pass_add_like(g, pos, kernel, b, nb, r, nr, nw, push, nd->push_size, &id);
    if (rc)
        return rc;
    s->repl[pos] = id;
    return LOOM_OK;
}

loom_result loom_pass_stage(loom_graph *g, loom_pass_ctx *ctx)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_pass_stage: graph is NULL");
    stage_state s = { .g = g, .a = loom_graph_allocator(g), .n = loom_graph_node_count(g), .acc = LOOM_NONE };
    s.repl = pass_alloc(s.a, (size_t)s.n * sizeof(uint32_t));
    s.prod = pass_alloc(s.a, (size_t)s.n * sizeof(uint32_t));
    s.st = pass_alloc(s.a, (size_t)s.n * sizeof(staged));
    loom_result rc = LOOM_OK;
    if (!s.repl || !s.prod || !s.st)
        rc = loom_fail(LOOM_OUT_OF_MEMORY, "stage: out of memory");
    uint32_t norms = 0, first = LOOM_NONE;
    for (uint32_t i = 0; !rc && i < s.n; i++) {
        const loom_node *nd = loom_graph_node(g, i);
        s.repl[i] = s.prod[i] = LOOM_NONE;
        if (nd->type != LOOM_NODE_DISPATCH || !is_norm(nd->op))
            continue;
        uint32_t prod = producer_of(&s, i, nd);
        if (prod != LOOM_NONE)
            s.prod[i] = entry_of(&s, prod, pass_named(g, nd, "g"));
        if (s.prod[i] != LOOM_NONE) {
            norms++;
            first = first == LOOM_NONE ? prod : first;
            /* every norm of t must read it as f16, or quantized */
            const char *k = loom_graph_kernel_name(g, nd->kernel);
            s.st[s.prod[i]].t16 &= pass_weight_dtype(g, nd) != LOOM_F32;
            s.st[s.prod[i]].tq &= loom_dtype_is_block(pass_weight_dtype(g, nd)) &&
                                  loom_form_variant(k, "MV_PRE MV_XQ", NULL) != NULL;
        }
    }
    /* t as f16 only where asked, from an f16 producer of an even row count
     * (it writes rows in pairs). */
    bool half = ctx && (ctx->enable & LOOM_ENABLE_HALF_STAGE);
    for (uint32_t k = 0; k < s.n_st; k++) {
        const loom_node *p = loom_graph_node(g, s.st[k].prod);
        const loom_binding *y = pass_named(g, p, "y");
        bool f16 = pass_weight_dtype(g, p) != LOOM_F32;
        s.st[k].t16 &= half && f16 && y && (y->size / 4) % 2 == 0;
        /* quantized where half stage is not taken, from a producer of
         * whole quads (its rows: its norms' columns, whole blocks) */
        s.st[k].tq &= !s.st[k].t16 && loom_dtype_is_block(pass_weight_dtype(g, p)) && y && (y->size / 4) % 32 == 0;
    }
    uint32_t zero = LOOM_NONE;
    if (!rc && norms) {
        uint64_t bytes = (uint64_t)s.n_st * SITE_BYTES;
        rc = loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = "stage.sum_sq", .size = bytes,
                                                           .usage = LOOM_USAGE_SCRATCH }, &s.acc);
        if (!rc)
            rc = loom_op_zero(g, (loom_tensor){ s.acc, LOOM_F32, 0, 1, (uint32_t)(bytes / 4) }, &zero);
        if (!rc)
            pass_made_node(g, zero, loom_graph_node(g, first)->capture_index);
    }
    for (uint32_t i = 0; !rc && norms && i < s.n_st; i++)
        rc = build_producer(&s, &s.st[i]);
    for (uint32_t i = 0; !rc && norms && i < s.n; i++)
        if (s.prod[i] != LOOM_NONE)
            rc = rebind(&s, i, &s.st[s.prod[i]]);
    if (!rc && norms) {
        uint32_t *order = pass_alloc(s.a, ((size_t)s.n + 1) * sizeof(uint32_t));
        if (!order) {
            rc = loom_fail(LOOM_OUT_OF_MEMORY, "stage: out of memory");
        } else {
            order[0] = zero;
            for (uint32_t i = 0; i < s.n; i++)
                order[i + 1] = s.repl[i] != LOOM_NONE ? s.repl[i] : i;
            loom_graph_clear_schedule(g);
            rc = loom_graph_permute(g, order, s.n + 1);
            pass_free(s.a, order, ((size_t)s.n + 1) * sizeof(uint32_t));
        }
    }
    if (!rc && ctx)
        ctx->staged_gains += norms;
    /* The last steps rename kernels in place (pass_rename_nodes). */
    uint32_t renamed;
    if (!rc && ctx && (ctx->enable & LOOM_ENABLE_HALF_ACT))
        rc = pass_rename_nodes(g, "stage", half_act, NULL, &renamed);
    if (!rc && ctx && (ctx->enable & LOOM_ENABLE_LONG_ROWS))
        rc = pass_rename_nodes(g, "stage", long_row, NULL, &renamed);
    pass_free(s.a, s.repl, (size_t)s.n * sizeof(uint32_t));
    pass_free(s.a, s.prod, (size_t)s.n * sizeof(uint32_t));
    pass_free(s.a, s.st, (size_t)s.n * sizeof(staged));
    return rc;
}
