/* The graph: creation, capture (buffers, kernels, dispatches, sentinels),
 * accessors and the edit API passes use. Memory comes from the graph's
 * allocator; every allocation failure is reported, never fatal. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

/* ---- allocator ---------------------------------------------------------- */

static void *libc_realloc(void *user, void *p, size_t old_size, size_t new_size)
{
    (void)user;
    (void)old_size;
    if (new_size == 0) {
        free(p);
        return NULL;
    }
    return realloc(p, new_size);
}

static const loom_allocator libc_allocator = { libc_realloc, NULL };

const loom_allocator *loom_default_allocator(void) { return &libc_allocator; }

void *loom_alloc(const loom_allocator *a, size_t n) { return a->realloc(a->user, NULL, 0, n); }

void loom_free(const loom_allocator *a, void *p, size_t n)
{
    if (p)
        a->realloc(a->user, p, n, 0);
}

bool loom_grow(const loom_allocator *a, void **p, uint32_t *cap, uint32_t need, size_t es)
{
    if (need <= *cap)
        return true;
    uint64_t ncap = *cap ? *cap : 16;
    while (ncap < need)
        ncap *= 2;
    if (ncap > UINT32_MAX)
        return false;
    void *q = a->realloc(a->user, *p, (size_t)*cap * es, (size_t)ncap * es);
    if (!q)
        return false;
    *p = q;
    *cap = (uint32_t)ncap;
    return true;
}

/* ---- names -------------------------------------------------------------- */

static const char *const usage_names[LOOM_USAGE_COUNT] = {
    "none", "weight", "input", "output", "state", "kv_cache", "scratch", "params",
};
static const char *const class_names[LOOM_CLASS_COUNT] = {
    "UNKNOWN", "WEIGHT", "SCRATCH", "KV_APPEND", "INPUT", "OUTPUT", "STATE",
};
static const char *const hazard_names[] = { "NONE", "RAW", "WAR", "WAW", "SENTINEL" };

const char *loom_usage_name(loom_usage u) { return (unsigned)u < LOOM_USAGE_COUNT ? usage_names[u] : "?"; }
const char *loom_class_name(loom_class c) { return (unsigned)c < LOOM_CLASS_COUNT ? class_names[c] : "?"; }
const char *loom_hazard_name(loom_hazard h) { return (unsigned)h <= LOOM_HAZARD_SENTINEL ? hazard_names[h] : "?"; }

static bool name_lookup(const char *const *names, unsigned n, const char *name, unsigned *out)
{
    if (!name)
        return false;
    for (unsigned i = 0; i < n; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = i;
            return true;
        }
    return false;
}

bool loom_usage_from_name(const char *name, loom_usage *out)
{
    unsigned i;
    if (!out || !name_lookup(usage_names, LOOM_USAGE_COUNT, name, &i))
        return false;
    *out = (loom_usage)i;
    return true;
}

bool loom_class_from_name(const char *name, loom_class *out)
{
    unsigned i;
    if (!out || !name_lookup(class_names, LOOM_CLASS_COUNT, name, &i))
        return false;
    *out = (loom_class)i;
    return true;
}

/* ---- lifetime ----------------------------------------------------------- */

loom_result loom_graph_create(const loom_graph_desc *desc, loom_graph **out)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_create: out is NULL");
    *out = NULL;
    const loom_allocator *a = desc && desc->allocator ? desc->allocator : loom_default_allocator();
    if (!a->realloc)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_create: allocator has no realloc");
    loom_graph *g = loom_alloc(a, sizeof *g);
    if (!g)
        return loom_fail(LOOM_OUT_OF_MEMORY, "loom_graph_create: out of memory");
    memset(g, 0, sizeof *g);
    g->a = a;
    g->params = LOOM_NONE;
    g->node_enc_ok = true;
    const char *name = desc && desc->name ? desc->name : "graph";
    strncpy(g->name, name, sizeof g->name - 1);
    *out = g;
    return LOOM_OK;
}

void loom_graph_destroy(loom_graph *g)
{
    if (!g)
        return;
    const loom_allocator *a = g->a;
    LOOM_VEC_FREE(a, g->nodes);
    LOOM_VEC_FREE(a, g->buffers);
    LOOM_VEC_FREE(a, g->kernels);
    LOOM_VEC_FREE(a, g->bindings);
    LOOM_VEC_FREE(a, g->ranges);
    LOOM_VEC_FREE(a, g->push);
    LOOM_VEC_FREE(a, g->strings);
    LOOM_VEC_FREE(a, g->barriers);
    LOOM_VEC_FREE(a, g->members);
    LOOM_VEC_FREE(a, g->node_enc);
    loom_free(a, g, sizeof *g);
}

