/* GLSL kernels the runtime tests register (loom_rt_kernel_glsl), written
 * once for every test program that uses them. */
#ifndef LOOM_TEST_KERNELS_H
#define LOOM_TEST_KERNELS_H

#include "loom_runtime.h"

static const char K_FILL[] =
    "#version 450\n"
    "layout(local_size_x = 64) in;\n"
    "layout(set = 0, binding = 0) writeonly buffer A { uint a[]; };\n"
    "layout(push_constant) uniform Pc { uint n; uint k; } pc;\n"
    "void main() { uint i = gl_GlobalInvocationID.x; if (i < pc.n) a[i] = pc.k; }\n";

static const char K_ADDK[] =
    "#version 450\n"
    "layout(local_size_x = 64) in;\n"
    "layout(set = 0, binding = 0) readonly buffer A { uint a[]; };\n"
    "layout(set = 0, binding = 1) writeonly buffer B { uint b[]; };\n"
    "layout(push_constant) uniform Pc { uint n; uint k; } pc;\n"
    "void main() { uint i = gl_GlobalInvocationID.x; if (i < pc.n) b[i] = a[i] + pc.k; }\n";

static const char K_SUM[] =
    "#version 450\n"
    "layout(local_size_x = 64) in;\n"
    "layout(set = 0, binding = 0) readonly buffer A { uint a[]; };\n"
    "layout(set = 0, binding = 1) readonly buffer B { uint b[]; };\n"
    "layout(set = 0, binding = 2) writeonly buffer C { uint c[]; };\n"
    "layout(push_constant) uniform Pc { uint n; } pc;\n"
    "void main() { uint i = gl_GlobalInvocationID.x; if (i < pc.n) c[i] = a[i] * 3u + b[i]; }\n";

static const char K_SPIN[] =
    "#version 450\n"
    "layout(local_size_x = 64) in;\n"
    "layout(set = 0, binding = 0) writeonly buffer A { uint a[]; };\n"
    "layout(push_constant) uniform Pc { uint n; uint iters; } pc;\n"
    "void main() {\n"
    "  uint i = gl_GlobalInvocationID.x, h = i;\n"
    "  for (uint j = 0u; j < pc.iters; j++) h = h * 1664525u + 1013904223u;\n"
    "  if (i < pc.n) a[i] = h;\n"
    "}\n";

/* Registers the kernels above as t_fill, t_addk, t_sum and t_spin. */
static inline loom_result test_kernels_register(loom_rt *rt)
{
    loom_result rc = loom_rt_kernel_glsl(rt, "t_fill", K_FILL);
    if (!rc)
        rc = loom_rt_kernel_glsl(rt, "t_addk", K_ADDK);
    if (!rc)
        rc = loom_rt_kernel_glsl(rt, "t_sum", K_SUM);
    if (!rc)
        rc = loom_rt_kernel_glsl(rt, "t_spin", K_SPIN);
    return rc;
}

#endif
