/* The JSON schema: a document tree (json_parse.c) into a graph, and graph
 * files. The tree is converted through the capture and edit APIs, so a
 * file can never produce a graph that capture could not. Semantic nonsense
 * (a range past its buffer, zero workgroups) parses and is left to
 * loom_graph_verify; capture indices and members are checked, never
 * trusted. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include "json.h"

static bool want_type(jp *p, uint32_t i, uint8_t t, const char *what)
{
    if (J(p, i)->t == t)
        return true;
    AT(p, J(p, i), "%s must be %s, not %s", what, jtype_names[t], jtype_names[J(p, i)->t]);
    return false;
}

/* Looks up each of `keys` in object `obj`; out[k] is the member or NONE.
 * Unknown and repeated keys are errors: a typo must not silently become a
 * default. */
static bool fields(jp *p, uint32_t obj, const char *what, const char *const *keys, unsigned nkeys, uint32_t *out)
{
    if (!want_type(p, obj, J_OBJ, what))
        return false;
    for (unsigned k = 0; k < nkeys; k++)
        out[k] = LOOM_NONE;
    for (uint32_t m = J(p, obj)->first; m != LOOM_NONE; m = J(p, m)->next) {
        const char *key = p->pool.v + J(p, m)->key;
        unsigned k = 0;
        while (k < nkeys && strcmp(key, keys[k]) != 0)
            k++;
        if (k == nkeys)
            return AT(p, J(p, m), "unknown key \"%.40s\" in %s", key, what), false;
        if (out[k] != LOOM_NONE)
            return AT(p, J(p, m), "key \"%s\" repeated in %s", key, what), false;
        out[k] = m;
    }
    return true;
}

static bool need(jp *p, uint32_t obj, uint32_t member, const char *key, const char *what)
{
    if (member != LOOM_NONE)
        return true;
    AT(p, J(p, obj), "%s has no \"%s\"", what, key);
    return false;
}

/* fields() for an object whose every key is required. */
static bool all_fields(jp *p, uint32_t obj, const char *what, const char *const *keys, unsigned nkeys, uint32_t *out)
{
    if (!fields(p, obj, what, keys, nkeys, out))
        return false;
    for (unsigned k = 0; k < nkeys; k++)
        if (!need(p, obj, out[k], keys[k], what))
            return false;
    return true;
}

static bool get_u64(jp *p, uint32_t i, uint64_t max, const char *what, uint64_t *out)
{
    const jv *v = J(p, i);
    if (v->t != J_NUM)
        return AT(p, v, "%s must be an unsigned integer, not %s", what, jtype_names[v->t]), false;
    uint64_t x = 0;
    for (uint32_t k = 0; k < v->n; k++) {
        char c = p->s[v->a + k];
        if (!is_digit(c))
            return AT(p, v, "%s must be an unsigned integer", what), false;
        unsigned d = (unsigned)(c - '0');
        if (x > (UINT64_MAX - d) / 10)
            return AT(p, v, "%s does not fit in 64 bits", what), false;
        x = x * 10 + d;
    }
    if (x > max)
        return AT(p, v, "%s %" PRIu64 " exceeds %" PRIu64, what, x, max), false;
    *out = x;
    return true;
}

static bool get_u32(jp *p, uint32_t i, uint32_t max, const char *what, uint32_t *out)
{
    uint64_t x;
    if (!get_u64(p, i, max, what, &x))
        return false;
    *out = (uint32_t)x;
    return true;
}

static bool get_buffer_id(jp *p, const loom_graph *g, uint32_t i, const char *what, uint32_t *out)
{
    uint64_t x;
    if (!get_u64(p, i, UINT64_MAX, what, &x))
        return false;
    if (x >= loom_graph_buffer_count(g))
        return AT(p, J(p, i), "%s %" PRIu64 " does not exist (the graph has %u buffers)", what, x,
                  loom_graph_buffer_count(g)), false;
    *out = (uint32_t)x;
    return true;
}

/* Optional member: leaves *out alone when absent. */
static bool opt_u64(jp *p, uint32_t i, const char *what, uint64_t *out)
{
    return i == LOOM_NONE || get_u64(p, i, UINT64_MAX, what, out);
}

static bool opt_u32(jp *p, uint32_t i, uint32_t max, const char *what, uint32_t *out)
{
    return i == LOOM_NONE || get_u32(p, i, max, what, out);
}

