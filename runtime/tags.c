/* Tagged vectors (shaders/tag.glsl): which dependencies of a program are
 * polled in the shader instead of recorded as barriers, the kernels that
 * poll and tag, and the memory the tagged vectors live in. program.c asks
 * once, at creation (rt_tags_plan), and records what p->tags says. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "loom_ops.h"

/* The kernels with a tagged form (MV_TAG in matvec.glsl, ATT_TAG in
 * attention.glsl), the form that waits for all of x before it loads
 * anything (MV_TAG_GATE), and the slots of their x and y (-1: not one the
 * form tags). Two producers (docs/perf.md, "Tagged vectors"):
 * - the gated FFN: its 4096 workgroups run in several waves, and the down
 *   projection's workgroups take the slots its last wave frees, issue
 *   their weight loads and poll h;
 * - the attention (gate): its 32 workgroups leave most SMs idle, and the
 *   o-projection's workgroups wait there, resident, for its output. Had
 *   they loaded their weights first, the stream and the polls would slow
 *   the attention by more than the barrier costs.
 * Tagging the other vectors of a layer gained nothing: behind a one-wave
 * producer nothing starts early. */
/* By form (forms.def), for every weight type that has the tagged forms
 * (those read in chunks of 8: f16 and the block types). */
static const struct tag_form {
    const char *form, *tag_flags, *gate_flags;
    int x, y;    /* slots; -1 none (as uint32_t, a slot no node binds) */
    bool gate;   /* as a producer: its reader waits for all of y before loading anything */
} tag_forms[] = {
    { "attention", "ATT_TAG", NULL, -1, 4, true },
    { "attention_kh", "ATT_TAG", NULL, -1, 4, true },
    { "rms_norm_matvec_silu_mul", "MV_TAG", NULL, -1, 4, false },
    { "rms_norm_matvec_silu_mul_pre", "MV_TAG", NULL, -1, 4, false },
    { "matvec_add", "MV_TAG", "MV_TAG MV_TAG_GATE", 1, -1, false },
    { "matvec_add_stage", "MV_TAG", "MV_TAG MV_TAG_GATE", 1, -1, false },
};

/* Node n's kernel as a tagged producer or reader, or NULL: its form's row,
 * where the form has the tagged kernel for its weights. */
typedef struct tag_kernel {
    const char *tag_name, *gate_name;
    int x, y;
    bool gate;
} tag_kernel;

static bool tag_kernel_of(const loom_graph *g, const loom_node *n, tag_kernel *out)
{
    if (n->type != LOOM_NODE_DISPATCH)
        return false;
    const char *name = loom_graph_kernel_name(g, n->kernel), *row = loom_form_row(name);
    for (size_t k = 0; row && k < sizeof tag_forms / sizeof tag_forms[0]; k++)
        if (!strcmp(row, tag_forms[k].form)) {
            const struct tag_form *f = &tag_forms[k];
            *out = (tag_kernel){ loom_form_variant(name, f->tag_flags, NULL),
                                 f->gate_flags ? loom_form_variant(name, f->gate_flags, NULL) : NULL, f->x, f->y,
                                 f->gate };
            return out->tag_name && (!f->gate_flags || out->gate_name);
        }
    return false;
}

/* The node that may read y, node j's output, tagged: the one other node
 * touching y's bytes, reading all of them as the x of a tagged form and
 * writing none. LOOM_NONE if there is no such node. */
static uint32_t tag_reader(const loom_graph *g, uint32_t j, const loom_binding *y)
{
    if (loom_graph_buffer(g, y->buffer)->cls != LOOM_CLASS_SCRATCH)
        return LOOM_NONE;
    uint32_t reader = LOOM_NONE;
    for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
        const loom_node *n = loom_graph_node(g, i);
        const loom_range *w = loom_node_writes(g, n), *r = loom_node_reads(g, n);
        bool reads = false, writes = false;
        for (uint32_t k = 0; k < n->n_writes; k++)
            writes |= loom_range_meets(&w[k], y);
        for (uint32_t k = 0; k < n->n_reads; k++)
            reads |= loom_range_meets(&r[k], y);
        if (i == j || !(reads || writes))
            continue;
        tag_kernel tk;
        const tag_kernel *t = tag_kernel_of(g, n, &tk) ? &tk : NULL;
        if (reader != LOOM_NONE || writes || !t || !loom_binding_same(loom_node_slot(g, n, (uint32_t)t->x), y))
            return LOOM_NONE;
        reader = i;
    }
    return reader;
}

/* Is y all node j writes, but for buffers no other node touches (the
 * attention's own state)? */
static bool writes_only(const loom_graph *g, uint32_t j, const loom_binding *y)
{
    const loom_node *n = loom_graph_node(g, j);
    const loom_range *w = loom_node_writes(g, n);
    for (uint32_t k = 0; k < n->n_writes; k++) {
        if (w[k].buffer == y->buffer && w[k].offset == y->offset && w[k].size == y->size)
            continue;
        for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
            const loom_node *m = loom_graph_node(g, i);
            const loom_range *r[2] = { loom_node_reads(g, m), loom_node_writes(g, m) };
            uint32_t nr[2] = { m->n_reads, m->n_writes };
            for (int a = 0; i != j && a < 2; a++)
                for (uint32_t b = 0; b < nr[a]; b++)
                    if (r[a][b].buffer == w[k].buffer)
                        return false;
        }
    }
    return true;
}

