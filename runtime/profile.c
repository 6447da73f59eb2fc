/* GPU time per concurrency group. With profiling or tracing on, a program
 * records one timestamp at the step's start and one where each group ends,
 * just before the barrier that closes it: the queue drains there anyway, so
 * the timestamps cost next to nothing, where one between the nodes of a
 * group would hold the group's dispatches apart. A group's time therefore
 * runs from the end of the group before it, barrier included, and the
 * groups of a step add up to the step.
 *
 * Every completed replay is read back once (when its copy is reused, on
 * loom_rt_collect_timestamps, or when the program dies), summed per group
 * for loom_rt_profile_get and handed to the trace. */
#include <stdio.h>
#include "internal.h"

#define LABEL_BYTES 64u

/* ---- the group table ---------------------------------------------------- */

/* "MATVEC_ADD", "COPY x8", "ADD x2 + MUL": op kinds in order of first use,
 * cut with "..." when longer than the label. */
static void group_label(const loom_graph *g, uint32_t lo, uint32_t hi, char *out)
{
    uint32_t count[LOOM_OP_COUNT] = { 0 };
    uint8_t order[LOOM_OP_COUNT];
    uint32_t k = 0;
    for (uint32_t i = lo; i < hi; i++) {
        const loom_node *n = loom_graph_node(g, i);
        if (n->type == LOOM_NODE_DISPATCH && n->op < LOOM_OP_COUNT && !count[n->op]++)
            order[k++] = n->op;
    }
    snprintf(out, LABEL_BYTES, "barrier");
    size_t len = 0;
    for (uint32_t j = 0; j < k; j++) {
        const char *name = loom_op_name((loom_op)order[j]);
        int w = count[order[j]] > 1
                    ? snprintf(out + len, LABEL_BYTES - len, "%s%s x%u", j ? " + " : "", name, count[order[j]])
                    : snprintf(out + len, LABEL_BYTES - len, "%s%s", j ? " + " : "", name);
        if (w < 0 || len + (size_t)w >= LABEL_BYTES) {
            memcpy(out + LABEL_BYTES - 4, "...", 4);
            return;
        }
        len += (size_t)w;
    }
}

static uint32_t count_groups(const loom_graph *g)
{
    bool scheduled = loom_graph_scheduled(g);
    uint32_t n = 1;
    for (uint32_t i = 1; i < loom_graph_node_count(g); i++)
        n += rt_node_barrier(loom_graph_node(g, i), i, scheduled);
    return n;
}

static loom_result groups_build(loom_rt *rt, const loom_graph *g, bool per_node, rt_groups **out)
{
    uint32_t nn = loom_graph_node_count(g), n = count_groups(g);
    size_t bytes = sizeof(rt_groups) + (size_t)(4 * n + 1) * sizeof(uint32_t) + (size_t)n * LABEL_BYTES;
    uint8_t *mem = rt_alloc_bytes(rt, bytes);
    if (!mem)
        return loom_fail(LOOM_OUT_OF_MEMORY, "profile: out of memory for %u groups", n);
    memset(mem, 0, bytes);
    rt_groups *gr = (rt_groups *)mem;
    gr->refs = 1;
    gr->n = n;
    gr->bytes = bytes;
    gr->first = (uint32_t *)(mem + sizeof *gr);
    gr->end_query = gr->first + n + 1;
    gr->dispatches = gr->end_query + n;
    gr->label = gr->dispatches + n;
    gr->text = (char *)(gr->label + n);
    snprintf(gr->program, sizeof gr->program, "%s", loom_graph_name(g) ? loom_graph_name(g) : "");
    bool scheduled = loom_graph_scheduled(g);
    uint32_t k = 0;
    for (uint32_t i = 0; i < nn; i++) {
        const loom_node *node = loom_graph_node(g, i);
        if (i > 0 && rt_node_barrier(node, i, scheduled))
            gr->first[++k] = i;
        gr->dispatches[k] += node->type == LOOM_NODE_DISPATCH;
    }
    gr->first[n] = nn;
    for (uint32_t j = 0; j < n; j++) {
        /* Per node, query i + 1 follows node i; per group, query j + 1. */
        gr->end_query[j] = per_node ? gr->first[j + 1] : j + 1;
        gr->label[j] = j * LABEL_BYTES;
        group_label(g, gr->first[j], gr->first[j + 1], gr->text + gr->label[j]);
    }
    *out = gr;
    return LOOM_OK;
}

void rt_groups_unref(loom_rt *rt, rt_groups *gr)
{
    if (gr && --gr->refs == 0)
        rt_free_bytes(rt, gr, gr->bytes);
}

loom_result rt_profile_setup(loom_rt_program *p)
{
    loom_rt *rt = p->rt;
    if (!rt_group_queries(rt))
        return LOOM_OK;
    bool per_node = rt->profile == LOOM_PROFILE_NODES;
    loom_result rc = groups_build(rt, p->g, per_node, &p->groups);
    if (rc)
        return rc;
    p->n_queries = per_node ? loom_graph_node_count(p->g) + 1 : p->groups->n + 1;
    p->ticks = rt_alloc_bytes(rt, (size_t)p->n_queries * sizeof *p->ticks);
    p->group_ticks = rt_alloc_bytes(rt, (size_t)p->groups->n * sizeof *p->group_ticks);
    if (!p->ticks || !p->group_ticks)
        return loom_fail(LOOM_OUT_OF_MEMORY, "profile: out of memory");
    memset(p->group_ticks, 0, (size_t)p->groups->n * sizeof *p->group_ticks);
    return LOOM_OK;
}