void loom_graph_reset(loom_graph *g)
{
    if (!g)
        return;
    g->nodes.n = g->buffers.n = g->kernels.n = 0;
    g->bindings.n = g->ranges.n = g->push.n = g->strings.n = g->barriers.n = g->members.n = 0;
    g->params = LOOM_NONE;
    g->scheduled = false;
    g->arena_size = 0;
    g->node_enc.n = 0;
    g->node_enc_ok = true;
    memset(g->kernel_lit, 0, sizeof g->kernel_lit);   /* ids are about to be reused for other names */
}

#define CLONE_VEC(dst, src, field)                                                   \
    do {                                                                             \
        if ((src)->field.n) {                                                        \
            if (!LOOM_VEC_RESERVE((dst)->a, (dst)->field, (src)->field.n))           \
                goto oom;                                                            \
            memcpy((dst)->field.v, (src)->field.v, (size_t)(src)->field.n * sizeof(*(src)->field.v)); \
        }                                                                            \
        (dst)->field.n = (src)->field.n;                                             \
    } while (0)

loom_result loom_graph_clone(const loom_graph *g, loom_graph **out)
{
    if (!g || !out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_clone: NULL argument");
    loom_graph *c;
    loom_result rc = loom_graph_create(&(loom_graph_desc){ .name = g->name, .allocator = g->a }, &c);
    if (rc)
        return rc;
    CLONE_VEC(c, g, nodes);
    CLONE_VEC(c, g, buffers);
    CLONE_VEC(c, g, kernels);
    CLONE_VEC(c, g, bindings);
    CLONE_VEC(c, g, ranges);
    CLONE_VEC(c, g, push);
    CLONE_VEC(c, g, strings);
    CLONE_VEC(c, g, barriers);
    CLONE_VEC(c, g, members);
    if (g->node_enc_ok)
        CLONE_VEC(c, g, node_enc);
    c->node_enc_ok = g->node_enc_ok;
    c->params = g->params;
    c->scheduled = g->scheduled;
    c->arena_size = g->arena_size;
    *out = c;
    return LOOM_OK;
oom:
    loom_graph_destroy(c);
    return loom_fail(LOOM_OUT_OF_MEMORY, "loom_graph_clone: out of memory");
}

const char *loom_graph_name(const loom_graph *g) { return g ? g->name : "?"; }

/* ---- capture ------------------------------------------------------------ */

bool loom_graph_intern_string(loom_graph *g, const char *s, uint32_t *out)
{
    size_t n = strlen(s) + 1;
    if (n > UINT32_MAX - g->strings.n)
        return false;
    if (!LOOM_VEC_RESERVE(g->a, g->strings, g->strings.n + (uint32_t)n))
        return false;
    memcpy(g->strings.v + g->strings.n, s, n);
    *out = g->strings.n;
    g->strings.n += (uint32_t)n;
    return true;
}

loom_result loom_graph_add_buffer(loom_graph *g, const loom_buffer_desc *desc, uint32_t *out_id)
{
    if (!g || !desc)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_add_buffer: NULL argument");
    uint32_t id = g->buffers.n;
    if (desc->size == 0)
        return loom_fail(LOOM_INVALID_ARGUMENT, "buffer %u '%s': size is 0", id, desc->name ? desc->name : "");
    if ((unsigned)desc->usage >= LOOM_USAGE_COUNT)
        return loom_fail(LOOM_INVALID_ARGUMENT, "buffer %u '%s': usage %d is not a loom_usage", id,
                         desc->name ? desc->name : "", (int)desc->usage);
    if (!LOOM_VEC_RESERVE(g->a, g->buffers, id + 1))
        return loom_fail(LOOM_OUT_OF_MEMORY, "buffer %u: out of memory", id);
    char fallback[24];
    const char *name = desc->name;
    if (!name) {
        snprintf(fallback, sizeof fallback, "b%u", id);
        name = fallback;
    }
    loom_buffer *b = &g->buffers.v[id];
    memset(b, 0, sizeof *b);
    if (!loom_graph_intern_string(g, name, &b->name))
        return loom_fail(LOOM_OUT_OF_MEMORY, "buffer %u: out of memory", id);
    b->usage = desc->usage;
    b->size = desc->size;
    b->external = desc->external;
    g->buffers.n++;
    if (out_id)
        *out_id = id;
    return LOOM_OK;
}

loom_result loom_graph_keep_buffer(loom_graph *g, uint32_t buffer)
{
    if (!g || buffer >= g->buffers.n)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_keep_buffer: buffer %u does not exist", buffer);
    g->buffers.v[buffer].keep = 1;
    return LOOM_OK;
}

/* The kernels' view of it is shaders/params.glsl: 16 words. */
_Static_assert(sizeof(loom_step_params) == 64 && offsetof(loom_step_params, rows) == 16,
               "loom_step_params: shaders/params.glsl's layout");

loom_result loom_graph_params(loom_graph *g, uint32_t *out_id)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_params: graph is NULL");
    if (g->params == LOOM_NONE) {
        loom_buffer_desc d = { .name = "step_params", .size = sizeof(loom_step_params), .usage = LOOM_USAGE_PARAMS };
        loom_result rc = loom_graph_add_buffer(g, &d, &g->params);
        if (rc) {
            g->params = LOOM_NONE;
            return rc;
        }
    }
    if (out_id)
        *out_id = g->params;
    return LOOM_OK;
}

