/* The JSON writer (docs/json-format.md): a graph as one document, buffers,
 * kernels and nodes in id order, every annotation a pass left (groups,
 * barriers and their hazards, classes, arena offsets). Reached through
 * loom_graph_dump. */
#include <inttypes.h>
#include "json.h"

static void json_string(loom_str *s, const char *p)
{
    loom_str_append(s, "\"", 1);
    const char *run = p;
    for (; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f)
            continue;
        loom_str_append(s, run, (size_t)(p - run));
        run = p + 1;
        switch (c) {
        case '"': loom_str_append(s, "\\\"", 2); break;
        case '\\': loom_str_append(s, "\\\\", 2); break;
        case '\n': loom_str_append(s, "\\n", 2); break;
        case '\t': loom_str_append(s, "\\t", 2); break;
        case '\r': loom_str_append(s, "\\r", 2); break;
        default: loom_str_printf(s, "\\u%04x", c); break;
        }
    }
    loom_str_append(s, run, (size_t)(p - run));
    loom_str_append(s, "\"", 1);
}

static void json_range(loom_str *s, const loom_range *r)
{
    loom_str_printf(s, "{\"buffer\": %u, \"offset\": %" PRIu64 ", \"size\": %" PRIu64 "}", r->buffer, r->offset,
                    r->size);
}

static void json_ranges(loom_str *s, const char *key, const loom_range *r, uint32_t n)
{
    loom_str_printf(s, ", \"%s\": [", key);
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            loom_str_append(s, ", ", 2);
        json_range(s, &r[i]);
    }
    loom_str_append(s, "]", 1);
}

static void json_dispatch(loom_str *s, const loom_graph *g, const loom_node *n)
{
    loom_str_printf(s, "\"type\": \"dispatch\", \"op\": ");
    json_string(s, loom_op_name((loom_op)n->op));
    loom_str_printf(s, ", \"kernel\": ");
    json_string(s, loom_graph_kernel_name(g, n->kernel));
    loom_str_printf(s, ", \"groups\": [%u, %u, %u], \"bindings\": [", n->groups[0], n->groups[1], n->groups[2]);
    const loom_binding *b = loom_node_bindings(g, n);
    for (uint32_t i = 0; i < n->n_bindings; i++) {
        loom_str_printf(s, "%s{\"slot\": %u, \"buffer\": %u, \"offset\": %" PRIu64 ", \"size\": %" PRIu64
                           ", \"access\": ",
                        i ? ", " : "", b[i].slot, b[i].buffer, b[i].offset, b[i].size);
        if (b[i].access == LOOM_ACCESS_READ)
            loom_str_printf(s, "\"r\"}");
        else if (b[i].access == LOOM_ACCESS_WRITE)
            loom_str_printf(s, "\"w\"}");
        else if (b[i].access == LOOM_ACCESS_RW)
            loom_str_printf(s, "\"rw\"}");
        else
            loom_str_printf(s, "%u}", b[i].access);
    }
    loom_str_printf(s, "], \"push\": [");
    const uint8_t *p = loom_node_push(g, n);
    for (uint32_t i = 0; i < n->push_size; i += 4) {
        uint32_t w = 0;
        for (uint32_t k = 0; k < 4 && i + k < n->push_size; k++)
            w |= (uint32_t)p[i + k] << (8 * k);
        loom_str_printf(s, "%s%u", i ? ", " : "", w);
    }
    loom_str_append(s, "]", 1);
    json_ranges(s, "reads", loom_node_reads(g, n), n->n_reads);
    json_ranges(s, "writes", loom_node_writes(g, n), n->n_writes);
}

