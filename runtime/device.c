/* The Vulkan instance and device behind a loom_rt: loader setup, optional
 * validation (with synchronization validation, messages counted), device
 * choice (LOOM_DEVICE, else discrete > integrated > CPU), queue, timeline
 * semaphore, and the descriptive calls (info, device listing, counters). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

/* ---- small helpers ------------------------------------------------------ */

void *rt_alloc_bytes(loom_rt *rt, size_t n) { return rt->a.realloc(rt->a.user, NULL, 0, n); }

void rt_free_bytes(loom_rt *rt, void *p, size_t n)
{
    if (p)
        rt->a.realloc(rt->a.user, p, n, 0);
}

bool rt_grow(loom_rt *rt, void **p, uint32_t *cap, uint32_t need, size_t es)
{
    if (need <= *cap)
        return true;
    uint32_t nc = *cap ? *cap * 2 : 8;
    while (nc < need)
        nc *= 2;
    void *q = rt->a.realloc(rt->a.user, *p, (size_t)*cap * es, (size_t)nc * es);
    if (!q)
        return false;
    *p = q;
    *cap = nc;
    return true;
}

char *rt_strdup(loom_rt *rt, const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = rt_alloc_bytes(rt, n);
    if (d)
        memcpy(d, s, n);
    return d;
}

void rt_log(loom_rt *rt, loom_log_level level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (rt->log)
        rt->log(rt->log_user, level, msg);
    else if (level >= LOOM_LOG_WARN)
        fprintf(stderr, "loom: %s\n", msg);
}

const char *rt_vk_str(VkResult vr)
{
    switch (vr) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_INVALID_SHADER_NV: return "VK_ERROR_INVALID_SHADER_NV";
    default: return "VkResult(?)";
    }
}

loom_result rt_vk_fail(loom_rt *rt, VkResult vr, const char *what)
{
    if (vr == VK_ERROR_DEVICE_LOST) {
        if (rt)
            rt->lost = true;
        return loom_fail(LOOM_DEVICE_LOST, "%s: %s", what, rt_vk_str(vr));
    }
    if (vr == VK_ERROR_OUT_OF_DEVICE_MEMORY)
        return loom_fail(LOOM_DEVICE_OOM, "%s: %s", what, rt_vk_str(vr));
    if (vr == VK_ERROR_OUT_OF_HOST_MEMORY)
        return loom_fail(LOOM_OUT_OF_MEMORY, "%s: %s", what, rt_vk_str(vr));
    return loom_fail(LOOM_VULKAN, "%s: %s (%d)", what, rt_vk_str(vr), (int)vr);
}

void rt_inject_vk_failure(loom_rt *rt, const char *call, int vr)
{
    rt->inject_call = call;
    rt->inject_result = (VkResult)vr;
}

loom_result rt_check_lost(const loom_rt *rt, const char *fn)
{
    return rt->lost ? loom_fail(LOOM_DEVICE_LOST, "%s: the device was lost", fn) : LOOM_OK;
}

/* ---- instance ----------------------------------------------------------- */

static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                       VkDebugUtilsMessageTypeFlagsEXT type,
                                                       const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                       void *user)
{
    (void)type;
    loom_rt *rt = user;
    bool counted = severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT);
    if (counted)
        rt->validation_messages++;
    rt_log(rt, counted ? LOOM_LOG_ERROR : LOOM_LOG_DEBUG, "validation: %s",
           data && data->pMessage ? data->pMessage : "(no message)");
    return VK_FALSE;
}

