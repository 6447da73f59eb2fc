/* The verifier: every id exists, every binding and range lies inside its
 * buffer, counts and limits hold, bindings match their kernel's layout,
 * explicit ranges match the bindings, and a built-in kernel's written
 * slots overlap nothing the builders would refuse. The first violation is reported with
 * the node index, op, field and value. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "loom_ops.h"
#include "internal.h"

static loom_result check_extent(const loom_graph *g, uint32_t node, const loom_node *n, const char *field,
                                uint32_t index, uint32_t buffer, uint64_t offset, uint64_t size)
{
    const char *op = loom_op_name((loom_op)n->op);
    if (buffer >= g->buffers.n)
        return loom_fail(LOOM_VERIFY, "node %u (%s): %s %u names buffer %u, but the graph has %u buffers", node, op,
                         field, index, buffer, g->buffers.n);
    const loom_buffer *b = &g->buffers.v[buffer];
    const char *bname = g->strings.v + b->name;
    if (size == 0)
        return loom_fail(LOOM_VERIFY, "node %u (%s): %s %u on buffer %u '%s' has size 0", node, op, field, index,
                         buffer, bname);
    if (offset > b->size || size > b->size - offset)
        return loom_fail(LOOM_VERIFY,
                         "node %u (%s): %s %u [%" PRIu64 ", %" PRIu64 ") exceeds buffer %u '%s' of %" PRIu64
                         " bytes",
                         node, op, field, index, offset, offset + size, buffer, bname, b->size);
    return LOOM_OK;
}

/* Bindings against the kernel's layout: a slot left unbound makes the
 * kernel read a descriptor that does not exist, an extra one names memory
 * the kernel never sees, and a writable slot bound read-only hides a write
 * from the hazard analysis. */
static loom_result check_layout(const loom_graph *g, uint32_t i, const loom_node *n, const loom_kernel_layout *l)
{
    const char *op = loom_op_name((loom_op)n->op);
    const char *kname = g->strings.v + g->kernels.v[n->kernel];
    const loom_binding *b = loom_node_bindings(g, n);
    uint32_t bound = 0;
    for (uint32_t k = 0; k < n->n_bindings; k++) {
        uint32_t s = b[k].slot;
        uint32_t bit = s < LOOM_MAX_SLOTS ? 1u << s : 0;
        if (!(l->slots & bit))
            return loom_fail(LOOM_VERIFY, "node %u (%s): binding %u slot %u: kernel '%s' has no binding %u", i, op,
                             k, s, kname, s);
        bound |= bit;
        bool writes = b[k].access & LOOM_ACCESS_WRITE;
        if ((l->writable & bit) && !writes)
            return loom_fail(LOOM_VERIFY, "node %u (%s): binding %u slot %u: kernel '%s' may write slot %u, but it "
                             "is bound read-only", i, op, k, s, kname, s);
        if (!(l->writable & bit) && writes)
            return loom_fail(LOOM_VERIFY, "node %u (%s): binding %u slot %u: kernel '%s' declares slot %u readonly, "
                             "but it is bound writable", i, op, k, s, kname, s);
    }
    /* The step word of an awaited edge is the runtime's binding, never the
     * graph's; a kernel that has one polls or tags, so its node must say
     * which vector (and a node that tags needs a kernel that can). */
    const uint32_t step_bit = 1u << LOOM_AWAIT_BINDING, count_bit = 1u << LOOM_COUNT_BINDING_SLOT;
    bool tags = loom_node_on_edge(n);
    if ((n->count_in || n->count_out) && !(l->slots & count_bit))
        return loom_fail(LOOM_VERIFY, "node %u (%s): count_in %u / count_out %u, but kernel '%s' has no counters "
                         "(binding %u)", i, op, n->count_in, n->count_out, kname, LOOM_COUNT_BINDING_SLOT);
    if ((l->slots & step_bit) && !tags)
        return loom_fail(LOOM_VERIFY, "node %u (%s): kernel '%s' is a tagged form (binding %u) but the node has no "
                         "tag_in or tag_out", i, op, kname, LOOM_AWAIT_BINDING);
    if (!(l->slots & step_bit) && tags)
        return loom_fail(LOOM_VERIFY, "node %u (%s): tag_in %u / tag_out %u, but kernel '%s' is not a tagged form "
                         "(no binding %u)", i, op, n->tag_in, n->tag_out, kname, LOOM_AWAIT_BINDING);
    uint32_t missing = l->slots & ~bound & ~step_bit & ~(tags ? count_bit : 0);
    if (missing) {
        uint32_t s = (uint32_t)__builtin_ctz(missing);
        return loom_fail(LOOM_VERIFY, "node %u (%s): slot %u of kernel '%s' is not bound", i, op, s, kname);
    }
    return LOOM_OK;
}

