/* The built-in kernels: every shaders/NAME.comp compiled to SPIR-V by glslc at
 * build time and embedded. The kernel's name is its file name without
 * ".comp"; op builders name kernels the same way. */
#ifndef LOOM_SHADERS_H
#define LOOM_SHADERS_H

#include <stddef.h>
#include <stdint.h>

typedef struct loom_builtin_kernel {
    const char *name;
    const uint32_t *code;
    size_t size;          /* bytes */
    /* The same kernel with integer dot products (block-typed matvec forms:
     * x quantized to int8 per block of 32), for a device that has them;
     * NULL for the others. Same bindings and push constants. */
    const uint32_t *code_idot;
    size_t size_idot;
} loom_builtin_kernel;

/* The table of built-in kernels, sorted by name; *count gets its length. */
const loom_builtin_kernel *loom_builtin_kernels(size_t *count);
/* NULL when there is no kernel of that name. */
const loom_builtin_kernel *loom_builtin_kernel_find(const char *name);

/* ---- what C and the GLSL must agree on ------------------------------------ */

/* The tagged forms' interface (tag.glsl; MV_TAG in matvec.glsl, ATT_TAG in
 * attention.glsl), which the runtime binds and pushes: the step word at
 * binding LOOM_TAG_BINDING, the vector numbers tag_in and tag_out at push
 * bytes [LOOM_TAG_PUSH_OFFSET, +8). The GLSL writes the same numbers; the
 * build holds every kernel's SPIR-V against these two and fails where they
 * differ (tools/spirv_layouts.c). */
#define LOOM_TAG_BINDING 31u
#define LOOM_TAG_PUSH_OFFSET 120u
/* tag_in's bit for "wait for all of x first" (tag.glsl's TAG_GATE; the
 * build reads that line of tag.glsl and compares). */
#define LOOM_TAG_GATE 0x100u
/* Counted edges (tag.glsl, TAG_COUNTS; MV_CNT in matvec.glsl): the
 * counters at binding LOOM_COUNT_BINDING, a counter every
 * LOOM_COUNT_STRIDE bytes, and the words cnt_in (counter | the producer's
 * workgroups << 8) and cnt_out (counter) at push bytes
 * [LOOM_COUNT_PUSH_OFFSET, +8), right before the tag words. The build
 * holds these against the SPIR-V too. */
#define LOOM_COUNT_BINDING 30u
#define LOOM_COUNT_PUSH_OFFSET 112u
#define LOOM_COUNT_STRIDE 64u

#endif
