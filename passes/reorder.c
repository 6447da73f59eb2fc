/* reorder: schedules nodes into concurrency groups inside lookahead windows.
 *
 * The node list is cut into segments: a barrier sentinel or a node whose op
 * kind is not reorderable is a segment of its own, and runs of other nodes
 * are cut into windows of at most ctx->window nodes. Nothing moves across a
 * segment boundary. Inside a window a node's level is one more than the
 * highest level of an earlier window node it conflicts with (RAW, WAR, WAW
 * on overlapping bytes), so the number of levels equals the longest
 * dependency chain in the window — the fewest groups any schedule can have.
 * Nodes are then ordered by level, keeping capture order within a level.
 *
 * Hazard queries go through the per-buffer access set, so a window costs the
 * accesses to the buffers its nodes share, not all pairs of nodes. */
#include "internal.h"

typedef struct reorder_state {
    const loom_allocator *a;
    uint32_t n, window;
    uint32_t *order, *level, *count;
    pass_accset acc;
} reorder_state;

static void state_free(reorder_state *s)
{
    pass_free(s->a, s->order, (size_t)s->n * sizeof(uint32_t));
    pass_free(s->a, s->level, (size_t)s->n * sizeof(uint32_t));
    pass_free(s->a, s->count, ((size_t)s->window + 2) * sizeof(uint32_t));
    pass_accset_free(&s->acc);
}

static bool is_segment_breaker(const loom_node *nd)
{
    return nd->type == LOOM_NODE_BARRIER || !loom_op_reorderable((loom_op)nd->op);
}

/* Levels the window [lo, hi) and appends it to s->order by level. Returns
 * the number of levels through *levels. */
static loom_result schedule_window(loom_graph *g, reorder_state *s, uint32_t lo, uint32_t hi, uint32_t *out,
                                   uint32_t group_base, uint32_t *levels)
{
    pass_accset_clear(&s->acc);
    uint32_t maxl = 0;
    for (uint32_t i = lo; i < hi; i++) {
        const loom_node *nd = loom_graph_node(g, i);
        uint32_t l = pass_accset_max_tag(&s->acc, g, nd) + 1;
        s->level[i] = l;
        if (l > maxl)
            maxl = l;
        loom_result rc = pass_accset_add(&s->acc, g, nd, l);
        if (rc)
            return rc;
    }
    /* Stable counting sort: levels are 1..maxl ≤ window. */
    memset(s->count, 0, ((size_t)maxl + 2) * sizeof(uint32_t));
    for (uint32_t i = lo; i < hi; i++)
        s->count[s->level[i] + 1]++;
    for (uint32_t l = 1; l <= maxl + 1; l++)
        s->count[l] += s->count[l - 1];
    for (uint32_t i = lo; i < hi; i++) {
        s->order[*out + s->count[s->level[i]]++] = i;
        loom_graph_node_mut(g, i)->group = group_base + s->level[i] - 1;
    }
    *out += hi - lo;
    *levels = maxl;
    return LOOM_OK;
}

loom_result loom_pass_reorder(loom_graph *g, loom_pass_ctx *ctx)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_pass_reorder: graph is NULL");
    reorder_state s = { 0 };
    s.a = loom_graph_allocator(g);
    s.n = loom_graph_node_count(g);
    s.window = ctx && ctx->window ? ctx->window : LOOM_PASS_WINDOW_DEFAULT;
    if (s.window > s.n && s.n > 0)
        s.window = s.n;
    s.order = pass_alloc(s.a, (size_t)s.n * sizeof(uint32_t));
    s.level = pass_alloc(s.a, (size_t)s.n * sizeof(uint32_t));
    s.count = pass_alloc(s.a, ((size_t)s.window + 2) * sizeof(uint32_t));
    loom_result rc = LOOM_OK;
    if (!s.order || !s.level || !s.count) {
        rc = loom_fail(LOOM_OUT_OF_MEMORY, "reorder: out of memory for %u nodes", s.n);
        goto done;
    }
    if ((rc = pass_accset_init(&s.acc, s.a, loom_graph_buffer_count(g))))
        goto done;

    loom_graph_clear_schedule(g);
    uint32_t out = 0, groups = 0, bound = 0;
    bool dispatch_since_sentinel = false;
    for (uint32_t i = 0; i < s.n;) {
        loom_node *nd = loom_graph_node_mut(g, i);
        if (is_segment_breaker(nd)) {
            if (nd->type == LOOM_NODE_BARRIER) {
                /* A sentinel forces a barrier unless nothing ran since the last one. */
                bound += dispatch_since_sentinel;
                dispatch_since_sentinel = false;
            } else {
                dispatch_since_sentinel = true;
            }
            nd->group = groups++;
            s.order[out++] = i++;
            continue;
        }
        uint32_t hi = i;
        while (hi < s.n && hi - i < s.window && !is_segment_breaker(loom_graph_node(g, hi)))
            hi++;
        uint32_t levels;
        if ((rc = schedule_window(g, &s, i, hi, &out, groups, &levels)))
            goto done;
        groups += levels;
        bound += levels - 1;
        dispatch_since_sentinel = true;
        i = hi;
    }
    if ((rc = loom_graph_permute(g, s.order, s.n)))
        goto done;
    /* Groups alone are not a safe schedule; the barriers pass makes it one. */
    loom_graph_set_scheduled(g, false);
    if (ctx) {
        ctx->groups = groups;
        ctx->barrier_lower_bound = bound;
    }
done:
    state_free(&s);
    return rc;
}