static bool get_array(jp *p, uint32_t i, uint32_t max, const char *what)
{
    if (!want_type(p, i, J_ARR, what))
        return false;
    if (J(p, i)->count > max)
        return AT(p, J(p, i), "%s has %u entries; at most %u are allowed", what, J(p, i)->count, max), false;
    return true;
}

/* A failure inside a graph call becomes a parse error at the value that
 * caused it, except running out of memory, which stays what it is. */
static bool graph_call(jp *p, uint32_t at, loom_result rc)
{
    if (rc == LOOM_OK)
        return true;
    if (rc == LOOM_OUT_OF_MEMORY) {
        jfail(p, rc, J(p, at)->line, J(p, at)->col, "out of memory");
        return false;
    }
    if (!p->rc)
        p->rc = loom_fail_wrap(LOOM_PARSE, "line %u, column %u", J(p, at)->line, J(p, at)->col);
    return false;
}

static bool parse_buffer(jp *p, loom_graph *g, uint32_t obj)
{
    static const char *const keys[] = { "id", "name", "size", "usage", "external", "class", "arena_offset", "keep" };
    uint32_t f[8];
    uint32_t id = loom_graph_buffer_count(g);
    if (!fields(p, obj, "a buffer", keys, 8, f) || !need(p, obj, f[2], "size", "a buffer"))
        return false;
    loom_buffer_desc d = { 0 };
    uint32_t file_id = id;
    if (!opt_u32(p, f[0], UINT32_MAX, "buffer id", &file_id))
        return false;
    if (file_id != id)
        return AT(p, J(p, f[0]), "buffer id %u is out of sequence (expected %u)", file_id, id), false;
    if (f[1] != LOOM_NONE) {
        if (!want_type(p, f[1], J_STR, "buffer name"))
            return false;
        d.name = jstr(p, f[1]);
    }
    if (!get_u64(p, f[2], UINT64_MAX, "buffer size", &d.size) || !opt_u64(p, f[4], "external", &d.external))
        return false;
    if (f[3] != LOOM_NONE) {
        if (!want_type(p, f[3], J_STR, "usage"))
            return false;
        if (!loom_usage_from_name(jstr(p, f[3]), &d.usage))
            return AT(p, J(p, f[3]), "unknown usage \"%.40s\"", jstr(p, f[3])), false;
    }
    loom_class cls = LOOM_CLASS_UNKNOWN;
    if (f[5] != LOOM_NONE) {
        if (!want_type(p, f[5], J_STR, "class"))
            return false;
        if (!loom_class_from_name(jstr(p, f[5]), &cls))
            return AT(p, J(p, f[5]), "unknown class \"%.40s\"", jstr(p, f[5])), false;
    }
    uint64_t arena = 0;
    if (!opt_u64(p, f[6], "arena_offset", &arena))
        return false;
    if (f[7] != LOOM_NONE && J(p, f[7])->t != J_TRUE && !want_type(p, f[7], J_FALSE, "keep"))
        return false;
    bool keep = f[7] != LOOM_NONE && J(p, f[7])->t == J_TRUE;
    if (!graph_call(p, obj, loom_graph_add_buffer(g, &d, &id)) ||
        (keep && !graph_call(p, obj, loom_graph_keep_buffer(g, id))))
        return false;
    loom_buffer *b = loom_graph_buffer_mut(g, id);
    b->cls = cls;
    b->arena_offset = arena;
    /* The step-parameter buffer keeps its role, so loom_graph_params on the
     * loaded graph returns it instead of declaring a second one. */
    if (d.usage == LOOM_USAGE_PARAMS && g->params == LOOM_NONE)
        g->params = id;
    return true;
}

static bool parse_range(jp *p, loom_graph *g, uint32_t obj, loom_range *r)
{
    static const char *const keys[] = { "buffer", "offset", "size" };
    uint32_t f[3];
    if (!fields(p, obj, "a range", keys, 3, f) || !need(p, obj, f[0], "buffer", "a range") ||
        !need(p, obj, f[1], "offset", "a range") || !need(p, obj, f[2], "size", "a range"))
        return false;
    memset(r, 0, sizeof *r);
    return get_buffer_id(p, g, f[0], "range buffer", &r->buffer) &&
           get_u64(p, f[1], UINT64_MAX, "range offset", &r->offset) &&
           get_u64(p, f[2], UINT64_MAX, "range size", &r->size);
}

