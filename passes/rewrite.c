/* Helpers of the passes that rebuild builder-made nodes in another form
 * (stage, gather): slots by name, the builder's layout, ranges against
 * bindings, capture indices carried over. */
#include <string.h>
#include "internal.h"

/* The binding of nd's slot called name (its op's row of ops.def), or NULL. */
const loom_binding *pass_named(const loom_graph *g, const loom_node *nd, const char *name)
{
    const loom_op_info *in = loom_op_info_get((loom_op)nd->op);
    const loom_binding *b = loom_node_bindings(g, nd);
    for (uint32_t k = 0; in && k < in->n_slots; k++)
        if (!strcmp(in->slot[k].name, name))
            for (uint32_t i = 0; i < nd->n_bindings; i++)
                if (b[i].slot == k)
                    return &b[i];
    return NULL;
}

/* nd is laid out as its op's builder lays it out: every slot bound once,
 * the push bytes, one of the op's kernels. Returns which (its index in
 * the op's row: 1 and 3 f16 weights or ATTENTION's wide form, 2 and 3 f16
 * KV caches), or -1. */
int pass_builder_form(const loom_graph *g, const loom_node *nd)
{
    const loom_op_info *in = loom_op_info_get((loom_op)nd->op);
    const char *kernel = nd->type == LOOM_NODE_DISPATCH ? loom_graph_kernel_name(g, nd->kernel) : NULL;
    if (!in || !in->kernel[0] || !kernel || nd->n_bindings != in->n_slots || nd->push_size != in->push_size)
        return -1;
    int form = -1;
    for (int v = 0; v < 4 && form < 0; v++)
        if (in->kernel[v] && !strcmp(kernel, in->kernel[v]))
            form = v;
    /* The same form for block-typed weights (forms.def): the row's f32
     * kernel, or its f16 KV-cache one. */
    loom_dtype w, wv;
    const char *row = loom_form_row(kernel);
    for (int v = 0; v < 4 && form < 0 && row && loom_form_weights(kernel, &w, &wv) && loom_dtype_is_block(w); v += 2)
        if (in->kernel[v] && loom_form_row(in->kernel[v]) && !strcmp(row, loom_form_row(in->kernel[v])))
            form = v;
    const loom_binding *b = loom_node_bindings(g, nd);
    for (uint32_t i = 0; form >= 0 && i < nd->n_bindings; i++)
        if (b[i].slot != i)
            return -1;
    return form;
}

loom_dtype pass_weight_dtype(const loom_graph *g, const loom_node *nd)
{
    loom_dtype w = LOOM_F32, v;   /* loom_form_weights leaves them for a kernel outside the table */
    if (nd->type == LOOM_NODE_DISPATCH)
        loom_form_weights(loom_graph_kernel_name(g, nd->kernel), &w, &v);
    return w;
}

/* The same as a test; *second: f16 weights, or ATTENTION's wide form. */
bool pass_builder_made(const loom_graph *g, const loom_node *nd, bool *second)
{
    int form = pass_builder_form(g, nd);
    *second = form >= 0 && (form & 1);
    return form >= 0;
}

bool pass_plan_buffer(const loom_graph *g, uint32_t id)
{
    const loom_buffer *b = loom_graph_buffer(g, id);
    return b && !b->external && !b->keep && (b->usage == LOOM_USAGE_NONE || b->usage == LOOM_USAGE_SCRATCH);
}

bool pass_writes(const loom_graph *g, const loom_node *nd, const loom_binding *b)
{
    const loom_range *w = loom_node_writes(g, nd);
    for (uint32_t k = 0; k < nd->n_writes; k++)
        if (loom_range_meets(&w[k], b))
            return true;
    return false;
}

/* Copies nd's capture indices (its members, its own index, or none for a
 * node a pass made) onto node id:
 * through a local copy, since setting them may move the member list. */
