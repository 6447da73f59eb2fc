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

/* Called by whichever cache holds the plan, possibly on another runtime's
 * thread: it reads the program's last step and the semaphore and writes no
 * state of the program's runtime. */
static bool attachment_busy(void *obj)
{
    loom_rt_program *p = obj;
    uint64_t last = __atomic_load_n(&p->last_step, __ATOMIC_ACQUIRE), done = 0;
    if (last == 0)
        return false;
    return vkGetSemaphoreCounterValue(p->rt->device, p->rt->timeline, &done) != VK_SUCCESS || done < last;
}

/* Every kernel the graph names must be one this runtime can run, so that an
 * unknown one fails here rather than at the first replay. A graph names
 * few distinct kernels, so this costs little even on a cache hit. (What a
 * device's features allow, the subgroup width included, is checked once
 * a kernel, where its pipeline is made: kernel.c.) */
static loom_result check_kernels(loom_rt *rt, const loom_graph *g)
{
    for (uint32_t k = 0; k < loom_graph_kernel_count(g); k++) {
        const char *name = loom_graph_kernel_name(g, k);
        if (rt_kernel_known(rt, name))
            continue;
        for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
            const loom_node *n = loom_graph_node(g, i);
            if (n->type == LOOM_NODE_DISPATCH && n->kernel == k)
                return loom_fail(LOOM_NOT_FOUND, "node %u (%s): kernel '%s' is neither built in nor registered "
                                 "with this runtime", i, loom_op_name((loom_op)n->op), name);
        }
    }
    return LOOM_OK;
}

void loom_rt_device_options(const loom_rt *rt, loom_compile_options *o)
{
    if (!rt || !o)
        return;
    /* Compiled for this device's bindings: what exceeds one is split. */
    if (!o->max_binding_range || o->max_binding_range > rt->max_binding_range)
        o->max_binding_range = rt->max_binding_range;
    /* The argmax forms' workgroup cap of this device (device.c). */
    if (!o->wave_groups)
        o->wave_groups = rt->wave_groups;
    /* The matmul kinds' cooperative-matrix forms where the device runs them. */
    o->coopmat = rt->coopmat;
    /* Awaited edges where the device's rule allows them (device.c). */
    o->awaits = rt->awaits;
    /* The stage pass's kernels add with float atomics. */
    if (!rt->atomic_float_add)
        o->disable |= LOOM_DISABLE_STAGE;
    /* The half forms pair neighbouring invocations with subgroup shuffles. */
    if (rt->subgroup_size < 2)
        o->enable &= ~(uint32_t)LOOM_ENABLE_HALF_ALL;
}

loom_result loom_rt_compile(loom_rt *rt, const loom_graph *g, const loom_compile_options *opts, loom_plan **out,
                            bool *hit)
{
    if (out)
        *out = NULL;
    if (hit)
        *hit = false;
    if (!rt || !g || !out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_compile: NULL argument");
    loom_result rc = rt_check_lost(rt, "loom_rt_compile");
    if (!rc)
        rc = check_kernels(rt, g);
    if (rc)
        return rc;
    if (!rt->plans) {
        loom_cache_desc d = { .capacity = rt->plan_cache_capacity, .allocator = &rt->a };
        if ((rc = loom_cache_create(&d, &rt->plans)))
            return rc;
    }
    loom_compile_options o = opts ? *opts : (loom_compile_options){ 0 };
    loom_rt_device_options(rt, &o);
    bool h = false;
    uint64_t t0 = rt->trace ? rt_trace_now() : 0;
    rc = loom_cache_compile(rt->plans, g, &o, out, &h);
    if (t0)
        rt_trace_cpu(rt, "compile", t0, rt_trace_now(), 0, "cache", rc ? "failed" : h ? "hit" : "miss");
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
    loom_result rc = rt_check_lost(rt, "loom_rt_plan_program");
    if (rc)
        return rc;
    /* Each runtime keeps its own program on the plan, under its address:
     * runtimes on other threads may be attaching theirs at the same time. */
    loom_rt_program *p = loom_plan_find_attachment(plan, rt);
    if (p) {
        *out = p;
        return LOOM_OK;
    }
    if ((rc = loom_rt_program_create(rt, loom_plan_graph(plan), &p)))
        return rc;
    loom_rt_program *got = loom_plan_attach(plan, &(loom_plan_attachment){ p, attachment_destroy, attachment_busy, rt });
    if (got != p)
        loom_rt_program_release(p);
    if (!got)
        return loom_fail(LOOM_OUT_OF_MEMORY, "loom_rt_plan_program: out of memory");
    *out = got;
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