loom_result loom_graph_kernel(loom_graph *g, const char *name, uint32_t *out_id)
{
    if (!g || !name || !name[0] || !out_id)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_kernel: NULL graph or out_id, or empty kernel name");
    /* Graphs use few distinct kernels; a linear scan from the most recent
     * beats hashing at these sizes. */
    for (uint32_t i = g->kernels.n; i-- > 0;)
        if (strcmp(g->strings.v + g->kernels.v[i], name) == 0) {
            *out_id = i;
            return LOOM_OK;
        }
    if (!LOOM_VEC_RESERVE(g->a, g->kernels, g->kernels.n + 1))
        return loom_fail(LOOM_OUT_OF_MEMORY, "kernel '%s': out of memory", name);
    uint32_t off;
    if (!loom_graph_intern_string(g, name, &off))
        return loom_fail(LOOM_OUT_OF_MEMORY, "kernel '%s': out of memory", name);
    g->kernels.v[g->kernels.n] = off;
    *out_id = g->kernels.n++;
    return LOOM_OK;
}

static loom_result kernel_lit(loom_graph *g, const char *name, uint32_t *out_id)
{
    /* Literals are packed byte-aligned, so the low bits alone would collide. */
    size_t slot = (size_t)(((uint64_t)(uintptr_t)name * 0x9E3779B97F4A7C15u) >> 60);
    if (g->kernel_lit[slot].name == name && g->kernel_lit[slot].id < g->kernels.n) {
        *out_id = g->kernel_lit[slot].id;
        return LOOM_OK;
    }
    loom_result rc = loom_graph_kernel(g, name, out_id);
    if (rc == LOOM_OK) {
        g->kernel_lit[slot].name = name;
        g->kernel_lit[slot].id = *out_id;
    }
    return rc;
}

static loom_node *append_node(loom_graph *g)
{
    if (!LOOM_VEC_RESERVE(g->a, g->nodes, g->nodes.n + 1))
        return NULL;
    loom_node *n = &g->nodes.v[g->nodes.n];
    *n = (loom_node){ .kernel = LOOM_NONE, .capture_index = g->nodes.n, .group = LOOM_NONE,
                      .barrier = LOOM_NONE, .fused = 1, .first_member = LOOM_NONE, .window = LOOM_NONE };
    return n;
}

static loom_result add_dispatch(loom_graph *g, const loom_dispatch_desc *d, bool literal, uint32_t *out_id);

loom_result loom_graph_add_dispatch(loom_graph *g, const loom_dispatch_desc *d, uint32_t *out_id)
{
    return add_dispatch(g, d, false, out_id);
}

loom_result loom_graph_add_dispatch_lit(loom_graph *g, const loom_dispatch_desc *d, uint32_t *out_id)
{
    return add_dispatch(g, d, true, out_id);
}

