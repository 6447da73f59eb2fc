/* waves: a kernel whose workgroups would not all fit the device at once
 * takes a form of it that fits more of them an SM, where forms.def has one.
 *
 * - A block-typed residual projection's integer form (shaders/matvec.glsl:
 *   MV_ADD with MV_IDOT) runs 512 invocations a workgroup of 16 rows, and
 *   on an NVIDIA GPU takes 69-70 registers with Q4_K weights and 104 with
 *   Q6_K: one workgroup an SM. At dim 4096 that is 256 workgroups, two
 *   waves on a 132-SM card. At 256 invocations (the _wg256 forms) they run
 *   three an SM with Q4_K (two with Q6_K): one wave. On an H200 the `7b`
 *   Q4_K_M step with 8 layers took 652.5 -> 614.7 us; at dim 2048 (`1b`,
 *   128 workgroups, one wave either way) 256 invocations were slower
 *   (581.3 -> 624.7), so the rule is the wave, not the shape
 *   (docs/perf-log.md, "the residual projections in one wave").
 * - q/k/v with a Q6_K Wv (Q4_K_M's mixed form) takes 53 registers at 512
 *   invocations, two workgroups an SM, so `7b`'s 384 do not fit a 132-SM
 *   card at once; with the Q6_K spans read as words, not 8-byte pairs (the
 *   _q6w forms, MV_Q6W), 40 registers, three an SM. On an H200, twice:
 *   `7b` with 8 layers 653.1 -> 649.4 and 653.4 -> 649.1 us, where `1b`'s
 *   160 workgroups, which fit either way, lost 0.5% with the words
 *   (docs/perf-log.md, "four kernel variants").
 *
 * The rule: a node on a kernel with such a form whose workgroups exceed
 * what the kernel fits at once (its workgroups an SM times the SMs) takes
 * that form. The SM count comes from loom_pass_ctx.wave_groups (four an
 * SM: the argmax forms' cap, part of the plan key); where the device does
 * not tell it (0) nothing changes. A form differs from its base in its
 * workgroup size or its loads alone: same bindings, push constants and
 * workgroup count, so the schedule, the barriers and the arena stand.
 * Runs last. */
#include "internal.h"

/* The forms this pass knows: the flag forms.def adds, and the workgroups
 * an SM of the kernels it is added to (the registers above). */
static const struct {
    const char *flag;
    uint32_t per_sm;
} FORMS[] = {
    { "MV_WG=256", 1 },
    { "MV_Q6W", 2 },
};

#define N_FORMS (sizeof FORMS / sizeof FORMS[0])

/* Workgroups of form f's base kernels that fit a device of wave_groups / 4
 * SMs at once. */
static uint64_t fit(size_t f, uint32_t wave_groups) { return (uint64_t)FORMS[f].per_sm * (wave_groups / 4u); }

uint64_t loom_pass_waves_fit(const char *flag, uint32_t wave_groups)
{
    for (size_t f = 0; flag && f < N_FORMS; f++)
        if (strcmp(FORMS[f].flag, flag) == 0)
            return fit(f, wave_groups);
    return 0;
}

loom_result loom_pass_waves(loom_graph *g, loom_pass_ctx *ctx)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_pass_waves: graph is NULL");
    uint32_t wave = ctx ? ctx->wave_groups : 0;
    for (uint32_t i = 0; wave / 4u && i < loom_graph_node_count(g); i++) {
        const loom_node *n = loom_graph_node(g, i);
        if (n->type != LOOM_NODE_DISPATCH)
            continue;
        uint64_t groups = (uint64_t)n->groups[0] * n->groups[1] * n->groups[2];
        for (size_t f = 0; f < N_FORMS; f++) {
            if (groups <= fit(f, wave))
                continue;
            /* NULL where the kernel has no such form; itself where it is one */
            const char *to = loom_form_variant(loom_graph_kernel_name(g, n->kernel), FORMS[f].flag, NULL);
            if (!to)
                continue;
            uint32_t id;
            loom_result rc = loom_graph_kernel(g, to, &id);
            if (rc)
                return rc;
            loom_graph_node_mut(g, i)->kernel = id;
        }
    }
    return LOOM_OK;
}
