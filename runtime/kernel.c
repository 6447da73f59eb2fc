/* Kernels: SPIR-V shader modules by name (registered SPIR-V, GLSL compiled
 * at run time with libshaderc, or the built-in table of shaders/), compute
 * pipelines created once per kernel and set layout and cached, and the
 * VkPipelineCache persisted to a file and checked against the device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <shaderc/shaderc.h>
#include "internal.h"
#include "loom_ops.h"
#include "loom_shaders.h"

/* ---- kernel table ------------------------------------------------------- */

static rt_kernel *find_kernel(loom_rt *rt, const char *name)
{
    for (uint32_t i = 0; i < rt->n_kernels; i++)
        if (!strcmp(rt->kernels[i].name, name))
            return &rt->kernels[i];
    return NULL;
}

static void kernel_free_variants(loom_rt *rt, rt_kernel *k)
{
    for (uint32_t i = 0; i < k->n_variants; i++) {
        rt_pipeline *v = k->variants[i];
        vkDestroyPipeline(rt->device, v->pipeline, NULL);
        vkDestroyPipelineLayout(rt->device, v->layout, NULL);
        vkDestroyDescriptorSetLayout(rt->device, v->set_layout, NULL);
        rt_free_bytes(rt, v, sizeof *v);
    }
    rt_free_bytes(rt, k->variants, (size_t)k->n_variants * sizeof *k->variants);
    k->variants = NULL;
    k->n_variants = 0;
}

void rt_kernels_destroy(loom_rt *rt)
{
    for (uint32_t i = 0; i < rt->n_kernels; i++) {
        rt_kernel *k = &rt->kernels[i];
        kernel_free_variants(rt, k);
        vkDestroyShaderModule(rt->device, k->module, NULL);
        rt_free_bytes(rt, k->name, strlen(k->name) + 1);
    }
    rt_free_bytes(rt, rt->kernels, (size_t)rt->cap_kernels * sizeof *rt->kernels);
    rt->kernels = NULL;
    rt->n_kernels = rt->cap_kernels = 0;
    if (rt->shaderc)
        shaderc_compiler_release(rt->shaderc);
    rt->shaderc = NULL;
}

/* custom: a kernel the frontend registers, whose layout is read from its
 * SPIR-V and declared (loom_kernel_declare) so that graphs naming it are
 * verified against it; built-in layouts are known from the build. */
static loom_result add_module(loom_rt *rt, const char *name, const uint32_t *code, size_t size, bool custom,
                              rt_kernel **out)
{
    if (rt->lost)
        return loom_fail(LOOM_DEVICE_LOST, "kernel '%s': the device was lost", name);
    if (!code || size == 0 || size % 4 || code[0] != 0x07230203u)
        return loom_fail(LOOM_INVALID_ARGUMENT, "kernel '%s': %zu bytes are not SPIR-V", name, size);
    loom_kernel_layout layout;
    uint64_t shared;
    loom_result rc = loom_kernel_reflect(code, size, &layout, &shared);
    if (rc)
        return loom_fail_wrap(rc, "kernel '%s'", name);
    if ((layout.needs & LOOM_KERNEL_NEEDS_STORAGE16) && !rt->storage16)
        return loom_fail(LOOM_UNSUPPORTED, "kernel %s declares 16-bit storage-buffer access (as the f16 KV caches' "
                         "\"_kh\" kernels do), and device '%s' has no storageBuffer16BitAccess enabled",
                         name, rt->props.deviceName);
    if ((layout.needs & LOOM_KERNEL_NEEDS_COOPMAT) && !rt->coopmat)
        return loom_fail(LOOM_UNSUPPORTED, "kernel %s multiplies NV cooperative matrices (16x16x16 f16 -> f32, "
                         "subgroups of 32; the matmul kinds' coopmat forms), and device '%s' has none enabled",
                         name, rt->props.deviceName);
    /* Over the device's shared memory the pipeline could not be made (or a
     * driver would fail it without saying why): refuse it by name. */
    if (shared > rt->props.limits.maxComputeSharedMemorySize)
        return loom_fail(LOOM_UNSUPPORTED, "kernel '%s' declares %llu bytes of shared memory, and device '%s' "
                         "allows %u (maxComputeSharedMemorySize)", name, (unsigned long long)shared,
                         rt->props.deviceName, rt->props.limits.maxComputeSharedMemorySize);
    rt_kernel *k = find_kernel(rt, name);
    /* Programs hold this kernel's pipelines; swapping the code under them
     * would make replays disagree with what was compiled. */
    if (k && k->n_variants)
        return loom_fail(LOOM_BUSY, "kernel '%s' is already in use by programs; register it under a new name", name);
    if (custom && (rc = loom_kernel_declare(name, &layout)))
        return rc;
    VkShaderModuleCreateInfo ci = { .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                    .codeSize = size, .pCode = code };
    VkShaderModule module;
    VkResult vr = vkCreateShaderModule(rt->device, &ci, NULL, &module);
    if (vr != VK_SUCCESS)
        return rt_vk_fail(rt, vr, "vkCreateShaderModule");
    if (k) {
        vkDestroyShaderModule(rt->device, k->module, NULL);
        k->module = module;
        *out = k;
        return LOOM_OK;
    }
    char *dup = rt_strdup(rt, name);
    if (!dup || !rt_grow(rt, (void **)&rt->kernels, &rt->cap_kernels, rt->n_kernels + 1, sizeof *rt->kernels)) {
        if (dup)
            rt_free_bytes(rt, dup, strlen(dup) + 1);
        vkDestroyShaderModule(rt->device, module, NULL);
        return loom_fail(LOOM_OUT_OF_MEMORY, "kernel '%s': out of memory", name);
    }
    k = &rt->kernels[rt->n_kernels++];
    memset(k, 0, sizeof *k);
    k->name = dup;
    k->module = module;
    *out = k;
    return LOOM_OK;
}

