/* Human-facing dumps of a graph: the canonical text form (one line per
 * buffer, kernel and node; compared byte for byte by golden tests, so every
 * choice here is deterministic) and Graphviz DOT (hazard edges, groups as
 * clusters, barriers as red bars). JSON lives in json_write.c; every
 * format is saved to a file here. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "internal.h"

/* ---- shared helpers ----------------------------------------------------- */

static bool plain_name(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-'))
            return false;
    }
    return true;
}

/* Single-quoted with escapes, so a name can never break the one-line-per-
 * item shape of the text form. */
static void put_quoted(loom_str *s, const char *p)
{
    loom_str_append(s, "'", 1);
    for (; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '\'' || c == '\\')
            loom_str_printf(s, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            loom_str_printf(s, "\\x%02x", c);
        else
            loom_str_append(s, (const char *)p, 1);
    }
    loom_str_append(s, "'", 1);
}

static void put_name(loom_str *s, const char *p)
{
    if (plain_name(p))
        loom_str_append(s, p, strlen(p));
    else
        put_quoted(s, p);
}

static const char *access_name(uint32_t access)
{
    switch (access) {
    case LOOM_ACCESS_READ: return "r";
    case LOOM_ACCESS_WRITE: return "w";
    case LOOM_ACCESS_RW: return "rw";
    default: return NULL;
    }
}

static void put_range(loom_str *s, const loom_graph *g, const loom_range *r)
{
    put_name(s, loom_graph_buffer_name(g, r->buffer));
    loom_str_printf(s, "[%" PRIu64 ",+%" PRIu64 "]", r->offset, r->size);
}

/* Whether the node's ranges are exactly what capture would derive from its
 * bindings; only ranges that say something new are printed. */
static bool ranges_implied(const loom_graph *g, const loom_node *n)
{
    const loom_binding *b = loom_node_bindings(g, n);
    const loom_range *r = loom_node_reads(g, n), *w = loom_node_writes(g, n);
    uint32_t ri = 0, wi = 0;
    for (uint32_t i = 0; i < n->n_bindings; i++) {
        for (int dir = 0; dir < 2; dir++) {
            uint32_t bit = dir ? LOOM_ACCESS_WRITE : LOOM_ACCESS_READ;
            if (!(b[i].access & bit))
                continue;
            uint32_t *k = dir ? &wi : &ri;
            const loom_range *x = dir ? w : r;
            uint32_t count = dir ? n->n_writes : n->n_reads;
            if (*k >= count || x[*k].buffer != b[i].buffer || x[*k].offset != b[i].offset ||
                x[*k].size != b[i].size)
                return false;
            (*k)++;
        }
    }
    return ri == n->n_reads && wi == n->n_writes;
}

static void put_barrier_reason(loom_str *s, const loom_graph *g, const loom_barrier_info *bi, bool quote_buffer)
{
    if (!bi) {
        loom_str_printf(s, "?");
        return;
    }
    loom_str_printf(s, "%s", loom_hazard_name((loom_hazard)bi->hazard));
    if (bi->buffer != LOOM_NONE) {
        loom_str_printf(s, " on ");
        if (quote_buffer)
            put_quoted(s, loom_graph_buffer_name(g, bi->buffer));
        else
            loom_str_printf(s, "%s", loom_graph_buffer_name(g, bi->buffer));
    }
    loom_str_printf(s, ": node %u -> node %u", bi->before, bi->after);
}

/* " await=v3@1 gate tag=v4@4": the vectors a node polls and writes
 * (awaited edges), each at its binding slot. */
static void put_tags(loom_str *s, const loom_node *n)
{
    if (n->tag_in)
        loom_str_printf(s, " await=v%u@%u%s", n->tag_in & ~LOOM_AWAIT_GATE, n->tag_in_slot,
                        n->tag_in & LOOM_AWAIT_GATE ? " gate" : "");
    if (n->tag_out)
        loom_str_printf(s, " tag=v%u@%u", n->tag_out, n->tag_out_slot);
    if (n->count_in)
        loom_str_printf(s, " counted=c%u", n->count_in);
    if (n->count_out)
        loom_str_printf(s, " count=c%u", n->count_out);
}

