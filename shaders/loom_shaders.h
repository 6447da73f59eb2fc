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

#endif