/* The descriptor's counts against the fixed limits, and its arrays present. */
static loom_result check_dispatch(const loom_graph *g, const loom_dispatch_desc *d)
{
    uint32_t id = g->nodes.n;
    if ((unsigned)d->op >= LOOM_OP_COUNT)
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u: op %d is not a loom_op", id, (int)d->op);
    if (d->n_bindings > LOOM_MAX_BINDINGS)
        return loom_fail(LOOM_LIMIT, "node %u (%s): n_bindings %u exceeds %u", id, loom_op_name(d->op),
                         d->n_bindings, LOOM_MAX_BINDINGS);
    if (d->n_reads > LOOM_MAX_RANGES || d->n_writes > LOOM_MAX_RANGES)
        return loom_fail(LOOM_LIMIT, "node %u (%s): %u reads / %u writes exceed %u", id, loom_op_name(d->op),
                         d->n_reads, d->n_writes, LOOM_MAX_RANGES);
    if (d->push_size > LOOM_MAX_PUSH || d->push_size % 4)
        return loom_fail(LOOM_LIMIT, "node %u (%s): push_size %u is not a multiple of 4 up to %u", id,
                         loom_op_name(d->op), d->push_size, LOOM_MAX_PUSH);
    if ((d->n_bindings && !d->bindings) || (d->n_reads && !d->reads) || (d->n_writes && !d->writes) ||
        (d->push_size && !d->push))
        return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): a count is set but its array is NULL", id,
                         loom_op_name(d->op));
    return LOOM_OK;
}

/* A dispatch's share of the graph's arrays: its range counts (from the
 * bindings when the frontend gave no ranges) and its canonical record. */
typedef struct dispatch_size {
    uint32_t nb, nr, nw;
    bool derive;
    size_t rec;
} dispatch_size;

static dispatch_size size_dispatch(const loom_dispatch_desc *d)
{
    dispatch_size z = { d->n_bindings, d->n_reads, d->n_writes, d->n_reads == 0 && d->n_writes == 0, 0 };
    if (z.derive)
        for (uint32_t i = 0; i < z.nb; i++) {
            z.nr += (d->bindings[i].access & LOOM_ACCESS_READ) != 0;
            z.nw += (d->bindings[i].access & LOOM_ACCESS_WRITE) != 0;
        }
    z.rec = LOOM_ENC_DISPATCH + (size_t)z.nb * sizeof(loom_binding) + (size_t)(z.nr + z.nw) * sizeof(loom_range) +
            d->push_size;
    return z;
}

/* Room for the dispatch in every array, so that appending cannot fail. */
static bool reserve_dispatch(loom_graph *g, const dispatch_size *z, uint32_t push_size)
{
    return LOOM_VEC_RESERVE(g->a, g->bindings, g->bindings.n + z->nb) &&
           LOOM_VEC_RESERVE(g->a, g->ranges, g->ranges.n + z->nr + z->nw) &&
           LOOM_VEC_RESERVE(g->a, g->push, g->push.n + push_size) &&
           (!g->node_enc_ok || (z->rec <= UINT32_MAX - g->node_enc.n &&
                                LOOM_VEC_RESERVE(g->a, g->node_enc, g->node_enc.n + (uint32_t)z->rec)));
}

/* The bindings, padding zeroed and LOOM_WHOLE sizes resolved. */
static loom_binding *fill_bindings(loom_graph *g, loom_node *n, const loom_dispatch_desc *d)
{
    uint32_t nb = d->n_bindings;
    n->first_binding = g->bindings.n;
    n->n_bindings = (uint8_t)nb;
    /* With nothing reserved yet the arrays are NULL; NULL + 0 is undefined. */
    loom_binding *b = nb ? g->bindings.v + g->bindings.n : NULL;
    for (uint32_t i = 0; i < nb; i++) {
        b[i] = d->bindings[i];
        b[i].pad_ = 0;
        if (b[i].size == LOOM_WHOLE && b[i].buffer < g->buffers.n) {
            uint64_t sz = g->buffers.v[b[i].buffer].size;
            b[i].size = b[i].offset < sz ? sz - b[i].offset : 0;
        }
    }
    g->bindings.n += nb;
    return b;
}