static bool has_layer(const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || !n)
        return false;
    VkLayerProperties *p = calloc(n, sizeof *p);
    bool found = false;
    if (p && vkEnumerateInstanceLayerProperties(&n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = !strcmp(p[i].layerName, name);
    free(p);
    return found;
}

static bool has_instance_ext(const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceExtensionProperties(NULL, &n, NULL) != VK_SUCCESS || !n)
        return false;
    VkExtensionProperties *p = calloc(n, sizeof *p);
    bool found = false;
    if (p && vkEnumerateInstanceExtensionProperties(NULL, &n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = !strcmp(p[i].extensionName, name);
    free(p);
    return found;
}

static const char VALIDATION_LAYER[] = "VK_LAYER_KHRONOS_validation";

static loom_result create_instance(loom_rt *rt)
{
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "loom",
        .pEngineName = "loom",
        .apiVersion = VK_API_VERSION_1_2,
    };
    const char *exts[1];
    uint32_t n_exts = 0;
    rt->debug_utils = has_instance_ext(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    if (rt->debug_utils)
        exts[n_exts++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    if (rt->validate) {
        if (!has_layer(VALIDATION_LAYER))
            return loom_fail(LOOM_UNSUPPORTED, "validation was requested (desc.validate or LOOM_VALIDATE=1) but "
                             "%s is not installed", VALIDATION_LAYER);
        if (!rt->debug_utils)
            return loom_fail(LOOM_UNSUPPORTED, "validation needs %s, which the loader does not offer",
                             VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    }
    VkValidationFeatureEnableEXT enables[] = { VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT };
    VkValidationFeaturesEXT features = {
        .sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
        .enabledValidationFeatureCount = 1,
        .pEnabledValidationFeatures = enables,
    };
    VkDebugUtilsMessengerCreateInfoEXT mci = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .pNext = &features,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_debug_message,
        .pUserData = rt,
    };
    VkInstanceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        /* The messenger chained here also sees instance creation itself. */
        .pNext = rt->validate ? &mci : NULL,
        .pApplicationInfo = &app,
        .enabledLayerCount = rt->validate ? 1 : 0,
        .ppEnabledLayerNames = rt->validate ? (const char *const[]){ VALIDATION_LAYER } : NULL,
        .enabledExtensionCount = n_exts,
        .ppEnabledExtensionNames = exts,
    };
    VkResult vr = vkCreateInstance(&ci, NULL, &rt->instance);
    if (vr != VK_SUCCESS)
        return rt_vk_fail(rt, vr, "vkCreateInstance");
    if (rt->validate) {
        PFN_vkCreateDebugUtilsMessengerEXT create =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(rt->instance, "vkCreateDebugUtilsMessengerEXT");
        rt->destroy_messenger = (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
            rt->instance, "vkDestroyDebugUtilsMessengerEXT");
        mci.pNext = NULL;
        if (!create || !rt->destroy_messenger)
            return loom_fail(LOOM_UNSUPPORTED, "vkCreateDebugUtilsMessengerEXT is missing");
        vr = create(rt->instance, &mci, NULL, &rt->messenger);
        if (vr != VK_SUCCESS)
            return rt_vk_fail(rt, vr, "vkCreateDebugUtilsMessengerEXT");
    }
    if (rt->debug_utils) {
        rt->begin_label = (PFN_vkCmdBeginDebugUtilsLabelEXT)vkGetInstanceProcAddr(rt->instance,
                                                                                 "vkCmdBeginDebugUtilsLabelEXT");
        rt->end_label = (PFN_vkCmdEndDebugUtilsLabelEXT)vkGetInstanceProcAddr(rt->instance,
                                                                             "vkCmdEndDebugUtilsLabelEXT");
        rt->debug_utils = rt->begin_label && rt->end_label;
    }
    return LOOM_OK;
}

/* ---- device choice ------------------------------------------------------ */

static int type_rank(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
    }
}

static const char *type_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
    }
}

static bool compute_queue(VkPhysicalDevice pd, uint32_t *family)
{
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties q[16];
    if (n > 16)
        n = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
    /* A compute-only family avoids sharing with graphics work; else any. */
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < n; i++)
            if ((q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) &&
                (pass == 1 || !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))) {
                *family = i;
                return true;
            }
    return false;
}

static bool usable(VkPhysicalDevice pd)
{
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(pd, &p);
    uint32_t fam;
    if (p.apiVersion < VK_API_VERSION_1_2 || !compute_queue(pd, &fam))
        return false;
    VkPhysicalDeviceVulkan12Features f12 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES };
    VkPhysicalDeviceFeatures2 f = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f12 };
    vkGetPhysicalDeviceFeatures2(pd, &f);
    return f12.timelineSemaphore;
}

