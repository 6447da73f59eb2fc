/* Canonical encoding and XXH3-128 hash. The encoding lists, in order, the
 * buffers (name, size, usage, external), the kernel names, then every node's
 * captured fields with its variable parts inline — never side-array indices,
 * pointers or annotations — so equal graphs encode to equal bytes however
 * they were built. All integers are little-endian. */
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>
#include "internal.h"

typedef struct enc {
    const loom_allocator *a;
    uint8_t *p;
    size_t len, cap;
    bool failed;
} enc;

static bool reserve(enc *e, size_t more)
{
    if (e->len + more <= e->cap)
        return true;
    size_t ncap = e->cap ? e->cap : 4096;
    while (ncap < e->len + more)
        ncap *= 2;
    uint8_t *q = e->a->realloc(e->a->user, e->p, e->cap, ncap);
    if (!q) {
        e->failed = true;
        return false;
    }
    e->p = q;
    e->cap = ncap;
    return true;
}

static void put(enc *e, const void *p, size_t n)
{
    if (n && reserve(e, n)) {
        memcpy(e->p + e->len, p, n);
        e->len += n;
    }
}

static void put32(enc *e, uint32_t v) { put(e, &v, 4); }   /* hosts we build for are little-endian */
static void put64(enc *e, uint64_t v) { put(e, &v, 8); }

static void put_str(enc *e, const char *s)
{
    uint32_t n = (uint32_t)strlen(s);
    put32(e, n);
    put(e, s, n);
}

loom_result loom_graph_encode(const loom_graph *g, uint8_t **buf, size_t *cap, size_t *len)
{
    if (!g || !buf || !cap || !len)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_encode: NULL argument");
    enc e = { g->a, *buf, 0, *cap, false };
    put(&e, "loom-ir1", 8);
    put32(&e, g->buffers.n);
    for (uint32_t i = 0; i < g->buffers.n; i++) {
        const loom_buffer *b = &g->buffers.v[i];
        put_str(&e, g->strings.v + b->name);
        put64(&e, b->size);
        put32(&e, b->usage);
        put64(&e, b->external);
    }
    put32(&e, g->kernels.n);
    for (uint32_t i = 0; i < g->kernels.n; i++)
        put_str(&e, g->strings.v + g->kernels.v[i]);
    put32(&e, g->nodes.n);
    for (uint32_t i = 0; i < g->nodes.n; i++) {
        const loom_node *n = &g->nodes.v[i];
        uint8_t head[8] = { n->type, n->op, n->n_bindings, n->n_reads, n->n_writes, n->push_size,
                            (uint8_t)n->flags, (uint8_t)(n->flags >> 8) };
        put(&e, head, sizeof head);
        if (n->type == LOOM_NODE_BARRIER)
            continue;
        put32(&e, n->kernel);
        put(&e, n->groups, sizeof n->groups);
        /* loom_binding and loom_range have zeroed padding (set at capture), so
         * their bytes are canonical as they stand. */
        put(&e, loom_node_bindings(g, n), n->n_bindings * sizeof(loom_binding));
        put(&e, loom_node_reads(g, n), (size_t)(n->n_reads + n->n_writes) * sizeof(loom_range));
        put(&e, loom_node_push(g, n), n->push_size);
    }
    *buf = e.p;
    *cap = e.cap;
    *len = e.len;
    if (e.failed)
        return loom_fail(LOOM_OUT_OF_MEMORY, "loom_graph_encode: out of memory at %zu bytes", e.len);
    return LOOM_OK;
}

loom_hash loom_hash_bytes(const void *p, size_t n)
{
    XXH128_hash_t h = XXH3_128bits(p, n);
    return (loom_hash){ h.low64, h.high64 };
}

loom_result loom_graph_hash(const loom_graph *g, loom_hash *out)
{
    uint8_t *buf = NULL;
    size_t cap = 0, len = 0;
    loom_result rc = loom_graph_encode(g, &buf, &cap, &len);
    if (rc == LOOM_OK)
        *out = loom_hash_bytes(buf, len);
    if (buf)
        g->a->realloc(g->a->user, buf, cap, 0);
    return rc;
}
