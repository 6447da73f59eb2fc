/* The decode driver shared by llama-decode and `loom bench decode`: named
 * model shapes and their command-line flags, the figures of a compiled step
 * plan (device-free), copy bandwidth, and the decode loop itself — steps
 * submitted ahead of the GPU, tokens read behind it, optionally checked
 * against the CPU reference or timed after a clock warm-up.
 *
 * Ownership: the caller owns every object passed in. Failure: loom_result +
 * loom_last_error(). Threading: one thread per runtime. */
#ifndef LOOM_LLAMA_RUN_H
#define LOOM_LLAMA_RUN_H

#include <stdio.h>
#include "llama.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- shapes and flags ----------------------------------------------------- */

/* "tiny" (loom_llama_default_config), "1b", "7b"; LOOM_NOT_FOUND otherwise. */
loom_result loom_llama_preset(const char *name, loom_llama_config *out);

/* Command-line shape parsing. Begin applies --config wherever it appears
 * (default tiny), so shape flags override it in any order; arg consumes
 * argv[*i] (and its value) when it is a shape flag (--config --dim --layers
 * --heads --kv-heads --head-dim --ffn --vocab --max-seq --wtype --f16 --f32
 * --kv-f16 --kv-f32 --seed) and returns 1, returns 0 for other flags, -1
 * for a bad value; finish derives head-dim from dim/heads when those were
 * set and it was not. The *_set flags say what the command line gave (a
 * model file's own shape stands where it did not). */
typedef struct loom_llama_args {
    loom_llama_config cfg;
    char config_name[32];
    bool head_dim_set, dims_set;
    bool wtype_set, kvtype_set, max_seq_set, shape_set;   /* shape: --dim to --vocab */
} loom_llama_args;
loom_result loom_llama_args_begin(int argc, char **argv, loom_llama_args *a);
int loom_llama_args_shape(int argc, char **argv, int *i, loom_llama_args *a);
void loom_llama_args_finish(loom_llama_args *a);
/* One line per shape flag, for usage texts. */
extern const char loom_llama_args_help[];
/* A decimal u32 option value: digits only, no sign, at most UINT32_MAX. */
bool loom_llama_parse_u32(const char *s, uint32_t *out);

/* ---- plan figures (no device needed) ------------------------------------- */

typedef struct loom_llama_figures {
    uint32_t captured_nodes, dispatches, groups, barriers, barrier_lower_bound, fused_chains;
    uint32_t split_nodes;    /* nodes cut into row blocks for the binding limit */
    uint32_t awaited;        /* dependencies the reader polls instead of a barrier (awaited edges) */
    /* Barriers recorded before nodes that touch a layer's buffers, divided
     * by the number of layers: the dependency levels of one layer. */
    double levels_per_layer;
    /* Weight bytes one step reads: every WEIGHT buffer as stored (a
     * quantized matrix's blocks), except that an embedding table counts one
     * row per EMBED. */
    uint64_t weight_bytes;
    uint64_t arena_bytes, scratch_bytes;
} loom_llama_figures;
loom_result loom_llama_figures_of(const loom_plan *plan, uint32_t n_layers, loom_llama_figures *out);

/* Device-free: capture the step graph of a dry model and compile it
 * (early_log: the step logs first, as loom_llama_desc.early_log): of cfg,
 * or, when like is not NULL, of like's shape and matrix dtypes (cfg is then
 * not read; a shapes-only GGUF load will do). */
loom_result loom_llama_dry_figures(const loom_llama_config *cfg, const loom_llama_weights *like,
                                   const loom_compile_options *opts, bool early_log, loom_llama_figures *out);

/* ---- copy bandwidth ------------------------------------------------------- */

/* Device copy bandwidth in GB/s (bytes read + written) with the built-in
 * copy kernel: `bytes` copied per replay in 8 disjoint chunks (more where
 * one would exceed the runtime's binding limit), replayed back
 * to back for at least min_seconds (at least 3 replays) after one warm-up;
 * timed from GPU timestamps when the runtime has them, else host-timed. */
loom_result loom_llama_copy_gbps(loom_rt *rt, uint64_t bytes, double min_seconds, double *gbps);

/* ---- the decode loop ------------------------------------------------------ */

#define LOOM_LLAMA_NO_TOKEN 0xffffffffu

/* The warm-up rule (loom_llama_run_opts.warmup_s). */
#define LOOM_LLAMA_WARM_WINDOW 200u
#define LOOM_LLAMA_WARM_AGREE 0.01
#define LOOM_LLAMA_WARM_CAP_S 20.0
#define LOOM_LLAMA_WARM_PREFILLS 8u   /* loom_llama_bench_prefill's window */

/* The warm-up rule of the benchmarks (llama-decode's, loom bench's):
 * windows of work, each timed (GPU time where the runtime has timestamps,
 * else wall time) per unit, until at least min_s have passed and the last
 * two windows agree within LOOM_LLAMA_WARM_AGREE, or cap_s have: a clock
 * that has not risen yet reads slow, and a fixed time is not always
 * enough for it. min_s counts from the end of the first window, which
 * may hold seconds of host work with the GPU idle (a plan compiled and its
 * pipelines created on first use): counted, it let a warm-up end at the
 * start clock's speed, two windows agreeing after a fraction of a second of
 * GPU work. Set t0 to the wall clock (us) at the start; then
 * loom_llama_warm_begin before each window, loom_llama_warm_end after it
 * (its units of work all complete), which returns true when the warm-up
 * is over. */