/* ---- text --------------------------------------------------------------- */

static void text_buffer(loom_str *s, const loom_graph *g, uint32_t i)
{
    const loom_buffer *b = loom_graph_buffer(g, i);
    loom_str_printf(s, "buffer %u ", i);
    put_quoted(s, loom_graph_buffer_name(g, i));
    loom_str_printf(s, " size=%" PRIu64 " usage=%s", b->size, loom_usage_name((loom_usage)b->usage));
    if (b->external)
        loom_str_printf(s, " external=0x%" PRIx64, b->external);
    if (b->keep)
        loom_str_append(s, " keep", 5);
    if (b->cls != LOOM_CLASS_UNKNOWN)
        loom_str_printf(s, " class=%s", loom_class_name((loom_class)b->cls));
    if (b->cls == LOOM_CLASS_SCRATCH || b->arena_offset)
        loom_str_printf(s, " arena=%" PRIu64, b->arena_offset);
    loom_str_append(s, "\n", 1);
}

static void text_ranges(loom_str *s, const loom_graph *g, const char *label, const loom_range *r, uint32_t n)
{
    loom_str_printf(s, " %s=", label);
    if (n == 0)
        loom_str_append(s, "-", 1);
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            loom_str_append(s, ",", 1);
        put_range(s, g, &r[i]);
    }
}

static void text_dispatch(loom_str *s, const loom_graph *g, const loom_node *n)
{
    loom_str_printf(s, " %s kernel=", loom_op_name((loom_op)n->op));
    put_name(s, loom_graph_kernel_name(g, n->kernel));
    loom_str_printf(s, " groups=%u,%u,%u", n->groups[0], n->groups[1], n->groups[2]);
    const loom_binding *b = loom_node_bindings(g, n);
    loom_str_printf(s, " bindings=");
    if (n->n_bindings == 0)
        loom_str_append(s, "-", 1);
    for (uint32_t i = 0; i < n->n_bindings; i++) {
        loom_str_printf(s, "%s%u:", i ? "," : "", b[i].slot);
        put_name(s, loom_graph_buffer_name(g, b[i].buffer));
        loom_str_printf(s, "[%" PRIu64 ",+%" PRIu64 "]", b[i].offset, b[i].size);
        const char *a = access_name(b[i].access);
        if (a)
            loom_str_printf(s, "%s", a);
        else
            loom_str_printf(s, "access%u", b[i].access);
    }
    if (n->push_size) {
        const uint8_t *p = loom_node_push(g, n);
        loom_str_printf(s, " push=");
        /* Words are little-endian, as the kernels read them; a ragged tail
         * (only possible in an unverified graph) prints byte by byte. */
        for (uint32_t i = 0; i < n->push_size; i += 4) {
            if (i)
                loom_str_append(s, ",", 1);
            if (i + 4 <= n->push_size)
                loom_str_printf(s, "%08x",
                                (uint32_t)p[i] | (uint32_t)p[i + 1] << 8 | (uint32_t)p[i + 2] << 16 |
                                    (uint32_t)p[i + 3] << 24);
            else
                for (uint32_t k = i; k < n->push_size; k++)
                    loom_str_printf(s, "%02x", p[k]);
        }
    }
    if (!ranges_implied(g, n)) {
        text_ranges(s, g, "reads", loom_node_reads(g, n), n->n_reads);
        text_ranges(s, g, "writes", loom_node_writes(g, n), n->n_writes);
    }
}

