/* loom compiler: graph → immutable plan, and the plan cache.
 *
 * A plan is the optimized graph in execution order, annotated with
 * concurrency groups, barriers (with the hazard that required each), buffer
 * classes and the scratch-arena layout, plus its statistics. Plans are
 * reference-counted and immutable once made; the runtime hangs its recorded
 * command buffers on a plan through the attachment slot.
 *
 * Threading: plans may be read from several threads, and attachments made
 * with loom_plan_attach / found with loom_plan_find_attachment are safe to
 * use from several threads at once (each runtime hangs its own program on a
 * shared plan). A cache is used from one thread at a time.
 * Failure: loom_result + loom_last_error(). */
#ifndef LOOM_COMPILER_H
#define LOOM_COMPILER_H

#include "loom_ir.h"
#include "loom_pass_switches.h"

#ifdef __cplusplus
extern "C" {
#endif
/* The library is built with hidden visibility; what is declared here is its
 * public API, exported from the shared library. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define LOOM_DEFAULT_PIPELINE LOOM_PASS_PIPELINE_DEFAULT
#define LOOM_DEFAULT_WINDOW 64u

/* Switches for bisection and benchmarks: the LOOM_DISABLE_* pass bits of
 * loom_pass_switches.h, plus the cache's. Every combination stays correct:
 * with the barriers pass off a barrier is recorded before every node.
 *
 * The environment reaches every frontend without recompiling; loom_compile
 * and loom_cache_compile read it on each call:
 * - LOOM_DISABLE=fuse,stage,gather,reorder,barriers,lifetimes,cache,split_k (any subset) is ORed
 *   into loom_compile_options.disable: it can switch more off, never back on.
 * - LOOM_PASSES=verify,fuse,... (the pass table's names) replaces the
 *   pipeline; a pass it names that a disable bit covers is still skipped.
 * An unknown name fails the call with LOOM_INVALID_ARGUMENT and a message
 * listing the known ones. Both are part of the plan key, so the cache
 * never returns a plan made under other settings. */
enum {
    LOOM_DISABLE_CACHE     = LOOM_DISABLE_PASS_MASK + 1,  /* loom_cache_compile always compiles anew */
    /* split: no split K walk. By default a matrix of one weight (MATMUL,
     * MATMUL_ADD) whose large tiles are too few to fill the device
     * (LOOM_MATMUL_COOP_L_FROM / 2 up to LOOM_MATMUL_COOP_L_FROM) takes them
     * with its K walk split between two workgroups a tile, the second to
     * finish adding both halves (MM_SK; a plan-owned partial tile and
     * counter each); without cooperative matrices, the portable tiles of a
     * matrix of fewer than LOOM_MATMUL_COOP_L_FROM tiles split the same way.
     * On an H200 it took `1b` pp512 10.91 -> 10.06 ms (docs/perf-log.md). */
    LOOM_DISABLE_SPLIT_K   = (LOOM_DISABLE_PASS_MASK + 1) << 1,
};

/* Forms that are not the default (yet), switched on per compile for
 * benchmarks and checks (loom_pass_switches.h): LOOM_ENABLE_HALF_SHARES,
 * _HALF_STAGE, _HALF_ACT, _LONG_ROWS, _QKV_AWAIT, _COUNTS (_COUNTS_FFN |
 * _COUNTS_QKV). LOOM_ENABLE=half_shares,half_stage,half_act,long_rows,
 * qkv_await,counts,counts_ffn,counts_qkv (any subset) is ORed into
 * loom_compile_options.enable
 * on every compile, as LOOM_DISABLE is into .disable, and is part of the
 * plan key the same way. loom_rt_compile drops the half forms on a device
 * whose subgroups hold one invocation. */

typedef struct loom_compile_options {
    const char *pipeline;     /* NULL: LOOM_DEFAULT_PIPELINE; $LOOM_PASSES overrides */
    uint32_t window;          /* reorder lookahead; 0: LOOM_DEFAULT_WINDOW */
    uint32_t disable;         /* LOOM_DISABLE_*, ORed with $LOOM_DISABLE */
    uint32_t enable;          /* LOOM_ENABLE_*; part of the plan's key */
    bool verify_each;         /* run the verifier after every pass */
    bool time_each;           /* fill loom_plan_stats.pass_ns */
    const char *dump_dir;     /* dump after every pass; NULL: $LOOM_DUMP, else none */
    /* Bytes one binding may cover: a node binding more is cut into row
     * blocks by the split pass, or refused with LOOM_LIMIT naming node and
     * field (so is a plan still binding more, from a pipeline without
     * 'split'). 0: no limit. loom_rt_compile fills in its device's
     * maxStorageBufferRange (or the smaller loom_rt_desc.max_binding_range)
     * where this is 0 or larger. Part of the plan's key. */
    uint64_t max_binding_range;
    /* Workgroups of 256 invocations (at most 64 registers each) the device
     * runs at once; 0: unknown. The argmax forms' workgroups loop over
     * their row blocks, at most 1024 of them; the split pass caps them at
     * this where it is lower, so that one wave does all the blocks and no
     * second one starts as the first ends (faster on the H100 and H200;
     * figures: docs/perf-log.md). loom_rt_compile fills it in where the
     * driver tells the SM count. Part of the plan's key. */
    uint32_t wave_groups;
    /* The tiled forms of the matmul kinds (MATMUL, MATMUL_ADD,
     * MATMUL_SILU_MUL over f16 or block-typed weights) are swapped for
     * their cooperative-matrix forms (the split pass), whose kernels run
     * only on a device with VK_NV_cooperative_matrix's 16x16x16 f16 -> f32
     * shape. loom_rt_compile sets it from its device (loom_rt_info.coopmat;
     * LOOM_COOPMAT=0 at device creation runs as on a device without).
     * Part of the plan's key. */
    bool coopmat;
    /* Awaited edges (the awaits pass, docs/design-notes.md "Awaited edges:
     * what they assume"): a reader right after its producer polls the
     * producer's tagged output instead of waiting at a barrier, where the
     * plan allows. Only for a device that launches a queue's dispatches in
     * order; loom_rt_compile sets it from its device's rule
     * (loom_rt_info.awaited_edges; LOOM_TAGS=0 or 1 at device creation
     * overrides the rule). Off by default elsewhere. Part of the plan's key.
     * Numerics: an awaited edge's vector travels as 24-bit floats (15 bits
     * of mantissa, ties away from zero: at most 2^-16 of each value off,
     * NaN kept; design-notes.md "What a tagged vector rounds"), so a plan
     * with awaits is not bit-equal to one without; switch it off for that. */
    bool awaits;
} loom_compile_options;

#define LOOM_MAX_PASSES 16

typedef struct loom_plan_stats {
    uint32_t nodes;               /* nodes in the plan (after fusion) */
    uint32_t captured_nodes;      /* nodes in the input graph */
    uint32_t dispatches;
    uint32_t groups;
    uint32_t barriers;            /* recorded: the dependencies not awaited */
    uint32_t awaited;             /* dependencies polled in the shader instead (awaited edges) */
    uint32_t barrier_lower_bound; /* sum over windows of (longest chain - 1), plus forced barriers */
    uint32_t fused_chains;
    uint32_t split_nodes;         /* nodes cut into row blocks (the binding limit) */
    uint64_t scratch_bytes;       /* sum of SCRATCH buffer sizes, unpacked */
    uint64_t arena_bytes;         /* packed arena size */
    uint64_t arena_lower_bound;   /* peak of simultaneously live scratch bytes */
    uint32_t n_passes;
    const char *pass_names[LOOM_MAX_PASSES];
    uint64_t pass_ns[LOOM_MAX_PASSES];
} loom_plan_stats;

typedef struct loom_plan loom_plan;

/* Verifies g, runs the pipeline on a copy and returns a new plan holding one
 * reference. g is not modified. */
loom_result loom_compile(const loom_graph *g, const loom_compile_options *opts, loom_plan **out);
void loom_plan_retain(loom_plan *p);
/* Drops a reference; the last one destroys the attachment and the plan. */
void loom_plan_release(loom_plan *p);

const loom_graph *loom_plan_graph(const loom_plan *p);   /* optimized, annotated */
const loom_plan_stats *loom_plan_get_stats(const loom_plan *p);
loom_hash loom_plan_key(const loom_plan *p);              /* of the input graph + options */

/* Attachments: objects owned by the plan once attached, one per owner (a
 * runtime hangs its recorded program on a plan under its own address, so
 * runtimes on several threads can replay one plan). busy() tells the cache
 * that the plan must not be evicted now (e.g. a replay is in flight); it may
 * be called from the thread of any cache holding the plan. The last
 * reference destroys every attachment, on the thread that drops it. */
typedef struct loom_plan_attachment {
    void *obj;
    void (*destroy)(void *obj);
    bool (*busy)(void *obj);
    const void *owner;    /* NULL: the plan's default slot */
} loom_plan_attachment;
/* Attaches a->obj under a->owner unless that owner already has an
 * attachment; returns the owner's object either way (so a caller that lost
 * a race destroys its own). NULL on a NULL argument or out of memory.
 * Thread-safe. */
void *loom_plan_attach(loom_plan *p, const loom_plan_attachment *a);
/* The object attached under owner, or NULL. Thread-safe. */
void *loom_plan_find_attachment(const loom_plan *p, const void *owner);
/* Sets (a non-NULL) or clears (a NULL) the default slot (owner NULL),
 * destroying what it replaces. Not for plans other threads are using. */
void loom_plan_set_attachment(loom_plan *p, const loom_plan_attachment *a);
void *loom_plan_get_attachment(const loom_plan *p);   /* the default slot */

/* ---- cache -------------------------------------------------------------- */

typedef struct loom_cache loom_cache;

typedef struct loom_cache_desc {
    uint32_t capacity;                /* plans kept; 0: 64 */
    const loom_allocator *allocator;  /* NULL: default */
} loom_cache_desc;

typedef struct loom_cache_stats {
    uint64_t hits, misses, evictions, collisions, entries;
} loom_cache_stats;

loom_result loom_cache_create(const loom_cache_desc *desc, loom_cache **out);
/* Releases the cache's references; plans still held elsewhere live on. */
void loom_cache_destroy(loom_cache *c);

/* Looks g up by XXH3-128 of its canonical encoding plus the options that
 * change the result; a key match is confirmed by comparing canonical bytes.
 * On a miss compiles and inserts (evicting the least recently used plan that
 * is not busy). Returns a new reference in *out; *hit says which. */
loom_result loom_cache_compile(loom_cache *c, const loom_graph *g, const loom_compile_options *opts,
                               loom_plan **out, bool *hit);
void loom_cache_get_stats(const loom_cache *c, loom_cache_stats *out);

/* Test hook: when set, every key is replaced by this value, so distinct
 * graphs collide and only the byte comparison tells them apart. */
void loom_cache_force_key(loom_cache *c, const loom_hash *key);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif
#endif
