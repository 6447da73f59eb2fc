/* The verifier: every id exists, every binding and range lies inside its
 * buffer, counts and limits hold. The first violation is reported with the
 * node index, op, field and value. */
#include <inttypes.h>
#include <stdlib.h>
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
    if (n->n_writes == 0)
        return loom_fail(LOOM_VERIFY, "node %u (%s): writes nothing", i, op);

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