/* Picks by explicit choice (index or name substring) or by type rank. */
static loom_result pick_device(loom_rt *rt, const char *want)
{
    uint32_t n = 0;
    VkResult vr = vkEnumeratePhysicalDevices(rt->instance, &n, NULL);
    if (vr != VK_SUCCESS)
        return rt_vk_fail(rt, vr, "vkEnumeratePhysicalDevices");
    if (!n)
        return loom_fail(LOOM_NOT_FOUND, "no Vulkan device found");
    VkPhysicalDevice pds[32];
    if (n > 32)
        n = 32;
    vr = vkEnumeratePhysicalDevices(rt->instance, &n, pds);
    if (vr != VK_SUCCESS && vr != VK_INCOMPLETE)
        return rt_vk_fail(rt, vr, "vkEnumeratePhysicalDevices");
    int best = -1;
    if (want && *want) {
        char *end;
        long idx = strtol(want, &end, 10);
        for (uint32_t i = 0; i < n && best < 0; i++) {
            VkPhysicalDeviceProperties p;
            vkGetPhysicalDeviceProperties(pds[i], &p);
            if ((*end == 0 && idx == (long)i) || (*end != 0 && strstr(p.deviceName, want)))
                best = (int)i;
        }
        if (best < 0)
            return loom_fail(LOOM_NOT_FOUND, "device '%s' (LOOM_DEVICE or desc.device) matches none of %u devices",
                             want, n);
        if (!usable(pds[best]))
            return loom_fail(LOOM_UNSUPPORTED, "device '%s' lacks Vulkan 1.2, a compute queue or timeline "
                             "semaphores", want);
    } else {
        for (uint32_t i = 0; i < n; i++) {
            if (!usable(pds[i]))
                continue;
            VkPhysicalDeviceProperties p, q;
            vkGetPhysicalDeviceProperties(pds[i], &p);
            if (best >= 0)
                vkGetPhysicalDeviceProperties(pds[best], &q);
            if (best < 0 || type_rank(p.deviceType) < type_rank(q.deviceType))
                best = (int)i;
        }
        if (best < 0)
            return loom_fail(LOOM_UNSUPPORTED, "none of %u Vulkan devices has Vulkan 1.2 with timeline semaphores "
                             "and a compute queue", n);
    }
    rt->phys = pds[best];
    return LOOM_OK;
}

static bool device_has_extension(VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || !n)
        return false;
    VkExtensionProperties *e = malloc(n * sizeof *e);
    bool found = false;
    if (e && vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = !strcmp(e[i].extensionName, name);
    free(e);
    return found;
}