static loom_result dump_text(const loom_graph *g, loom_str *s)
{
    loom_str_printf(s, "graph ");
    put_quoted(s, loom_graph_name(g));
    loom_str_printf(s, " buffers=%u kernels=%u nodes=%u", loom_graph_buffer_count(g), loom_graph_kernel_count(g),
                    loom_graph_node_count(g));
    if (loom_graph_scheduled(g))
        loom_str_printf(s, " scheduled barriers=%u", loom_graph_barrier_count(g));
    if (loom_graph_arena_size(g))
        loom_str_printf(s, " arena=%" PRIu64, loom_graph_arena_size(g));
    loom_str_append(s, "\n", 1);
    for (uint32_t i = 0; i < loom_graph_buffer_count(g); i++)
        text_buffer(s, g, i);
    for (uint32_t i = 0; i < loom_graph_kernel_count(g); i++) {
        loom_str_printf(s, "kernel %u ", i);
        put_quoted(s, loom_graph_kernel_name(g, i));
        loom_str_append(s, "\n", 1);
    }
    bool sched = loom_graph_scheduled(g);
    for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
        const loom_node *n = loom_graph_node(g, i);
        if (n->barrier != LOOM_NONE) {
            /* an awaited edge: the node polls instead of this barrier */
            loom_str_printf(s, loom_node_awaited(n) ? "awaited (" : "barrier (");
            put_barrier_reason(s, g, loom_graph_barrier_info(g, n->barrier), true);
            loom_str_printf(s, ")\n");
        }
        loom_str_printf(s, "node %u", i);
        if (!loom_node_sane(g, n))
            loom_str_printf(s, " corrupt (side-array indices out of range)");
        else if (n->type == LOOM_NODE_DISPATCH)
            text_dispatch(s, g, n);
        else if (n->type == LOOM_NODE_BARRIER)
            loom_str_printf(s, " barrier-sentinel");
        else
            loom_str_printf(s, " type%u", n->type);
        if (n->flags)
            loom_str_printf(s, " flags=0x%04x", n->flags);
        put_tags(s, n);
        if (n->fused != 1) {
            const uint32_t *m = loom_node_members(g, n);
            loom_str_printf(s, n->fused ? " fused=%u members=" : " fused=%u", n->fused);
            for (uint32_t k = 0; k < n->fused && m != &n->capture_index; k++)
                loom_str_printf(s, "%s%u", k ? "," : "", m[k]);
        }
        if (sched) {
            loom_str_printf(s, " capture=%u group=", n->capture_index);
            if (n->group == LOOM_NONE)
                loom_str_append(s, "-", 1);
            else
                loom_str_printf(s, "%u", n->group);
        }
        loom_str_append(s, "\n", 1);
    }
    return LOOM_OK;
}

/* ---- DOT ---------------------------------------------------------------- */

/* DOT string contents: quotes and backslashes escaped, anything that is not
 * printable ASCII replaced, so `dot` never sees an invalid string. */
