/* loom IR: the graph a frontend captures — buffers, dispatch nodes, barrier
 * sentinels — plus the annotations passes add (groups, barriers, buffer
 * classes, arena offsets). No Vulkan here: this header and everything under
 * ir/ build and test without a loader.
 *
 * Ids: buffers, nodes and kernels are uint32_t indices into the graph; they
 * stay valid until the graph is reset or destroyed. A graph is not
 * thread-safe; distinct graphs may be used from distinct threads.
 *
 * Errors: every fallible call returns a loom_result; on failure the message
 * (naming the node, field and value where one applies) is kept per thread and
 * read with loom_last_error(). Nothing aborts on caller input: a NULL where a
 * pointer is required is LOOM_INVALID_ARGUMENT (accessors without a result
 * return 0, NULL or "?" instead).
 *
 * The error slot is thread-local, not per object: read it on the thread that
 * made the failing call, before that thread makes another loom call that can
 * fail. Two threads never see each other's messages. */
#ifndef LOOM_IR_H
#define LOOM_IR_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif
/* The library is built with hidden visibility; what is declared here is its
 * public API, exported from the shared library. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* ---- results ------------------------------------------------------------ */

typedef enum loom_result {
#define X(name, msg) LOOM_##name,
#include "results.def"
#undef X
    LOOM_RESULT_COUNT
} loom_result;

/* Name of a result code ("LOOM_VERIFY"); never NULL. */
const char *loom_result_str(loom_result rc);
/* Detail of the last failure on this thread; "" when none. The slot is
 * thread-local (see the top of this file). Valid until the next failing loom
 * call on this thread. */
