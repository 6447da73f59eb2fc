/* verify: the IR verifier as a pass, plus the checks on annotations that
 * only passes write — so verify-after-each catches a pass that leaves a
 * barrier index dangling or a scratch buffer outside the arena. */
#include <inttypes.h>
#include "internal.h"

loom_result loom_pass_verify(loom_graph *g, loom_pass_ctx *ctx)
{
    (void)ctx;
    loom_result rc = loom_graph_verify(g);
    if (rc)
        return rc;
    uint32_t n = loom_graph_node_count(g), nbar = loom_graph_barrier_count(g);
    for (uint32_t i = 0; i < n; i++) {
        const loom_node *nd = loom_graph_node(g, i);
        if (nd->barrier != LOOM_NONE && nd->barrier >= nbar)
            return loom_fail(LOOM_VERIFY, "node %u (%s): barrier %u, but the graph has %u barrier infos", i,
                             loom_op_name((loom_op)nd->op), nd->barrier, nbar);
    }
    uint64_t arena = loom_graph_arena_size(g);
    for (uint32_t i = 0; i < loom_graph_buffer_count(g); i++) {
        const loom_buffer *b = loom_graph_buffer(g, i);
        if (b->cls >= LOOM_CLASS_COUNT)
            return loom_fail(LOOM_VERIFY, "buffer %u '%s': class %u is not a loom_class", i,
                             loom_graph_buffer_name(g, i), b->cls);
        if (b->cls == LOOM_CLASS_SCRATCH && (b->arena_offset > arena || b->size > arena - b->arena_offset))
            return loom_fail(LOOM_VERIFY,
                             "buffer %u '%s': scratch [%" PRIu64 ", %" PRIu64 ") lies outside the arena of %" PRIu64
                             " bytes",
                             i, loom_graph_buffer_name(g, i), b->arena_offset, b->arena_offset + b->size, arena);
    }
    return LOOM_OK;
}