static bool parse_binding(jp *p, loom_graph *g, uint32_t obj, loom_binding *b)
{
    static const char *const keys[] = { "slot", "buffer", "offset", "size", "access" };
    uint32_t f[5];
    if (!all_fields(p, obj, "a binding", keys, 5, f))
        return false;
    memset(b, 0, sizeof *b);
    if (!get_u32(p, f[0], UINT32_MAX, "slot", &b->slot) ||
        !get_buffer_id(p, g, f[1], "binding buffer", &b->buffer) ||
        !get_u64(p, f[2], UINT64_MAX, "binding offset", &b->offset) ||
        !get_u64(p, f[3], UINT64_MAX, "binding size", &b->size))
        return false;
    if (J(p, f[4])->t == J_NUM)  /* numeric access: only unverifiable graphs carry one */
        return get_u32(p, f[4], UINT32_MAX, "access", &b->access);
    if (!want_type(p, f[4], J_STR, "access"))
        return false;
    const char *a = jstr(p, f[4]);
    if (!strcmp(a, "r"))
        b->access = LOOM_ACCESS_READ;
    else if (!strcmp(a, "w"))
        b->access = LOOM_ACCESS_WRITE;
    else if (!strcmp(a, "rw"))
        b->access = LOOM_ACCESS_RW;
    else
        return AT(p, J(p, f[4]), "access \"%.8s\" is not r, w or rw", a), false;
    return true;
}

static bool parse_ranges(jp *p, loom_graph *g, uint32_t arr, const char *what, loom_range *r, uint32_t *n)
{
    *n = 0;
    if (arr == LOOM_NONE)
        return true;
    if (!get_array(p, arr, LOOM_MAX_RANGES, what))
        return false;
    for (uint32_t e = J(p, arr)->first; e != LOOM_NONE; e = J(p, e)->next)
        if (!parse_range(p, g, e, &r[(*n)++]))
            return false;
    return true;
}

enum { NK_TYPE, NK_OP, NK_KERNEL, NK_GROUPS, NK_BINDINGS, NK_PUSH, NK_READS, NK_WRITES, NK_FLAGS, NK_FUSED,
       NK_CAPTURE, NK_GROUP, NK_BARRIER, NK_MEMBERS, NK_WINDOW, NK_TAG_IN, NK_TAG_OUT, NK_COUNT_IN, NK_COUNT_OUT,
       NK_COUNT };
static const char *const node_keys[NK_COUNT] = { "type",  "op",    "kernel", "groups",        "bindings",
                                                 "push",  "reads", "writes", "flags",         "fused",
                                                 "capture_index", "group", "barrier", "members", "window",
                                                 "tag_in", "tag_out", "count_in", "count_out" };