loom_result loom_rt_kernel_spirv(loom_rt *rt, const char *name, const uint32_t *code, size_t size_bytes)
{
    if (!rt || !name || !*name)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_kernel_spirv: NULL rt or empty name");
    rt_kernel *k;
    return add_module(rt, name, code, size_bytes, true, &k);
}

loom_result loom_rt_kernel_glsl(loom_rt *rt, const char *name, const char *source)
{
    if (!rt || !name || !*name || !source)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_kernel_glsl: NULL rt, name or source");
    if (rt->lost)
        return loom_fail(LOOM_DEVICE_LOST, "kernel '%s': the device was lost", name);
    if (!rt->shaderc && !(rt->shaderc = shaderc_compiler_initialize()))
        return loom_fail(LOOM_UNSUPPORTED, "kernel '%s': shaderc_compiler_initialize failed", name);
    shaderc_compile_options_t opt = shaderc_compile_options_initialize();
    if (!opt)
        return loom_fail(LOOM_OUT_OF_MEMORY, "kernel '%s': shaderc options: out of memory", name);
    /* Vulkan 1.2 SPIR-V: the 1.3 target emits LocalSizeId, which the
     * validation layer of Debian 12 rejects without maintenance4. */
    shaderc_compile_options_set_target_env(opt, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
    shaderc_compile_options_set_optimization_level(opt, shaderc_optimization_level_performance);
    shaderc_compilation_result_t res = shaderc_compile_into_spv(rt->shaderc, source, strlen(source),
                                                                shaderc_compute_shader, name, "main", opt);
    shaderc_compile_options_release(opt);
    if (!res)
        return loom_fail(LOOM_OUT_OF_MEMORY, "kernel '%s': shaderc returned no result", name);
    loom_result rc;
    if (shaderc_result_get_compilation_status(res) != shaderc_compilation_status_success) {
        /* shaderc's messages read "name:LINE: error: …", one per line. */
        rc = loom_fail(LOOM_SHADER_COMPILE, "kernel '%s': %s", name, shaderc_result_get_error_message(res));
    } else {
        rt_kernel *k;
        rc = add_module(rt, name, (const uint32_t *)(const void *)shaderc_result_get_bytes(res),
                        shaderc_result_get_length(res), true, &k);
    }
    shaderc_result_release(res);
    return rc;
}

/* ---- pipelines ---------------------------------------------------------- */


/* LOOM_KERNEL_STATS: the driver's statistics of one pipeline, on stderr. */
static void print_stats(loom_rt *rt, const char *name, VkPipeline pipeline)
{
    PFN_vkGetPipelineExecutableStatisticsKHR get =
        (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(rt->device,
                                                                      "vkGetPipelineExecutableStatisticsKHR");
    if (!get)
        return;
    VkPipelineExecutableInfoKHR ei = { .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                       .pipeline = pipeline, .executableIndex = 0 };
    VkPipelineExecutableStatisticKHR st[32];
    uint32_t n = 32;
    for (uint32_t i = 0; i < n; i++)
        st[i] = (VkPipelineExecutableStatisticKHR){ .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR };
    VkResult vr = get(rt->device, &ei, &n, st);
    if (vr != VK_SUCCESS && vr != VK_INCOMPLETE)
        return;
    fprintf(stderr, "kernel %s:", name);
    for (uint32_t i = 0; i < n; i++) {
        fprintf(stderr, " %s=", st[i].name);
        switch (st[i].format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: fprintf(stderr, "%u", st[i].value.b32); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: fprintf(stderr, "%lld", (long long)st[i].value.i64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: fprintf(stderr, "%llu", (unsigned long long)st[i].value.u64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: fprintf(stderr, "%g", st[i].value.f64); break;
        default: fprintf(stderr, "?");
        }
    }
    fprintf(stderr, "\n");
}

static loom_result make_variant(loom_rt *rt, rt_kernel *k, uint32_t slot_mask, rt_pipeline *v)
{
    VkDescriptorSetLayoutBinding b[LOOM_RT_MAX_SLOTS];
    uint32_t n = 0;
    for (uint32_t s = 0; s < LOOM_RT_MAX_SLOTS; s++)
        if (slot_mask & (1u << s))
            b[n++] = (VkDescriptorSetLayoutBinding){ .binding = s,
                                                     .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                     .descriptorCount = 1,
                                                     .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT };
    VkDescriptorSetLayoutCreateInfo dl = { .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .bindingCount = n, .pBindings = b };
    memset(v, 0, sizeof *v);
    v->slot_mask = slot_mask;
    VkResult vr = vkCreateDescriptorSetLayout(rt->device, &dl, NULL, &v->set_layout);
    if (vr != VK_SUCCESS)
        return rt_vk_fail(rt, vr, "vkCreateDescriptorSetLayout");
    uint32_t push = rt->props.limits.maxPushConstantsSize < LOOM_MAX_PUSH ? rt->props.limits.maxPushConstantsSize
                                                                          : LOOM_MAX_PUSH;
    VkPushConstantRange pr = { .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = push };
    VkPipelineLayoutCreateInfo pl = { .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .setLayoutCount = 1, .pSetLayouts = &v->set_layout,
                                      .pushConstantRangeCount = 1, .pPushConstantRanges = &pr };
    vr = vkCreatePipelineLayout(rt->device, &pl, NULL, &v->layout);
    if (vr == VK_SUCCESS) {
        VkComputePipelineCreateInfo ci = {
            .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            .flags = rt->kernel_stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0,
            .stage = { .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                       .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = k->module, .pName = "main" },
            .layout = v->layout,
        };
        vr = rt_vk_injected(rt, "vkCreateComputePipelines");
        if (vr == VK_SUCCESS)
            vr = vkCreateComputePipelines(rt->device, rt->pipeline_cache, 1, &ci, NULL, &v->pipeline);
    }
    if (vr != VK_SUCCESS) {
        if (v->layout)
            vkDestroyPipelineLayout(rt->device, v->layout, NULL);
        vkDestroyDescriptorSetLayout(rt->device, v->set_layout, NULL);
        /* rt_vk_fail, not a mapping of its own: device loss must mark the
         * runtime lost so that every later call says so. */
        loom_result rc = rt_vk_fail(rt, vr, "vkCreateComputePipelines");
        return loom_fail_wrap(rc, "kernel '%s'", k->name);
    }
    rt->counters.pipelines++;
    if (rt->kernel_stats)
        print_stats(rt, k->name, v->pipeline);
    return LOOM_OK;
}

bool rt_kernel_known(loom_rt *rt, const char *name)
{
    return find_kernel(rt, name) || loom_builtin_kernel_find(name);
}

/* The whole of open file f (under 1 GiB) into *data (rt_alloc_bytes, *len
 * bytes; NULL where it is empty); closes f. false where it cannot be read
 * (nothing is then held; *data NULL, *len the size it had, 0 if unknown). */
static bool read_whole(loom_rt *rt, FILE *f, uint8_t **data, size_t *len)
{
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    bool ok = n >= 0 && n < (1l << 30) && fseek(f, 0, SEEK_SET) == 0;
    *data = NULL;
    *len = n > 0 ? (size_t)n : 0;
    if (ok && n > 0) {
        *data = rt_alloc_bytes(rt, (size_t)n);
        ok = *data && fread(*data, 1, (size_t)n, f) == (size_t)n;
        if (!ok && *data) {
            rt_free_bytes(rt, *data, (size_t)n);
            *data = NULL;
        }
    }
    fclose(f);
    return ok;
}

#ifdef LOOM_PROBES
/* LOOM_KERNEL_DIR=DIR (test and benchmark builds): a built-in kernel is
 * taken from DIR/<name>.spv where that file exists, in place of the
 * embedded code (either form), so that a variant of a kernel can be timed
 * against the binary's own without rebuilding it. The file must have the
 * same bindings and push constants; add_module checks it as any other. */
static loom_result probe_kernel_file(loom_rt *rt, const char *kernel, uint32_t **code, size_t *size)
{
    *code = NULL;
    const char *dir = getenv("LOOM_KERNEL_DIR");
    if (!dir || !*dir)
        return LOOM_OK;
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/%s.spv", dir, kernel);
    if (n < 0 || (size_t)n >= sizeof path)
        return loom_fail(LOOM_INVALID_ARGUMENT, "LOOM_KERNEL_DIR: the path of kernel '%s' is too long", kernel);
    FILE *f = fopen(path, "rb");
    if (!f)
        return LOOM_OK;   /* no variant of this kernel: the built-in one */
    uint8_t *buf;
    size_t len;
    if (!read_whole(rt, f, &buf, &len) || !len)
        return loom_fail(len ? LOOM_IO : LOOM_INVALID_ARGUMENT,
                         "LOOM_KERNEL_DIR: cannot read %s (kernel '%s')", path, kernel);
    fprintf(stderr, "loom: LOOM_KERNEL_DIR: kernel '%s' from %s\n", kernel, path);
    *code = (uint32_t *)buf;
    *size = len;
    return LOOM_OK;
}
#endif

loom_result rt_pipeline_get(loom_rt *rt, const char *kernel, uint32_t slot_mask, rt_pipeline **out)
{
    rt_kernel *k = find_kernel(rt, kernel);
    if (!k) {
        const loom_builtin_kernel *bk = loom_builtin_kernel_find(kernel);
        if (!bk)
            return loom_fail(LOOM_NOT_FOUND, "kernel '%s' is neither registered nor built in", kernel);
        if (!loom_form_subgroup_ok(kernel, rt->subgroup_size))
            return loom_fail(LOOM_UNSUPPORTED, "kernel '%s' sums each row over 32 invocations (and Q4_K's shares "
                             "each block's header among 8), and device '%s' has subgroups %u wide (block-typed "
                             "weights need 8 to 32)", kernel, rt->props.deviceName, rt->subgroup_size);
        /* The integer form where the device has integer dot products. */
        bool idot = rt->int_dot && bk->code_idot;
        const uint32_t *code = idot ? bk->code_idot : bk->code;
        size_t size = idot ? bk->size_idot : bk->size;
        uint32_t *probe = NULL;
#ifdef LOOM_PROBES
        loom_result prc = probe_kernel_file(rt, kernel, &probe, &size);
        if (prc)
            return prc;
        if (probe)
            code = probe;
#endif
        loom_result rc = add_module(rt, kernel, code, size, false, &k);
        if (probe)
            rt_free_bytes(rt, probe, size);
        if (rc)
            return rc;
    }
    for (uint32_t i = 0; i < k->n_variants; i++)
        if (k->variants[i]->slot_mask == slot_mask) {
            *out = k->variants[i];
            return LOOM_OK;
        }
    /* Each variant is its own allocation: programs keep pointers to it. */
    rt_pipeline *v = rt_alloc_bytes(rt, sizeof *v);
    if (!v)
        return loom_fail(LOOM_OUT_OF_MEMORY, "kernel '%s': out of memory", kernel);
    loom_result rc = make_variant(rt, k, slot_mask, v);
    if (rc) {
        rt_free_bytes(rt, v, sizeof *v);
        return rc;
    }
    rt_pipeline **nv = rt->a.realloc(rt->a.user, k->variants, (size_t)k->n_variants * sizeof *nv,
                                     (size_t)(k->n_variants + 1) * sizeof *nv);
    if (!nv) {
        vkDestroyPipeline(rt->device, v->pipeline, NULL);
        vkDestroyPipelineLayout(rt->device, v->layout, NULL);
        vkDestroyDescriptorSetLayout(rt->device, v->set_layout, NULL);
        rt_free_bytes(rt, v, sizeof *v);
        return loom_fail(LOOM_OUT_OF_MEMORY, "kernel '%s': out of memory", kernel);
    }
    k->variants = nv;
    k->variants[k->n_variants++] = v;
    *out = v;
    return LOOM_OK;
}

/* ---- pipeline cache file ------------------------------------------------ */

/* The header every driver writes (VkPipelineCacheHeaderVersionOne); a file
 * from another device or driver is dropped rather than handed to it. */
static bool cache_header_ok(loom_rt *rt, const uint8_t *d, size_t n)
{
    if (n < 32)
        return false;
    uint32_t hdr_size, version, vendor, device;
    memcpy(&hdr_size, d, 4);
    memcpy(&version, d + 4, 4);
    memcpy(&vendor, d + 8, 4);
    memcpy(&device, d + 12, 4);
    return hdr_size >= 32 && hdr_size <= n && version == VK_PIPELINE_CACHE_HEADER_VERSION_ONE &&
           vendor == rt->props.vendorID && device == rt->props.deviceID &&
           !memcmp(d + 16, rt->props.pipelineCacheUUID, VK_UUID_SIZE);
}

loom_result rt_pipeline_cache_open(loom_rt *rt, const char *path)
{
    uint8_t *data = NULL;
    size_t n = 0, cap = 0;
    if (path) {
        if (!(rt->pipeline_cache_path = rt_strdup(rt, path)))
            return loom_fail(LOOM_OUT_OF_MEMORY, "pipeline cache path: out of memory");
        FILE *f = fopen(path, "rb");
        if (f && read_whole(rt, f, &data, &cap)) {
            n = cap;
            if (n && !cache_header_ok(rt, data, n)) {
                rt_log(rt, LOOM_LOG_WARN, "pipeline cache '%s' is for another device or driver; ignored", path);
                n = 0;
            }
        }
    }
    VkPipelineCacheCreateInfo ci = { .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                     .initialDataSize = n, .pInitialData = n ? data : NULL };
    VkResult vr = vkCreatePipelineCache(rt->device, &ci, NULL, &rt->pipeline_cache);
    if (vr != VK_SUCCESS && n) {
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        n = 0;
        vr = vkCreatePipelineCache(rt->device, &ci, NULL, &rt->pipeline_cache);
    }
    rt_free_bytes(rt, data, cap);
    rt->pipeline_cache_loaded = n;
    return vr == VK_SUCCESS ? LOOM_OK : rt_vk_fail(rt, vr, "vkCreatePipelineCache");
}

void rt_pipeline_cache_close(loom_rt *rt)
{
    if (!rt->pipeline_cache)
        return;
    if (rt->pipeline_cache_path) {
        size_t n = 0;
        void *data = NULL;
        if (vkGetPipelineCacheData(rt->device, rt->pipeline_cache, &n, NULL) == VK_SUCCESS && n &&
            (data = rt_alloc_bytes(rt, n)) &&
            vkGetPipelineCacheData(rt->device, rt->pipeline_cache, &n, data) == VK_SUCCESS) {
            /* Write then rename, so a crash never leaves half a file. */
            char tmp[4096];
            snprintf(tmp, sizeof tmp, "%s.tmp", rt->pipeline_cache_path);
            FILE *f = fopen(tmp, "wb");
            bool ok = f && fwrite(data, 1, n, f) == n;
            if (f && fclose(f) != 0)
                ok = false;
            if (!ok || rename(tmp, rt->pipeline_cache_path) != 0) {
                remove(tmp);
                rt_log(rt, LOOM_LOG_WARN, "pipeline cache '%s' could not be written", rt->pipeline_cache_path);
            }
        }
        rt_free_bytes(rt, data, n);
        rt_free_bytes(rt, rt->pipeline_cache_path, strlen(rt->pipeline_cache_path) + 1);
        rt->pipeline_cache_path = NULL;
    }
    vkDestroyPipelineCache(rt->device, rt->pipeline_cache, NULL);
    rt->pipeline_cache = VK_NULL_HANDLE;
}