const char *loom_last_error(void);
/* Record a failure (used by every loom module); returns rc. */
loom_result loom_fail(loom_result rc, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Record a failure that wraps the one already in this thread's slot: the
 * message becomes "<fmt…>: <earlier message>". Use it instead of passing
 * loom_last_error() to loom_fail, which would format the slot into itself.
 * Returns rc. */
loom_result loom_fail_wrap(loom_result rc, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void loom_clear_error(void);

/* ---- allocator ---------------------------------------------------------- */

/* Lua-style: realloc(user, p, old, new) — new == 0 frees and returns NULL;
 * returning NULL for new > 0 is an allocation failure the caller survives. */
typedef struct loom_allocator {
    void *(*realloc)(void *user, void *p, size_t old_size, size_t new_size);
    void *user;
} loom_allocator;

/* The libc allocator; used where a descriptor leaves .allocator NULL. */
const loom_allocator *loom_default_allocator(void);

/* ---- op kinds ----------------------------------------------------------- */

typedef enum loom_op {
#define X(name, ...) LOOM_OP_##name,
#include "ops.def"
#undef X
    LOOM_OP_COUNT
} loom_op;

const char *loom_op_name(loom_op op);       /* "RMS_NORM"; "?" if out of range */
const char *loom_op_meaning(loom_op op);
bool loom_op_reorderable(loom_op op);
/* Parse a name as written by loom_op_name; returns false if unknown. */
bool loom_op_from_name(const char *name, loom_op *out);

/* ---- buffers ------------------------------------------------------------ */

/* What the frontend says a buffer is for; NONE lets the lifetimes pass decide. */
typedef enum loom_usage {
    LOOM_USAGE_NONE = 0,
    LOOM_USAGE_WEIGHT,
    LOOM_USAGE_INPUT,     /* written by the host before each step */
    LOOM_USAGE_OUTPUT,    /* read by the host after each step */
    LOOM_USAGE_STATE,     /* persists and is read-written across steps */
    LOOM_USAGE_KV_CACHE,  /* append-only at the step's position */
    LOOM_USAGE_SCRATCH,   /* per-step temporary */
    LOOM_USAGE_PARAMS,    /* the step-parameter buffer (see loom_graph_params) */
    LOOM_USAGE_COUNT
} loom_usage;

/* What the lifetimes pass decided. UNKNOWN until it runs. */
typedef enum loom_class {
    LOOM_CLASS_UNKNOWN = 0,
    LOOM_CLASS_WEIGHT,
    LOOM_CLASS_SCRATCH,
    LOOM_CLASS_KV_APPEND,
    LOOM_CLASS_INPUT,
    LOOM_CLASS_OUTPUT,
    LOOM_CLASS_STATE,
    LOOM_CLASS_COUNT
} loom_class;

const char *loom_usage_name(loom_usage u);   /* "weight", "none", … */
bool loom_usage_from_name(const char *name, loom_usage *out);
const char *loom_class_name(loom_class c);   /* "WEIGHT", … */
bool loom_class_from_name(const char *name, loom_class *out);

typedef struct loom_buffer_desc {
    const char *name;     /* copied; NULL means "b<id>" */
    uint64_t size;        /* bytes, > 0 */
    loom_usage usage;
    /* Identity of the memory behind the buffer, e.g. a runtime buffer's
     * serial number; 0 means the plan provides the memory (scratch arena or a
     * plan-owned allocation). Part of the graph's hash. */
    uint64_t external;
} loom_buffer_desc;

typedef struct loom_buffer {
    uint32_t name;        /* offset into the graph's string table */
    uint32_t usage;       /* loom_usage */
    uint64_t size;
    uint64_t external;
    /* annotations (lifetimes pass) */
    uint32_t cls;         /* loom_class */
    uint32_t keep;        /* loom_graph_keep_buffer (captured, not an annotation) */
    uint64_t arena_offset;  /* SCRATCH only: offset in the plan's arena */
} loom_buffer;

/* ---- nodes -------------------------------------------------------------- */

#define LOOM_MAX_BINDINGS 12
#define LOOM_MAX_RANGES   8    /* per direction (reads, writes) */
#define LOOM_MAX_PUSH     128  /* bytes; the Vulkan minimum maxPushConstantsSize */
#define LOOM_NONE         UINT32_MAX
#define LOOM_WHOLE        UINT64_MAX  /* binding size: to the end of the buffer */

enum { LOOM_ACCESS_READ = 1, LOOM_ACCESS_WRITE = 2, LOOM_ACCESS_RW = 3 };

/* One binding slot of an op kind's kernel. */
typedef struct loom_op_slot {
    const char *name;         /* "params": the step-parameter buffer */
    uint32_t access;          /* LOOM_ACCESS_READ, _WRITE, or _RW for a workspace */
    bool inplace;             /* a read slot that may be exactly a written slot's view ("(i)") */
} loom_op_slot;

/* An op kind's row of ops.def, whose header says what each column means. */
typedef struct loom_op_info {
    loom_op op;
    const char *name, *meaning;
    bool reorderable;
    const char *kernel[4];    /* by weight dtype, [0] f32 and [1] f16 (ATTENTION: [1] for head_dim
                                 > 64); the same name twice when the kernel has no variants; NULL
                                 for an op with no built-in kernel. [2] and [3]: the same for f16
                                 KV caches, where the op has caches (else NULL); the matmul kinds:
                                 [2] and [3] their tiled forms */
    bool params;              /* slot 0 is the step-parameter buffer */
    uint32_t n_slots;
    loom_op_slot slot[LOOM_MAX_BINDINGS];
    uint32_t writable;        /* bit s: slot s is written (WRITE or RW) */
    uint32_t push_size;       /* bytes */
    uint32_t local_size;      /* local_size_x */
    uint32_t per_group;       /* what one workgroup covers; 0: the builder decides */
    const char *colour;       /* DOT fill, "#rrggbb" */
    float tol_abs, tol_rel;   /* op test bound: |got - want| <= tol_abs + tol_rel * |want| */
} loom_op_info;

/* The row of op; NULL if out of range. Static storage, thread-safe. */
const loom_op_info *loom_op_info_get(loom_op op);

typedef enum loom_node_type {
    LOOM_NODE_DISPATCH = 0,
    LOOM_NODE_BARRIER  = 1,   /* sentinel: an ordering point the frontend demands */
} loom_node_type;

typedef struct loom_binding {
    uint32_t buffer;
    uint32_t slot;        /* descriptor binding number in set 0 */
    uint64_t offset;
    uint64_t size;        /* bytes; LOOM_WHOLE resolved at capture */
    uint32_t access;      /* LOOM_ACCESS_* */
    uint32_t pad_;
} loom_binding;

typedef struct loom_range {
    uint32_t buffer;
    uint32_t pad_;
    uint64_t offset;
    uint64_t size;
} loom_range;

typedef enum loom_hazard {
    LOOM_HAZARD_NONE = 0,
    LOOM_HAZARD_RAW,
    LOOM_HAZARD_WAR,
    LOOM_HAZARD_WAW,
    LOOM_HAZARD_SENTINEL,  /* the frontend's barrier node */
} loom_hazard;

const char *loom_hazard_name(loom_hazard h);  /* "RAW", … */

/* Why a barrier exists: the first hazard found that required it. */
typedef struct loom_barrier_info {
    uint32_t hazard;      /* loom_hazard */
    uint32_t buffer;      /* LOOM_NONE for SENTINEL */
    uint32_t before;      /* capture index of the earlier node */
    uint32_t after;       /* capture index of the later node */
} loom_barrier_info;

/* loom_node.flags. */
enum {
    /* A row block of the captured nodes it names, made by the split pass:
     * several nodes may stand for the same captured nodes. */
    LOOM_NODE_SPLIT = 1u << 0,
};

/* Flat, fixed-size node. Variable parts live in the graph's side arrays:
 * bindings[first_binding ..+n_bindings), ranges[first_range ..+n_reads) are
 * the reads and the next n_writes are the writes, push[push_offset ..+push_size). */
typedef struct loom_node {
    uint8_t type;         /* loom_node_type */
    uint8_t op;           /* loom_op */
    uint8_t n_bindings;
    uint8_t n_reads;
    uint8_t n_writes;
    uint8_t push_size;
    uint16_t flags;       /* LOOM_NODE_* */
    uint32_t kernel;      /* kernel id (interned name); LOOM_NONE for a barrier */
    uint32_t groups[3];
    uint32_t first_binding;
    uint32_t first_range;
    uint32_t push_offset;
    /* annotations */
    uint32_t capture_index; /* position in capture order (set at capture) */
    uint32_t group;         /* concurrency group; LOOM_NONE before scheduling */
    uint32_t barrier;       /* index into barrier infos for a barrier recorded
                               before this node; LOOM_NONE if none */
    uint32_t fused;         /* number of captured nodes this node stands for;
                               0 for a node a pass added (the stage pass's
                               ZERO), whose capture_index is only a label */
    uint32_t first_member;  /* fused > 1: index of their capture indices in the
                               graph's member list; LOOM_NONE otherwise */
    uint32_t window;        /* reorder's lookahead window (segment) number;
                               LOOM_NONE when reorder did not run */
    /* Awaited edges (the awaits pass): the barrier in front of a node whose
     * tag_in is set is not recorded; the node polls the tagged vector its
     * producer (the node before it, whose tag_out is the same number)
     * writes. Its .barrier still names the hazard the poll stands in for,
     * so the plan can also be recorded with every barrier. */
    uint16_t tag_in;        /* tagged vector read at slot tag_in_slot, 1..LOOM_AWAIT_MAX,
                               | LOOM_AWAIT_GATE: all of it before loading anything; 0: none */
    uint16_t tag_out;       /* tagged vector written at slot tag_out_slot; 0: none */
    uint8_t tag_in_slot, tag_out_slot;
    /* Counted edges (the awaits pass): a producer whose outputs are not
     * tagged words counts its finished workgroups into counter count_out;
     * a node with count_in waits until every workgroup of that producer (a
     * node before it) has, then reads the producer's outputs. A reader
     * right behind its producer records no barrier either. 1..
     * LOOM_COUNT_MAX; 0: none. */
    uint8_t count_in, count_out;
} loom_node;

/* Awaited edges: vectors a plan may tag (the 8-bit tag word's vector
 * part), tag_in's "wait for all of x first" bit, and the binding the
 * runtime supplies to a tagged kernel (its step and fault words), which a
 * graph never binds. shaders/loom_shaders.h spells the same numbers for
 * the GLSL; the runtime checks that they agree. */
#define LOOM_AWAIT_MAX 127u
#define LOOM_AWAIT_GATE 0x100u
#define LOOM_AWAIT_BINDING 31u
/* Counted edges: counters a plan may use, and the binding the runtime
 * supplies for them (LOOM_COUNT_BINDING in shaders/loom_shaders.h). */
#define LOOM_COUNT_MAX 127u
#define LOOM_COUNT_BINDING_SLOT 30u

/* Does node n wait in the shader (a tagged vector or a counter) for what
 * the barrier in front of it would order? */
static inline bool loom_node_awaited(const loom_node *n) { return n->tag_in || n->count_in; }

/* Is node n an end of an awaited edge (reader or producer, tagged or
 * counted)? */
static inline bool loom_node_on_edge(const loom_node *n)
{
    return loom_node_awaited(n) || n->tag_out || n->count_out;
}

/* ---- graph -------------------------------------------------------------- */

typedef struct loom_graph loom_graph;

typedef struct loom_graph_desc {
    const char *name;                 /* NULL: "graph" */
    const loom_allocator *allocator;  /* NULL: loom_default_allocator() */
} loom_graph_desc;

/* Creates an empty graph. On failure *out is NULL. */
loom_result loom_graph_create(const loom_graph_desc *desc, loom_graph **out);
void loom_graph_destroy(loom_graph *g);  /* NULL is fine */
/* Forgets every node, buffer and kernel but keeps the memory, so a frontend
 * can capture the same step again each token without allocating. */
void loom_graph_reset(loom_graph *g);
/* Deep copy (same allocator). */
loom_result loom_graph_clone(const loom_graph *g, loom_graph **out);

const char *loom_graph_name(const loom_graph *g);

loom_result loom_graph_add_buffer(loom_graph *g, const loom_buffer_desc *desc, uint32_t *out_id);
/* Says the host reads the buffer after a step (an intermediate under
 * inspection, say): it is never fused away nor packed into the scratch
 * arena, so a buffer the lifetimes pass would call SCRATCH is an OUTPUT
 * instead, and the runtime lets the host read it. Part of the graph's hash.
 * LOOM_INVALID_ARGUMENT for a buffer that does not exist. */
loom_result loom_graph_keep_buffer(loom_graph *g, uint32_t buffer);
/* Interns a kernel name; the same name gives the same id. */
loom_result loom_graph_kernel(loom_graph *g, const char *name, uint32_t *out_id);

/* ---- kernel binding layouts ---------------------------------------------- */

/* What a kernel binds: storage buffers in descriptor set 0, one bit per
 * binding number (a node's binding .slot). The verifier holds every dispatch
 * of a kernel whose layout is known to it: each slot bound once, no other
 * slot bound, a slot the kernel may write bound with LOOM_ACCESS_WRITE and a
 * read-only one without it. Built-in kernels (shaders/) know their layouts
 * from their SPIR-V at build time; custom kernels declare theirs. */
#define LOOM_MAX_SLOTS 32
/* Device features a kernel's SPIR-V declares it needs (loom_kernel_layout.needs). */
#define LOOM_KERNEL_NEEDS_STORAGE16 1u   /* 16-bit loads and stores of storage buffers (StorageBuffer16BitAccess) */
#define LOOM_KERNEL_NEEDS_COOPMAT 2u     /* NV cooperative matrices, 16x16x16 f16 -> f32 by subgroups of 32
                                            (CooperativeMatrixNV; the matmul kinds' coopmat forms) */
typedef struct loom_kernel_layout {
    uint32_t slots;      /* bit s: the kernel declares binding s */
    uint32_t writable;   /* bit s: binding s is not readonly (NonWritable): the kernel may write it */
    uint32_t needs;      /* LOOM_KERNEL_NEEDS_*: the runtime refuses the kernel on a device without them */
} loom_kernel_layout;

/* Reads the layout of a SPIR-V compute shader (code: size_bytes of SPIR-V
 * words, not kept). A binding outside set 0, one that is not a storage
 * buffer, or a binding number >= LOOM_MAX_SLOTS is LOOM_UNSUPPORTED;
 * malformed SPIR-V is LOOM_PARSE. *out is zeroed on failure. */
loom_result loom_kernel_layout_from_spirv(const uint32_t *code, size_t size_bytes, loom_kernel_layout *out);

/* Declares a custom kernel's layout, process-wide, under its name (copied):
 * graphs verified afterwards are checked against it. The runtime declares
 * every kernel it registers from that kernel's SPIR-V, so a frontend using
 * loom_rt_kernel_glsl/spirv needs no call here. Declaring a name again
 * replaces its layout; a declared name shadows a built-in one, as a
 * registered kernel does in the runtime. Thread-safe. */
loom_result loom_kernel_declare(const char *name, const loom_kernel_layout *layout);
/* The layout of a declared or built-in kernel; LOOM_NOT_FOUND when neither.
 * *builtin (may be NULL) says which. Thread-safe. */
loom_result loom_kernel_find(const char *name, loom_kernel_layout *out, bool *builtin);

typedef struct loom_dispatch_desc {
    const char *kernel;               /* name; the runtime maps it to a pipeline */
    loom_op op;
    uint32_t groups[3];               /* workgroup counts; 0 is rejected by verify */
    const loom_binding *bindings;     /* n_bindings ≤ LOOM_MAX_BINDINGS */
    uint32_t n_bindings;
    const void *push;                 /* push-constant bytes, copied */
    uint32_t push_size;               /* ≤ LOOM_MAX_PUSH, multiple of 4 */
    /* Explicit ranges. When both counts are 0 they are derived from the
     * bindings: READ bindings give reads, WRITE bindings give writes. */
    const loom_range *reads;
    uint32_t n_reads;
    const loom_range *writes;
    uint32_t n_writes;
} loom_dispatch_desc;

/* Appends a dispatch. Structural limits (counts, push size) are checked here;
 * the rest by loom_graph_verify. out_id may be NULL. */
loom_result loom_graph_add_dispatch(loom_graph *g, const loom_dispatch_desc *desc, uint32_t *out_id);
loom_result loom_graph_add_barrier(loom_graph *g, uint32_t *out_id);

/* The step-parameter buffer (a loom_step_params, host-written before every
 * replay). Declared on first call; later calls return the same id. */
loom_result loom_graph_params(loom_graph *g, uint32_t *out_id);

/* Per-token values kernels read from the step-parameter buffer. */
/* rows: the token rows valid in a multi-token step, 1 <= rows <= T (row t
 * at position pos + t; rows past it are padding); 1 in a decode step. */
typedef struct loom_step_params {
    uint32_t pos;         /* position of the token being decoded (a multi-token step: of row 0) */
    uint32_t token;       /* its token id */
    uint32_t kv_len;      /* cache entries valid after this step (pos + rows) */
    uint32_t step;        /* replay counter */
    uint32_t rows;        /* token rows valid (see above) */
    uint32_t user[11];
} loom_step_params;

/* Accessors. Pointers stay valid until the graph is next modified. */
uint32_t loom_graph_node_count(const loom_graph *g);
uint32_t loom_graph_buffer_count(const loom_graph *g);
uint32_t loom_graph_kernel_count(const loom_graph *g);
const loom_node *loom_graph_node(const loom_graph *g, uint32_t id);
const loom_buffer *loom_graph_buffer(const loom_graph *g, uint32_t id);
const char *loom_graph_buffer_name(const loom_graph *g, uint32_t id);
const char *loom_graph_kernel_name(const loom_graph *g, uint32_t kernel_id);
const loom_binding *loom_node_bindings(const loom_graph *g, const loom_node *n);
const loom_range *loom_node_reads(const loom_graph *g, const loom_node *n);
const loom_range *loom_node_writes(const loom_graph *g, const loom_node *n);
const uint8_t *loom_node_push(const loom_graph *g, const loom_node *n);
/* Capture indices of the captured nodes n stands for, ascending; n->fused of
 * them (the last is n->capture_index). An unfused node stands for itself. */
const uint32_t *loom_node_members(const loom_graph *g, const loom_node *n);

/* ---- verification, hashing ---------------------------------------------- */

/* Checks every id, range, count and limit. On failure returns LOOM_VERIFY
 * with a message like "node 3 (MATVEC): write range 0 [0, 4100) exceeds
 * buffer 2 'y' of 4096 bytes". Also checks, for every dispatch, its
 * bindings against its kernel's layout when the layout is known (see
 * loom_kernel_find), and — for a dispatch with bindings — its explicit
 * ranges against its bindings: every read range inside a binding of its
 * buffer, every write range inside a writable binding, and every binding
 * touched by at least one range of its direction (a wrong range would
 * otherwise remove a barrier). */
loom_result loom_graph_verify(const loom_graph *g);

typedef struct loom_hash { uint64_t lo, hi; } loom_hash;

/* Canonical encoding: deterministic bytes describing buffers (name, size,
 * usage, external), kernel names and nodes in order, independent of pointer
 * values and of side-array layout. Annotations are not included.
 * Writes into *buf (grown with the graph's allocator as needed; *cap is its
 * capacity) and sets *len. The caller frees *buf with the same allocator. */
loom_result loom_graph_encode(const loom_graph *g, uint8_t **buf, size_t *cap, size_t *len);
/* XXH3-128 of the canonical encoding. */
loom_result loom_graph_hash(const loom_graph *g, loom_hash *out);
loom_hash loom_hash_bytes(const void *p, size_t n);

/* ---- annotations (written by passes) ------------------------------------ */

/* True once a scheduling pass has assigned groups. */
bool loom_graph_scheduled(const loom_graph *g);
uint32_t loom_graph_barrier_count(const loom_graph *g);      /* barrier infos */
const loom_barrier_info *loom_graph_barrier_info(const loom_graph *g, uint32_t i);

/* ---- dumps and files ---------------------------------------------------- */

typedef enum loom_format {
    LOOM_FORMAT_TEXT = 0,
    LOOM_FORMAT_DOT,
    LOOM_FORMAT_JSON,
} loom_format;

bool loom_format_from_name(const char *name, loom_format *out);
const char *loom_format_ext(loom_format f);   /* "txt", "dot", "json" */

/* A growable string the dumpers write into; free with loom_str_free. */
typedef struct loom_str {
    char *data;           /* NUL-terminated when len > 0 */
    size_t len, cap;
    const loom_allocator *allocator;
    bool failed;          /* an allocation failed; contents are incomplete */
} loom_str;

void loom_str_init(loom_str *s, const loom_allocator *a);  /* a NULL: default */
void loom_str_free(loom_str *s);
void loom_str_append(loom_str *s, const char *p, size_t n);
void loom_str_printf(loom_str *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Text is canonical and one line per node (golden-test stable). DOT colours
 * nodes by op kind, draws hazard edges and shows barriers. JSON is the file
 * format of docs/json-format.md, read back by loom_graph_parse_json. */
loom_result loom_graph_dump(const loom_graph *g, loom_format f, loom_str *out);
/* Parses JSON text into a new graph. Malformed input returns LOOM_PARSE with
 * "line L, column C: …"; never crashes. */
loom_result loom_graph_parse_json(const char *text, size_t len, const loom_graph_desc *desc, loom_graph **out);
loom_result loom_graph_load(const char *path, const loom_graph_desc *desc, loom_graph **out);
loom_result loom_graph_save(const loom_graph *g, loom_format f, const char *path);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif
#endif
