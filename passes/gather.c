/* gather: an ATTENTION split over the cache ends with a serial tail — a
 * fence, an atomic count per head, and the last workgroup of each head
 * loading every share to combine them — a measurable part of the 1b decode
 * step (docs/perf-log.md). Its output is read by one matvec (the
 * attention's output projection), whose every workgroup loads the whole
 * vector anyway: this pass makes the ATTENTION store its shares only
 * (kernel attention_part, no output, no counter) and
 * binds the consumer's form that combines a chunk's shares as it loads x
 * (kernel *_comb_*, MV_COMB in matvec.glsl, whose push constants add
 * head_dim and the share count).
 *
 * A builder-made ATTENTION A is gathered when it runs the narrow kernel
 * (head_dim <= 64; the wide one splits a 512-row cache into 16 shares, too
 * many to load beside each chunk), has 2 to GATHER_MAX_SHARES shares, and
 * head_dim is a multiple of 8 (a 16-byte chunk of f16 weights covers 8
 * columns and must lie in one head); its output buffer is a plan
 * buffer (no external memory, not kept, usage none or scratch); and the
 * first node after A that reads the output is a builder-made MATVEC_ADD
 * or MATVEC_ADD_STAGE, not a row block of a split, reading it whole as x,
 * with no sentinel between, and no other node of the graph reads or
 * writes the output (A will no longer write it). Runs after stage
 * (the consumer is then MATVEC_ADD_STAGE) and before reorder; clears any
 * schedule.
 *
 * With LOOM_ENABLE_HALF_SHARES and an f16 consumer the shares are stored
 * as f16, each divided by its own sum (attention_part_h, *_comb_h_f16):
 * a chunk of a share is one 16-byte load in the consumer instead of two.
 * The shares' buffer keeps the size the builder gave it (it needs less). */
#include <stdio.h>
#include <string.h>
#include "internal.h"
#include "loom_ops.h"

#define GATHER_MAX_SHARES 4u   /* matvec.glsl: COMB_SHARES */
#define GATHER_CHUNK 8u        /* columns of a 16-byte f16 chunk */

typedef struct gather_pc { uint32_t rows, cols, head_dim, splits; } gather_pc;   /* MV_COMB */

/* A builder-made consumer, or the stage pass's f16-t form of one; *f16:
 * its weights are read in chunks of 8 (f16 or a block type), which the
 * f16 shares need. */
static bool consumer_made(const loom_graph *g, const loom_node *c, bool *f16)
{
    const loom_op_info *in = loom_op_info_get((loom_op)c->op);
    const char *row = loom_form_row(loom_graph_kernel_name(g, c->kernel));
    bool t16 = c->op == LOOM_OP_MATVEC_ADD_STAGE && in && c->n_bindings == in->n_slots &&
               c->push_size == in->push_size && row &&
               (!strcmp(row, "matvec_add_stage_t16") || !strcmp(row, "matvec_add_stage_tq"));
    *f16 = pass_weight_dtype(g, c) != LOOM_F32;
    return t16 || pass_builder_made(g, c, &(bool){ false });
}

/* The node that may combine A's shares (A at pos), or LOOM_NONE: the first
 * reader of out after A, with no sentinel between; no other node anywhere
 * in the graph may read or write out, since A will no longer write it. */