static loom_result create_device(loom_rt *rt)
{
    VkPhysicalDeviceSubgroupProperties sg = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES };
    VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg };
    vkGetPhysicalDeviceProperties2(rt->phys, &p2);
    rt->props = p2.properties;
    rt->subgroup_size = sg.subgroupSize;
    vkGetPhysicalDeviceMemoryProperties(rt->phys, &rt->mem_props);
    compute_queue(rt->phys, &rt->queue_family);

    VkPhysicalDeviceVulkan12Features have12 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES };
    VkPhysicalDeviceFeatures2 have = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &have12 };
    vkGetPhysicalDeviceFeatures2(rt->phys, &have);
    /* Kernels may use 16-bit storage / f16 math and int64 where present. */
    VkPhysicalDeviceVulkan11Features want11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
    };
    VkPhysicalDeviceVulkan11Features have11 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES };
    VkPhysicalDeviceFeatures2 have_b = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &have11 };
    vkGetPhysicalDeviceFeatures2(rt->phys, &have_b);
    want11.storageBuffer16BitAccess = have11.storageBuffer16BitAccess;
    VkPhysicalDeviceVulkan12Features want12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .pNext = &want11,
        .timelineSemaphore = VK_TRUE,
        .shaderFloat16 = have12.shaderFloat16,
        .storageBuffer8BitAccess = have12.storageBuffer8BitAccess,
    };
    VkPhysicalDeviceFeatures2 want = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
        .pNext = &want12,
        .features = { .shaderInt64 = have.features.shaderInt64, .shaderInt16 = have.features.shaderInt16 },
    };
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = rt->queue_family,
        .queueCount = 1,
        .pQueuePriorities = &prio,
    };
    /* LOOM_KERNEL_STATS=1: the driver's statistics of every pipeline
     * (registers, spills, ...) on stderr, where the device reports them. */
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pep = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
        .pipelineExecutableInfo = VK_TRUE,
    };
    const char *dev_exts[2];
    uint32_t n_dev_exts = 0;
    const char *stats = getenv("LOOM_KERNEL_STATS");
    if (stats && *stats && strcmp(stats, "0") && device_has_extension(rt->phys, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) {
        dev_exts[n_dev_exts++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
        want11.pNext = &pep;
        rt->kernel_stats = true;
    }
    /* Tracing aligns GPU time to the host clock through calibrated
     * timestamps where the device has them. */
    const char *ext = rt_trace_device_extension(rt);
    if (ext)
        dev_exts[n_dev_exts++] = ext;
    VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = &want,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qci,
        .enabledExtensionCount = n_dev_exts,
        .ppEnabledExtensionNames = n_dev_exts ? dev_exts : NULL,
    };
    VkResult vr = vkCreateDevice(rt->phys, &dci, NULL, &rt->device);
    if (vr != VK_SUCCESS)
        return rt_vk_fail(rt, vr, "vkCreateDevice");
    vkGetDeviceQueue(rt->device, rt->queue_family, 0, &rt->queue);
    rt_trace_device_ready(rt);

    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = rt->queue_family,
    };
    vr = vkCreateCommandPool(rt->device, &pci, NULL, &rt->cmd_pool);
    if (vr != VK_SUCCESS)
        return rt_vk_fail(rt, vr, "vkCreateCommandPool");
    VkSemaphoreTypeCreateInfo sti = {
        .sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
        .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
        .initialValue = 0,
    };
    VkSemaphoreCreateInfo sci = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &sti };
    vr = vkCreateSemaphore(rt->device, &sci, NULL, &rt->timeline);
    if (vr != VK_SUCCESS)
        return rt_vk_fail(rt, vr, "vkCreateSemaphore(timeline)");
    return LOOM_OK;
}

/* ---- create / destroy --------------------------------------------------- */

/* The binding limit in force: the device's, or less when asked (the desc,
 * else $LOOM_MAX_BINDING_RANGE, where 0 means the device's), so tests can
 * make small devices. */
static loom_result binding_limit(loom_rt *rt, uint64_t want)
{
    uint64_t dev = rt->props.limits.maxStorageBufferRange;
    const char *env = getenv("LOOM_MAX_BINDING_RANGE");
    if (!want && env && *env) {
        char *end;
        unsigned long long v = strtoull(env, &end, 10);
        if (*end || env[0] < '0' || env[0] > '9')
            return loom_fail(LOOM_INVALID_ARGUMENT, "LOOM_MAX_BINDING_RANGE '%s' is not a byte count", env);
        want = v;
    }
    rt->max_binding_range = want && want < dev ? want : dev;
    if (rt->max_binding_range < dev)
        rt_log(rt, LOOM_LOG_INFO, "binding limit %llu bytes (the device allows %llu)",
               (unsigned long long)rt->max_binding_range, (unsigned long long)dev);
    return LOOM_OK;
}

/* $LOOM_PROFILE: 1 or "groups", 2 or "nodes"; anything else leaves the
 * desc's level. */
static loom_rt_profile_level profile_level(loom_rt_profile_level desc)
{
    const char *env = getenv("LOOM_PROFILE");
    loom_rt_profile_level e = LOOM_PROFILE_OFF;
    if (env && (!strcmp(env, "1") || !strcmp(env, "groups")))
        e = LOOM_PROFILE_GROUPS;
    else if (env && (!strcmp(env, "2") || !strcmp(env, "nodes")))
        e = LOOM_PROFILE_NODES;
    if (desc > LOOM_PROFILE_NODES)
        desc = LOOM_PROFILE_NODES;
    return e > desc ? e : desc;
}