void rt_profile_destroy(loom_rt_program *p)
{
    loom_rt *rt = p->rt;
    if (p->groups) {
        rt_free_bytes(rt, p->ticks, (size_t)p->n_queries * sizeof *p->ticks);
        rt_free_bytes(rt, p->group_ticks, (size_t)p->groups->n * sizeof *p->group_ticks);
    }
    rt_groups_unref(rt, p->groups);
    p->groups = NULL;
}

/* ---- reading replays back ----------------------------------------------- */

void rt_profile_harvest(loom_rt *rt, loom_rt_program *p, rt_copy *c)
{
    VkResult vr = vkGetQueryPoolResults(rt->device, c->queries, 0, p->n_queries,
                                        (size_t)p->n_queries * sizeof *p->ticks, p->ticks, sizeof *p->ticks,
                                        VK_QUERY_RESULT_64_BIT);
    c->timed_step = c->last_step;
    uint64_t *t = p->ticks;
    if (vr != VK_SUCCESS || t[p->n_queries - 1] < t[0])
        return;
    /* One queue runs in order, so the ends only grow; clamped all the same
     * so that a group's time is never negative. */
    for (uint32_t g = 0, prev = 0; g < p->groups->n; g++) {
        uint32_t q = p->groups->end_query[g];
        if (t[q] < t[prev])
            t[q] = t[prev];
        p->group_ticks[g] += t[q] - t[prev];
        prev = q;
    }
    uint64_t step_ticks = t[p->n_queries - 1] - t[0];
    p->prof_steps++;
    p->prof_step_ticks += step_ticks;
    rt->counters.gpu_ns += (uint64_t)((double)step_ticks * rt->props.limits.timestampPeriod + 0.5);
    rt->counters.timed_steps++;
    if (rt->trace)
        rt_trace_gpu(rt, p, c->last_step, c->submit_ns, t);
}

/* ---- the profile API ---------------------------------------------------- */

static loom_result ready(loom_rt *rt, loom_rt_program *p, const char *fn)
{
    if (!rt || !p || p->rt != rt)
        return loom_fail(LOOM_INVALID_ARGUMENT, "%s: NULL or foreign program", fn);
    loom_result rc = rt_check_lost(rt, fn);
    if (rc)
        return rc;
    if (!p->groups)
        return loom_fail(LOOM_UNSUPPORTED, "%s: the program records no group timestamps (make the runtime with "
                         ".profile or a trace, or set LOOM_PROFILE=1)", fn);
    loom_rt_collect_timestamps(rt);
    if (!p->prof_steps)
        return loom_fail(LOOM_NOT_FOUND, "%s: no replay of program '%s' has completed since the profile began", fn,
                         p->groups->program);
    return LOOM_OK;
}

static double ticks_us(const loom_rt *rt, uint64_t ticks, uint64_t steps)
{
    return (double)ticks * rt->props.limits.timestampPeriod / 1e3 / (double)steps;
}

loom_result loom_rt_profile_get(loom_rt *rt, loom_rt_program *p, loom_rt_profile *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    loom_result rc = out ? ready(rt, p, "loom_rt_profile_get")
                         : loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_profile_get: out is NULL");
    if (rc)
        return rc;
    const rt_groups *gr = p->groups;
    out->steps = p->prof_steps;
    out->groups = gr->n;
    out->barriers = p->n_barriers;
    out->dispatches = p->n_dispatches;
    out->step_us = ticks_us(rt, p->prof_step_ticks, p->prof_steps);
    for (uint32_t g = 0; g < gr->n; g++) {
        bool seen[LOOM_OP_COUNT] = { false };
        double share = gr->dispatches[g] ? ticks_us(rt, p->group_ticks[g], p->prof_steps) / gr->dispatches[g] : 0;
        for (uint32_t i = gr->first[g]; i < gr->first[g + 1]; i++) {
            const loom_node *n = loom_graph_node(p->g, i);
            if (n->type != LOOM_NODE_DISPATCH || n->op >= LOOM_OP_COUNT)
                continue;
            loom_rt_profile_op *o = &out->ops[n->op];
            o->us += share;
            o->nodes++;
            o->groups += !seen[n->op];
            seen[n->op] = true;
        }
    }
    return LOOM_OK;
}

loom_result loom_rt_profile_groups(loom_rt *rt, loom_rt_program *p, loom_rt_profile_group *out, uint32_t cap,
                                   uint32_t *n)
{
    if (n)
        *n = 0;
    if (!n || (cap && !out))
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_profile_groups: n is NULL, or out is NULL with cap %u", cap);
    loom_result rc = ready(rt, p, "loom_rt_profile_groups");
    if (rc)
        return rc;
    const rt_groups *gr = p->groups;
    *n = gr->n;
    for (uint32_t g = 0; g < gr->n && g < cap; g++) {
        loom_rt_profile_group *o = &out[g];
        memset(o, 0, sizeof *o);
        o->index = g;
        o->first_node = gr->first[g];
        o->n_nodes = gr->first[g + 1] - gr->first[g];
        o->dispatches = gr->dispatches[g];
        o->us = ticks_us(rt, p->group_ticks[g], p->prof_steps);
        snprintf(o->label, sizeof o->label, "%s", gr->text + gr->label[g]);
    }
    return LOOM_OK;
}

void loom_rt_profile_reset(loom_rt *rt, loom_rt_program *p)
{
    if (!rt || !p || p->rt != rt || !p->groups)
        return;
    /* Replays that completed before the reset must not count after it. */
    loom_rt_collect_timestamps(rt);
    memset(p->group_ticks, 0, (size_t)p->groups->n * sizeof *p->group_ticks);
    p->prof_steps = p->prof_step_ticks = 0;
}

loom_rt_profile_level loom_rt_profiling(const loom_rt *rt) { return rt ? rt->profile : LOOM_PROFILE_OFF; }