static uint32_t consumer_of(const loom_graph *g, uint32_t pos, const loom_binding *out)
{
    uint32_t n = loom_graph_node_count(g), found = LOOM_NONE;
    for (uint32_t i = pos + 1; i < n && found == LOOM_NONE; i++) {
        const loom_node *c = loom_graph_node(g, i);
        if (c->type != LOOM_NODE_DISPATCH)
            return LOOM_NONE;   /* a sentinel: nothing crosses it */
        if (!pass_reads(g, c, out))
            continue;
        bool f16;
        const loom_binding *x = pass_named(g, c, "x");
        const loom_range *r = loom_node_reads(g, c);
        if ((c->op != LOOM_OP_MATVEC_ADD && c->op != LOOM_OP_MATVEC_ADD_STAGE) || !consumer_made(g, c, &f16) ||
            (c->flags & LOOM_NODE_SPLIT) || !x || !loom_binding_same(x, out) || pass_writes(g, c, out))
            return LOOM_NONE;
        for (uint32_t k = 0; k < c->n_reads; k++)
            if (loom_range_meets(&r[k], out) && !pass_same_range(&r[k], out))
                return LOOM_NONE;
        found = i;
    }
    for (uint32_t i = 0; found != LOOM_NONE && i < n; i++) {
        const loom_node *o = loom_graph_node(g, i);
        if (i != pos && i != found && o->type == LOOM_NODE_DISPATCH && (pass_reads(g, o, out) ||
            pass_writes(g, o, out)))
            return LOOM_NONE;   /* a second reader, or another writer */
    }
    return found;
}

/* A bound and ranged without slots `drop` (a mask of slot numbers). */
typedef struct node_copy {
    loom_binding b[LOOM_MAX_BINDINGS];
    loom_range r[2 * LOOM_MAX_RANGES];
    uint32_t nb, nr, nw;
} node_copy;

static void copy_without(const loom_graph *g, const loom_node *nd, uint32_t drop, node_copy *c)
{
    const loom_binding *b = loom_node_bindings(g, nd);
    const loom_range *r = loom_node_reads(g, nd), *w = loom_node_writes(g, nd);
    c->nb = c->nr = c->nw = 0;
    for (uint32_t i = 0; i < nd->n_bindings; i++)
        if (!(drop >> b[i].slot & 1u))
            c->b[c->nb++] = b[i];
    /* a range goes with the binding it lies in */
    for (uint32_t pass = 0; pass < 2; pass++) {
        const loom_range *v = pass ? w : r;
        uint32_t n = pass ? nd->n_writes : nd->n_reads;
        for (uint32_t k = 0; k < n; k++) {
            bool dropped = false;
            for (uint32_t i = 0; i < nd->n_bindings; i++)
                if ((drop >> b[i].slot & 1u) && loom_range_meets(&v[k], &b[i]))
                    dropped = true;
            if (dropped)
                continue;
            c->r[c->nr + c->nw] = v[k];
            if (pass)
                c->nw++;
            else
                c->nr++;
        }
    }
}

static uint32_t slot_of(const loom_graph *g, const loom_node *nd, const char *name)
{
    const loom_binding *b = pass_named(g, nd, name);
    return b ? b->slot : 31u;
}

static loom_result add_node(loom_graph *g, uint32_t pos, const char *kernel, node_copy *c, const void *push,
                            uint32_t push_size, uint32_t *id)
{
    loom_result rc = pass_add_like(g, pos, kernel, c->b, c->nb, c->r, c->nr, c->nw, push, push_size, id);
    return rc ? loom_fail_wrap(rc, "gather: node %u (%s)", pos, loom_op_name((loom_op)loom_graph_node(g, pos)->op))
              : LOOM_OK;
}

/* Appends A (at a) storing its shares only, and consumer c combining them
 * (half: as f16, where the consumer's weights are f16); repl[] says which
 * node replaces which. */