static bool inside(const loom_range *r, const loom_binding *b)
{
    return r->buffer == b->buffer && r->offset >= b->offset && r->size <= b->size &&
           r->offset - b->offset <= b->size - r->size;
}

static bool touches(const loom_range *r, const loom_binding *b)
{
    return r->buffer == b->buffer && r->offset < b->offset + b->size && b->offset < r->offset + r->size;
}

/* Explicit ranges against the bindings they must describe: the hazard
 * analysis trusts ranges alone, so one on the wrong buffer or direction
 * silently removes a barrier. A kernel reaches memory only through its
 * bindings, so every range lies inside one of the right direction, and
 * every binding is touched by a range of each direction it has. */
static loom_result check_ranges(const loom_graph *g, uint32_t i, const loom_node *n)
{
    const char *op = loom_op_name((loom_op)n->op);
    const loom_binding *b = loom_node_bindings(g, n);
    const loom_range *r = loom_node_reads(g, n), *w = loom_node_writes(g, n);
    for (uint32_t d = 0; d < 2; d++) {
        const loom_range *rs = d ? w : r;
        uint32_t nr = d ? n->n_writes : n->n_reads, need = d ? LOOM_ACCESS_WRITE : LOOM_ACCESS_READ;
        const char *dir = d ? "write" : "read";
        for (uint32_t k = 0; k < nr; k++) {
            bool ok = false;
            for (uint32_t j = 0; j < n->n_bindings && !ok; j++)
                ok = (b[j].access & need) && inside(&rs[k], &b[j]);
            if (!ok)
                return loom_fail(LOOM_VERIFY, "node %u (%s): %s range %u [%" PRIu64 ", %" PRIu64 ") on buffer %u "
                                 "'%s' lies inside no %s binding", i, op, dir, k, rs[k].offset,
                                 rs[k].offset + rs[k].size, rs[k].buffer, loom_graph_buffer_name(g, rs[k].buffer),
                                 d ? "writable" : "readable");
        }
        for (uint32_t j = 0; j < n->n_bindings; j++) {
            if (!(b[j].access & need))
                continue;
            bool ok = false;
            for (uint32_t k = 0; k < nr && !ok; k++)
                ok = touches(&rs[k], &b[j]);
            if (!ok)
                return loom_fail(LOOM_VERIFY, "node %u (%s): binding %u slot %u on buffer %u '%s' is %s, but no %s "
                                 "range covers it", i, op, j, b[j].slot, b[j].buffer,
                                 loom_graph_buffer_name(g, b[j].buffer), d ? "writable" : "readable", dir);
        }
    }
    return LOOM_OK;
}

/* A kernel form over block-typed weights (forms.def) reads rows of whole
 * blocks: its push constants' shape must be whole blocks a row, and each
 * weight slot must bind exactly the rows it names (its last word whole,
 * ops.c's rule). The builders keep to this; a captured or parsed node may
 * not. The shapes come from the push constants as loom_op_args_read
 * decodes them: a matvec form's W (Wg, Wu) is rows x cols; the q/k/v
 * forms' Wq is q_rows x cols, Wk and Wv kv_rows x cols (Wv of its own
 * type), the EMBED-fed form's table vocab x cols; EMBED's table is vocab x
 * cols; EMBED_ROWS's is whole rows of cols, as many as its binding holds.
 * EMBED_BLOCKS splits its table: skipped. Push constants that are not the
 * op's layout are left to the layout checks. */
