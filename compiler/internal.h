/* compiler/ private: the plan's layout and the canonical key bytes shared by
 * loom_compile and the cache. */
#ifndef LOOM_COMPILER_INTERNAL_H
#define LOOM_COMPILER_INTERNAL_H

#include "loom_compiler.h"
#include "loom_passes.h"

struct loom_plan {
    const loom_allocator *a;
    uint32_t refs;                 /* atomic */
    loom_graph *graph;
    loom_plan_stats stats;
    loom_hash key;
    /* Attachments, one per owner; guarded by att_lock (a spin lock: taken
     * once per replay, held for a short scan). */
    loom_plan_attachment *atts;
    uint32_t n_atts, cap_atts;
    uint32_t att_lock;
};

/* True while some attachment of p says busy. */
bool plan_busy(const loom_plan *p);

/* The options that change a plan, with defaults and the environment
 * resolved. */
typedef struct plan_opts {
    const char *pipeline;          /* $LOOM_PASSES if set, else the caller's, else the default */
    uint32_t window;
    uint32_t disable;              /* caller's | $LOOM_DISABLE, without LOOM_DISABLE_CACHE */
    bool cache;                    /* neither the caller nor $LOOM_DISABLE switched the cache off */
    uint64_t max_binding_range;
    uint32_t enable;               /* LOOM_ENABLE_* */
    uint32_t wave_groups;          /* loom_compile_options.wave_groups */
    bool coopmat;                  /* loom_compile_options.coopmat */
    bool awaits;                   /* loom_compile_options.awaits */
} plan_opts;

/* Fails (LOOM_INVALID_ARGUMENT) on an unknown name in either variable. */
loom_result plan_opts_resolve(const loom_compile_options *o, plan_opts *out);

/* The options' part of a key, appended after the graph's encoding:
 * PLAN_OPTS_FIXED bytes, then the pipeline string; returns the length. */
#define PLAN_OPTS_FIXED 36u
size_t plan_opts_bytes(const plan_opts *o, uint8_t *dst);

/* Canonical bytes of (graph, options) into *buf — grown with the graph's
 * allocator, as loom_graph_encode does. */
loom_result plan_key_bytes(const loom_graph *g, const plan_opts *o, uint8_t **buf, size_t *cap, size_t *len);

/* Compiles with the options resolved and the key already known; opts
 * supplies what does not change the plan (verify_each, dump_dir). */
loom_result plan_compile(const loom_graph *g, const loom_compile_options *opts, const plan_opts *resolved,
                         const loom_hash *key, loom_plan **out);

#endif