static bool parse_dispatch(jp *p, loom_graph *g, uint32_t obj, const uint32_t *f)
{
    if (!need(p, obj, f[NK_OP], "op", "a dispatch") || !need(p, obj, f[NK_KERNEL], "kernel", "a dispatch") ||
        !need(p, obj, f[NK_GROUPS], "groups", "a dispatch") || !want_type(p, f[NK_OP], J_STR, "op") ||
        !want_type(p, f[NK_KERNEL], J_STR, "kernel") || !get_array(p, f[NK_GROUPS], 3, "groups"))
        return false;
    loom_dispatch_desc d = { .kernel = jstr(p, f[NK_KERNEL]) };
    if (!loom_op_from_name(jstr(p, f[NK_OP]), &d.op))
        return AT(p, J(p, f[NK_OP]), "unknown op \"%.40s\"", jstr(p, f[NK_OP])), false;
    if (J(p, f[NK_GROUPS])->count != 3)
        return AT(p, J(p, f[NK_GROUPS]), "groups must have 3 entries"), false;
    uint32_t k = 0;
    for (uint32_t e = J(p, f[NK_GROUPS])->first; e != LOOM_NONE; e = J(p, e)->next)
        if (!get_u32(p, e, UINT32_MAX, "groups entry", &d.groups[k++]))
            return false;

    loom_binding binds[LOOM_MAX_BINDINGS];
    if (f[NK_BINDINGS] != LOOM_NONE) {
        if (!get_array(p, f[NK_BINDINGS], LOOM_MAX_BINDINGS, "bindings"))
            return false;
        for (uint32_t e = J(p, f[NK_BINDINGS])->first; e != LOOM_NONE; e = J(p, e)->next)
            if (!parse_binding(p, g, e, &binds[d.n_bindings++]))
                return false;
    }
    uint8_t push[LOOM_MAX_PUSH];
    if (f[NK_PUSH] != LOOM_NONE) {
        if (!get_array(p, f[NK_PUSH], LOOM_MAX_PUSH / 4, "push"))
            return false;
        for (uint32_t e = J(p, f[NK_PUSH])->first; e != LOOM_NONE; e = J(p, e)->next) {
            uint32_t w;
            if (!get_u32(p, e, UINT32_MAX, "push word", &w))
                return false;
            for (int b = 0; b < 4; b++)
                push[d.push_size++] = (uint8_t)(w >> (8 * b));
        }
    }
    loom_range reads[LOOM_MAX_RANGES], writes[LOOM_MAX_RANGES];
    if (!parse_ranges(p, g, f[NK_READS], "reads", reads, &d.n_reads) ||
        !parse_ranges(p, g, f[NK_WRITES], "writes", writes, &d.n_writes))
        return false;
    d.bindings = binds;
    d.push = push;
    d.reads = reads;
    d.writes = writes;
    uint32_t id;
    if (!graph_call(p, obj, loom_graph_add_dispatch(g, &d, &id)))
        return false;
    /* Capture derives ranges when both lists are empty; a file that spells
     * out two empty lists means exactly that. */
    bool explicit_ranges = f[NK_READS] != LOOM_NONE || f[NK_WRITES] != LOOM_NONE;
    if (explicit_ranges && d.n_reads == 0 && d.n_writes == 0) {
        loom_node *n = loom_graph_node_mut(g, id);
        n->n_reads = n->n_writes = 0;
    }
    return true;
}

static bool parse_barrier_info(jp *p, loom_graph *g, uint32_t obj, uint32_t *out_index)
{
    static const char *const keys[] = { "hazard", "buffer", "before", "after" };
    uint32_t f[4];
    if (!all_fields(p, obj, "a barrier", keys, 4, f))
        return false;
    loom_barrier_info bi = { .buffer = LOOM_NONE };
    if (!want_type(p, f[0], J_STR, "hazard"))
        return false;
    const char *h = jstr(p, f[0]);
    bi.hazard = LOOM_HAZARD_SENTINEL + 1;
    for (uint32_t k = 0; k <= LOOM_HAZARD_SENTINEL; k++)
        if (!strcmp(h, loom_hazard_name((loom_hazard)k)))
            bi.hazard = k;
    if (bi.hazard > LOOM_HAZARD_SENTINEL)
        return AT(p, J(p, f[0]), "unknown hazard \"%.40s\"", h), false;
    if (J(p, f[1])->t != J_NULL &&
        !get_buffer_id(p, g, f[1], "barrier buffer", &bi.buffer))
        return false;
    if (!get_u32(p, f[2], UINT32_MAX, "before", &bi.before) || !get_u32(p, f[3], UINT32_MAX, "after", &bi.after))
        return false;
    return graph_call(p, obj, loom_graph_add_barrier_info(g, &bi, out_index));
}

/* An awaited edge's end: {"vector", "slot"} and, where it is read,
 * "gate". The verifier checks the numbers against the graph. */
static bool parse_tag(jp *p, uint32_t obj, bool in, uint16_t *tag, uint8_t *slot)
{
    static const char *const keys[] = { "vector", "slot", "gate" };
    uint32_t f[3], v, s;
    const char *what = in ? "tag_in" : "tag_out";
    if (!fields(p, obj, what, keys, in ? 3 : 2, f) || !need(p, obj, f[0], "vector", what) ||
        !need(p, obj, f[1], "slot", what) || !get_u32(p, f[0], LOOM_AWAIT_MAX, "vector", &v) ||
        !get_u32(p, f[1], LOOM_MAX_SLOTS - 1, "slot", &s))
        return false;
    bool gate = false;
    if (in && f[2] != LOOM_NONE) {
        if (J(p, f[2])->t != J_TRUE && J(p, f[2])->t != J_FALSE)
            return AT(p, J(p, f[2]), "\"gate\" is not a boolean"), false;
        gate = J(p, f[2])->t == J_TRUE;
    }
    *tag = (uint16_t)(v | (gate ? LOOM_AWAIT_GATE : 0));
    *slot = (uint8_t)s;
    return true;
}

