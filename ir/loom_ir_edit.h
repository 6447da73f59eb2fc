/* Mutation API for passes and the compiler: edit nodes in place, permute or
 * drop nodes, and write annotations. Frontends capture through loom_ir.h
 * only. Same failure rules as loom_ir.h. */
#ifndef LOOM_IR_EDIT_H
#define LOOM_IR_EDIT_H

#include "loom_ir.h"

#ifdef __cplusplus
extern "C" {
#endif
/* The library is built with hidden visibility; what is declared here is its
 * public API, exported from the shared library. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* Questions the passes and the runtime ask of nodes, bindings and ranges;
 * NULL-safe, no failure. loom_node_slot: n's binding at slot, or NULL.
 * loom_binding_same: a and b bind the same bytes (buffer, offset, size);
 * false if either is NULL. loom_range_meets: r shares a byte with b.
 * loom_node_is_fence: nothing moves across n (a sentinel, or an op kind
 * ops.def marks not reorderable). */
const loom_binding *loom_node_slot(const loom_graph *g, const loom_node *n, uint32_t slot);
bool loom_binding_same(const loom_binding *a, const loom_binding *b);
bool loom_range_meets(const loom_range *r, const loom_binding *b);
bool loom_node_is_fence(const loom_node *n);

/* Edits to a node's bindings, ranges or push bytes (through the accessors)
 * go through a node from loom_graph_node_mut too: it is what tells the graph
 * that its nodes may have changed since capture. */
loom_node *loom_graph_node_mut(loom_graph *g, uint32_t id);
loom_buffer *loom_graph_buffer_mut(loom_graph *g, uint32_t id);

/* Rebuilds the node list as old nodes order[0], order[1], … order[n-1].
 * Nodes not listed are dropped; listing one twice is LOOM_INVALID_ARGUMENT. */
loom_result loom_graph_permute(loom_graph *g, const uint32_t *order, uint32_t n);

/* Drops every buffer from id first on that no node binds or ranges, and
 * renumbers the rest of them in order (ids below first never change), so a
 * pass or builder that declared buffers it did not use leaves none behind.
 * *out_dropped (may be NULL): how many went. Fails only for memory, leaving
 * the graph as it was. */
loom_result loom_graph_drop_unused_buffers(loom_graph *g, uint32_t first, uint32_t *out_dropped);

/* Records that node id stands for the captured nodes caps[0..n) (ascending,
 * the last its capture index): sets fused = n and the member list. */
loom_result loom_graph_set_members(loom_graph *g, uint32_t id, const uint32_t *caps, uint32_t n);

/* Appends a barrier reason; *out_index goes into a node's .barrier. */
loom_result loom_graph_add_barrier_info(loom_graph *g, const loom_barrier_info *info, uint32_t *out_index);

/* Drops groups, barriers and barrier infos (not buffer classes). */
void loom_graph_clear_schedule(loom_graph *g);
void loom_graph_set_scheduled(loom_graph *g, bool scheduled);

/* Arena size chosen by the lifetimes pass (0 when none). */
void loom_graph_set_arena_size(loom_graph *g, uint64_t size);
uint64_t loom_graph_arena_size(const loom_graph *g);

/* The graph's allocator, for passes' temporary memory. */
const loom_allocator *loom_graph_allocator(const loom_graph *g);

/* loom_graph_encode in pieces, for the plan cache: the bytes before the node
 * records (magic, buffers, kernel names, node count) go into *buf as
 * loom_graph_encode writes, and *nodes / *nodes_len point at the node
 * records the graph keeps from capture, valid until the graph is next
 * modified. *buf followed by *nodes is exactly loom_graph_encode's output.
 * After an edit (node_mut, permute) the graph keeps no records: the whole
 * encoding goes into *buf and *nodes_len is 0. */
loom_result loom_graph_encode_parts(const loom_graph *g, uint8_t **buf, size_t *cap, size_t *len,
                                    const uint8_t **nodes, size_t *nodes_len);
/* loom_hash_bytes of the concatenation of count pieces, without joining them. */
loom_hash loom_hash_concat(uint32_t count, const void *const p[], const size_t n[]);

/* Overlap of half-open byte ranges on the same buffer. */
static inline bool loom_ranges_overlap(const loom_range *a, const loom_range *b)
{
    return a->buffer == b->buffer && a->offset < b->offset + b->size &&
           b->offset < a->offset + a->size;
}

/* First hazard between earlier node a and later node b (RAW, then WAW, then
 * WAR), or LOOM_HAZARD_NONE. Sets *buffer to the buffer involved. Barrier
 * nodes conflict with everything (SENTINEL). */
loom_hazard loom_nodes_conflict(const loom_graph *g, const loom_node *a, const loom_node *b, uint32_t *buffer);

/* loom_kernel_layout_from_spirv, and from the same reading the bytes of
 * shared (workgroup) memory the shader declares: each variable's scalars,
 * vectors, arrays and structs, unpadded. */
loom_result loom_kernel_reflect(const uint32_t *code, size_t size_bytes, loom_kernel_layout *layout,
                                uint64_t *shared_bytes);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif
#endif