loom_result loom_rt_create(const loom_rt_desc *desc, loom_rt **out)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_create: out is NULL");
    *out = NULL;
    loom_rt_desc d = desc ? *desc : (loom_rt_desc){ 0 };
    const loom_allocator *a = d.allocator ? d.allocator : loom_default_allocator();
    loom_rt *rt = a->realloc(a->user, NULL, 0, sizeof *rt);
    if (!rt)
        return loom_fail(LOOM_OUT_OF_MEMORY, "loom_rt_create: out of memory");
    memset(rt, 0, sizeof *rt);
    rt->a = *a;
    rt->log = d.log;
    rt->log_user = d.log_user;
    rt->spin_polls = d.spin_polls ? d.spin_polls : LOOM_RT_DEFAULT_SPIN;
    rt->plan_cache_capacity = d.plan_cache_capacity;
    rt->in_flight = d.in_flight;
    rt->timestamps = d.timestamps;
    rt->profile = profile_level(d.profile);
    const char *env = getenv("LOOM_VALIDATE");
    rt->validate = d.validate || (env && !strcmp(env, "1"));
    rt->next_serial = 1;

    const char *dev = d.device ? d.device : getenv("LOOM_DEVICE");
    const char *cache = d.pipeline_cache_path ? d.pipeline_cache_path : getenv("LOOM_PIPELINE_CACHE");
    loom_result rc = rt_trace_create(rt, d.trace_path, d.trace_steps);
    if (!rc)
        rc = create_instance(rt);
    if (!rc)
        rc = pick_device(rt, dev);
    if (!rc)
        rc = create_device(rt);
    if (!rc)
        rc = binding_limit(rt, d.max_binding_range);
    if (!rc)
        rc = rt_pipeline_cache_open(rt, cache && *cache ? cache : NULL);
    if (rc) {
        /* Nothing made yet can fail on destruction: the slot keeps rc's message. */
        loom_rt_destroy(rt);
        return loom_fail_wrap(rc, "loom_rt_create");
    }
    rt_log(rt, LOOM_LOG_INFO, "device: %s (%s)%s", rt->props.deviceName, type_name(rt->props.deviceType),
           rt->validate ? ", validation on" : "");
    *out = rt;
    return LOOM_OK;
}

void loom_rt_destroy(loom_rt *rt)
{
    if (!rt)
        return;
    if (rt->device) {
        vkDeviceWaitIdle(rt->device);
        rt->completed = rt->submitted;
        /* The plan cache first: its plans hold programs. */
        loom_cache_destroy(rt->plans);
        rt->plans = NULL;
        /* Programs next: they hold references to buffers. */
        while (rt->live_programs)
            loom_rt_program_release(rt->live_programs);
        rt_collect(rt);
        while (rt->zombie_programs) {
            loom_rt_program *p = rt->zombie_programs;
            rt->zombie_programs = p->next_zombie;
            rt_program_destroy(p);
        }
        rt_collect(rt);
        /* Every replay was read back as its program died: the trace is
         * complete. */
        rt_trace_destroy(rt);
        while (rt->zombie_buffers) {
            loom_rt_buffer *b = rt->zombie_buffers;
            rt->zombie_buffers = b->next_zombie;
            rt_buffer_destroy(b);
        }
        for (uint32_t i = 0; i < rt->n_live; i++)
            rt_buffer_destroy(rt->live[i]);
        rt_free_bytes(rt, rt->live, (size_t)rt->cap_live * sizeof *rt->live);
        rt_kernels_destroy(rt);
        rt_pipeline_cache_close(rt);
        rt_blocks_destroy(rt);
        if (rt->timeline)
            vkDestroySemaphore(rt->device, rt->timeline, NULL);
        if (rt->cmd_pool)
            vkDestroyCommandPool(rt->device, rt->cmd_pool, NULL);
        vkDestroyDevice(rt->device, NULL);
    }
    rt_trace_destroy(rt);   /* creation failed before the device: nothing recorded */
    if (rt->messenger)
        rt->destroy_messenger(rt->instance, rt->messenger, NULL);
    if (rt->instance)
        vkDestroyInstance(rt->instance, NULL);
    loom_allocator a = rt->a;
    a.realloc(a.user, rt, sizeof *rt, 0);
}

uint64_t loom_rt_validation_messages(const loom_rt *rt) { return rt ? rt->validation_messages : 0; }