static loom_result check_blocks(const loom_graph *g, uint32_t i, const loom_node *n)
{
    const char *kname = g->strings.v + g->kernels.v[n->kernel];
    loom_dtype wt, wv;
    loom_op_args a;
    if (!loom_form_weights(kname, &wt, &wv) || !loom_dtype_is_block(wt) || n->op == LOOM_OP_EMBED_BLOCKS ||
        loom_op_args_read((loom_op)n->op, g->push.v + n->push_offset, n->push_size, &a))
        return LOOM_OK;
    const loom_op_info *in = loom_op_info_get((loom_op)n->op);
    const loom_binding *b = loom_node_bindings(g, n);
    bool rows_op = n->op == LOOM_OP_EMBED_ROWS;   /* its table's rows are its binding's */
    uint32_t cols = a.cols;
    const char *op = loom_op_name((loom_op)n->op);
    for (uint32_t k = 0; k < n->n_bindings; k++) {
        const char *slot = b[k].slot < in->n_slots ? in->slot[b[k].slot].name : "";
        uint32_t rows;
        loom_dtype t = wt;
        if (!strcmp(slot, "W") || !strcmp(slot, "Wg") || !strcmp(slot, "Wu"))
            rows = a.rows;
        else if (!strcmp(slot, "Wq"))
            rows = a.q_rows;
        else if (!strcmp(slot, "Wk") || !strcmp(slot, "Wv")) {
            rows = a.kv_rows;
            t = slot[1] == 'v' ? wv : wt;
        } else if (!strcmp(slot, "table") && rows_op) {
            uint64_t rb = loom_dtype_row_bytes(t, cols);
            rows = rb ? (uint32_t)(b[k].size / rb) : 0;
        } else if (!strcmp(slot, "table"))
            rows = a.vocab;
        else
            continue;
        if (cols == 0 || cols % loom_dtype_block(t))
            return loom_fail(LOOM_VERIFY, "node %u (%s): kernel '%s': %s has %u columns, not a whole number of %s "
                             "blocks of %u", i, op, kname, slot, cols, loom_dtype_name(t), loom_dtype_block(t));
        uint64_t want = loom_view_bytes(t, rows, cols);
        if (b[k].size != want)
            return loom_fail(LOOM_VERIFY, "node %u (%s): kernel '%s': %s binds %" PRIu64 " bytes, but %u rows of %u "
                             "%s weights are %" PRIu64, i, op, kname, slot, b[k].size, rows, cols,
                             loom_dtype_name(t), want);
    }
    return LOOM_OK;
}

/* A built-in kernel bound slot by slot as its op kind's row lays it out:
 * the row's kernels, or any form of forms.def. */
static bool row_layout(const loom_graph *g, const loom_node *n, const loom_op_info *in)
{
    const char *kname = g->strings.v + g->kernels.v[n->kernel];
    bool own = loom_form_row(kname) != NULL;
    for (int v = 0; v < 4 && !own; v++)
        own = in->kernel[v] && !strcmp(kname, in->kernel[v]);
    const loom_binding *b = loom_node_bindings(g, n);
    for (uint32_t k = 0; own && k < n->n_bindings; k++)
        own = b[k].slot == k;
    return own && n->n_bindings == in->n_slots;
}

/* What the builders refuse (ops.c, check_aliasing): a written slot meeting
 * another slot, unless that one is a read slot ops.def marks in place "(i)"
 * bound to exactly the same bytes. A kernel reading x whole while other
 * workgroups write y over it (a MATVEC_ADD with y = x) races; checked here
 * so that no pipeline, and no device, decides the verdict. */
