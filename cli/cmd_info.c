/* `loom info`: every Vulkan device the loader sees, then the one loom would
 * choose (LOOM_DEVICE honoured) with the limits and memory facts that shape
 * plans: offset alignment, push-constant size, how the host reaches device
 * memory (unified, a resizable-BAR window, staged), timestamps. */
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "loom_ops.h"
#include "loom_passes.h"
#include "loom_runtime.h"

static const char *type_str(uint32_t t)
{
    static const char *names[] = { "other", "integrated GPU", "discrete GPU", "virtual GPU", "CPU" };
    return t < 5 ? names[t] : "?";
}

int loom_cmd_info(int argc, char **argv)
{
    loom_rt_desc desc = { 0 };
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            desc.device = argv[++i];
        else if (!strcmp(argv[i], "--validate"))
            desc.validate = true;
        else {
            fprintf(stderr, "usage: loom info [--device INDEX|NAME] [--validate]\n");
            return 2;
        }
    }
    loom_str s;
    loom_str_init(&s, NULL);
    loom_result rc = loom_rt_describe_devices(&s);
    if (rc) {
        loom_str_free(&s);
        return loom_cli_fail("info", rc);
    }
    fputs(s.data ? s.data : "", stdout);
    loom_str_free(&s);

    loom_rt *rt;
    if ((rc = loom_rt_create(&desc, &rt)))
        return loom_cli_fail("info", rc);
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    printf("\nchosen: %s (%s)\n", info.device_name, type_str(info.device_type));
    printf("  api %u.%u.%u, driver 0x%x, vendor 0x%04x, device 0x%04x\n", info.api_version >> 22,
           (info.api_version >> 12) & 0x3ff, info.api_version & 0xfff, info.driver_version, info.vendor_id,
           info.device_id);
    printf("  memory:                         %s", loom_rt_memory_name((loom_rt_memory)info.memory));
    if (info.memory != LOOM_RT_MEMORY_UNIFIED && info.host_window_bytes)
        printf(", %llu MiB", (unsigned long long)(info.host_window_bytes >> 20));
    static const char *const what[] = {
        [LOOM_RT_MEMORY_UNIFIED] = "every buffer mapped: host I/O is zero-copy",
        [LOOM_RT_MEMORY_REBAR] = "inputs, KV caches and state mapped through the window; outputs in host-cached "
                                 "memory; weights and scratch device-local",
        [LOOM_RT_MEMORY_BAR] = "inputs in the window; outputs in host-cached memory; KV caches and state "
                               "device-local, read through staging",
        [LOOM_RT_MEMORY_DISCRETE] = "inputs and outputs in system memory; KV caches and state device-local, read "
                                    "through staging",
    };
    printf("\n  placement:                      %s\n", info.memory < 4 ? what[info.memory] : "?");
    printf("  awaited edges:                  %s: %s\n", info.awaited_edges ? "yes" : "no (barrier plan)",
           info.awaited_why);
    printf("  timestamp period:               %.3f ns\n", info.timestamp_period_ns);
    printf("  minStorageBufferOffsetAlignment %llu\n", (unsigned long long)info.min_storage_offset_alignment);
    printf("  maxStorageBufferRange           %llu", (unsigned long long)info.max_storage_buffer_range);
    if (info.max_binding_range < info.max_storage_buffer_range)
        printf(" (binding limit in force: %llu)", (unsigned long long)info.max_binding_range);
    printf("\n  maxPushConstantsSize            %u\n", info.max_push_constants);
    printf("  maxComputeSharedMemorySize      %u\n", info.max_shared_memory);
    /* The block-typed matvec forms sum a row over 32 invocations
     * (loom_form_subgroup_ok): wider subgroups would add rows together;
     * Q4_K's share a block's header among 8 by shuffles. */
    bool blocks = loom_form_subgroup_ok(loom_form_kernel("matvec", LOOM_Q8_0, LOOM_Q8_0), info.subgroup_size);
    bool q4k = loom_form_subgroup_ok(loom_form_kernel("matvec", LOOM_Q4_K, LOOM_Q4_K), info.subgroup_size);
    printf("  subgroup size                   %u (block-typed weights: %s)\n", info.subgroup_size,
           !blocks ? "no, their matvec forms need subgroups of at most 32"
           : !q4k  ? "yes but Q4_K, whose matvec forms need subgroups of at least 8"
                   : "yes");
    printf("  queue family                    %u (%s; LOOM_QUEUE=compute prefers compute-only)\n",
           info.queue_family, (info.queue_flags & LOOM_RT_QUEUE_GRAPHICS) ? "graphics and compute" : "compute only");
    loom_compile_options o = { 0 };
    loom_rt_device_options(rt, &o);
    if (info.sm_count)
        printf("  SMs                             %u\n", info.sm_count);
    /* One wave (LOOM_WAVE_GROUPS, else four an SM): the split pass's cap
     * and the waves pass's rule (passes/waves.c). */
    if (o.wave_groups)
        printf("  one wave                        %u workgroups of 256 invocations: the argmax forms take at most\n"
               "                                  that many, a block-typed residual projection of more than %u\n"
               "                                  workgroups takes 256 invocations a workgroup, not 512, and q/k/v\n"
               "                                  with a Q6_K Wv of more than %u its form with fewer registers\n",
               o.wave_groups, (unsigned)loom_pass_waves_fit("MV_WG=256", o.wave_groups),
               (unsigned)loom_pass_waves_fit("MV_Q6W", o.wave_groups));
    printf("  debug utils (labels)            %s\n", info.debug_utils ? "yes" : "no");
    loom_rt_destroy(rt);
    return 0;
}