loom_result pass_same_members(loom_graph *g, const loom_node *nd, uint32_t id)
{
    uint32_t caps[256], n = nd->fused, cap = nd->capture_index;
    uint16_t flags = nd->flags;
    if (n > 1) {
        if (n > 256)
            return loom_fail(LOOM_LIMIT, "node %u stands for %u captured nodes, at most 256", id, n);
        memcpy(caps, loom_node_members(g, nd), n * sizeof *caps);
        loom_result rc = loom_graph_set_members(g, id, caps, n);
        if (rc)
            return rc;
    }
    loom_node *nn = loom_graph_node_mut(g, id);
    nn->capture_index = cap;
    nn->flags = flags;
    if (n == 0)
        pass_made_node(g, id, cap);
    return LOOM_OK;
}

void pass_made_node(loom_graph *g, uint32_t id, uint32_t label)
{
    loom_node *nn = loom_graph_node_mut(g, id);
    nn->fused = 0;
    nn->first_member = LOOM_NONE;
    nn->capture_index = label;
}

loom_result pass_add_like(loom_graph *g, uint32_t pos, const char *kernel, const loom_binding *b, uint32_t nb,
                          const loom_range *r, uint32_t nr, uint32_t nw, const void *push, uint32_t push_size,
                          uint32_t *id)
{
    const loom_node *nd = loom_graph_node(g, pos);
    loom_dispatch_desc d = { .kernel = kernel, .op = (loom_op)nd->op, .bindings = b, .n_bindings = nb,
                             .push = push, .push_size = push_size, .reads = r, .n_reads = nr,
                             .writes = r + nr, .n_writes = nw };
    memcpy(d.groups, nd->groups, sizeof d.groups);
    loom_result rc = loom_graph_add_dispatch(g, &d, id);
    return rc ? rc : pass_same_members(g, loom_graph_node(g, pos), *id);
}

loom_result pass_rename_nodes(loom_graph *g, const char *pass, pass_rename_fn fn, const void *arg, uint32_t *count)
{
    const loom_allocator *a = loom_graph_allocator(g);
    uint32_t n = loom_graph_node_count(g);
    *count = 0;
    uint32_t *repl = pass_alloc(a, ((size_t)n + 1) * sizeof(uint32_t));
    if (!repl)
        return loom_fail(LOOM_OUT_OF_MEMORY, "%s: out of memory", pass);
    for (uint32_t i = 0; i < n; i++)
        repl[i] = i;
    loom_result rc = LOOM_OK;
    for (uint32_t i = 0; !rc && i < n; i++)
        if (repl[i] == i)
            rc = fn(g, i, repl, count, arg);
    if (!rc && *count) {
        loom_graph_clear_schedule(g);
        rc = loom_graph_permute(g, repl, n);
    }
    pass_free(a, repl, ((size_t)n + 1) * sizeof(uint32_t));
    return rc;
}

bool pass_same_range(const loom_range *r, const loom_binding *b)
{
    return r->buffer == b->buffer && r->offset == b->offset && r->size == b->size;
}

bool pass_reads(const loom_graph *g, const loom_node *nd, const loom_binding *b)
{
    const loom_range *r = loom_node_reads(g, nd);
    for (uint32_t k = 0; k < nd->n_reads; k++)
        if (loom_range_meets(&r[k], b))
            return true;
    return false;
}

loom_result pass_retarget(loom_graph *g, uint32_t id, const char *kernel, uint32_t *out)
{
    const loom_node *nd = loom_graph_node(g, id);
    loom_binding b[LOOM_MAX_BINDINGS];
    loom_range r[2 * LOOM_MAX_RANGES];
    uint8_t push[LOOM_MAX_PUSH];
    uint32_t nb = nd->n_bindings, nr = nd->n_reads, nw = nd->n_writes;
    memcpy(b, loom_node_bindings(g, nd), nb * sizeof *b);
    memcpy(r, loom_node_reads(g, nd), (nr + nw) * sizeof *r);
    memcpy(push, loom_node_push(g, nd), nd->push_size);
    return pass_add_like(g, id, kernel, b, nb, r, nr, nw, push, nd->push_size, out);
}