/* "fused" and "members" are checked, never taken on trust: a node standing
 * for more than one captured node lists them all, ascending, its capture
 * index last; one standing for none (fused 0, a node a pass added) lists
 * nothing. Uniqueness across nodes is checked once all are read. */
static bool parse_members(jp *p, loom_graph *g, uint32_t id, uint32_t obj, uint32_t arr, uint32_t fused)
{
    const loom_node *n = loom_graph_node(g, id);
    if (arr == LOOM_NONE) {
        if (fused > 1)
            return AT(p, J(p, obj), "\"fused\": %u needs the \"members\" it stands for", fused), false;
        loom_graph_node_mut(g, id)->fused = fused;   /* 0: a node a pass added, claiming none */
        return true;
    }
    if (!get_array(p, arr, UINT8_MAX, "members"))
        return false;
    uint32_t caps[UINT8_MAX], k = 0;
    for (uint32_t e = J(p, arr)->first; e != LOOM_NONE; e = J(p, e)->next) {
        if (!get_u32(p, e, UINT32_MAX - 1, "members entry", &caps[k]))
            return false;
        if (k && caps[k] <= caps[k - 1])
            return AT(p, J(p, e), "members must ascend"), false;
        k++;
    }
    if (k != fused || k == 0 || caps[k - 1] != n->capture_index)
        return AT(p, J(p, arr), "%u members for \"fused\": %u, the last must be capture_index %u", k, fused,
                  n->capture_index), false;
    return graph_call(p, arr, loom_graph_set_members(g, id, caps, k));
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* No captured node is claimed twice (by two capture indices or members),
 * except by the row blocks the split pass cut one node into: every claim is
 * (capture index << 1 | split flag), so after sorting a repeat is allowed
 * only between two split nodes. */
static bool check_captures(jp *p, const loom_graph *g, uint32_t nodes_arr)
{
    uint32_t n = loom_graph_node_count(g), total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += loom_graph_node(g, i)->fused;
    size_t bytes = (size_t)total * sizeof(uint64_t) + 1;
    uint64_t *all = p->al->realloc(p->al->user, NULL, 0, bytes);
    uint32_t k = 0;
    if (!all)
        return jfail(p, LOOM_OUT_OF_MEMORY, J(p, nodes_arr)->line, J(p, nodes_arr)->col, "out of memory"), false;
    for (uint32_t i = 0; i < n; i++) {
        const loom_node *nd = loom_graph_node(g, i);
        const uint32_t *m = loom_node_members(g, nd);
        for (uint32_t j = 0; j < nd->fused; j++)
            all[k++] = (uint64_t)m[j] << 1 | ((nd->flags & LOOM_NODE_SPLIT) != 0);
    }
    qsort(all, k, sizeof *all, cmp_u64);
    uint32_t dup = LOOM_NONE;
    for (uint32_t i = 1; i < k && dup == LOOM_NONE; i++)
        if (all[i] >> 1 == all[i - 1] >> 1 && !(all[i] & all[i - 1] & 1))
            dup = (uint32_t)(all[i] >> 1);
    p->al->realloc(p->al->user, all, bytes, 0);
    if (dup != LOOM_NONE)
        return AT(p, J(p, nodes_arr), "captured node %u is claimed by two nodes (capture_index or members)", dup),
               false;
    return true;
}

static bool parse_node(jp *p, loom_graph *g, uint32_t obj)
{
    uint32_t f[NK_COUNT];
    uint32_t id = loom_graph_node_count(g);
    if (!fields(p, obj, "a node", node_keys, NK_COUNT, f) || !need(p, obj, f[NK_TYPE], "type", "a node") ||
        !want_type(p, f[NK_TYPE], J_STR, "type"))
        return false;
    const char *type = jstr(p, f[NK_TYPE]);
    if (!strcmp(type, "dispatch")) {
        if (!parse_dispatch(p, g, obj, f))
            return false;
    } else if (!strcmp(type, "barrier")) {
        for (unsigned k = NK_OP; k <= NK_WRITES; k++)
            if (f[k] != LOOM_NONE)
                return AT(p, J(p, f[k]), "a barrier node has no \"%s\"", node_keys[k]), false;
        if (!graph_call(p, obj, loom_graph_add_barrier(g, NULL)))
            return false;
    } else {
        return AT(p, J(p, f[NK_TYPE]), "node type \"%.40s\" is neither dispatch nor barrier", type), false;
    }
    loom_node *n = loom_graph_node_mut(g, id);
    uint32_t flags = 0, fused = 1, capture = id, group = LOOM_NONE, barrier = LOOM_NONE;
    if (!opt_u32(p, f[NK_FLAGS], UINT16_MAX, "flags", &flags) || !opt_u32(p, f[NK_FUSED], UINT8_MAX, "fused", &fused) ||
        !opt_u32(p, f[NK_CAPTURE], UINT32_MAX - 1, "capture_index", &capture))
        return false;
    if (f[NK_GROUP] != LOOM_NONE && J(p, f[NK_GROUP])->t != J_NULL &&
        !get_u32(p, f[NK_GROUP], UINT32_MAX, "group", &group))
        return false;
    if (f[NK_BARRIER] != LOOM_NONE && J(p, f[NK_BARRIER])->t != J_NULL &&
        !parse_barrier_info(p, g, f[NK_BARRIER], &barrier))
        return false;
    uint32_t window = LOOM_NONE;
    if (f[NK_WINDOW] != LOOM_NONE && J(p, f[NK_WINDOW])->t != J_NULL &&
        !get_u32(p, f[NK_WINDOW], UINT32_MAX - 1, "window", &window))
        return false;
    uint16_t tag_in = 0, tag_out = 0;
    uint8_t in_slot = 0, out_slot = 0;
    if ((f[NK_TAG_IN] != LOOM_NONE && !parse_tag(p, f[NK_TAG_IN], true, &tag_in, &in_slot)) ||
        (f[NK_TAG_OUT] != LOOM_NONE && !parse_tag(p, f[NK_TAG_OUT], false, &tag_out, &out_slot)))
        return false;
    uint32_t count_in = 0, count_out = 0;
    if ((f[NK_COUNT_IN] != LOOM_NONE && !get_u32(p, f[NK_COUNT_IN], LOOM_COUNT_MAX, "count_in", &count_in)) ||
        (f[NK_COUNT_OUT] != LOOM_NONE && !get_u32(p, f[NK_COUNT_OUT], LOOM_COUNT_MAX, "count_out", &count_out)))
        return false;
    n = loom_graph_node_mut(g, id); /* the barrier list may have grown, the node list did not; re-read anyway */
    n->count_in = (uint8_t)count_in;
    n->count_out = (uint8_t)count_out;
    n->tag_in = tag_in;
    n->tag_out = tag_out;
    n->tag_in_slot = in_slot;
    n->tag_out_slot = out_slot;
    n->flags = (uint16_t)flags;
    n->capture_index = capture;
    n->group = group;
    n->barrier = barrier;
    n->window = window;
    return parse_members(p, g, id, obj, f[NK_MEMBERS], fused);
}

static bool parse_kernels(jp *p, loom_graph *g, uint32_t arr)
{
    if (!get_array(p, arr, UINT32_MAX, "kernels"))
        return false;
    for (uint32_t e = J(p, arr)->first; e != LOOM_NONE; e = J(p, e)->next) {
        if (!want_type(p, e, J_STR, "a kernel name"))
            return false;
        uint32_t before = loom_graph_kernel_count(g), id;
        if (!graph_call(p, e, loom_graph_kernel(g, jstr(p, e), &id)))
            return false;
        if (id < before)
            return AT(p, J(p, e), "kernel \"%.40s\" is listed twice", jstr(p, e)), false;
    }
    return true;
}

static bool build_graph(jp *p, uint32_t root, const loom_graph_desc *desc, loom_graph **out)
{
    static const char *const keys[] = { "format", "version", "name", "scheduled", "arena_size",
                                        "buffers", "kernels", "nodes" };
    uint32_t f[8];
    if (!fields(p, root, "the document", keys, 8, f) || !need(p, root, f[0], "format", "the document") ||
        !need(p, root, f[1], "version", "the document") || !need(p, root, f[5], "buffers", "the document") ||
        !need(p, root, f[7], "nodes", "the document") || !want_type(p, f[0], J_STR, "format"))
        return false;
    if (strcmp(jstr(p, f[0]), JSON_FORMAT) != 0)
        return AT(p, J(p, f[0]), "format is \"%.40s\", not \"" JSON_FORMAT "\"", jstr(p, f[0])), false;
    uint32_t version;
    if (!get_u32(p, f[1], UINT32_MAX, "version", &version))
        return false;
    if (version != JSON_VERSION)
        return AT(p, J(p, f[1]), "version %u is not supported (this build reads %d)", version, JSON_VERSION), false;
    loom_graph_desc gd = { .name = desc ? desc->name : NULL, .allocator = desc ? desc->allocator : NULL };
    if (!gd.name && f[2] != LOOM_NONE) {
        if (!want_type(p, f[2], J_STR, "name"))
            return false;
        gd.name = jstr(p, f[2]);
    }
    uint64_t arena = 0;
    if (f[3] != LOOM_NONE && J(p, f[3])->t != J_TRUE && !want_type(p, f[3], J_FALSE, "scheduled"))
        return false;
    if (!opt_u64(p, f[4], "arena_size", &arena) || !get_array(p, f[5], UINT32_MAX, "buffers") ||
        !get_array(p, f[7], UINT32_MAX, "nodes"))
        return false;
    loom_graph *g;
    if (!graph_call(p, root, loom_graph_create(&gd, &g)))
        return false;
    bool ok = true;
    for (uint32_t e = J(p, f[5])->first; ok && e != LOOM_NONE; e = J(p, e)->next)
        ok = parse_buffer(p, g, e);
    if (ok && f[6] != LOOM_NONE)
        ok = parse_kernels(p, g, f[6]);
    for (uint32_t e = J(p, f[7])->first; ok && e != LOOM_NONE; e = J(p, e)->next)
        ok = parse_node(p, g, e);
    ok = ok && check_captures(p, g, f[7]);
    if (!ok) {
        loom_graph_destroy(g);
        return false;
    }
    loom_graph_set_scheduled(g, f[3] != LOOM_NONE && J(p, f[3])->t == J_TRUE);
    loom_graph_set_arena_size(g, arena);
    *out = g;
    return true;
}

loom_result loom_graph_parse_json(const char *text, size_t len, const loom_graph_desc *desc, loom_graph **out)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_parse_json: out is NULL");
    *out = NULL;
    if (!text && len)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_parse_json: text is NULL");
    if (len > JSON_MAX_INPUT)
        return loom_fail(LOOM_PARSE, "line 1, column 1: input of %zu bytes exceeds %u", len, JSON_MAX_INPUT);
    jp p = { .al = desc && desc->allocator ? desc->allocator : loom_default_allocator(),
             .s = text ? text : "", .len = len, .line = 1 };
    if (!p.al->realloc)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_parse_json: allocator has no realloc");
    uint32_t root = json_parse_document(&p);
    if (root != LOOM_NONE)
        build_graph(&p, root, desc, out);
    LOOM_VEC_FREE(p.al, p.v);
    LOOM_VEC_FREE(p.al, p.pool);
    return p.rc;
}

