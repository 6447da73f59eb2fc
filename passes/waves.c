/* waves: a block-typed residual projection whose workgroups would not all
 * fit the device at once takes its form at 256 invocations a workgroup.
 *
 * A residual projection's integer form (shaders/matvec.glsl: MV_ADD with
 * MV_IDOT) runs 512 invocations a workgroup of 16 rows, and on an NVIDIA
 * GPU takes 69-70 registers with Q4_K weights and 104 with Q6_K: one
 * workgroup an SM. At dim 4096 that is 256 workgroups, two waves on a
 * 132-SM card, the second starting as the first ends. At 256 invocations
 * (the _wg256 forms, forms.def) the same 256 workgroups run three an SM
 * with Q4_K (two with Q6_K): one wave. On an H200 the `7b` Q4_K_M step
 * with 8 layers took 652.5 -> 614.7 us; at dim 2048 (`1b`, 128
 * workgroups, one wave either way) 256 invocations were slower (581.3 ->
 * 624.7), so the rule is the wave, not the shape (docs/perf-log.md, "the
 * residual projections in one wave").
 *
 * The rule: a node on a kernel with a _wg256 form whose workgroups exceed
 * one an SM takes that form. The SM count comes from
 * loom_pass_ctx.wave_groups (four an SM: the argmax forms' cap, part of
 * the plan key); where the device does not tell it (0) nothing changes.
 * The forms differ in their workgroup size alone: same bindings, push
 * constants and workgroup count, so the schedule, the barriers and the
 * arena stand. Runs last. */
#include "internal.h"

/* Workgroups of the 512-invocation forms that fit the device at once. */
static uint32_t one_wave(const loom_pass_ctx *ctx) { return ctx ? ctx->wave_groups / 4u : 0; }

loom_result loom_pass_waves(loom_graph *g, loom_pass_ctx *ctx)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_pass_waves: graph is NULL");
    uint32_t wave = one_wave(ctx);
    if (!wave)
        return LOOM_OK;
    for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
        const loom_node *n = loom_graph_node(g, i);
        if (n->type != LOOM_NODE_DISPATCH || (uint64_t)n->groups[0] * n->groups[1] * n->groups[2] <= wave)
            continue;
        /* NULL where the kernel has no such form; itself where it is one */
        const char *to = loom_form_variant(loom_graph_kernel_name(g, n->kernel), "MV_WG=256", NULL);
        if (!to)
            continue;
        uint32_t id;
        loom_result rc = loom_graph_kernel(g, to, &id);
        if (rc)
            return rc;
        loom_graph_node_mut(g, i)->kernel = id;
    }
    return LOOM_OK;
}
