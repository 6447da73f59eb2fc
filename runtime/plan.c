/* Where plans meet the runtime. A plan's program hangs on the plan's
 * attachment slot, so it is made once, on the first replay, and lives as
 * long as the plan; the runtime's plan cache maps a captured graph to its
 * plan. On a cache hit the per-token cost is: encode + hash + compare the
 * graph, write the step parameters, submit — nothing is recorded. */
#include "internal.h"

static void attachment_destroy(void *obj) { loom_rt_program_release(obj); }

bool loom_rt_program_busy(loom_rt *rt, loom_rt_program *p)
{
    if (!rt || !p)
        return false;
    if (p->last_step <= rt->completed)
        return false;
    rt_poll(rt);
    return p->last_step > rt->completed;
}

static bool attachment_busy(void *obj)
{
    loom_rt_program *p = obj;
    return loom_rt_program_busy(p->rt, p);
}

loom_result loom_rt_compile(loom_rt *rt, const loom_graph *g, const loom_compile_options *opts, loom_plan **out,
                            bool *hit)
{
    if (out)
        *out = NULL;
    if (!rt || !g || !out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_compile: NULL argument");
    if (!rt->plans) {
        loom_cache_desc d = { .capacity = rt->plan_cache_capacity, .allocator = &rt->a };
        loom_result rc = loom_cache_create(&d, &rt->plans);
        if (rc)
            return rc;
    }
    bool h = false;
    loom_result rc = loom_cache_compile(rt->plans, g, opts, out, &h);
    if (hit)
        *hit = h;
    return rc;
}

loom_result loom_rt_plan_program(loom_rt *rt, loom_plan *plan, loom_rt_program **out)
{
    if (out)
        *out = NULL;
    if (!rt || !plan || !out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_plan_program: NULL argument");
    loom_rt_program *p = loom_plan_get_attachment(plan);
    if (p) {
        if (p->rt != rt)
            return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_plan_program: the plan was recorded by another runtime");
        *out = p;
        return LOOM_OK;
    }
    loom_result rc = loom_rt_program_create(rt, loom_plan_graph(plan), &p);
    if (rc)
        return rc;
    loom_plan_set_attachment(plan, &(loom_plan_attachment){ p, attachment_destroy, attachment_busy });
    *out = p;
    return LOOM_OK;
}

loom_result loom_rt_replay_plan(loom_rt *rt, loom_plan *plan, const loom_step_params *params, uint64_t *out_step)
{
    if (out_step)
        *out_step = 0;
    loom_rt_program *p;
    loom_result rc = loom_rt_plan_program(rt, plan, &p);
    if (rc)
        return rc;
    return loom_rt_replay(rt, p, params, out_step);
}

void loom_rt_get_cache_stats(const loom_rt *rt, loom_cache_stats *out)
{
    if (!out)
        return;
    if (rt && rt->plans)
        loom_cache_get_stats(rt->plans, out);
    else
        *out = (loom_cache_stats){ 0 };
}
