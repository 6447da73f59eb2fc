/* barriers: places the compute→compute barriers the concurrency groups need.
 *
 * Walking the groups in plan order, the pass keeps every access made since
 * the last barrier. A group that conflicts with any of them gets one barrier
 * before its first node, recording the first hazard found (kind, buffer and
 * the capture indices of the two nodes); a group that conflicts with nothing
 * joins the current epoch. A sentinel gets a barrier unless nothing ran
 * since the last one. Nodes without a group (reorder did not run) are each
 * their own group, so the pass alone still yields the fewest barriers for
 * capture order. Should two nodes of one group conflict — groups that did
 * not come from reorder — the group is split there rather than trusted. */
#include "internal.h"

typedef struct barrier_state {
    loom_graph *g;
    pass_accset acc;
    uint32_t barriers;
} barrier_state;

static loom_result place(barrier_state *s, uint32_t at, loom_hazard h, uint32_t buffer, uint32_t before)
{
    loom_node *nd = loom_graph_node_mut(s->g, at);
    loom_barrier_info info = { (uint32_t)h, buffer, before, nd->capture_index };
    loom_result rc = loom_graph_add_barrier_info(s->g, &info, &nd->barrier);
    if (rc)
        return rc;
    pass_accset_clear(&s->acc);
    s->barriers++;
    return LOOM_OK;
}

/* One group [lo, hi) of dispatches; gid is the next group number. */
static loom_result do_group(barrier_state *s, uint32_t lo, uint32_t hi, uint32_t *gid)
{
    const loom_graph *g = s->g;
    for (uint32_t k = lo; k < hi; k++) {
        uint32_t buf, before;
        loom_hazard h = pass_accset_first(&s->acc, g, loom_graph_node(g, k), &buf, &before);
        if (h != LOOM_HAZARD_NONE) {
            loom_result rc = place(s, lo, h, buf, before);
            if (rc)
                return rc;
            break;
        }
    }
    for (uint32_t k = lo; k < hi; k++) {
        loom_node *nd = loom_graph_node_mut(s->g, k);
        uint32_t buf, before;
        loom_hazard h = k > lo ? pass_accset_first(&s->acc, g, nd, &buf, &before) : LOOM_HAZARD_NONE;
        if (h != LOOM_HAZARD_NONE) {
            loom_result rc = place(s, k, h, buf, before);
            if (rc)
                return rc;
            ++*gid;
        }
        nd->group = *gid;
        loom_result rc = pass_accset_add(&s->acc, g, nd, nd->capture_index);
        if (rc)
            return rc;
    }
    ++*gid;
    return LOOM_OK;
}

loom_result loom_pass_barriers(loom_graph *g, loom_pass_ctx *ctx)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_pass_barriers: graph is NULL");
    const loom_allocator *a = loom_graph_allocator(g);
    uint32_t n = loom_graph_node_count(g);
    uint32_t *key = pass_alloc(a, (size_t)n * sizeof(uint32_t));
    if (!key)
        return loom_fail(LOOM_OUT_OF_MEMORY, "barriers: out of memory for %u nodes", n);
    bool grouped = n > 0;
    for (uint32_t i = 0; i < n; i++) {
        key[i] = loom_graph_node(g, i)->group;
        grouped &= key[i] != LOOM_NONE;
    }
    for (uint32_t i = 0; !grouped && i < n; i++)
        key[i] = i;
    loom_graph_clear_schedule(g);

    barrier_state s = { .g = g };
    loom_result rc = pass_accset_init(&s.acc, a, loom_graph_buffer_count(g));
    uint32_t gid = 0, last = LOOM_NONE;
    bool ran = false;   /* a dispatch since the last barrier */
    for (uint32_t i = 0; rc == LOOM_OK && i < n;) {
        loom_node *nd = loom_graph_node_mut(g, i);
        if (nd->type == LOOM_NODE_BARRIER) {
            if (ran)
                rc = place(&s, i, LOOM_HAZARD_SENTINEL, LOOM_NONE, last);
            ran = false;
            nd->group = gid++;
            last = nd->capture_index;
            i++;
            continue;
        }
        uint32_t hi = i + 1;
        while (hi < n && key[hi] == key[i] && loom_graph_node(g, hi)->type != LOOM_NODE_BARRIER)
            hi++;
        rc = do_group(&s, i, hi, &gid);
        last = loom_graph_node(g, hi - 1)->capture_index;
        ran = true;
        i = hi;
    }
    pass_accset_free(&s.acc);
    pass_free(a, key, (size_t)n * sizeof(uint32_t));
    if (rc)
        return rc;
    loom_graph_set_scheduled(g, true);
    if (ctx) {
        ctx->groups = gid;
        ctx->barriers = s.barriers;
    }
    return LOOM_OK;
}

loom_result loom_schedule_serial(loom_graph *g, loom_pass_ctx *ctx)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_schedule_serial: graph is NULL");
    uint32_t n = loom_graph_node_count(g);
    loom_graph_clear_schedule(g);
    for (uint32_t i = 0; i < n; i++) {
        loom_node *nd = loom_graph_node_mut(g, i);
        nd->group = i;
        if (i == 0)
            continue;
        const loom_node *prev = loom_graph_node(g, i - 1);
        uint32_t buf;
        loom_hazard h = loom_nodes_conflict(g, prev, nd, &buf);
        loom_barrier_info info = { (uint32_t)h, buf, prev->capture_index, nd->capture_index };
        loom_result rc = loom_graph_add_barrier_info(g, &info, &nd->barrier);
        if (rc)
            return rc;
    }
    loom_graph_set_scheduled(g, true);
    if (ctx) {
        ctx->groups = n;
        ctx->barriers = n ? n - 1 : 0;
    }
    return LOOM_OK;
}