/* Reads then writes: the frontend's, or each binding's range by access. */
static loom_range *fill_ranges(loom_graph *g, loom_node *n, const loom_dispatch_desc *d, const loom_binding *b,
                               const dispatch_size *z)
{
    n->first_range = g->ranges.n;
    n->n_reads = (uint8_t)z->nr;
    n->n_writes = (uint8_t)z->nw;
    loom_range *r = z->nr + z->nw ? g->ranges.v + g->ranges.n : NULL;
    if (z->derive) {
        uint32_t ri = 0, wi = z->nr;
        for (uint32_t i = 0; i < z->nb; i++) {
            loom_range x = { b[i].buffer, 0, b[i].offset, b[i].size };
            if (b[i].access & LOOM_ACCESS_READ)
                r[ri++] = x;
            if (b[i].access & LOOM_ACCESS_WRITE)
                r[wi++] = x;
        }
    } else {
        for (uint32_t i = 0; i < z->nr; i++)
            r[i] = d->reads[i];
        for (uint32_t i = 0; i < z->nw; i++)
            r[z->nr + i] = d->writes[i];
        for (uint32_t i = 0; i < z->nr + z->nw; i++)
            r[i].pad_ = 0;
    }
    g->ranges.n += z->nr + z->nw;
    return r;
}

static uint8_t *fill_push(loom_graph *g, loom_node *n, const loom_dispatch_desc *d)
{
    n->push_offset = g->push.n;
    n->push_size = (uint8_t)d->push_size;
    uint8_t *push = d->push_size ? g->push.v + g->push.n : NULL;
    for (uint32_t i = 0; i < d->push_size; i += 4)   /* a multiple of 4, checked */
        memcpy(push + i, (const uint8_t *)d->push + i, 4);
    g->push.n += d->push_size;
    return push;
}

/* Check, reserve, append, fill; the node's canonical record is encoded as
 * it is captured (see node_enc). */
static loom_result add_dispatch(loom_graph *g, const loom_dispatch_desc *d, bool literal, uint32_t *out_id)
{
    if (!g || !d)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_add_dispatch: NULL argument");
    uint32_t id = g->nodes.n;
    loom_result rc = check_dispatch(g, d);
    if (rc)
        return rc;
    dispatch_size z = size_dispatch(d);
    if (!reserve_dispatch(g, &z, d->push_size))
        return loom_fail(LOOM_OUT_OF_MEMORY, "node %u: out of memory", id);
    uint32_t kernel;
    rc = literal ? kernel_lit(g, d->kernel, &kernel) : loom_graph_kernel(g, d->kernel, &kernel);
    if (rc)
        return loom_fail_wrap(rc, "node %u (%s)", id, loom_op_name(d->op));
    loom_node *n = append_node(g);
    if (!n)
        return loom_fail(LOOM_OUT_OF_MEMORY, "node %u: out of memory", id);

    n->type = LOOM_NODE_DISPATCH;
    n->op = (uint8_t)d->op;
    n->kernel = kernel;
    memcpy(n->groups, d->groups, sizeof n->groups);
    const loom_binding *b = fill_bindings(g, n, d);
    const loom_range *r = fill_ranges(g, n, d, b, &z);
    const uint8_t *push = fill_push(g, n, d);
    if (g->node_enc_ok) {
        loom_enc_record(g->node_enc.v + g->node_enc.n, n, b, r, push);
        g->node_enc.n += (uint32_t)z.rec;
    }
    g->nodes.n++;
    if (out_id)
        *out_id = id;
    return LOOM_OK;
}

loom_result loom_graph_add_barrier(loom_graph *g, uint32_t *out_id)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_add_barrier: graph is NULL");
    uint32_t id = g->nodes.n;
    if (g->node_enc_ok && (LOOM_ENC_HEAD > UINT32_MAX - g->node_enc.n ||
                           !LOOM_VEC_RESERVE(g->a, g->node_enc, g->node_enc.n + LOOM_ENC_HEAD)))
        return loom_fail(LOOM_OUT_OF_MEMORY, "node %u: out of memory", id);
    loom_node *n = append_node(g);
    if (!n)
        return loom_fail(LOOM_OUT_OF_MEMORY, "node %u: out of memory", id);
    n->type = LOOM_NODE_BARRIER;
    n->op = LOOM_OP_OTHER;
    n->first_binding = g->bindings.n;
    n->first_range = g->ranges.n;
    n->push_offset = g->push.n;
    if (g->node_enc_ok) {
        loom_enc_record(g->node_enc.v + g->node_enc.n, n, NULL, NULL, NULL);
        g->node_enc.n += LOOM_ENC_HEAD;
    }
    g->nodes.n++;
    if (out_id)
        *out_id = id;
    return LOOM_OK;
}

