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

/* ---- a program's profile ------------------------------------------------ */

loom_result rt_profile_setup(loom_rt_program *p)
{
    loom_rt *rt = p->rt;
    if (!rt_group_queries(rt))
        return LOOM_OK;
    bool per_node = rt->profile == LOOM_PROFILE_NODES;
    loom_result rc = rt_groups_build(rt, p->g, per_node, &p->groups);
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

static void harvest_groups(loom_rt *rt, loom_rt_program *p, rt_copy *c)
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

/* ---- GPU time per replay ------------------------------------------------ */

/* Adds a completed, not yet counted replay of copy c to the counters. The
 * results are ready once the step completed, so this never waits. */
void rt_harvest(loom_rt *rt, loom_rt_program *p, rt_copy *c)
{
    if (!c->queries || !c->last_step || c->last_step <= c->timed_step || c->last_step > rt->completed)
        return;
    if (p->groups) {
        harvest_groups(rt, p, c);
        return;
    }
    uint64_t t0 = 0, t1 = 0;
    VkResult a = vkGetQueryPoolResults(rt->device, c->queries, 0, 1, sizeof t0, &t0, sizeof t0,
                                       VK_QUERY_RESULT_64_BIT);
    VkResult b = vkGetQueryPoolResults(rt->device, c->queries, p->n_queries - 1, 1, sizeof t1, &t1, sizeof t1,
                                       VK_QUERY_RESULT_64_BIT);
    c->timed_step = c->last_step;
    if (a != VK_SUCCESS || b != VK_SUCCESS || t1 < t0)
        return;
    rt->counters.gpu_ns += (uint64_t)((double)(t1 - t0) * rt->props.limits.timestampPeriod + 0.5);
    rt->counters.timed_steps++;
}

void rt_harvest_program(loom_rt *rt, loom_rt_program *p)
{
    for (uint32_t i = 0; i < p->n_copies; i++)
        rt_harvest(rt, p, &p->copies[i]);
}

void loom_rt_collect_timestamps(loom_rt *rt)
{
    if (!rt || rt_poll(rt))
        return;
    for (loom_rt_program *p = rt->live_programs; p; p = p->next_live)
        rt_harvest_program(rt, p);
    for (loom_rt_program *p = rt->released_programs; p; p = p->next_live)
        rt_harvest_program(rt, p);
}

/* The trace's file holds every replay read back so far: read back the
 * completed ones first. */
loom_result loom_rt_trace_flush(loom_rt *rt)
{
    if (!rt)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_trace_flush: rt is NULL");
    if (!rt->trace)
        return LOOM_OK;
    loom_rt_collect_timestamps(rt);
    return rt_trace_write(rt);
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
