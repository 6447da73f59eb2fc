/* Canonical encoding and XXH3-128 hash. The encoding lists, in order, the
 * buffers (name, size, usage, external, keep), the kernel names, then every node's
 * captured fields with its variable parts inline — never side-array indices,
 * pointers or annotations — so equal graphs encode to equal bytes however
 * they were built. All integers are little-endian.
 *
 * This runs once per decoded token, so it is built for speed: the node
 * section (by far the largest part) is appended record by record at capture
 * (graph.c keeps it while no edit has touched the nodes), the sizes are known
 * before anything is written, and the hash can run over the pieces in place
 * instead of a joined copy. A graph whose kept section was dropped encodes
 * from its nodes to the very same bytes. */
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>
#include "internal.h"

static const char magic[8] = { 'l', 'o', 'o', 'm', '-', 'i', 'r', '1' };

/* Hosts we build for are little-endian, so a value's bytes are its encoding. */
static inline uint8_t *st32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
    return p + 4;
}

static inline uint8_t *st64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
    return p + 8;
}

static inline uint8_t *st_bytes(uint8_t *p, const void *src, size_t n)
{
    if (n)   /* src may be NULL when n is 0 */
        memcpy(p, src, n);
    return p + n;
}

uint8_t *loom_enc_node(const loom_graph *g, const loom_node *n, uint8_t *p)
{
    return loom_enc_record(p, n, loom_node_bindings(g, n), loom_node_reads(g, n), loom_node_push(g, n));
}

/* Magic, buffers, kernel names and the node count: everything before the
 * node records. */
static size_t prefix_size(const loom_graph *g)
{
    size_t n = sizeof magic + 4 + (size_t)g->buffers.n * (4 + 8 + 4 + 8 + 4) + 4 + (size_t)g->kernels.n * 4 + 4;
    for (uint32_t i = 0; i < g->buffers.n; i++)
        n += strlen(g->strings.v + g->buffers.v[i].name);
    for (uint32_t i = 0; i < g->kernels.n; i++)
        n += strlen(g->strings.v + g->kernels.v[i]);
    return n;
}

static uint8_t *put_str(uint8_t *p, const char *s)
{
    uint32_t n = (uint32_t)strlen(s);
    p = st32(p, n);
    return st_bytes(p, s, n);
}

static uint8_t *write_prefix(const loom_graph *g, uint8_t *p)
{
    p = st_bytes(p, magic, sizeof magic);
    p = st32(p, g->buffers.n);
    for (uint32_t i = 0; i < g->buffers.n; i++) {
        const loom_buffer *b = &g->buffers.v[i];
        p = put_str(p, g->strings.v + b->name);
        p = st64(p, b->size);
        p = st32(p, b->usage);
        p = st64(p, b->external);
        p = st32(p, b->keep);
    }
    p = st32(p, g->kernels.n);
    for (uint32_t i = 0; i < g->kernels.n; i++)
        p = put_str(p, g->strings.v + g->kernels.v[i]);
    return st32(p, g->nodes.n);
}

static size_t nodes_size(const loom_graph *g)
{
    if (g->node_enc_ok)
        return g->node_enc.n;
    size_t n = 0;
    for (uint32_t i = 0; i < g->nodes.n; i++)
        n += loom_enc_node_size(&g->nodes.v[i]);
    return n;
}

static uint8_t *write_nodes(const loom_graph *g, uint8_t *p)
{
    if (g->node_enc_ok)
        return st_bytes(p, g->node_enc.v, g->node_enc.n);
    for (uint32_t i = 0; i < g->nodes.n; i++)
        p = loom_enc_node(g, &g->nodes.v[i], p);
    return p;
}

/* Grows *buf to hold need bytes; doubling keeps a buffer reused across
 * tokens from being reallocated as the graph varies a little. */
static bool fit(const loom_graph *g, uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return true;
    size_t ncap = *cap ? *cap : 4096;
    while (ncap < need)
        ncap *= 2;
    uint8_t *q = g->a->realloc(g->a->user, *buf, *cap, ncap);
    if (!q)
        return false;
    *buf = q;
    *cap = ncap;
    return true;
}

loom_result loom_graph_encode(const loom_graph *g, uint8_t **buf, size_t *cap, size_t *len)
{
    if (!g || !buf || !cap || !len)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_encode: NULL argument");
    size_t need = prefix_size(g) + nodes_size(g);
    if (!fit(g, buf, cap, need)) {
        *len = 0;
        return loom_fail(LOOM_OUT_OF_MEMORY, "loom_graph_encode: out of memory at %zu bytes", need);
    }
    uint8_t *end = write_nodes(g, write_prefix(g, *buf));
    *len = (size_t)(end - *buf);
    return LOOM_OK;
}

loom_result loom_graph_encode_parts(const loom_graph *g, uint8_t **buf, size_t *cap, size_t *len,
                                    const uint8_t **nodes, size_t *nodes_len)
{
    if (!g || !buf || !cap || !len || !nodes || !nodes_len)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_encode_parts: NULL argument");
    *nodes = NULL;
    *nodes_len = 0;
    if (!g->node_enc_ok)
        return loom_graph_encode(g, buf, cap, len);
    size_t need = prefix_size(g);
    if (!fit(g, buf, cap, need)) {
        *len = 0;
        return loom_fail(LOOM_OUT_OF_MEMORY, "loom_graph_encode: out of memory at %zu bytes", need);
    }
    *len = (size_t)(write_prefix(g, *buf) - *buf);
    *nodes = g->node_enc.v;
    *nodes_len = g->node_enc.n;
    return LOOM_OK;
}

loom_hash loom_hash_bytes(const void *p, size_t n)
{
    if (!p)
        n = 0;   /* hashes as the empty string */
    XXH128_hash_t h = XXH3_128bits(p, n);
    return (loom_hash){ h.low64, h.high64 };
}

loom_hash loom_hash_concat(uint32_t count, const void *const p[], const size_t n[])
{
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_128bits_reset(&st);
    for (uint32_t i = 0; p && n && i < count; i++)
        if (n[i] && p[i])
            XXH3_128bits_update(&st, p[i], n[i]);
    XXH128_hash_t h = XXH3_128bits_digest(&st);
    return (loom_hash){ h.low64, h.high64 };
}

loom_result loom_graph_hash(const loom_graph *g, loom_hash *out)
{
    if (!g || !out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_graph_hash: NULL argument");
    /* The prefix is a few hundred bytes for a typical step: on the stack,
     * so hashing a captured graph allocates nothing. */
    uint8_t stack[1024];
    uint8_t *buf = stack;
    size_t cap = sizeof stack, len = 0;
    const uint8_t *nodes;
    size_t nodes_len;
    /* fit() would realloc the stack buffer, so a larger encoding starts over
     * on the heap. */
    size_t need = prefix_size(g) + (g->node_enc_ok ? 0 : nodes_size(g));
    if (need > sizeof stack) {
        buf = NULL;
        cap = 0;
    }
    loom_result rc = loom_graph_encode_parts(g, &buf, &cap, &len, &nodes, &nodes_len);
    if (rc == LOOM_OK)
        *out = loom_hash_concat(2, (const void *const[]){ buf, nodes }, (const size_t[]){ len, nodes_len });
    if (buf != stack && buf)
        g->a->realloc(g->a->user, buf, cap, 0);
    return rc;
}