void loom_rt_get_info(const loom_rt *rt, loom_rt_info *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (!rt)
        return;
    snprintf(out->device_name, sizeof out->device_name, "%s", rt->props.deviceName);
    out->device_type = rt->props.deviceType;
    out->vendor_id = rt->props.vendorID;
    out->device_id = rt->props.deviceID;
    out->driver_version = rt->props.driverVersion;
    out->api_version = rt->props.apiVersion;
    loom_rt_memory mem = rt_memory_of(&rt->props, &rt->mem_props, &out->host_window_bytes);
    out->memory = mem;
    out->unified_memory = mem == LOOM_RT_MEMORY_UNIFIED;
    out->timestamp_period_ns = rt->props.limits.timestampPeriod;
    out->min_storage_offset_alignment = rt->props.limits.minStorageBufferOffsetAlignment;
    out->max_storage_buffer_range = rt->props.limits.maxStorageBufferRange;
    out->max_binding_range = rt->max_binding_range;
    out->max_push_constants = rt->props.limits.maxPushConstantsSize;
    out->subgroup_size = rt->subgroup_size;
    out->debug_utils = rt->debug_utils;
    out->pipeline_cache_loaded = rt->pipeline_cache_loaded;
}

void loom_rt_get_counters(const loom_rt *rt, loom_rt_counters *out)
{
    if (out)
        *out = rt ? rt->counters : (loom_rt_counters){ 0 };
}

/* ---- device listing ----------------------------------------------------- */

static void describe_memory(loom_str *s, const VkPhysicalDeviceMemoryProperties *mp)
{
    for (uint32_t h = 0; h < mp->memoryHeapCount; h++)
        loom_str_printf(s, "    heap %u: %llu MiB%s\n", h, (unsigned long long)(mp->memoryHeaps[h].size >> 20),
                        mp->memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT ? " device-local" : "");
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
        loom_str_printf(s, "    type %u (heap %u):%s%s%s%s\n", i, mp->memoryTypes[i].heapIndex,
                        f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT ? " device-local" : "",
                        f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT ? " host-visible" : "",
                        f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT ? " coherent" : "",
                        f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT ? " cached" : "");
    }
}

loom_result loom_rt_describe_devices(loom_str *out)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_describe_devices: out is NULL");
    VkApplicationInfo app = { .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_2 };
    VkInstanceCreateInfo ci = { .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app };
    VkInstance inst;
    VkResult vr = vkCreateInstance(&ci, NULL, &inst);
    if (vr != VK_SUCCESS)
        return rt_vk_fail(NULL, vr, "vkCreateInstance");
    uint32_t n = 32;
    VkPhysicalDevice pds[32];
    vr = vkEnumeratePhysicalDevices(inst, &n, pds);
    if (vr != VK_SUCCESS && vr != VK_INCOMPLETE) {
        vkDestroyInstance(inst, NULL);
        return rt_vk_fail(NULL, vr, "vkEnumeratePhysicalDevices");
    }
    loom_str_printf(out, "%u Vulkan device%s\n", n, n == 1 ? "" : "s");
    for (uint32_t i = 0; i < n; i++) {
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(pds[i], &p);
        VkPhysicalDeviceMemoryProperties mp;
        vkGetPhysicalDeviceMemoryProperties(pds[i], &mp);
        loom_str_printf(out, "[%u] %s — %s, Vulkan %u.%u.%u, vendor 0x%04x device 0x%04x%s\n", i, p.deviceName,
                        type_name(p.deviceType), VK_API_VERSION_MAJOR(p.apiVersion),
                        VK_API_VERSION_MINOR(p.apiVersion), VK_API_VERSION_PATCH(p.apiVersion), p.vendorID,
                        p.deviceID, usable(pds[i]) ? "" : " (unusable: needs 1.2 + timeline semaphores)");
        uint64_t win;
        loom_rt_memory mem = rt_memory_of(&p, &mp, &win);
        loom_str_printf(out, "    memory: %s", loom_rt_memory_name(mem));
        if (mem != LOOM_RT_MEMORY_UNIFIED && win)
            loom_str_printf(out, ", %llu MiB", (unsigned long long)(win >> 20));
        loom_str_printf(out, "; timestamp period %.3f ns\n", p.limits.timestampPeriod);
        describe_memory(out, &mp);
    }
    vkDestroyInstance(inst, NULL);
    return out->failed ? loom_fail(LOOM_OUT_OF_MEMORY, "describe devices: out of memory") : LOOM_OK;
}