/* ---- accessors ---------------------------------------------------------- */

/* A NULL graph reads as an empty one: accessors have no result code. */
uint32_t loom_graph_node_count(const loom_graph *g) { return g ? g->nodes.n : 0; }
uint32_t loom_graph_buffer_count(const loom_graph *g) { return g ? g->buffers.n : 0; }
uint32_t loom_graph_kernel_count(const loom_graph *g) { return g ? g->kernels.n : 0; }

const loom_node *loom_graph_node(const loom_graph *g, uint32_t id)
{
    return g && id < g->nodes.n ? &g->nodes.v[id] : NULL;
}

const loom_buffer *loom_graph_buffer(const loom_graph *g, uint32_t id)
{
    return g && id < g->buffers.n ? &g->buffers.v[id] : NULL;
}

const char *loom_graph_buffer_name(const loom_graph *g, uint32_t id)
{
    return g && id < g->buffers.n ? g->strings.v + g->buffers.v[id].name : "?";
}

const char *loom_graph_kernel_name(const loom_graph *g, uint32_t id)
{
    return g && id < g->kernels.n ? g->strings.v + g->kernels.v[id] : "?";
}

const loom_binding *loom_node_bindings(const loom_graph *g, const loom_node *n)
{
    return g && n && g->bindings.v ? g->bindings.v + n->first_binding : NULL;
}

const loom_range *loom_node_reads(const loom_graph *g, const loom_node *n)
{
    return g && n && g->ranges.v ? g->ranges.v + n->first_range : NULL;
}

const loom_range *loom_node_writes(const loom_graph *g, const loom_node *n)
{
    return g && n && g->ranges.v ? g->ranges.v + n->first_range + n->n_reads : NULL;
}

const uint8_t *loom_node_push(const loom_graph *g, const loom_node *n)
{
    return g && n && g->push.v ? g->push.v + n->push_offset : NULL;
}

const loom_binding *loom_node_slot(const loom_graph *g, const loom_node *n, uint32_t slot)
{
    const loom_binding *b = loom_node_bindings(g, n);
    for (uint32_t i = 0; b && i < n->n_bindings; i++)
        if (b[i].slot == slot)
            return &b[i];
    return NULL;
}

bool loom_binding_same(const loom_binding *a, const loom_binding *b)
{
    return a && b && a->buffer == b->buffer && a->offset == b->offset && a->size == b->size;
}

bool loom_range_meets(const loom_range *r, const loom_binding *b)
{
    return r && b && r->buffer == b->buffer && r->offset < b->offset + b->size && b->offset < r->offset + r->size;
}

bool loom_node_is_fence(const loom_node *n)
{
    return n && (n->type == LOOM_NODE_BARRIER || !loom_op_reorderable((loom_op)n->op));
}

bool loom_graph_scheduled(const loom_graph *g) { return g && g->scheduled; }
uint32_t loom_graph_barrier_count(const loom_graph *g) { return g ? g->barriers.n : 0; }

const loom_barrier_info *loom_graph_barrier_info(const loom_graph *g, uint32_t i)
{
    return g && i < g->barriers.n ? &g->barriers.v[i] : NULL;
}

/* ---- edit API ----------------------------------------------------------- */

/* The caller may change any captured field of the node, or of its bindings,
 * ranges and push bytes through the accessors, so the node section kept for
 * the encoder is dropped until the next reset. */
loom_node *loom_graph_node_mut(loom_graph *g, uint32_t id)
{
    if (!g || id >= g->nodes.n)
        return NULL;
    g->node_enc_ok = false;
    return &g->nodes.v[id];
}

loom_buffer *loom_graph_buffer_mut(loom_graph *g, uint32_t id)
{
    return g && id < g->buffers.n ? &g->buffers.v[id] : NULL;
}

const loom_allocator *loom_graph_allocator(const loom_graph *g) { return g ? g->a : loom_default_allocator(); }