static loom_result check_aliasing(const loom_graph *g, uint32_t i, const loom_node *n)
{
    const loom_op_info *in = loom_op_info_get((loom_op)n->op);
    if (!in || !row_layout(g, n, in))
        return LOOM_OK;
    const loom_binding *b = loom_node_bindings(g, n);
    for (uint32_t w = 0; w < n->n_bindings; w++) {
        if (!(b[w].access & LOOM_ACCESS_WRITE))
            continue;
        for (uint32_t k = 0; k < n->n_bindings; k++) {
            if (k == w || b[k].buffer != b[w].buffer || b[k].offset >= b[w].offset + b[w].size ||
                b[w].offset >= b[k].offset + b[k].size)
                continue;
            bool same = b[k].offset == b[w].offset && b[k].size == b[w].size;
            if (!(b[k].access & LOOM_ACCESS_WRITE) && in->slot[k].inplace && same)
                continue;
            return loom_fail(LOOM_VERIFY, "node %u (%s): %s overlaps %s in buffer %u '%s'", i, in->name,
                             in->slot[w].name, in->slot[k].name, b[w].buffer, loom_graph_buffer_name(g, b[w].buffer));
        }
    }
    return LOOM_OK;
}

/* An awaited edge: the vector numbers in range, each slot bound (the
 * producer's writable, the reader's read-only), and the reader right after
 * its producer, with the barrier reason the poll stands in for. */
static loom_result check_tags(const loom_graph *g, uint32_t i, const loom_node *n)
{
    const char *op = loom_op_name((loom_op)n->op);
    uint32_t in = n->tag_in & ~LOOM_AWAIT_GATE;
    if ((n->tag_in && (in == 0 || in > LOOM_AWAIT_MAX)) || n->tag_out > LOOM_AWAIT_MAX)
        return loom_fail(LOOM_VERIFY, "node %u (%s): tag_in 0x%x / tag_out %u: vectors are 1..%u (tag_in may add "
                         "the gate bit 0x%x)", i, op, n->tag_in, n->tag_out, LOOM_AWAIT_MAX, LOOM_AWAIT_GATE);
    const loom_binding *b = loom_node_bindings(g, n);
    for (int side = 0; side < 2; side++) {
        uint32_t tag = side ? n->tag_out : in, slot = side ? n->tag_out_slot : n->tag_in_slot, k = 0;
        if (!tag)
            continue;
        while (k < n->n_bindings && b[k].slot != slot)
            k++;
        if (k == n->n_bindings || (side ? !(b[k].access & LOOM_ACCESS_WRITE) : b[k].access != LOOM_ACCESS_READ))
            return loom_fail(LOOM_VERIFY, "node %u (%s): %s %u names slot %u, which it does not bind %s", i, op,
                             side ? "tag_out" : "tag_in", tag, slot, side ? "writable" : "read-only");
    }
    if (!in)
        return LOOM_OK;
    const loom_node *p = i ? &g->nodes.v[i - 1] : NULL;
    if (!p || p->tag_out != in || n->barrier == LOOM_NONE)
        return loom_fail(LOOM_VERIFY, "node %u (%s): tag_in %u: the node before it must write vector %u (tag_out) "
                         "and the node keep the barrier reason its poll replaces", i, op, in, in);
    return LOOM_OK;
}

/* A counted edge: the counter numbers in range, one producer a counter,
 * before every node that waits on it; a waiting node whose barrier is not
 * recorded keeps its reason. */
static loom_result check_counts(const loom_graph *g, uint32_t i, const loom_node *n)
{
    const char *op = loom_op_name((loom_op)n->op);
    if (n->count_in > LOOM_COUNT_MAX || n->count_out > LOOM_COUNT_MAX)
        return loom_fail(LOOM_VERIFY, "node %u (%s): count_in %u / count_out %u: counters are 1..%u", i, op,
                         n->count_in, n->count_out, LOOM_COUNT_MAX);
    for (uint32_t k = 0; n->count_out && k < g->nodes.n; k++)
        if (k != i && g->nodes.v[k].count_out == n->count_out)
            return loom_fail(LOOM_VERIFY, "node %u (%s): count_out %u: node %u counts into that counter too", i, op,
                             n->count_out, k);
    if (!n->count_in)
        return LOOM_OK;
    uint32_t k = 0;
    while (k < i && g->nodes.v[k].count_out != n->count_in)
        k++;
    if (k == i)
        return loom_fail(LOOM_VERIFY, "node %u (%s): count_in %u: no node before it counts into that counter "
                         "(count_out)", i, op, n->count_in);
    if (!n->tag_in && k + 1 == i && n->barrier == LOOM_NONE)
        return loom_fail(LOOM_VERIFY, "node %u (%s): count_in %u: the node right after its producer must keep the "
                         "barrier reason its wait replaces", i, op, n->count_in);
    return LOOM_OK;
}