static loom_result gather_one(loom_graph *g, uint32_t a, uint32_t c, bool half, uint32_t *repl)
{
    const loom_node *an = loom_graph_node(g, a);
    const loom_node *cn = loom_graph_node(g, c);
    bool f16 = false;
    consumer_made(g, cn, &f16);
    half &= f16;
    /* The shares' node takes A's push constants as they are. */
    uint8_t apush[LOOM_MAX_PUSH];
    uint32_t apush_size = an->push_size;
    memcpy(apush, loom_node_push(g, an), apush_size);
    loom_op_args aa, ca;
    if (loom_op_args_read(LOOM_OP_ATTENTION, apush, apush_size, &aa) || loom_op_args_of(g, c, &ca))
        return loom_fail(LOOM_UNSUPPORTED, "gather: node %u or %u: push constants not as their builders lay them out",
                         a, c);
    const loom_binding part = *pass_named(g, an, "part"), out = *pass_named(g, an, "out");
    node_copy ac;
    copy_without(g, an, 1u << slot_of(g, an, "out") | 1u << slot_of(g, an, "count"), &ac);
    uint32_t id;
    /* The shares are f32 (or f16 with half) whatever the caches hold: only
     * the attention's own kernel has a form for f16 caches. */
    const char *part_kernel = loom_form_variant(loom_graph_kernel_name(g, an->kernel),
                                                half ? "ATT_PART ATT_PART_H" : "ATT_PART", NULL);
    if (!part_kernel)
        return loom_fail(LOOM_UNSUPPORTED, "gather: node %u: no share form of kernel %s", a,
                         loom_graph_kernel_name(g, an->kernel));
    loom_result rc = add_node(g, a, part_kernel, &ac, apush, apush_size, &id);
    if (rc)
        return rc;
    repl[a] = id;

    cn = loom_graph_node(g, c);   /* adding a node may have moved the node array */
    gather_pc pc = { ca.rows, ca.cols, aa.head_dim, aa.splits };
    node_copy cc;
    copy_without(g, cn, 0, &cc);
    for (uint32_t i = 0; i < cc.nb; i++)
        if (loom_binding_same(&cc.b[i], &out)) {
            cc.b[i].buffer = part.buffer;
            cc.b[i].offset = part.offset;
            cc.b[i].size = part.size;
            cc.b[i].access = LOOM_ACCESS_READ;
        }
    for (uint32_t k = 0; k < cc.nr; k++)
        if (pass_same_range(&cc.r[k], &out)) {
            cc.r[k].buffer = part.buffer;
            cc.r[k].offset = part.offset;
            cc.r[k].size = part.size;
        }
    const char *kernel = loom_form_variant(loom_graph_kernel_name(g, cn->kernel),
                                           half ? "MV_COMB MV_COMB_H" : "MV_COMB", NULL);
    if (!kernel)
        return loom_fail(LOOM_UNSUPPORTED, "gather: node %u: no combining form of kernel %s", c,
                         loom_graph_kernel_name(g, cn->kernel));
    if ((rc = add_node(g, c, kernel, &cc, &pc, sizeof pc, &id)))
        return rc;
    repl[c] = id;
    return LOOM_OK;
}

/* Node i, if it is an ATTENTION to gather and its consumer is not renamed
 * yet: both replaced (*half: the shares as f16). */
static loom_result gather_at(loom_graph *g, uint32_t i, uint32_t *repl, uint32_t *count, const void *half)
{
    const loom_node *a = loom_graph_node(g, i);
    bool wide;
    if (a->type != LOOM_NODE_DISPATCH || a->op != LOOM_OP_ATTENTION || !pass_builder_made(g, a, &wide))
        return LOOM_OK;
    loom_op_args pc;
    const loom_binding *out = pass_named(g, a, "out");
    if (loom_op_args_of(g, i, &pc) || wide || pc.splits < 2 || pc.splits > GATHER_MAX_SHARES ||
        pc.head_dim % GATHER_CHUNK || !out ||
        !pass_plan_buffer(g, out->buffer))
        return LOOM_OK;
    uint32_t c = consumer_of(g, i, out);
    if (c == LOOM_NONE || repl[c] != c)
        return LOOM_OK;
    loom_result rc = gather_one(g, i, c, *(const bool *)half, repl);
    *count += !rc;
    return rc;
}

loom_result loom_pass_gather(loom_graph *g, loom_pass_ctx *ctx)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_pass_gather: graph is NULL");
    bool half = ctx && (ctx->enable & LOOM_ENABLE_HALF_SHARES);
    uint32_t count;
    loom_result rc = pass_rename_nodes(g, "gather", gather_at, &half, &count);
    if (!rc && ctx)
        ctx->gathered += count;
    return rc;
}