loom_result loom_graph_permute(loom_graph *g, const uint32_t *order, uint32_t n)
{
    if (!g || (n && !order))
        return loom_fail(LOOM_INVALID_ARGUMENT, "permute: NULL graph or order");
    uint32_t count = g->nodes.n;
    if (n > count)
        return loom_fail(LOOM_INVALID_ARGUMENT, "permute: %u entries for %u nodes", n, count);
    size_t bytes = (size_t)n * sizeof(loom_node) + count;
    uint8_t *mem = loom_alloc(g->a, bytes ? bytes : 1);
    if (!mem)
        return loom_fail(LOOM_OUT_OF_MEMORY, "permute: out of memory");
    loom_node *tmp = (loom_node *)mem;
    uint8_t *seen = mem + (size_t)n * sizeof(loom_node);
    memset(seen, 0, count);
    for (uint32_t i = 0; i < n; i++) {
        if (order[i] >= count || seen[order[i]]) {
            loom_free(g->a, mem, bytes ? bytes : 1);
            return loom_fail(LOOM_INVALID_ARGUMENT, "permute: entry %u (node %u) is out of range or repeated", i,
                             order[i]);
        }
        seen[order[i]] = 1;
        tmp[i] = g->nodes.v[order[i]];
    }
    if (n)
        memcpy(g->nodes.v, tmp, (size_t)n * sizeof(loom_node));
    g->nodes.n = n;
    g->node_enc_ok = false;
    loom_free(g->a, mem, bytes ? bytes : 1);
    return LOOM_OK;
}

/* Renumbers buffer id for loom_graph_drop_unused_buffers: map holds the new
 * id of every buffer from first on (LOOM_NONE: dropped). */
static uint32_t remapped(const uint32_t *map, uint32_t first, uint32_t n_old, uint32_t id)
{
    return id >= first && id < n_old ? map[id - first] : id;
}

loom_result loom_graph_drop_unused_buffers(loom_graph *g, uint32_t first, uint32_t *out_dropped)
{
    if (out_dropped)
        *out_dropped = 0;
    if (!g || first >= g->buffers.n)
        return LOOM_OK;
    uint32_t n_old = g->buffers.n, n = n_old - first, k = first;
    uint32_t *map = loom_alloc(g->a, (size_t)n * sizeof *map);
    if (!map)
        return loom_fail(LOOM_OUT_OF_MEMORY, "drop_unused_buffers: out of memory");
    for (uint32_t i = 0; i < n; i++)
        map[i] = LOOM_NONE;
    /* Used: bound or ranged by a node of the graph (the side arrays may
     * still hold entries of nodes a permutation dropped). */
    for (uint32_t i = 0; i < g->nodes.n; i++) {
        const loom_node *nd = &g->nodes.v[i];
        if (!loom_node_sane(g, nd))
            continue;
        for (uint32_t j = 0; j < nd->n_bindings; j++)
            if (g->bindings.v[nd->first_binding + j].buffer - first < n)
                map[g->bindings.v[nd->first_binding + j].buffer - first] = 0;
        for (uint32_t j = 0; j < (uint32_t)nd->n_reads + nd->n_writes; j++)
            if (g->ranges.v[nd->first_range + j].buffer - first < n)
                map[g->ranges.v[nd->first_range + j].buffer - first] = 0;
    }
    for (uint32_t i = 0; i < n; i++)
        if (map[i] != LOOM_NONE) {
            g->buffers.v[k] = g->buffers.v[first + i];
            map[i] = k++;
        }
    if (k != n_old) {
        for (uint32_t i = 0; i < g->nodes.n; i++) {
            const loom_node *nd = &g->nodes.v[i];
            if (!loom_node_sane(g, nd))
                continue;
            for (uint32_t j = 0; j < nd->n_bindings; j++) {
                loom_binding *b = &g->bindings.v[nd->first_binding + j];
                b->buffer = remapped(map, first, n_old, b->buffer);
            }
            for (uint32_t j = 0; j < (uint32_t)nd->n_reads + nd->n_writes; j++) {
                loom_range *r = &g->ranges.v[nd->first_range + j];
                r->buffer = remapped(map, first, n_old, r->buffer);
            }
        }
        for (uint32_t i = 0; i < g->barriers.n; i++)
            g->barriers.v[i].buffer = remapped(map, first, n_old, g->barriers.v[i].buffer);
        if (g->params != LOOM_NONE)
            g->params = remapped(map, first, n_old, g->params);
        g->buffers.n = k;
        g->node_enc_ok = false;
    }
    loom_free(g->a, map, (size_t)n * sizeof *map);
    if (out_dropped)
        *out_dropped = n_old - k;
    return LOOM_OK;
}