loom_result loom_graph_load(const char *path, const loom_graph_desc *desc, loom_graph **out)
{
    if (!path || !out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_load: NULL argument");
    *out = NULL;
    const loom_allocator *a = desc && desc->allocator ? desc->allocator : loom_default_allocator();
    FILE *f = fopen(path, "rb");
    if (!f)
        return loom_fail(LOOM_IO, "%s: %s", path, strerror(errno));
    char *buf = NULL;
    uint32_t cap = 0, len = 0;
    loom_result rc = LOOM_OK;
    for (;;) {
        if (len > JSON_MAX_INPUT) {
            rc = loom_fail(LOOM_PARSE, "%s: larger than %u bytes", path, JSON_MAX_INPUT);
            break;
        }
        if (!loom_grow(a, (void **)&buf, &cap, len + 65536, 1)) {
            rc = loom_fail(LOOM_OUT_OF_MEMORY, "%s: out of memory reading the file", path);
            break;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += (uint32_t)got;
        if (got == 0) {
            if (ferror(f))
                rc = loom_fail(LOOM_IO, "%s: read error", path);
            break;
        }
    }
    fclose(f);
    if (rc == LOOM_OK) {
        rc = loom_graph_parse_json(buf, len, desc, out);
        if (rc == LOOM_PARSE)
            loom_fail_wrap(rc, "%s", path);
    }
    loom_free(a, buf, cap);
    return rc;
}
