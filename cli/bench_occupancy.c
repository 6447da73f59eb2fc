/* `loom bench occupancy`: how many workgroups of a given size, shared memory
 * and register load the device keeps resident at once. The kernel forms'
 * speed turns on it (a form that waits on its loads hides the wait only
 * behind other resident workgroups), and the driver does not say it: an
 * SM's shared memory is split with its L1 cache at a size the driver picks.
 *
 * Each workgroup's first invocation counts itself in (an atomic counter of
 * live workgroups, whose peak is kept), spins for a while, and counts itself
 * out; the others wait at a barrier, so the workgroup is resident the whole
 * time. Launched many times over the device's capacity, the peak is the
 * number of workgroups resident at once. Registers are held by R values
 * that the spin updates in a chain, so all of them stay live across it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "loom_ir_edit.h"
#include "loom_runtime.h"

typedef struct occ_config {
    uint32_t threads, shared_bytes, regs;
} occ_config;

/* The kernel of one configuration; NULL if it does not fit buf. */
static const char *occ_source(const occ_config *c, char *buf, size_t n)
{
    size_t o = 0;
    uint32_t words = c->shared_bytes / 4u;
#define EMIT(...)                                                  \
    do {                                                           \
        int k = snprintf(buf + o, o < n ? n - o : 0, __VA_ARGS__); \
        if (k < 0 || (size_t)k >= n - o)                           \
            return NULL;                                           \
        o += (size_t)k;                                            \
    } while (0)
    EMIT("#version 450\nlayout(local_size_x = %u) in;\n", c->threads);
    EMIT("layout(set = 0, binding = 0) coherent buffer C { uint live; uint peak; uint sink[]; };\n");
    EMIT("layout(push_constant) uniform Pc { uint spin; } pc;\n");
    if (words)
        EMIT("shared uint pad[%u];\n", words);
    EMIT("void main()\n{\n    uint t = gl_LocalInvocationID.x, v = t + gl_WorkGroupID.x;\n");
    for (uint32_t r = 0; r < c->regs; r++)
        EMIT("    uint r%u = v * %uu + %uu;\n", r, 2u * r + 3u, 7u * r + 1u);
    if (words)
        EMIT("    for (uint i = t; i < %uu; i += %uu)\n        pad[i] = i ^ gl_WorkGroupID.x;\n"
             "    barrier();\n", words, c->threads);
    EMIT("    if (t == 0u) {\n        atomicMax(peak, atomicAdd(live, 1u) + 1u);\n    }\n");
    /* Every invocation spins (holding its registers); the first one's
     * count-out comes after its own spin, before the closing barrier. */
    EMIT("    for (uint i = 0u; i < pc.spin; i++) {\n        v = v * 1664525u + 1013904223u;\n");
    for (uint32_t r = 0; r < c->regs; r++)
        EMIT("        r%u = r%u * 747796405u + %s;\n", r, r, r ? "r0" : "v");
    EMIT("    }\n");
    for (uint32_t r = 0; r < c->regs; r++)
        EMIT("    v ^= r%u;\n", r);
    EMIT("    if (t == 0u)\n        atomicAdd(live, 0xffffffffu);\n    barrier();\n");
    if (words)
        EMIT("    v += pad[(t * 7u) %% %uu];\n", words);
    EMIT("    if (v == 0x9e3779b9u)\n        sink[gl_WorkGroupID.x %% 64u] = v;\n}\n");
#undef EMIT
    return buf;
}

#define OCC_BUF_BYTES 1024u   /* live, peak, then the sink */