static void json_node(loom_str *s, const loom_graph *g, const loom_node *n)
{
    loom_str_append(s, "{", 1);
    if (!loom_node_sane(g, n))
        loom_str_printf(s, "\"type\": \"corrupt\"");
    else if (n->type == LOOM_NODE_DISPATCH)
        json_dispatch(s, g, n);
    else if (n->type == LOOM_NODE_BARRIER)
        loom_str_printf(s, "\"type\": \"barrier\"");
    else
        loom_str_printf(s, "\"type\": %u", n->type);
    if (n->flags)
        loom_str_printf(s, ", \"flags\": %u", n->flags);
    if (n->fused != 1)
        loom_str_printf(s, ", \"fused\": %u", n->fused);
    loom_str_printf(s, ", \"capture_index\": %u", n->capture_index);
    const uint32_t *m = loom_node_members(g, n);
    if (m != &n->capture_index) {   /* every captured node a fused node stands for */
        loom_str_printf(s, ", \"members\": [");
        for (uint32_t k = 0; k < n->fused; k++)
            loom_str_printf(s, "%s%u", k ? ", " : "", m[k]);
        loom_str_append(s, "]", 1);
    }
    if (n->window != LOOM_NONE)
        loom_str_printf(s, ", \"window\": %u", n->window);
    if (n->group != LOOM_NONE)
        loom_str_printf(s, ", \"group\": %u", n->group);
    const loom_barrier_info *bi = n->barrier != LOOM_NONE ? loom_graph_barrier_info(g, n->barrier) : NULL;
    if (bi) {
        loom_str_printf(s, ", \"barrier\": {\"hazard\": ");
        json_string(s, loom_hazard_name((loom_hazard)bi->hazard));
        if (bi->buffer == LOOM_NONE)
            loom_str_printf(s, ", \"buffer\": null");
        else
            loom_str_printf(s, ", \"buffer\": %u", bi->buffer);
        loom_str_printf(s, ", \"before\": %u, \"after\": %u}", bi->before, bi->after);
    }
    if (n->tag_in)
        loom_str_printf(s, ", \"tag_in\": {\"vector\": %u, \"slot\": %u, \"gate\": %s}", n->tag_in & ~LOOM_AWAIT_GATE,
                        n->tag_in_slot, n->tag_in & LOOM_AWAIT_GATE ? "true" : "false");
    if (n->tag_out)
        loom_str_printf(s, ", \"tag_out\": {\"vector\": %u, \"slot\": %u}", n->tag_out, n->tag_out_slot);
    if (n->count_in)
        loom_str_printf(s, ", \"count_in\": %u", n->count_in);
    if (n->count_out)
        loom_str_printf(s, ", \"count_out\": %u", n->count_out);
    loom_str_append(s, "}", 1);
}

loom_result loom_dump_json(const loom_graph *g, loom_str *s)
{
    loom_str_printf(s, "{\n  \"format\": \"%s\",\n  \"version\": %d,\n  \"name\": ", JSON_FORMAT, JSON_VERSION);
    json_string(s, loom_graph_name(g));
    loom_str_printf(s, ",\n  \"scheduled\": %s,\n  \"arena_size\": %" PRIu64 ",\n  \"buffers\": [",
                    loom_graph_scheduled(g) ? "true" : "false", loom_graph_arena_size(g));
    uint32_t nb = loom_graph_buffer_count(g), nk = loom_graph_kernel_count(g), nn = loom_graph_node_count(g);
    for (uint32_t i = 0; i < nb; i++) {
        const loom_buffer *b = loom_graph_buffer(g, i);
        loom_str_printf(s, "%s\n    {\"id\": %u, \"name\": ", i ? "," : "", i);
        json_string(s, loom_graph_buffer_name(g, i));
        loom_str_printf(s, ", \"size\": %" PRIu64 ", \"usage\": ", b->size);
        json_string(s, loom_usage_name((loom_usage)b->usage));
        if (b->external)
            loom_str_printf(s, ", \"external\": %" PRIu64, b->external);
        if (b->keep)
            loom_str_printf(s, ", \"keep\": true");
        if (b->cls != LOOM_CLASS_UNKNOWN) {
            loom_str_printf(s, ", \"class\": ");
            json_string(s, loom_class_name((loom_class)b->cls));
        }
        if (b->arena_offset || b->cls == LOOM_CLASS_SCRATCH)   /* placement explicit, 0 included */
            loom_str_printf(s, ", \"arena_offset\": %" PRIu64, b->arena_offset);
        loom_str_append(s, "}", 1);
    }
    loom_str_printf(s, "%s],\n  \"kernels\": [", nb ? "\n  " : "");
    for (uint32_t i = 0; i < nk; i++) {
        if (i)
            loom_str_append(s, ", ", 2);
        json_string(s, loom_graph_kernel_name(g, i));
    }
    loom_str_printf(s, "],\n  \"nodes\": [");
    for (uint32_t i = 0; i < nn; i++) {
        loom_str_printf(s, "%s\n    ", i ? "," : "");
        json_node(s, g, loom_graph_node(g, i));
    }
    loom_str_printf(s, "%s]\n}\n", nn ? "\n  " : "");
    return LOOM_OK;
}
