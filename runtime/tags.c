/* Tagged vectors (shaders/tag.glsl): the memory side of the awaited edges
 * a plan holds (the awaits pass decides them: node tag_in / tag_out, the
 * tagged kernels). program.c asks once, at creation (rt_tags_plan), for the
 * vectors' own memory and the tag words each node pushes; record.c records
 * what the plan says. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "loom_ops.h"

_Static_assert(LOOM_AWAIT_BINDING == LOOM_TAG_BINDING && LOOM_AWAIT_GATE == LOOM_TAG_GATE &&
                   LOOM_AWAIT_MAX == RT_TAG_MAX,
               "loom_ir.h's awaited-edge numbers are the shaders' (loom_shaders.h)");

/* Every barrier in front of an awaited edge is recorded anyway (the
 * tagged kernels still run, then only slower) where the plan's edges
 * cannot be trusted here: under the validation layer, which cannot see a
 * poll (with the barrier it judges everything else, the tagged kernels
 * included); with LOOM_TAGS=keep; on a device whose rule gives the barrier
 * plan (a plan compiled elsewhere). After a poll gave up, too (record.c:
 * rt_tags_fallback). */
loom_result rt_tags_plan(loom_rt_program *p)
{
    const loom_graph *g = p->g;
    uint32_t nn = loom_graph_node_count(g), nb = loom_graph_buffer_count(g), first = LOOM_NONE;
    for (uint32_t i = 0; i < nn && first == LOOM_NONE; i++)
        if (loom_node_on_edge(loom_graph_node(g, i)))
            first = i;
    if (first == LOOM_NONE)
        return LOOM_OK;
    if (p->params_buffer == LOOM_NONE)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): an awaited edge needs the step word after the step "
                         "parameters, and the plan has no plan-owned step-parameter buffer", first,
                         loom_op_name((loom_op)loom_graph_node(g, first)->op));
    /* The tagged vectors live apart from the arena, each in its own
     * words: an f32 word another vector left there could pass for a tag.
     * Tag 0 is never a valid tag: the zeroed memory holds none. The step
     * word sits after the step parameters. Both at offsets the device
     * accepts for a storage binding. */
    uint64_t align = p->rt->props.limits.minStorageBufferOffsetAlignment;
    if (align < 16)
        align = 16;
    p->tags = rt_alloc_bytes(p->rt, nn * sizeof *p->tags);
    p->tag_at = rt_alloc_bytes(p->rt, nb * sizeof *p->tag_at);
    if (!p->tags || !p->tag_at)
        return loom_fail(LOOM_OUT_OF_MEMORY, "program: out of memory");
    for (uint32_t b = 0; b < nb; b++)
        p->tag_at[b] = UINT64_MAX;
    p->all_barriers = p->rt->validate || p->rt->awaits_keep || !p->rt->awaits;
    uint32_t awaited = 0;
    uint64_t at = 0;
    /* Counted edges: counter c's producer's workgroups (the target a step
     * adds), and whether each node's kernel binds the counters. */
    p->n_counts = 0;
    memset(p->cnt_groups, 0, sizeof p->cnt_groups);
    for (uint32_t i = 0; i < nn; i++) {
        const loom_node *n = loom_graph_node(g, i);
        uint32_t c = n->count_out > n->count_in ? n->count_out : n->count_in;
        if (c > LOOM_COUNT_MAX)   /* the verifier refuses it; never index past the table */
            return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): counter %u: counters are 1..%u", i,
                             loom_op_name((loom_op)n->op), c, LOOM_COUNT_MAX);
        if (c >= p->n_counts)
            p->n_counts = c + 1;
        uint64_t wgs = (uint64_t)n->groups[0] * n->groups[1] * n->groups[2];
        if (n->count_out && (wgs >> 24 || p->cnt_groups[n->count_out]))
            return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): count_out %u: %s", i,
                             loom_op_name((loom_op)n->op), n->count_out,
                             wgs >> 24 ? "2^24 workgroups or more cannot be counted" : "counted into twice");
        if (n->count_out)
            p->cnt_groups[n->count_out] = (uint32_t)wgs;
    }
    for (uint32_t i = 0; i < nn; i++) {
        const loom_node *n = loom_graph_node(g, i);
        loom_kernel_layout l;
        bool counts = loom_node_on_edge(n) &&
                      loom_kernel_find(loom_graph_kernel_name(g, n->kernel), &l, NULL) == LOOM_OK &&
                      (l.slots & 1u << LOOM_COUNT_BINDING);
        if ((n->count_in || n->count_out) && !counts)
            return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): a counted edge, but kernel '%s' has no counters",
                             i, loom_op_name((loom_op)n->op), loom_graph_kernel_name(g, n->kernel));
        if (n->count_in && !p->cnt_groups[n->count_in])
            return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): count_in %u: no node counts into it", i,
                             loom_op_name((loom_op)n->op), n->count_in);
        p->tags[i] = (rt_tag){ n->tag_in & (LOOM_AWAIT_GATE | 0xffu), n->tag_out,
                               n->count_in ? n->count_in | p->cnt_groups[n->count_in] << 8 : 0, n->count_out,
                               counts };
        awaited += loom_node_awaited(n);
        const loom_binding *y = n->tag_out ? loom_node_slot(g, n, n->tag_out_slot) : NULL;
        if (!y)
            continue;
        if (p->tag_at[y->buffer] != UINT64_MAX)
            return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): buffer %u '%s' is tagged twice", i,
                             loom_op_name((loom_op)n->op), y->buffer, loom_graph_buffer_name(g, y->buffer));
        p->tag_at[y->buffer] = at;
        at += rt_round_up(loom_graph_buffer(g, y->buffer)->size, align);
    }
    p->n_polled = p->all_barriers ? 0 : awaited;
    p->tag_seq_at = rt_round_up(loom_graph_buffer(g, p->params_buffer)->size, align);
    p->cnt_at = at;
    at += rt_round_up(rt_count_bytes(p), align);
    loom_result rc = rt_mem_create(p->rt, at, RT_MEM_DEVICE, &p->tag_mem);
    VkCommandBuffer cmd;
    if (!rc && !(rc = rt_oneshot_begin(p->rt, &cmd))) {
        vkCmdFillBuffer(cmd, p->tag_mem.buffer, 0, VK_WHOLE_SIZE, 0);
        rc = rt_oneshot_end(p->rt, cmd);
    }
    return rc;
}