static void dot_text(loom_str *s, const char *p)
{
    for (; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\')
            loom_str_printf(s, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            loom_str_append(s, "?", 1);
        else
            loom_str_append(s, (const char *)p, 1);
    }
}

/* Node n's barrier reason as DOT label text: a barrier's box and the
 * awaited edge that stands in for one say the same. */
static void dot_barrier_reason(loom_str *s, const loom_graph *g, const loom_node *n)
{
    loom_str tmp;
    loom_str_init(&tmp, s->allocator);
    put_barrier_reason(&tmp, g, loom_graph_barrier_info(g, n->barrier), false);
    dot_text(s, tmp.data ? tmp.data : "");
    s->failed |= tmp.failed;
    loom_str_free(&tmp);
}

typedef struct access_ix {
    uint32_t node;
    uint32_t range;   /* index into the node's reads then writes */
    bool write;
} access_ix;

/* Per-buffer lists of every range, in node order (CSR layout), so each
 * range looks back only over earlier accesses of its own buffer. */
typedef struct dot_index {
    uint32_t *start;   /* buffer_count + 1 */
    access_ix *acc;
    size_t start_bytes, acc_bytes;
} dot_index;

static bool build_index(const loom_graph *g, dot_index *ix)
{
    const loom_allocator *a = loom_graph_allocator(g);
    uint32_t nb = loom_graph_buffer_count(g), nn = loom_graph_node_count(g);
    size_t total = 0;
    for (uint32_t i = 0; i < nn; i++) {
        const loom_node *n = loom_graph_node(g, i);
        if (n->type == LOOM_NODE_DISPATCH && loom_node_sane(g, n))
            total += (size_t)n->n_reads + n->n_writes;
    }
    ix->start_bytes = ((size_t)nb + 1) * sizeof(uint32_t);
    ix->acc_bytes = (total ? total : 1) * sizeof(access_ix);
    ix->start = loom_alloc(a, ix->start_bytes);
    ix->acc = loom_alloc(a, ix->acc_bytes);
    if (!ix->start || !ix->acc)
        return false;
    memset(ix->start, 0, ix->start_bytes);
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < nn; i++) {
            const loom_node *n = loom_graph_node(g, i);
            if (n->type != LOOM_NODE_DISPATCH || !loom_node_sane(g, n))
                continue;
            const loom_range *r = loom_node_reads(g, n);
            for (uint32_t k = 0; k < (uint32_t)n->n_reads + n->n_writes; k++) {
                uint32_t buf = r[k].buffer;
                if (buf >= nb)
                    continue;
                if (pass == 0)
                    ix->start[buf + 1]++;
                else
                    ix->acc[ix->start[buf]++] = (access_ix){ i, k, k >= n->n_reads };
            }
        }
        if (pass == 0)
            for (uint32_t b = 0; b < nb; b++)
                ix->start[b + 1] += ix->start[b];
        else /* the fill advanced each start to the next list's; shift back */
            for (uint32_t b = nb; b > 0; b--)
                ix->start[b] = ix->start[b - 1];
    }
    ix->start[0] = 0;
    return true;
}

static void free_index(const loom_graph *g, dot_index *ix)
{
    const loom_allocator *a = loom_graph_allocator(g);
    loom_free(a, ix->start, ix->start_bytes);
    loom_free(a, ix->acc, ix->acc_bytes);
}

static void dot_edge(loom_str *s, const loom_graph *g, uint32_t from, uint32_t to)
{
    uint32_t buf = LOOM_NONE;
    const loom_node *a = loom_graph_node(g, from), *b = loom_graph_node(g, to);
    loom_hazard h = LOOM_HAZARD_SENTINEL;
    if (loom_node_sane(g, a) && loom_node_sane(g, b))
        h = loom_nodes_conflict(g, a, b, &buf);
    loom_str_printf(s, "  n%u -> n%u [label=\"%s", from, to, loom_hazard_name(h));
    if (buf != LOOM_NONE) {
        loom_str_append(s, " ", 1);
        dot_text(s, loom_graph_buffer_name(g, buf));
    }
    loom_str_printf(s, "\"%s];\n", h == LOOM_HAZARD_SENTINEL ? ", style=dashed" : "");
}

/* For each range of node i, the nearest earlier node touching overlapping
 * bytes of the same buffer with at least one side writing. `cursor[b]`
 * counts how many of buffer b's accesses belong to nodes before i. */
static uint32_t dot_range_edges(loom_str *s, const loom_graph *g, const dot_index *ix, uint32_t *cursor,
                                uint32_t i, uint32_t floor)
{
    const loom_node *n = loom_graph_node(g, i);
    const loom_range *r = loom_node_reads(g, n);
    uint32_t drawn[2 * LOOM_MAX_RANGES + 1], n_drawn = 0;
    uint32_t nr = (uint32_t)n->n_reads + n->n_writes;
    for (uint32_t k = 0; k < nr && n_drawn < 2 * LOOM_MAX_RANGES; k++) {
        uint32_t buf = r[k].buffer;
        if (buf >= loom_graph_buffer_count(g))
            continue;
        bool write = k >= n->n_reads;
        for (uint32_t j = cursor[buf]; j-- > ix->start[buf];) {
            const access_ix *x = &ix->acc[j];
            if (x->node < floor)
                break;
            if (!write && !x->write)
                continue;
            const loom_node *o = loom_graph_node(g, x->node);
            if (!loom_ranges_overlap(&loom_node_reads(g, o)[x->range], &r[k]))
                continue;
            bool dup = false;
            for (uint32_t d = 0; d < n_drawn; d++)
                dup |= drawn[d] == x->node;
            if (!dup) {
                drawn[n_drawn++] = x->node;
                dot_edge(s, g, x->node, i);
            }
            break;
        }
    }
    return n_drawn;
}