typedef struct loom_llama_warm {
    double t0, window_t0;   /* wall us: the warm-up's start, the window's */
    double work_t0;         /* wall us: the first window's end, from which min_s counts (0: none yet) */
    double prev, us;        /* the last two windows' time per unit (0: none yet) */
    bool stable;
    loom_rt_counters c0;
} loom_llama_warm;
void loom_llama_warm_begin(loom_rt *rt, loom_llama_warm *w);
bool loom_llama_warm_end(loom_rt *rt, loom_llama_warm *w, uint32_t units, double min_s, double cap_s);

typedef struct loom_llama_run_opts {
    uint32_t steps;          /* steps decoded, prompt included (timed in bench mode) */
    uint32_t token;          /* first token when there is no prompt */
    /* Prefill by decode steps: the first n_prompt steps are fed these ids
     * (each < vocab; n_prompt <= steps and <= max_seq), then decoding goes
     * on from the last one's argmax. NULL/0: start from token. */
    const uint32_t *prompt;
    uint32_t n_prompt;
    /* The prompt in multi-token steps of at most this many rows
     * (loom_llama_submit_rows; <= LOOM_LLAMA_MAX_ROWS); 0 or 1: one decode
     * step per prompt id. tokens[] then holds LOOM_LLAMA_NO_TOKEN for a
     * step's rows before its last, whose argmax no step computes. */
    uint32_t prefill_chunk;
    bool check;              /* CPU reference every step (needs weights) */
    /* Back-to-back steps before timing, in windows of LOOM_LLAMA_WARM_WINDOW
     * steps, until at least warmup_s seconds have passed and the last two
     * windows' time per step agree within LOOM_LLAMA_WARM_AGREE, or
     * warmup_cap_s (0: LOOM_LLAMA_WARM_CAP_S) have passed. 0: none. */
    double warmup_s, warmup_cap_s;
    FILE *log;               /* per-step lines; NULL: none */
    uint32_t *tokens;        /* room for steps token ids; may be NULL */
} loom_llama_run_opts;

typedef struct loom_llama_result {
    uint32_t steps;
    double wall_us_per_token, gpu_us_per_token;   /* gpu: 0 without timestamps */
    double dispatches_per_token, barriers_per_token;
    double polled_per_token;   /* dependencies polled instead of a barrier (tagged vectors) */
    double host_waits_per_token, submits_per_token, replay_waits_per_token;
    uint64_t cache_hits, cache_misses, warmup_steps;
    double warmup_s;          /* seconds the warm-up took */
    double warmup_window_us;  /* its last window's time per step */
    bool warmup_stable;       /* it ended on two windows that agree (false: at the cap) */
    uint32_t mismatches;     /* check mode */
    float max_err;
} loom_llama_result;

/* Decodes opts->steps tokens chained on the GPU: each step is submitted
 * before the previous one's token is read, and a token is read once the
 * steps still in flight would fill the runtime's copies. Positions cycle
 * through max_seq (a new sequence each time round); the timed run starts at
 * 0. Check mode needs m made with keep_logits and w, steps <= max_seq, and
 * counts mismatches (tokens or logits beyond tol) instead of failing; the
 * reference is fed the same prompt, so prompt steps are checked too. */
loom_result loom_llama_run(loom_rt *rt, loom_llama *m, const loom_llama_weights *w, const loom_llama_run_opts *opts,
                           float tol, loom_llama_result *out);

/* ---- prefill benchmark ---------------------------------------------------- */

typedef struct loom_llama_prefill_result {
    uint32_t rows, chunk, reps;
    uint64_t warmup_reps;
    double warmup_s;
    bool warmup_stable;      /* the warm-up ended on two windows that agree (false: at the cap) */
    double gpu_us, wall_us;  /* one prefill of rows ids (all its steps), median; gpu 0 without timestamps */
    double tokens_per_s;     /* rows per second of GPU time (wall time without timestamps) */
    double ttft_us;          /* wall: the prefill and one decode step, until its token is read, median */
    uint32_t first_token;    /* the token of the last such decode step */
} loom_llama_prefill_result;

/* Times a prefill of ids at .. at + n - 1 (positions at .. at + n - 1, at +
 * n < max_seq; ids holds at + n ids) in steps of at most chunk rows, after
 * ids 0 .. at - 1 were prefilled once (untimed), so that the timed rows
 * attend to a context of at rows, as a verification deep in a context
 * does: after warming up with the same prefill back to back
 * (in windows of LOOM_LLAMA_WARM_PREFILLS, by loom_llama_run's rule: at
 * least warmup_s, until two windows agree within LOOM_LLAMA_WARM_AGREE, at
 * most LOOM_LLAMA_WARM_CAP_S; 0: none), reps prefills one at a time from an idle
 * queue (median GPU and wall time), then reps times the time to the first
 * token: the prefill, then a decode step from its token (m must be made
 * with chain), until that token is read. verify: the steps are verifying
 * ones (loom_llama_submit_verify: every row through the LM head). */
loom_result loom_llama_bench_prefill(loom_rt *rt, loom_llama *m, const uint32_t *ids, uint32_t at, uint32_t n,
                                     uint32_t chunk, bool verify, double warmup_s, uint32_t reps,
                                     loom_llama_prefill_result *out);

#ifdef __cplusplus
}
#endif
#endif