/* Does node i make a level of its own, with a barrier in front? */
static bool level_alone(const loom_graph *g, uint32_t i)
{
    uint32_t nn = loom_graph_node_count(g);
    return (i == 0 || rt_node_barrier(loom_graph_node(g, i), i, true)) &&
           (i + 1 == nn || rt_node_barrier(loom_graph_node(g, i + 1), i + 1, true));
}

/* Where the device rule allows awaited edges (device.c: rt_awaits_rule;
 * LOOM_TAGS=0: off, 1: on whatever the device, keep: tagged, barriers
 * kept): the output
 * of a tagged-form producer becomes a tagged vector, and the barrier in
 * front of its reader is left out, where
 * - the producer and the reader are levels of their own, one after the
 *   other, and the reader reads y whole as its x: each of its workgroups
 *   has then seen every producer workgroup finish (a producer workgroup
 *   writes its part of y after all its reads) before it writes anything,
 *   so no write of the reader overtakes a read of the producer;
 * - y is all the producer writes, so nothing after the reader can find an
 *   untagged write of the producer not yet landed: the barrier after the
 *   reader (kept) orders what the pair did for everything later.
 * Under the validation layer the barriers stay: the layer cannot see a
 * poll, and with the barrier it judges everything else, the tagged
 * kernels included. */
loom_result rt_tags_plan(loom_rt_program *p)
{
    const loom_graph *g = p->g;
    uint32_t nn = loom_graph_node_count(g);
    if (!p->rt->awaits || !loom_graph_scheduled(g) || p->params_buffer == LOOM_NONE || nn < 2)
        return LOOM_OK;
    bool keep = p->rt->validate || p->rt->awaits_keep;
    /* cand[b]: graph buffer b is the y of a producer at node cand[b] - 1 */
    uint32_t nb = loom_graph_buffer_count(g);
    uint32_t *cand = rt_alloc_bytes(p->rt, nb * sizeof *cand);
    if (!cand)
        return loom_fail(LOOM_OUT_OF_MEMORY, "program: out of memory");
    memset(cand, 0, nb * sizeof *cand);
    uint32_t n_cand = 0;
    for (uint32_t j = 0; j + 1 < nn; j++) {
        const loom_node *n = loom_graph_node(g, j);
        tag_kernel tk, uk;
        const tag_kernel *t = tag_kernel_of(g, n, &tk) ? &tk : NULL;
        const loom_binding *y = t ? loom_node_slot(g, n, (uint32_t)t->y) : NULL;
        /* the reader is the next node, alone in its level */
        const tag_kernel *u = tag_kernel_of(g, loom_graph_node(g, j + 1), &uk) ? &uk : NULL;
        if (t && t->gate && (!u || !u->gate_name))
            continue;
        if (!y || !writes_only(g, j, y) || cand[y->buffer] || tag_reader(g, j, y) != j + 1 || !level_alone(g, j) ||
            !level_alone(g, j + 1))
            continue;
        cand[y->buffer] = j + 1;
        n_cand++;
    }
    if (!n_cand) {
        rt_free_bytes(p->rt, cand, nb * sizeof *cand);
        return LOOM_OK;
    }
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
    if (!p->tags || !p->tag_at) {
        rt_free_bytes(p->rt, cand, nb * sizeof *cand);
        return loom_fail(LOOM_OUT_OF_MEMORY, "program: out of memory");
    }
    memset(p->tags, 0, nn * sizeof *p->tags);
    uint32_t edge = 0, polled = 0;
    uint64_t at = 0;
    for (uint32_t b = 0; b < nb; b++) {
        uint32_t i = cand[b];
        p->tag_at[b] = UINT64_MAX;
        if (!i || edge == RT_TAG_MAX)
            continue;
        p->tags[i - 1].out = p->tags[i].in = ++edge;
        tag_kernel tk;
        if (tag_kernel_of(g, loom_graph_node(g, i - 1), &tk) && tk.gate)
            p->tags[i].in |= RT_TAG_GATE;
        p->tags[i].no_barrier = !keep;
        polled += !keep;
        p->tag_at[b] = at;
        at += rt_round_up(loom_graph_buffer(g, b)->size, align);
    }
    rt_free_bytes(p->rt, cand, nb * sizeof *cand);
    for (uint32_t i = 0; i < nn; i++)
        if (p->tags[i].in || p->tags[i].out) {
            tag_kernel t = { 0 };
            tag_kernel_of(g, loom_graph_node(g, i), &t);
            p->tags[i].kernel = p->tags[i].in & RT_TAG_GATE ? t.gate_name : t.tag_name;
        }
    p->n_polled = polled;
    p->tag_seq_at = rt_round_up(loom_graph_buffer(g, p->params_buffer)->size, align);
    loom_result rc = rt_mem_create(p->rt, at, RT_MEM_DEVICE, &p->tag_mem);
    VkCommandBuffer cmd;
    if (!rc && !(rc = rt_oneshot_begin(p->rt, &cmd))) {
        vkCmdFillBuffer(cmd, p->tag_mem.buffer, 0, VK_WHOLE_SIZE, 0);
        rc = rt_oneshot_end(p->rt, cmd);
    }
    return rc;
}
