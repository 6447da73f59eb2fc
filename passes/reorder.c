/* reorder: schedules nodes into concurrency groups inside lookahead windows.
 *
 * The node list is cut into segments: a barrier sentinel or a node whose op
 * kind is not reorderable is a segment of its own, and runs of other nodes
 * are cut into windows of at most ctx->window nodes. Nothing moves across a
 * segment boundary. Inside a window a node's level is one more than the
 * highest level of an earlier window node it conflicts with (RAW, WAR, WAW
 * on overlapping bytes); level 0 — no barrier — is for nodes that conflict
 * with nothing in the window or in the epoch still open from before it. So
 * each window adds the fewest barriers its hazards allow given where the
 * previous one left off, and the sum (plus sentinels) is the longest
 * dependency path under the window and fence rules: the lower bound, which
 * the barriers pass then meets. Nodes are ordered by level, keeping capture
 * order within a level.
 *
 * Hazard queries go through the per-buffer access set, so a window costs the
 * accesses to the buffers its nodes share, not all pairs of nodes. */
#include "internal.h"

typedef struct reorder_state {
    const loom_allocator *a;
    uint32_t n, window;
    uint32_t *order, *level, *count;
    pass_accset acc;          /* the open epoch (tag 1) and the current window's levels (tag level + 1) */
} reorder_state;

static void state_free(reorder_state *s)
{
    pass_free(s->a, s->order, (size_t)s->n * sizeof(uint32_t));
    pass_free(s->a, s->level, (size_t)s->n * sizeof(uint32_t));
    pass_free(s->a, s->count, ((size_t)s->window + 3) * sizeof(uint32_t));
    pass_accset_free(&s->acc);
}

/* Levels the window [lo, hi) and appends it to s->order by level. Level 0
 * joins the epoch still open from before the window (no barrier: its nodes
 * conflict with nothing run since the last barrier); level k >= 1 follows
 * the k-th barrier of the window. Levels are as low as the hazards allow,
 * so *levels (the highest) is the fewest barriers this window can add, and
 * the last level holds only what must be there — the least that the next
 * window has to wait for. Afterwards the access set holds the epoch left
 * open. Group ids from *groups on, one per non-empty level. */
static loom_result schedule_window(loom_graph *g, reorder_state *s, uint32_t lo, uint32_t hi, uint32_t *out,
                                   uint32_t *groups, uint32_t *levels)
{
    uint32_t maxl = 0;
    bool has0 = false;
    for (uint32_t i = lo; i < hi; i++) {
        const loom_node *nd = loom_graph_node(g, i);
        uint32_t l = pass_accset_max_tag(&s->acc, g, nd);   /* 0: no conflict in the open epoch or window */
        s->level[i] = l;
        maxl = l > maxl ? l : maxl;
        has0 |= l == 0;
        loom_result rc = pass_accset_add(&s->acc, g, nd, l + 1);
        if (rc)
            return rc;
    }
    /* Stable counting sort: levels are 0..maxl <= window. */
    memset(s->count, 0, ((size_t)maxl + 2) * sizeof(uint32_t));
    for (uint32_t i = lo; i < hi; i++)
        s->count[s->level[i] + 1]++;
    for (uint32_t l = 1; l <= maxl + 1; l++)
        s->count[l] += s->count[l - 1];
    uint32_t base = *groups - !has0;   /* dense ids: no empty level 0 group */
    for (uint32_t i = lo; i < hi; i++) {
        s->order[*out + s->count[s->level[i]]++] = i;
        loom_graph_node_mut(g, i)->group = base + s->level[i];
    }
    *out += hi - lo;
    *groups = base + maxl + 1;
    *levels = maxl;
    if (maxl == 0)
        return LOOM_OK;   /* everything joined the open epoch, already tagged 1 */
    pass_accset_clear(&s->acc);   /* a barrier came: the last level is the open epoch now */
    for (uint32_t i = lo; i < hi; i++) {
        loom_result rc = s->level[i] == maxl ? pass_accset_add(&s->acc, g, loom_graph_node(g, i), 1) : LOOM_OK;
        if (rc)
            return rc;
    }
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
    s.count = pass_alloc(s.a, ((size_t)s.window + 3) * sizeof(uint32_t));
    loom_result rc = LOOM_OK;
    if (!s.order || !s.level || !s.count) {
        rc = loom_fail(LOOM_OUT_OF_MEMORY, "reorder: out of memory for %u nodes", s.n);
        goto done;
    }
    if ((rc = pass_accset_init(&s.acc, s.a, loom_graph_buffer_count(g))))
        goto done;

    loom_graph_clear_schedule(g);
    uint32_t out = 0, groups = 0, bound = 0, windows = 0;
    bool dispatch_since_sentinel = false;
    for (uint32_t i = 0; i < s.n;) {
        loom_node *nd = loom_graph_node_mut(g, i);
        if (nd->type == LOOM_NODE_BARRIER) {
            nd->window = windows++;
            /* A sentinel forces a barrier unless nothing ran since the last one;
             * either way the epoch after it starts empty. */
            bound += dispatch_since_sentinel;
            dispatch_since_sentinel = false;
            pass_accset_clear(&s.acc);
            nd->group = groups++;
            s.order[out++] = i++;
            continue;
        }
        /* A non-reorderable node is a window of its own: nothing crosses it,
         * but it joins the open epoch when it conflicts with nothing there. */
        uint32_t hi = i + 1;
        if (!loom_node_is_fence(nd))
            while (hi < s.n && hi - i < s.window && !loom_node_is_fence(loom_graph_node(g, hi)))
                hi++;
        for (uint32_t k = i; k < hi; k++)
            loom_graph_node_mut(g, k)->window = windows;
        windows++;
        uint32_t levels;
        if ((rc = schedule_window(g, &s, i, hi, &out, &groups, &levels)))
            goto done;
        bound += levels;
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