/* Peak resident workgroups of configuration c over `groups` workgroups. */
static loom_result occ_run(loom_rt *rt, loom_rt_buffer *b, const occ_config *c, uint32_t groups, uint32_t spin,
                           uint32_t *peak)
{
    char name[64], src[16384];
    snprintf(name, sizeof name, "occ_%u_%u_%u", c->threads, c->shared_bytes, c->regs);
    if (!occ_source(c, src, sizeof src))
        return loom_fail(LOOM_LIMIT, "occupancy kernel %s: source longer than %zu bytes", name, sizeof src);
    loom_result rc = loom_rt_kernel_glsl(rt, name, src);
    uint32_t zero[2] = { 0, 0 };
    if (!rc)
        rc = loom_rt_buffer_write(rt, b, 0, zero, sizeof zero);
    loom_graph *g = NULL;
    if (!rc)
        rc = loom_graph_create(&(loom_graph_desc){ .name = "occupancy" }, &g);
    uint32_t id;
    if (!rc)
        rc = loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = "c", .size = OCC_BUF_BYTES,
                                                           .external = loom_rt_buffer_id(b) }, &id);
    if (!rc) {
        loom_binding bd = { .buffer = id, .slot = 0, .offset = 0, .size = OCC_BUF_BYTES, .access = LOOM_ACCESS_RW };
        loom_dispatch_desc d = { .kernel = name, .op = LOOM_OP_OTHER, .groups = { groups, 1, 1 },
                                 .bindings = &bd, .n_bindings = 1, .push = &spin, .push_size = 4 };
        rc = loom_graph_add_dispatch(g, &d, NULL);
    }
    if (!rc)
        rc = loom_rt_run_graph(rt, g, NULL);
    uint32_t got[2];
    if (!rc)
        rc = loom_rt_buffer_read(rt, b, 0, got, sizeof got);
    if (!rc && got[1] == 0)
        rc = loom_fail(LOOM_VULKAN, "occupancy kernel %s: no workgroup counted itself in", name);
    if (!rc && got[0] != 0) {
        rc = loom_fail(LOOM_VULKAN, "occupancy kernel %s: %u workgroups still counted live at the end", name,
                       got[0]);
    }
    if (!rc)
        *peak = got[1];
    loom_graph_destroy(g);
    return rc;
}

int loom_bench_occupancy(int argc, char **argv)
{
    const char *device = NULL;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else {
            fprintf(stderr, "usage: loom bench occupancy [--quick] [--device INDEX|NAME]\n");
            return 2;
        }
    }
    loom_rt *rt;
    loom_result rc = loom_rt_create(&(loom_rt_desc){ .device = device }, &rt);
    if (rc) {
        fprintf(stderr, "loom bench occupancy: %s: %s\n", loom_result_str(rc), loom_last_error());
        return 1;
    }
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    loom_rt_buffer *b;
    rc = loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ .name = "occupancy", .size = OCC_BUF_BYTES,
                                                           .usage = LOOM_USAGE_STATE }, &b);
    if (rc) {
        fprintf(stderr, "loom bench occupancy: %s: %s\n", loom_result_str(rc), loom_last_error());
        loom_rt_destroy(rt);
        return 1;
    }
    /* Far more workgroups than can be resident, each spinning long against
     * the time the device takes to launch them all. */
    uint32_t sms = info.sm_count ? info.sm_count : 1;
    uint32_t groups = quick ? 64 : 48 * sms, spin = quick ? 2000 : 200000;
    static const uint32_t threads[] = { 128, 256, 512 };
    static const uint32_t kbytes[] = { 0, 8, 16, 20, 24, 32, 40, 48 };
    static const uint32_t regs[] = { 0, 48, 100 };
    if (info.sm_count)
        printf("loom bench occupancy on %s (%u SMs): %u workgroups a run, max shared memory %u bytes\n",
               info.device_name, info.sm_count, groups, info.max_shared_memory);
    else
        printf("loom bench occupancy on %s (no SM count: \"per SM\" is the whole device): %u workgroups a run, "
               "max shared memory %u bytes\n", info.device_name, groups, info.max_shared_memory);
    printf("%8s %10s %6s %12s %12s\n", "threads", "shared", "regs", "resident", "per SM");
    int failures = 0, measured = 0;
    for (size_t r = 0; r < sizeof regs / sizeof regs[0]; r++)
        for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++)
            for (size_t k = 0; k < sizeof kbytes / sizeof kbytes[0]; k++) {
                occ_config c = { threads[t], kbytes[k] * 1024u, regs[r] };
                if (c.shared_bytes > info.max_shared_memory || (quick && (r > 0 || k % 2)))
                    continue;
                uint32_t peak = 0;
                rc = occ_run(rt, b, &c, groups, spin, &peak);
                if (rc) {
                    fprintf(stderr, "loom bench occupancy: %u threads, %u bytes, %u values: %s: %s\n", c.threads,
                            c.shared_bytes, c.regs, loom_result_str(rc), loom_last_error());
                    failures++;
                    continue;
                }
                measured++;
                printf("%8u %10u %6u %12u %12.2f\n", c.threads, c.shared_bytes, c.regs, peak,
                       (double)peak / sms);
            }
    printf("resident: the most workgroups counted live at once; regs: values the spin keeps live (the driver's\n"
           "register count is LOOM_KERNEL_STATS=1's). A peak below the launch's capacity can also mean the\n"
           "device started workgroups slower than they ended.\n");
    loom_rt_buffer_release(b);
    loom_rt_destroy(rt);
    return failures || !measured ? 1 : 0;
}
