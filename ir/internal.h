/* ir/ private: the graph's layout and the growable arrays behind it. Shared
 * by the files of ir/ only. */
#ifndef LOOM_IR_INTERNAL_H
#define LOOM_IR_INTERNAL_H

#include "loom_ir.h"
#include "loom_ir_edit.h"

/* Grows *p (element size es, *cap elements) to hold at least need elements. */
bool loom_grow(const loom_allocator *a, void **p, uint32_t *cap, uint32_t need, size_t es);
void *loom_alloc(const loom_allocator *a, size_t n);
void loom_free(const loom_allocator *a, void *p, size_t n);

#define LOOM_VEC(T) struct { T *v; uint32_t n, cap; }
#define LOOM_VEC_FREE(a, vec) \
    (loom_free((a), (vec).v, (size_t)(vec).cap * sizeof(*(vec).v)), (vec).v = NULL, (vec).n = (vec).cap = 0)
#define LOOM_VEC_RESERVE(a, vec, need) \
    loom_grow((a), (void **)&(vec).v, &(vec).cap, (need), sizeof(*(vec).v))

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
    uint32_t params;                     /* buffer id or LOOM_NONE */
    bool scheduled;
    uint64_t arena_size;
};

/* Copies a NUL-terminated string into the table; returns its offset. */
bool loom_graph_intern_string(loom_graph *g, const char *s, uint32_t *out);

/* The JSON writer (json.c), reached through loom_graph_dump. */
loom_result loom_dump_json(const loom_graph *g, loom_str *out);

#endif
