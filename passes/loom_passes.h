/* loom passes: the optimizer passes that turn a captured graph into a plan
 * (verify, fuse, split, stage, gather, reorder, barriers, lifetimes, awaits), their registry and the pass
 * manager that runs a pipeline string over a graph.
 *
 * Every pass edits the graph in place and writes its annotations into it
 * (node groups and barriers, buffer classes and arena offsets); what a pass
 * learns for statistics goes into a loom_pass_ctx. Passes use the graph's
 * allocator for their temporary memory and report failure through
 * loom_result + loom_last_error(); a failed pass may leave the graph
 * half-edited, so callers run pipelines on a copy (loom_compile does).
 * Nothing here is thread-safe per graph; distinct graphs are independent. */
#ifndef LOOM_PASSES_H
#define LOOM_PASSES_H

#include "loom_ir.h"
#include "loom_ir_edit.h"
#include "loom_pass_switches.h"

#ifdef __cplusplus
extern "C" {
#endif
/* The library is built with hidden visibility; what is declared here is its
 * public API, exported from the shared library. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define LOOM_PASS_WINDOW_DEFAULT 64u
#define LOOM_PASS_MAX 16u          /* passes in one pipeline */
#define LOOM_ARENA_ALIGN 256u      /* scratch offsets inside the arena */

/* Inputs every pass may read and results the passes fill in. Zero-initialise
 * and set .window and .max_binding_range; the rest is output. */
typedef struct loom_pass_ctx {
    uint32_t window;              /* reorder lookahead in nodes; 0: 64 */
    uint64_t max_binding_range;   /* bytes one binding may cover (split, fuse); 0: no limit */
    uint32_t enable;              /* LOOM_ENABLE_* forms asked for (gather) */
    uint32_t wave_groups;         /* split: the argmax forms' workgroup cap (loom_compile_options), four an SM; waves: the SMs from it; 0: none */
    bool coopmat;                 /* split: the tiled matmul forms take their cooperative-matrix forms */
    bool split_k;                 /* split: a matrix of too few tiles splits its K walk (LOOM_DISABLE_SPLIT_K) */
    uint32_t coop_large_cols;     /* split: K from which a matmul may take the large tiles; 0: LOOM_MATMUL_COOP_L_COLS */
    bool awaits;                  /* awaits: the device allows awaited edges (loom_compile_options.awaits) */
    uint32_t fused_chains;        /* fuse: chains replaced by one node */
    uint32_t split_nodes;         /* split: nodes cut into row blocks */
    uint32_t staged_gains;        /* stage: norms now reading a staged copy of their gain */
    uint32_t gathered;            /* gather: ATTENTIONs whose shares their consumer combines */
    uint32_t groups;              /* reorder/barriers: concurrency groups */
    uint32_t barriers;            /* barriers: barriers recorded */
    uint32_t barrier_lower_bound; /* reorder: sum over windows of (longest chain - 1) + forced */
    uint64_t scratch_bytes;       /* lifetimes: SCRATCH bytes, unpacked */
    uint64_t arena_bytes;         /* lifetimes: packed arena */
    uint64_t arena_lower_bound;   /* lifetimes: peak simultaneously live scratch bytes */
    uint32_t awaited;             /* awaits: dependencies polled in the shader, not recorded as barriers */
} loom_pass_ctx;

typedef loom_result (*loom_pass_fn)(loom_graph *g, loom_pass_ctx *ctx);

typedef struct loom_pass {
    const char *name;
    const char *summary;
    loom_pass_fn run;
    uint32_t disable;     /* the LOOM_DISABLE_* bit that skips it; 0: always runs */
} loom_pass;

/* The registry, in its canonical pipeline order. */
uint32_t loom_pass_count(void);
const loom_pass *loom_pass_at(uint32_t i);          /* NULL past the end */
/* Index of the named pass, or -1. */
int loom_pass_index(const char *name);
/* The pass-manager skip mask (bit i: pass i) for LOOM_DISABLE_* switches. */
uint32_t loom_pass_skip_mask(uint32_t disable);

/* The passes themselves; each can run alone on any verified graph.
 * - verify: loom_graph_verify, plus annotation sanity (groups ascend).
 * - fuse: replaces chains by fused nodes where legal, by the rules of
 *   passes/fuse.c's table, each a row of data: the chain's pattern, the
 *   fields its nodes must agree on, and how the fused op's tensors are
 *   wired from the members' slots (14: RMS_NORM→MUL, ADD→RMS_NORM(→MUL),
 *   MATVEC×2→SILU_MUL, MATVEC→ADD, MATVEC→ARGMAX, their T-row forms
 *   MATMUL×2→SILU_MUL and MATMUL→ADD, and, from a later round,
 *   the norm folded into a matvec form, q/k/v with RoPE and the KV append,
 *   EMBED into that, and the argmax's step log); clears any schedule. A
 *   chain touching a binding above ctx->max_binding_range is fused only
 *   into a node split can cut.
 * - split: cuts nodes with a binding above ctx->max_binding_range into row
 *   blocks (the matvec forms, their argmax forms into blocks + ARGMAX,
 *   EMBED into loom_op_embed_blocks nodes); any other such node is
 *   LOOM_LIMIT naming node and field. No limit or nothing above it: the
 *   graph is left as is; else any schedule is cleared. Then the argmax
 *   forms still whole take at most ctx->wave_groups workgroups (their
 *   workgroups loop over row blocks; 0: no cap). With ctx->coopmat, the
 *   matmul kinds' tiled forms take their cooperative-matrix forms where
 *   forms.def has one (f16 and block-typed weights; see coopmat.c).
 * - stage: a fused RMS norm whose input a MATVEC_ADD wrote reads its gain
 *   from a copy that producer (now MATVEC_ADD_STAGE) writes; see stage.c.
 * - gather: an ATTENTION split into shares stores them only, and the
 *   MATVEC_ADD that reads its output combines them; see gather.c.
 * - reorder: concurrency groups within lookahead windows; the graph is left
 *   unscheduled until barriers runs (the runtime would otherwise trust it).
 * - barriers: the minimal barriers for the current groups (each node its
 *   own group when reorder did not run); marks the graph scheduled.
 * - lifetimes: buffer classes and the scratch arena, by barrier epochs. A
 *   usage hint the graph contradicts is LOOM_VERIFY naming buffer and node.
 * - awaits: with ctx->awaits, the barriers a reader may replace by polling
 *   its producer's tagged output become awaited edges (node tag_in /
 *   tag_out, tagged kernels); see awaits.c. Needs the schedule and the
 *   classes, so it runs after lifetimes; without ctx->awaits a no-op.
 * - waves: a node on a kernel with a form that fits more workgroups an
 *   SM (forms.def: _wg256, the block-typed residual projections' integer
 *   forms at 256 invocations; _q6w, q/k/v with a Q6_K Wv in fewer
 *   registers) takes it where its workgroups exceed what the kernel fits
 *   at once on ctx->wave_groups / 4 SMs; see waves.c. Changes kernels
 *   alone, so it may run after lifetimes; with ctx->wave_groups 0 a no-op. */
loom_result loom_pass_verify(loom_graph *g, loom_pass_ctx *ctx);
loom_result loom_pass_fuse(loom_graph *g, loom_pass_ctx *ctx);
loom_result loom_pass_split(loom_graph *g, loom_pass_ctx *ctx);
loom_result loom_pass_stage(loom_graph *g, loom_pass_ctx *ctx);
loom_result loom_pass_gather(loom_graph *g, loom_pass_ctx *ctx);
loom_result loom_pass_reorder(loom_graph *g, loom_pass_ctx *ctx);
loom_result loom_pass_barriers(loom_graph *g, loom_pass_ctx *ctx);
loom_result loom_pass_lifetimes(loom_graph *g, loom_pass_ctx *ctx);
loom_result loom_pass_awaits(loom_graph *g, loom_pass_ctx *ctx);
loom_result loom_pass_waves(loom_graph *g, loom_pass_ctx *ctx);
/* The workgroups a node on a kernel may have and keep it, before the waves
 * pass gives it the form `flag` adds ("MV_WG=256", "MV_Q6W"), on a device
 * of wave_groups / 4 SMs; 0 for a flag the pass does not take. */
uint64_t loom_pass_waves_fit(const char *flag, uint32_t wave_groups);

/* The unoptimized schedule: each node its own group, a barrier recorded
 * before every node but the first (reason: the hazard with the previous
 * node, NONE if there is none), graph marked scheduled. Used when the
 * barriers pass is switched off, so a plan is always explicit. */
loom_result loom_schedule_serial(loom_graph *g, loom_pass_ctx *ctx);

/* ---- pass manager ------------------------------------------------------- */

typedef struct loom_pipeline_desc {
    const char *pipeline;   /* comma-separated names; NULL: the default */
    uint32_t skip;          /* bit (1u << loom_pass_index(name)): listed but not run */
    bool verify_each;       /* loom_graph_verify after every pass */
    bool time_each;         /* fill loom_pipeline_report.ns */
    /* Dump the graph after every pass as DIR/NN-<pass>.{txt,dot,json}
     * (00-input first). NULL: $LOOM_DUMP if set; "": never. */
    const char *dump_dir;
} loom_pipeline_desc;

typedef struct loom_pipeline_report {
    uint32_t n_passes;                  /* passes run (skipped ones excluded) */
    const char *names[LOOM_PASS_MAX];   /* static strings */
    uint64_t ns[LOOM_PASS_MAX];         /* 0 unless time_each */
} loom_pipeline_report;

/* Checks a pipeline string: every name registered, at most LOOM_PASS_MAX,
 * and nothing that moves nodes or barriers after lifetimes (its arena
 * depends on the final barrier placement). LOOM_INVALID_ARGUMENT names the
 * offending entry. */
loom_result loom_pipeline_check(const char *pipeline);

/* Runs the pipeline over g in place. rep may be NULL. */
loom_result loom_pipeline_run(loom_graph *g, const loom_pipeline_desc *desc, loom_pass_ctx *ctx,
                              loom_pipeline_report *rep);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif
#endif
