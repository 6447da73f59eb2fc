/* The group table of a program: its concurrency groups as recorded, their
 * labels and the timestamp that ends each. The program's profile makes it;
 * the trace's steps keep references, as they outlive the program, so it is
 * reference-counted and lives below both. */
#include <stdio.h>
#include "internal.h"

#define LABEL_BYTES 64u

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

loom_result rt_groups_build(loom_rt *rt, const loom_graph *g, bool per_node, rt_groups **out)
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