static void dot_node(loom_str *s, const loom_graph *g, uint32_t i, const char *indent)
{
    const loom_node *n = loom_graph_node(g, i);
    if (n->type != LOOM_NODE_DISPATCH) {
        loom_str_printf(s, "%sn%u [label=\"%u barrier-sentinel\", shape=octagon, fillcolor=\"#ffffff\"];\n",
                        indent, i, i);
        return;
    }
    loom_op op = n->op < LOOM_OP_COUNT ? (loom_op)n->op : LOOM_OP_OTHER;
    loom_str_printf(s, "%sn%u [label=\"%u %s\\n", indent, i, i, loom_op_name((loom_op)n->op));
    dot_text(s, loom_graph_kernel_name(g, n->kernel));
    loom_str_printf(s, "\", fillcolor=\"%s\"];\n", loom_op_info_get(op)->colour);
}

static void dot_nodes_scheduled(loom_str *s, const loom_graph *g)
{
    uint32_t nn = loom_graph_node_count(g), last = LOOM_NONE, cluster = 0;
    bool open = false;
    for (uint32_t i = 0; i < nn; i++) {
        const loom_node *n = loom_graph_node(g, i);
        bool barrier = n->barrier != LOOM_NONE && !loom_node_awaited(n);   /* an awaited edge records none */
        bool new_group = !open || n->group != loom_graph_node(g, i - 1)->group || barrier;
        if (new_group) {
            if (open)
                loom_str_printf(s, "  }\n");
            if (barrier) {
                loom_str_printf(s, "  bar%u [shape=box, style=filled, fillcolor=red, fontcolor=white, height=0.1, "
                                   "width=3, label=\"barrier: ", i);
                dot_barrier_reason(s, g, n);
                loom_str_printf(s, "\"];\n");
                if (last != LOOM_NONE)
                    loom_str_printf(s, "  n%u -> bar%u [style=invis];\n", last, i);
                loom_str_printf(s, "  bar%u -> n%u [style=invis];\n", i, i);
            }
            loom_str_printf(s, "  subgraph cluster_%u {\n    label=\"group ", cluster++);
            if (n->group == LOOM_NONE)
                loom_str_printf(s, "-\";\n");
            else
                loom_str_printf(s, "%u\";\n", n->group);
            open = true;
        }
        dot_node(s, g, i, "    ");
        if (n->tag_in && i > 0) {
            loom_str_printf(s, "    n%u -> n%u [style=bold, color=blue, fontcolor=blue, label=\"awaited v%u", i - 1, i,
                            n->tag_in & ~LOOM_AWAIT_GATE);
            loom_str_printf(s, "%s: ", n->tag_in & LOOM_AWAIT_GATE ? " gate" : "");
            dot_barrier_reason(s, g, n);
            loom_str_printf(s, "\"];\n");
        }
        if (n->count_in) {   /* a counted edge: from the node counting into it */
            uint32_t p = i;
            while (p > 0 && loom_graph_node(g, --p)->count_out != n->count_in) {
            }
            loom_str_printf(s, "    n%u -> n%u [style=bold, color=darkgreen, fontcolor=darkgreen, label=\"counted c%u\"];\n",
                            p, i, n->count_in);
        }
        last = i;
    }
    if (open)
        loom_str_printf(s, "  }\n");
}