static loom_result verify_dispatch(const loom_graph *g, uint32_t i, const loom_node *n)
{
    const char *op = loom_op_name((loom_op)n->op);
    if (n->op >= LOOM_OP_COUNT)
        return loom_fail(LOOM_VERIFY, "node %u: op %u is not a loom_op", i, n->op);
    if (n->kernel >= g->kernels.n)
        return loom_fail(LOOM_VERIFY, "node %u (%s): kernel %u does not exist", i, op, n->kernel);
    for (int d = 0; d < 3; d++)
        if (n->groups[d] == 0)
            return loom_fail(LOOM_VERIFY, "node %u (%s): groups[%d] is 0", i, op, d);
    if (n->n_bindings > LOOM_MAX_BINDINGS)
        return loom_fail(LOOM_VERIFY, "node %u (%s): n_bindings %u exceeds %u", i, op, n->n_bindings,
                         LOOM_MAX_BINDINGS);
    if (n->n_reads > LOOM_MAX_RANGES || n->n_writes > LOOM_MAX_RANGES)
        return loom_fail(LOOM_VERIFY, "node %u (%s): %u reads / %u writes exceed %u", i, op, n->n_reads, n->n_writes,
                         LOOM_MAX_RANGES);
    if (n->push_size > LOOM_MAX_PUSH || n->push_size % 4)
        return loom_fail(LOOM_VERIFY, "node %u (%s): push_size %u is not a multiple of 4 up to %u", i, op,
                         n->push_size, LOOM_MAX_PUSH);
    if ((uint64_t)n->first_binding + n->n_bindings > g->bindings.n ||
        (uint64_t)n->first_range + n->n_reads + n->n_writes > g->ranges.n ||
        (uint64_t)n->push_offset + n->push_size > g->push.n)
        return loom_fail(LOOM_VERIFY, "node %u (%s): side-array indices out of range", i, op);
    /* The layout first: a binding that does not match its kernel explains
     * whatever else looks wrong with the node. */
    loom_kernel_layout l;
    if (loom_kernel_lookup(g->strings.v + g->kernels.v[n->kernel], &l, NULL)) {
        loom_result rc = check_layout(g, i, n, &l);
        if (rc)
            return rc;
    }
    if (n->n_writes == 0)
        return loom_fail(LOOM_VERIFY, "node %u (%s): writes nothing", i, op);
    if (n->tag_in || n->tag_out) {
        loom_result rc = check_tags(g, i, n);
        if (rc)
            return rc;
    }
    if (n->count_in || n->count_out) {
        loom_result rc = check_counts(g, i, n);
        if (rc)
            return rc;
    }
    loom_result brc = check_blocks(g, i, n);
    if (brc)
        return brc;

    const loom_binding *b = loom_node_bindings(g, n);
    for (uint32_t k = 0; k < n->n_bindings; k++) {
        if (b[k].access == 0 || b[k].access > LOOM_ACCESS_RW)
            return loom_fail(LOOM_VERIFY, "node %u (%s): binding %u has access %u (want 1..3)", i, op, k,
                             b[k].access);
        for (uint32_t j = 0; j < k; j++)
            if (b[j].slot == b[k].slot)
                return loom_fail(LOOM_VERIFY, "node %u (%s): bindings %u and %u share slot %u", i, op, j, k,
                                 b[k].slot);
        loom_result rc = check_extent(g, i, n, "binding", k, b[k].buffer, b[k].offset, b[k].size);
        if (rc)
            return rc;
    }
    const loom_range *r = loom_node_reads(g, n), *w = loom_node_writes(g, n);
    for (uint32_t k = 0; k < n->n_reads; k++) {
        loom_result rc = check_extent(g, i, n, "read range", k, r[k].buffer, r[k].offset, r[k].size);
        if (rc)
            return rc;
    }
    for (uint32_t k = 0; k < n->n_writes; k++) {
        loom_result rc = check_extent(g, i, n, "write range", k, w[k].buffer, w[k].offset, w[k].size);
        if (rc)
            return rc;
    }
    /* A dispatch with no bindings at all is abstract (the passes' tests
     * describe nodes by their ranges alone); the runtime rejects it unless
     * its kernel binds nothing. */
    if (n->n_bindings) {
        loom_result rc = check_ranges(g, i, n);
        if (!rc)
            rc = check_aliasing(g, i, n);
        if (rc)
            return rc;
    }
    return LOOM_OK;
}

