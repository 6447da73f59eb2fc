/* ir/ private: the graph's layout and the growable arrays behind it. Shared
 * by the files of ir/ only. */
#ifndef LOOM_IR_INTERNAL_H
#define LOOM_IR_INTERNAL_H

#include "loom_ir.h"
#include <string.h>
#include "loom_ir_edit.h"

/* Grows *p (element size es, *cap elements) to hold at least need elements. */
bool loom_grow(const loom_allocator *a, void **p, uint32_t *cap, uint32_t need, size_t es);
void *loom_alloc(const loom_allocator *a, size_t n);
void loom_free(const loom_allocator *a, void *p, size_t n);

#define LOOM_VEC(T) struct { T *v; uint32_t n, cap; }
#define LOOM_VEC_FREE(a, vec) \
    (loom_free((a), (vec).v, (size_t)(vec).cap * sizeof(*(vec).v)), (vec).v = NULL, (vec).n = (vec).cap = 0)
/* The capacity test is inline: capture reserves several arrays per node and
 * almost never grows them once a graph has been captured before. */
#define LOOM_VEC_RESERVE(a, vec, need) \
    ((need) <= (vec).cap || loom_grow((a), (void **)&(vec).v, &(vec).cap, (need), sizeof(*(vec).v)))

struct loom_graph {
    const loom_allocator *a;
    char name[64];
    LOOM_VEC(loom_node) nodes;
    LOOM_VEC(loom_buffer) buffers;
    LOOM_VEC(uint32_t) kernels;          /* string-table offsets */
    LOOM_VEC(loom_binding) bindings;
    LOOM_VEC(loom_range) ranges;
    LOOM_VEC(uint8_t) push;
    LOOM_VEC(char) strings;
    LOOM_VEC(loom_barrier_info) barriers;
    LOOM_VEC(uint32_t) members;          /* capture indices of fused nodes' members */
    /* The node section of the canonical encoding (encode.c), appended node
     * by node at capture so encoding and hashing a freshly captured graph
     * copy no per-field data. node_enc_ok is false once an edit may have
     * made it stale; the encoder then rebuilds from the nodes. */
    LOOM_VEC(uint8_t) node_enc;
    bool node_enc_ok;
    /* Kernel ids by the address of a name with static storage (op builders
     * pass literals): a hit skips the string compare. Direct-mapped; a slot
     * is trusted only while its id is below kernels.n and cleared on reset. */
    struct { const char *name; uint32_t id; } kernel_lit[16];
    uint32_t params;                     /* buffer id or LOOM_NONE */
    bool scheduled;
    uint64_t arena_size;
};

/* Capture always leaves a node's side-array indices in range, but the edit
 * API can break them; the dumps are how one finds out, so they print such
 * a node as corrupt rather than read past the arrays. */
static inline bool loom_node_sane(const loom_graph *g, const loom_node *n)
{
    return (uint64_t)n->first_binding + n->n_bindings <= g->bindings.n &&
           (uint64_t)n->first_range + n->n_reads + n->n_writes <= g->ranges.n &&
           (uint64_t)n->push_offset + n->push_size <= g->push.n;
}

/* Copies a NUL-terminated string into the table; returns its offset. */
bool loom_graph_intern_string(loom_graph *g, const char *s, uint32_t *out);

/* loom_graph_add_dispatch for the op builders, whose kernel names are string
 * literals: d->kernel must never change for the life of the program, so its
 * address alone can find the kernel id. */
loom_result loom_graph_add_dispatch_lit(loom_graph *g, const loom_dispatch_desc *d, uint32_t *out_id);

/* Canonical record sizes (encode.c): a node's record is its 8-byte head, and
 * for a dispatch the kernel id, groups, bindings, ranges and push bytes. */
#define LOOM_ENC_HEAD 8u
#define LOOM_ENC_DISPATCH (LOOM_ENC_HEAD + 4u + 12u)

/* Writes node n's canonical record at p (exactly loom_enc_node_size bytes)
 * from its bindings b, ranges r (reads then writes) and push bytes; returns
 * the end. Inline with fixed-size copies: capture calls it for every node. */
static inline uint8_t *loom_enc_record(uint8_t *p, const loom_node *n, const loom_binding *b,
                                       const loom_range *r, const uint8_t *push)
{
    uint8_t head[LOOM_ENC_HEAD] = { n->type, n->op, n->n_bindings, n->n_reads, n->n_writes, n->push_size,
                                    (uint8_t)n->flags, (uint8_t)(n->flags >> 8) };
    memcpy(p, head, sizeof head);
    if (n->type == LOOM_NODE_BARRIER)
        return p + LOOM_ENC_HEAD;
    memcpy(p + LOOM_ENC_HEAD, &n->kernel, 4);
    memcpy(p + LOOM_ENC_HEAD + 4, n->groups, sizeof n->groups);
    p += LOOM_ENC_DISPATCH;
    /* loom_binding and loom_range have zeroed padding (set at capture), so
     * their bytes are canonical as they stand. */
    for (uint32_t i = 0; i < n->n_bindings; i++, p += sizeof *b)
        memcpy(p, &b[i], sizeof *b);
    for (uint32_t i = 0, nr = (uint32_t)n->n_reads + n->n_writes; i < nr; i++, p += sizeof *r)
        memcpy(p, &r[i], sizeof *r);
    uint32_t i = 0;
    for (; i + 4 <= n->push_size; i += 4, p += 4)
        memcpy(p, push + i, 4);
    for (; i < n->push_size; i++)   /* capture keeps sizes a multiple of 4; an edit may not */
        *p++ = push[i];
    return p;
}

/* loom_enc_record for node n of g. */
uint8_t *loom_enc_node(const loom_graph *g, const loom_node *n, uint8_t *p);

static inline size_t loom_enc_node_size(const loom_node *n)
{
    if (n->type == LOOM_NODE_BARRIER)
        return LOOM_ENC_HEAD;
    return LOOM_ENC_DISPATCH + (size_t)n->n_bindings * sizeof(loom_binding) +
           (size_t)(n->n_reads + n->n_writes) * sizeof(loom_range) + n->push_size;
}

/* Built-in kernel layouts, sorted by name: generated from the SPIR-V of
 * shaders/ at build time (tools/spirv_layouts.c). */
typedef struct loom_builtin_layout {
    const char *name;
    loom_kernel_layout layout;
} loom_builtin_layout;
const loom_builtin_layout *loom_builtin_layout_table(size_t *count);
/* What the build's check against ops.def reads of a kernel's SPIR-V
 * (tools/spirv_layouts.c): its layout, its push-constant bytes (the end of
 * the block's furthest member; 0 without one) and its local size. A member
 * that is not a scalar or vector is LOOM_UNSUPPORTED; otherwise it fails as
 * loom_kernel_layout_from_spirv does. */
typedef struct loom_spirv_info {
    loom_kernel_layout layout;
    uint32_t push_size;
    uint32_t local_size[3];
    uint64_t shared_bytes;   /* the workgroup variables' bytes, unpadded */
} loom_spirv_info;
loom_result loom_spirv_reflect(const uint32_t *code, size_t size_bytes, loom_spirv_info *out);
/* loom_kernel_find without touching the error slot: the verifier asks for
 * every node's kernel and most test kernels have no layout. */
bool loom_kernel_lookup(const char *name, loom_kernel_layout *out, bool *builtin);

/* The JSON writer (json_write.c), reached through loom_graph_dump. */
loom_result loom_dump_json(const loom_graph *g, loom_str *out);

#endif