static loom_result dump_dot(const loom_graph *g, loom_str *s)
{
    dot_index ix = { 0 };
    uint32_t *cursor = NULL;
    uint32_t nb = loom_graph_buffer_count(g), nn = loom_graph_node_count(g);
    size_t cursor_bytes = ((size_t)nb + 1) * sizeof(uint32_t);
    const loom_allocator *a = loom_graph_allocator(g);
    if (!build_index(g, &ix) || !(cursor = loom_alloc(a, cursor_bytes))) {
        free_index(g, &ix);
        return loom_fail(LOOM_OUT_OF_MEMORY, "dot dump: out of memory");
    }
    memcpy(cursor, ix.start, cursor_bytes);

    loom_str_printf(s, "digraph \"");
    dot_text(s, loom_graph_name(g));
    loom_str_printf(s, "\" {\n  rankdir=TB;\n  node [shape=box, style=filled, fontname=\"monospace\"];\n"
                       "  edge [fontname=\"monospace\", fontsize=10];\n");
    if (loom_graph_scheduled(g))
        dot_nodes_scheduled(s, g);
    else
        for (uint32_t i = 0; i < nn; i++)
            dot_node(s, g, i, "  ");

    /* Sentinels order everything: each links from the nodes since the one
     * before it and to the nodes up to the next, and range edges never look
     * back past one. Every node has at most one sentinel on each side, so
     * the edge count stays linear. (Hazard edges may repeat what a sentinel
     * already implies; the drawing stays readable.) */
    uint32_t since = 0, sentinel = LOOM_NONE;
    for (uint32_t i = 0; i < nn; i++) {
        const loom_node *n = loom_graph_node(g, i);
        if (n->type != LOOM_NODE_DISPATCH) {
            for (uint32_t j = since; j < i; j++)
                dot_edge(s, g, j, i);
            if (since == i && sentinel != LOOM_NONE)
                dot_edge(s, g, sentinel, i);
            sentinel = i;
            since = i + 1;
            continue;
        }
        /* A node ordered after the sentinel through a hazard edge already
         * shows that order; only the others need the dashed edge. */
        if (!loom_node_sane(g, n))
            continue;
        if (dot_range_edges(s, g, &ix, cursor, i, since) == 0 && sentinel != LOOM_NONE)
            dot_edge(s, g, sentinel, i);
        const loom_range *r = loom_node_reads(g, n);
        for (uint32_t k = 0; k < (uint32_t)n->n_reads + n->n_writes; k++)
            if (r[k].buffer < nb)
                cursor[r[k].buffer]++;
    }
    loom_str_printf(s, "}\n");
    loom_free(a, cursor, cursor_bytes);
    free_index(g, &ix);
    return LOOM_OK;
}

/* ---- entry -------------------------------------------------------------- */

loom_result loom_graph_dump(const loom_graph *g, loom_format f, loom_str *out)
{
    if (!g || !out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_dump: NULL argument");
    loom_result rc;
    switch (f) {
    case LOOM_FORMAT_TEXT: rc = dump_text(g, out); break;
    case LOOM_FORMAT_DOT: rc = dump_dot(g, out); break;
    case LOOM_FORMAT_JSON: rc = loom_dump_json(g, out); break;
    default: return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_dump: format %d is not a loom_format", (int)f);
    }
    if (rc == LOOM_OK && out->failed)
        rc = loom_fail(LOOM_OUT_OF_MEMORY, "loom_graph_dump: out of memory after %zu bytes", out->len);
    return rc;
}

loom_result loom_graph_save(const loom_graph *g, loom_format fmt, const char *path)
{
    if (!g || !path)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_save: NULL argument");
    loom_str s;
    loom_str_init(&s, loom_graph_allocator(g));
    loom_result rc = loom_graph_dump(g, fmt, &s);
    if (rc == LOOM_OK) {
        FILE *f = fopen(path, "wb");
        if (!f) {
            rc = loom_fail(LOOM_IO, "%s: %s", path, strerror(errno));
        } else {
            bool ok = fwrite(s.data ? s.data : "", 1, s.len, f) == s.len;
            ok &= fclose(f) == 0;
            if (!ok)
                rc = loom_fail(LOOM_IO, "%s: write failed", path);
        }
    }
    loom_str_free(&s);
    return rc;
}