static int by_external(const void *pa, const void *pb, void *ctx)
{
    const loom_graph *g = ctx;
    uint64_t a = g->buffers.v[*(const uint32_t *)pa].external, b = g->buffers.v[*(const uint32_t *)pb].external;
    return a < b ? -1 : a > b;
}

/* Two buffers naming the same external memory would alias behind every
 * hazard check (passes compare buffer ids); a frontend binds views of one
 * buffer instead. */
static loom_result verify_externals(const loom_graph *g)
{
    uint32_t n = 0, *ids = loom_alloc(g->a, (size_t)g->buffers.n * sizeof(uint32_t) + 1);
    if (!ids)
        return loom_fail(LOOM_OUT_OF_MEMORY, "verify: out of memory for %u buffers", g->buffers.n);
    for (uint32_t i = 0; i < g->buffers.n; i++)
        if (g->buffers.v[i].external)
            ids[n++] = i;
    qsort_r(ids, n, sizeof *ids, by_external, (void *)g);
    loom_result rc = LOOM_OK;
    for (uint32_t k = 1; k < n && rc == LOOM_OK; k++) {
        const loom_buffer *a = &g->buffers.v[ids[k - 1]], *b = &g->buffers.v[ids[k]];
        if (a->external == b->external) {
            uint32_t x = ids[k - 1] < ids[k] ? ids[k - 1] : ids[k], y = ids[k - 1] ^ ids[k] ^ x;
            rc = loom_fail(LOOM_VERIFY,
                           "buffers %u '%s' and %u '%s' name the same external memory %" PRIu64
                           "; declare it once and bind views of it",
                           x, g->strings.v + g->buffers.v[x].name, y, g->strings.v + g->buffers.v[y].name, a->external);
        }
    }
    loom_free(g->a, ids, (size_t)g->buffers.n * sizeof(uint32_t) + 1);
    return rc;
}

loom_result loom_graph_verify(const loom_graph *g)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_verify: graph is NULL");
    for (uint32_t i = 0; i < g->buffers.n; i++) {
        const loom_buffer *b = &g->buffers.v[i];
        if (b->size == 0)
            return loom_fail(LOOM_VERIFY, "buffer %u '%s': size is 0", i, g->strings.v + b->name);
        if (b->usage >= LOOM_USAGE_COUNT)
            return loom_fail(LOOM_VERIFY, "buffer %u '%s': usage %u is not a loom_usage", i, g->strings.v + b->name,
                             b->usage);
    }
    loom_result rc = verify_externals(g);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < g->nodes.n; i++) {
        const loom_node *n = &g->nodes.v[i];
        if (n->type == LOOM_NODE_BARRIER && (n->tag_in || n->tag_out))
            return loom_fail(LOOM_VERIFY, "node %u: a barrier node has no tag_in or tag_out", i);
        if (n->type == LOOM_NODE_BARRIER)
            continue;
        if (n->type != LOOM_NODE_DISPATCH)
            return loom_fail(LOOM_VERIFY, "node %u: type %u is neither dispatch nor barrier", i, n->type);
        loom_result rc = verify_dispatch(g, i, n);
        if (rc)
            return rc;
    }
    return LOOM_OK;
}