const uint32_t *loom_node_members(const loom_graph *g, const loom_node *n)
{
    if (n->fused > 1 && n->first_member != LOOM_NONE && (uint64_t)n->first_member + n->fused <= g->members.n)
        return g->members.v + n->first_member;
    return &n->capture_index;
}

loom_result loom_graph_set_members(loom_graph *g, uint32_t id, const uint32_t *caps, uint32_t n)
{
    if (id >= g->nodes.n || n == 0 || !caps)
        return loom_fail(LOOM_INVALID_ARGUMENT, "set_members: node %u of %u, %u members", id, g->nodes.n, n);
    for (uint32_t i = 1; i < n; i++)
        if (caps[i] <= caps[i - 1])
            return loom_fail(LOOM_INVALID_ARGUMENT, "set_members: node %u: members are not ascending", id);
    loom_node *nd = &g->nodes.v[id];
    nd->fused = n;
    nd->first_member = LOOM_NONE;
    nd->capture_index = caps[n - 1];
    if (n == 1)
        return LOOM_OK;
    if (!LOOM_VEC_RESERVE(g->a, g->members, g->members.n + n))
        return loom_fail(LOOM_OUT_OF_MEMORY, "set_members: out of memory");
    memcpy(g->members.v + g->members.n, caps, (size_t)n * sizeof *caps);
    nd->first_member = g->members.n;
    g->members.n += n;
    return LOOM_OK;
}

loom_result loom_graph_add_barrier_info(loom_graph *g, const loom_barrier_info *info, uint32_t *out_index)
{
    if (!g || !info || !out_index)
        return loom_fail(LOOM_INVALID_ARGUMENT, "barrier info: NULL argument");
    if (!LOOM_VEC_RESERVE(g->a, g->barriers, g->barriers.n + 1))
        return loom_fail(LOOM_OUT_OF_MEMORY, "barrier info: out of memory");
    g->barriers.v[g->barriers.n] = *info;
    *out_index = g->barriers.n++;
    return LOOM_OK;
}

void loom_graph_clear_schedule(loom_graph *g)
{
    if (!g)
        return;
    for (uint32_t i = 0; i < g->nodes.n; i++) {
        g->nodes.v[i].group = LOOM_NONE;
        g->nodes.v[i].barrier = LOOM_NONE;
    }
    g->barriers.n = 0;
    g->scheduled = false;
}

void loom_graph_set_scheduled(loom_graph *g, bool scheduled)
{
    if (g)
        g->scheduled = scheduled;
}
void loom_graph_set_arena_size(loom_graph *g, uint64_t size)
{
    if (g)
        g->arena_size = size;
}
uint64_t loom_graph_arena_size(const loom_graph *g) { return g ? g->arena_size : 0; }

loom_hazard loom_nodes_conflict(const loom_graph *g, const loom_node *a, const loom_node *b, uint32_t *buffer)
{
    uint32_t none;
    if (!buffer)
        buffer = &none;
    *buffer = LOOM_NONE;
    if (!g || !a || !b)
        return LOOM_HAZARD_NONE;
    if (a->type == LOOM_NODE_BARRIER || b->type == LOOM_NODE_BARRIER)
        return LOOM_HAZARD_SENTINEL;
    const loom_range *ar = loom_node_reads(g, a), *aw = loom_node_writes(g, a);
    const loom_range *br = loom_node_reads(g, b), *bw = loom_node_writes(g, b);
    for (uint32_t i = 0; i < a->n_writes; i++)
        for (uint32_t j = 0; j < b->n_reads; j++)
            if (loom_ranges_overlap(&aw[i], &br[j])) {
                *buffer = aw[i].buffer;
                return LOOM_HAZARD_RAW;
            }
    for (uint32_t i = 0; i < a->n_writes; i++)
        for (uint32_t j = 0; j < b->n_writes; j++)
            if (loom_ranges_overlap(&aw[i], &bw[j])) {
                *buffer = aw[i].buffer;
                return LOOM_HAZARD_WAW;
            }
    for (uint32_t i = 0; i < a->n_reads; i++)
        for (uint32_t j = 0; j < b->n_writes; j++)
            if (loom_ranges_overlap(&ar[i], &bw[j])) {
                *buffer = ar[i].buffer;
                return LOOM_HAZARD_WAR;
            }
    return LOOM_HAZARD_NONE;
}
