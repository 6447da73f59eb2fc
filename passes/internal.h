/* passes/ private: temporary memory from the graph's allocator and the
 * access set that reorder, barriers and the tests' helpers share — per
 * buffer lists of the byte ranges read and written since some point, so a
 * hazard query touches only the ranges of the buffers a node uses instead
 * of every earlier node. */
#ifndef LOOM_PASSES_INTERNAL_H
#define LOOM_PASSES_INTERNAL_H

#include <string.h>
#include "loom_passes.h"
#include "loom_ops.h"

static inline void *pass_alloc(const loom_allocator *a, size_t n)
{
    return a->realloc(a->user, NULL, 0, n ? n : 1);
}
static inline void *pass_calloc(const loom_allocator *a, size_t n)
{
    void *p = pass_alloc(a, n);
    if (p)
        memset(p, 0, n ? n : 1);
    return p;
}
static inline void pass_free(const loom_allocator *a, void *p, size_t n)
{
    if (p)
        a->realloc(a->user, p, n ? n : 1, 0);
}

/* One recorded access: [lo, hi) of a buffer by the node with tag `tag`
 * (a level for reorder, a capture index for barriers). */
typedef struct pass_acc {
    uint64_t lo, hi;
    uint32_t tag;
    uint32_t next;        /* next access of the same buffer and direction */
} pass_acc;

typedef struct pass_accset {
    const loom_allocator *a;
    uint32_t nbuf;
    uint32_t *rhead, *whead, *stamp;   /* per buffer; a stale stamp means empty */
    uint32_t epoch;
    pass_acc *v;
    uint32_t n, cap;
} pass_accset;

loom_result pass_accset_init(pass_accset *s, const loom_allocator *a, uint32_t nbuf);
void pass_accset_free(pass_accset *s);
/* Forgets every access in O(1). */
void pass_accset_clear(pass_accset *s);
/* Records a node's reads and writes under tag. */
loom_result pass_accset_add(pass_accset *s, const loom_graph *g, const loom_node *n, uint32_t tag);

/* First hazard between an earlier recorded access and node n (RAW, then
 * WAW, then WAR); fills *buffer and *tag of the earlier access. */
loom_hazard pass_accset_first(const pass_accset *s, const loom_graph *g, const loom_node *n, uint32_t *buffer,
                              uint32_t *tag);
/* Largest tag among recorded accesses that conflict with n; 0 when none. */
uint32_t pass_accset_max_tag(const pass_accset *s, const loom_graph *g, const loom_node *n);

/* Whether the split pass can cut a node of this op into row blocks; the
 * fuse pass makes no node it could not, over a binding above the limit. */
bool pass_split_handles(loom_op op);

/* Elapsed monotonic nanoseconds, for pass timing. */
uint64_t pass_now_ns(void);

/* ---- rebuilding builder-made nodes (rewrite.c: stage, gather) ----------- */

/* The binding of nd's slot called name (its op's row of ops.def), or NULL. */
const loom_binding *pass_named(const loom_graph *g, const loom_node *nd, const char *name);
/* nd is laid out as its op's builder lays it out; *second: its op's second
 * kernel (f16 weights, or ATTENTION's wide form). */
bool pass_builder_made(const loom_graph *g, const loom_node *nd, bool *second);
/* The same, as the index of nd's kernel in its op's row (2 and 3: f16 KV
 * caches), or -1. */
int pass_builder_form(const loom_graph *g, const loom_node *nd);
/* The weights' dtype of nd's kernel form (forms.def; f32 for a kernel
 * outside the table). Forms of any dtype but f32 read x in chunks of 8,
 * which the f16-activation forms (MV_X16, MV_Y16, MV_T16) need. */
loom_dtype pass_weight_dtype(const loom_graph *g, const loom_node *nd);

/* A buffer only the plan sees: no external memory, not kept for the host,
 * usage none or scratch. */
bool pass_plan_buffer(const loom_graph *g, uint32_t id);
bool pass_same_range(const loom_range *r, const loom_binding *b);
/* Whether a write (read) range of nd meets any byte of b. */
bool pass_writes(const loom_graph *g, const loom_node *nd, const loom_binding *b);
bool pass_reads(const loom_graph *g, const loom_node *nd, const loom_binding *b);
/* Gives node id nd's capture indices (members or its own) and flags. */
loom_result pass_same_members(loom_graph *g, const loom_node *nd, uint32_t id);
/* Marks node id as made by a pass, standing for no captured node (fused 0);
 * label is the capture index it carries for messages and barrier reasons. */
void pass_made_node(loom_graph *g, uint32_t id, uint32_t label);
/* Appends a dispatch standing for node pos (its op, workgroups and
 * captured members) with the given kernel, bindings, ranges (nr reads,
 * then nw writes) and push constants; *id: the new node. None of the
 * arrays may point into g (appending may move its storage). */
loom_result pass_add_like(loom_graph *g, uint32_t pos, const char *kernel, const loom_binding *b, uint32_t nb,
                          const loom_range *r, uint32_t nr, uint32_t nw, const void *push, uint32_t push_size,
                          uint32_t *id);
/* Appends node id again with another kernel of the same slots (bindings,
 * ranges, push constants, workgroups); *out: the copy. */
loom_result pass_retarget(loom_graph *g, uint32_t id, const char *kernel, uint32_t *out);
/* Passes that put copies of nodes, under other kernels, where the nodes
 * were: fn(g, i, repl, count, arg) is called for every node i not renamed
 * yet and may append copies of nodes, node j's copy going to repl[j]
 * (repl[j] == j: none yet), adding the renamings it made to *count; then
 * the plan lists each copy where its node was (the schedule is cleared).
 * *count: the renamings of all calls; pass names the pass in errors. */
typedef loom_result (*pass_rename_fn)(loom_graph *g, uint32_t i, uint32_t *repl, uint32_t *count, const void *arg);
loom_result pass_rename_nodes(loom_graph *g, const char *pass, pass_rename_fn fn, const void *arg, uint32_t *count);

/* split's last step: the matmul kinds' tiled forms to their
 * cooperative-matrix forms where ctx->coopmat (coopmat.c). */
loom_result pass_coopmat(loom_graph *g, const loom_pass_ctx *ctx);

#endif
