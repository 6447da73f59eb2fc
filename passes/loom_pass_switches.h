/* The passes' on/off switches and the default pipeline: constants the
 * compiler's public API re-exports (loom_compiler.h) and the pass table in
 * passes/manager.c uses, so each is written once. No functions here. */
#ifndef LOOM_PASS_SWITCHES_H
#define LOOM_PASS_SWITCHES_H

/* Every registered pass, in canonical order: the pipeline when none is named. */
#define LOOM_PASS_PIPELINE_DEFAULT "verify,fuse,split,reorder,barriers,lifetimes"

/* Switches for bisection and benchmarks, one bit per pass that may be
 * skipped (the pass table names each pass's bit). Bits above
 * LOOM_DISABLE_PASS_MASK belong to the compiler. */
enum {
    LOOM_DISABLE_FUSE      = 1u << 0,
    LOOM_DISABLE_REORDER   = 1u << 1,
    LOOM_DISABLE_BARRIERS  = 1u << 2,  /* barrier after every node */
    LOOM_DISABLE_LIFETIMES = 1u << 3,  /* no classes, no arena: every buffer its own memory */
    LOOM_DISABLE_PASS_MASK = (1u << 4) - 1,
};

#endif
