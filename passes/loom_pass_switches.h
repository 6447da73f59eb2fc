/* The list of passes, their on/off switches and the default pipeline:
 * constants the compiler's public API re-exports (loom_compiler.h) and the
 * pass table in passes/manager.c is made from, so each is written once. No
 * functions here. */
#ifndef LOOM_PASS_SWITCHES_H
#define LOOM_PASS_SWITCHES_H

/* Switches for bisection and benchmarks, one bit per pass that may be
 * skipped (the list below names each pass's bit). Bits above
 * LOOM_DISABLE_PASS_MASK belong to the compiler. */
enum {
    LOOM_DISABLE_FUSE      = 1u << 0,
    LOOM_DISABLE_REORDER   = 1u << 1,
    LOOM_DISABLE_BARRIERS  = 1u << 2,  /* barrier after every node */
    LOOM_DISABLE_LIFETIMES = 1u << 3,  /* no classes, no arena: every buffer its own memory */
    LOOM_DISABLE_STAGE     = 1u << 4,  /* norms read their gains from the weights */
    LOOM_DISABLE_GATHER    = 1u << 5,  /* ATTENTION combines its own shares */
    LOOM_DISABLE_WAVES     = 1u << 6,  /* every kernel on its base form whatever its workgroups */
    LOOM_DISABLE_PASS_MASK = (1u << 7) - 1,
};

/* Forms a pass makes only when asked (loom_compile_options.enable): not
 * the default until a benchmark says they should be. */
enum {
    /* gather: the shares an f16 consumer combines are stored as f16, each
     * divided by its own sum (one 16-byte load a chunk a share, not two). */
    LOOM_ENABLE_HALF_SHARES = 1u << 0,
    /* stage: the staged vector t is stored as f16 where the producer and
     * every norm reading it have f16 weights (one 16-byte load of x a chunk
     * in the norm's invocations, not two). */
    LOOM_ENABLE_HALF_STAGE  = 1u << 1,
    /* stage: a gated FFN's output, read by one down projection only, is
     * stored as f16 where both have f16 weights (half the x loads of the
     * projection's invocations). */
    LOOM_ENABLE_HALF_ACT    = 1u << 2,
    /* stage: a staged residual-add projection with f16 weights whose rows
     * are at least two chunks an invocation long loads two chunks a trip
     * (matvec_add_stage_long_f16, MV_LONG). */
    LOOM_ENABLE_LONG_ROWS   = 1u << 3,
    /* awaits: the attention behind q/k/v polls them instead of waiting at a
     * barrier, taking the step's own k and v rows from q/k/v's tagged
     * vector (MV_QKV with MV_TAG, ATT_QKVT). On an H200 it took the `1b`
     * Q4_K_M step 589.7 -> 632.8 us, `1b` f16 800.1 -> 819.3, `7b` with 8
     * layers Q4_K_M 655.5 -> 655.4-664.5 (docs/perf-log.md): the polls
     * cost more than the barrier they replace. */
    LOOM_ENABLE_QKV_AWAIT   = 1u << 4,
    /* awaits: a block-typed residual projection and the norm-folded reader
     * behind it as a counted edge (tag.glsl, "Counted edges") instead of a
     * barrier: the gated FFN behind the o-projection (_FFN), q/k/v behind
     * the down projection (_QKV). */
    LOOM_ENABLE_COUNTS_FFN  = 1u << 5,
    LOOM_ENABLE_COUNTS_QKV  = 1u << 6,
    LOOM_ENABLE_COUNTS      = LOOM_ENABLE_COUNTS_FFN | LOOM_ENABLE_COUNTS_QKV,
    /* the forms whose kernels pair neighbouring invocations by subgroup
     * shuffles (a device with subgroups of one cannot run them) */
    LOOM_ENABLE_HALF_ALL    = LOOM_ENABLE_HALF_SHARES | LOOM_ENABLE_HALF_STAGE | LOOM_ENABLE_HALF_ACT,
};

/* Every registered pass in canonical order, as P(name, switch, "summary"):
 * the pass runs as loom_pass_<name>, and switch is the LOOM_DISABLE_* bit
 * that skips it (0: it always runs). The first entry goes to FIRST instead,
 * so that the list can also be spelled as a pipeline string. */
#define LOOM_PASS_LIST(FIRST, P)                                                                        \
    FIRST(verify, 0, "check ids, ranges, counts and annotations")                                      \
    P(fuse, LOOM_DISABLE_FUSE, "replace matching op chains by fused kernels")                          \
    P(split, 0, "cut nodes whose bindings exceed the binding limit into row blocks")                   \
    P(stage, LOOM_DISABLE_STAGE, "the residual add writing a norm's input also scales it and sums its squares") \
    P(gather, LOOM_DISABLE_GATHER, "the matvec reading an attention's output combines the attention's shares") \
    P(reorder, LOOM_DISABLE_REORDER, "schedule nodes into concurrency groups within a lookahead window") \
    P(barriers, LOOM_DISABLE_BARRIERS, "place the minimal barriers the groups need")                   \
    P(lifetimes, LOOM_DISABLE_LIFETIMES, "classify buffers and pack scratch into one arena")           \
    P(awaits, 0, "where the device allows, a reader polls its producer's tagged output instead of a barrier") \
    P(waves, LOOM_DISABLE_WAVES, "a kernel with more workgroups than fit the device at once takes a form that fits more")

#define LOOM_PASS_NAME_FIRST_(name, bit, summary) #name
#define LOOM_PASS_NAME_NEXT_(name, bit, summary) "," #name
/* The pipeline when none is named: every pass of the list, in order
 * ("verify,fuse,split,stage,gather,reorder,barriers,lifetimes,awaits,waves"). */
#define LOOM_PASS_PIPELINE_DEFAULT LOOM_PASS_LIST(LOOM_PASS_NAME_FIRST_, LOOM_PASS_NAME_NEXT_)

#endif
