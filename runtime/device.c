/* The Vulkan instance and device behind a loom_rt: loader setup, optional
 * validation (with synchronization validation, messages counted), device
 * choice (LOOM_DEVICE, else discrete > integrated > CPU), the VkDevice and
 * its queue, what the device's memory types allow the host, and the
 * descriptive calls (info, device listing, counters). Each creation is a
 * row of short steps: choose what to enable, fill the create info, create,
 * fetch what creation made available. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

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
static const VkValidationFeatureEnableEXT SYNC_VALIDATION[] = {
    VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT,
};

/* Debug utils where the loader has them (labels, and validation's
 * messages); validation needs both the layer and them. */
static loom_result instance_extensions(loom_rt *rt, const char **exts, uint32_t *n_exts)
{
    rt->debug_utils = has_instance_ext(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    if (rt->debug_utils)
        exts[(*n_exts)++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    if (!rt->validate)
        return LOOM_OK;
    if (!has_layer(VALIDATION_LAYER))
        return loom_fail(LOOM_UNSUPPORTED, "validation was requested (desc.validate or LOOM_VALIDATE=1) but "
                         "%s is not installed", VALIDATION_LAYER);
    if (!rt->debug_utils)
        return loom_fail(LOOM_UNSUPPORTED, "validation needs %s, which the loader does not offer",
                         VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    return LOOM_OK;
}

/* Warnings and errors of every kind to on_debug_message, with
 * synchronization validation enabled through the chain. */
static void messenger_info(loom_rt *rt, VkValidationFeaturesEXT *features, VkDebugUtilsMessengerCreateInfoEXT *mci)
{
    *features = (VkValidationFeaturesEXT){
        .sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
        .enabledValidationFeatureCount = 1,
        .pEnabledValidationFeatures = SYNC_VALIDATION,
    };
    *mci = (VkDebugUtilsMessengerCreateInfoEXT){
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .pNext = features,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_debug_message,
        .pUserData = rt,
    };
}

/* The messenger that outlives instance creation (the chained one covers
 * only vkCreateInstance itself). */
static loom_result messenger_create(loom_rt *rt, VkDebugUtilsMessengerCreateInfoEXT *mci)
{
    PFN_vkCreateDebugUtilsMessengerEXT create =
        (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(rt->instance, "vkCreateDebugUtilsMessengerEXT");
    rt->destroy_messenger = (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
        rt->instance, "vkDestroyDebugUtilsMessengerEXT");
    mci->pNext = NULL;
    if (!create || !rt->destroy_messenger)
        return loom_fail(LOOM_UNSUPPORTED, "vkCreateDebugUtilsMessengerEXT is missing");
    VkResult vr = create(rt->instance, mci, NULL, &rt->messenger);
    return vr == VK_SUCCESS ? LOOM_OK : rt_vk_fail(rt, vr, "vkCreateDebugUtilsMessengerEXT");
}

static void labels_fetch(loom_rt *rt)
{
    if (!rt->debug_utils)
        return;
    rt->begin_label = (PFN_vkCmdBeginDebugUtilsLabelEXT)vkGetInstanceProcAddr(rt->instance,
                                                                             "vkCmdBeginDebugUtilsLabelEXT");
    rt->end_label = (PFN_vkCmdEndDebugUtilsLabelEXT)vkGetInstanceProcAddr(rt->instance,
                                                                         "vkCmdEndDebugUtilsLabelEXT");
    rt->debug_utils = rt->begin_label && rt->end_label;
}

static loom_result create_instance(loom_rt *rt)
{
    const char *exts[1];
    uint32_t n_exts = 0;
    loom_result rc = instance_extensions(rt, exts, &n_exts);
    if (rc)
        return rc;
    VkValidationFeaturesEXT features;
    VkDebugUtilsMessengerCreateInfoEXT mci;
    messenger_info(rt, &features, &mci);
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "loom",
        .pEngineName = "loom",
        .apiVersion = VK_API_VERSION_1_2,
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
    if (rt->validate && (rc = messenger_create(rt, &mci)))
        return rc;
    labels_fetch(rt);
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

const char *rt_device_type_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
    }
}

_Static_assert(LOOM_RT_QUEUE_GRAPHICS == VK_QUEUE_GRAPHICS_BIT && LOOM_RT_QUEUE_COMPUTE == VK_QUEUE_COMPUTE_BIT,
               "loom_runtime.h: LOOM_RT_QUEUE_*");

/* The queue family loom submits to (*flags: its VkQueueFlags). */
static bool compute_queue(VkPhysicalDevice pd, uint32_t *family, uint32_t *flags)
{
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties q[16];
    if (n > 16)
        n = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
    /* A family with graphics as well as compute first, else any with
     * compute; LOOM_QUEUE=compute prefers a compute-only family. The
     * families may run on different hardware channels: the 1b decode step
     * read faster on the graphics family, on the H200 and the H100 alike
     * (figures: docs/perf-log.md, "Figures moved out of code comments"). */
    const char *want = getenv("LOOM_QUEUE");
    bool graphics = !(want && !strcmp(want, "compute"));
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < n; i++)
            if ((q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) &&
                (pass == 1 || ((q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT) != 0) == graphics)) {
                *family = i;
                *flags = q[i].queueFlags;
                return true;
            }
    return false;
}

static bool usable(VkPhysicalDevice pd)
{
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(pd, &p);
    uint32_t fam, flags;
    if (p.apiVersion < VK_API_VERSION_1_2 || !compute_queue(pd, &fam, &flags))
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

/* What the chosen device is: properties, subgroup size, memory types and
 * the compute queue's family. */
static void device_fetch(loom_rt *rt)
{
    VkPhysicalDeviceSubgroupProperties sg = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES };
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV };
    /* The SM count, where the driver tells it (an NVIDIA extension). */
    bool has_sm = device_has_extension(rt->phys, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
    if (has_sm)
        sg.pNext = &sm;
    VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg };
    vkGetPhysicalDeviceProperties2(rt->phys, &p2);
    rt->props = p2.properties;
    rt->subgroup_size = sg.subgroupSize;
    rt->sm_count = has_sm ? sm.shaderSMCount : 0;
    /* One wave of the argmax forms' workgroups (256 invocations, at most 64
     * registers: four fit an SM's 64K registers), where the SM count is
     * known; LOOM_WAVE_GROUPS, read once here, sets it for measuring. */
    const char *wave = getenv("LOOM_WAVE_GROUPS");
    rt->wave_groups = wave && *wave ? (uint32_t)strtoul(wave, NULL, 10) : 4u * rt->sm_count;
    vkGetPhysicalDeviceMemoryProperties(rt->phys, &rt->mem_props);
    compute_queue(rt->phys, &rt->queue_family, &rt->queue_flags);
    if (getenv("LOOM_QUEUE"))
        rt_log(rt, LOOM_LOG_INFO, "LOOM_QUEUE=%s: queue family %u", getenv("LOOM_QUEUE"), rt->queue_family);
}

/* The features chain of vkCreateDevice; filled in place, as it points into
 * itself. */
typedef struct device_features {
    VkPhysicalDeviceFeatures2 want;
    VkPhysicalDeviceVulkan12Features want12;
    VkPhysicalDeviceVulkan11Features want11;
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pep;
    VkPhysicalDeviceShaderAtomicFloatFeaturesEXT atomic_float;
    VkPhysicalDeviceCooperativeMatrixFeaturesNV coopmat;
    VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR int_dot;
} device_features;

/* Timeline semaphores always; kernels may use 16-bit storage / f16 math
 * and int64 where present. */
static void features_fill(loom_rt *rt, device_features *f)
{
    VkPhysicalDeviceVulkan12Features have12 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES };
    VkPhysicalDeviceFeatures2 have = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &have12 };
    vkGetPhysicalDeviceFeatures2(rt->phys, &have);
    VkPhysicalDeviceVulkan11Features have11 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES };
    VkPhysicalDeviceFeatures2 have_b = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &have11 };
    vkGetPhysicalDeviceFeatures2(rt->phys, &have_b);
    /* LOOM_STORAGE16=0: run as on a device without it (tests). */
    const char *s16 = getenv("LOOM_STORAGE16");
    rt->storage16 = have11.storageBuffer16BitAccess && !(s16 && !strcmp(s16, "0"));
    f->want11 = (VkPhysicalDeviceVulkan11Features){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
        .storageBuffer16BitAccess = rt->storage16,
    };
    f->want12 = (VkPhysicalDeviceVulkan12Features){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .pNext = &f->want11,
        .timelineSemaphore = VK_TRUE,
        .shaderFloat16 = have12.shaderFloat16,
        .storageBuffer8BitAccess = have12.storageBuffer8BitAccess,
        .vulkanMemoryModel = have12.vulkanMemoryModel,   /* kept only with cooperative matrices (device_extensions) */
    };
    f->want = (VkPhysicalDeviceFeatures2){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
        .pNext = &f->want12,
        .features = { .shaderInt64 = have.features.shaderInt64, .shaderInt16 = have.features.shaderInt16 },
    };
    f->pep = (VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
        .pipelineExecutableInfo = VK_TRUE,
    };
}

/* Float atomic adds on storage buffers (MATVEC_ADD_STAGE sums its squares
 * with them) where the device has VK_EXT_shader_atomic_float. */
static bool atomic_float_add(loom_rt *rt)
{
    if (!device_has_extension(rt->phys, VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME))
        return false;
    VkPhysicalDeviceShaderAtomicFloatFeaturesEXT af = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT
    };
    VkPhysicalDeviceFeatures2 f = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &af };
    vkGetPhysicalDeviceFeatures2(rt->phys, &f);
    return af.shaderBufferFloat32AtomicAdd == VK_TRUE;
}

/* The shape the coopmat forms multiply (shaders/matmul.glsl,
 * attention_rows.glsl): 16x16x16, f16 A and B, f32 C and D, by a subgroup,
 * where subgroups are 32 wide (a workgroup of 128 is the four subgroups the
 * kernels divide their tiles between) and f16 arithmetic, which the kernels
 * declare, is on. */
static bool coopmat_shape(loom_rt *rt, bool float16)
{
    if (!float16 || rt->subgroup_size != 32 ||
        !device_has_extension(rt->phys, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME))
        return false;
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV props =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)vkGetInstanceProcAddr(
            rt->instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
    VkPhysicalDeviceCooperativeMatrixFeaturesNV cf = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV };
    VkPhysicalDeviceFeatures2 f = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &cf };
    vkGetPhysicalDeviceFeatures2(rt->phys, &f);
    uint32_t n = 0;
    if (!props || !cf.cooperativeMatrix || props(rt->phys, &n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkCooperativeMatrixPropertiesNV p[64];
    if (n > 64)
        n = 64;
    for (uint32_t i = 0; i < n; i++)
        p[i] = (VkCooperativeMatrixPropertiesNV){ .sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV };
    VkResult vr = props(rt->phys, &n, p);
    if (vr != VK_SUCCESS && vr != VK_INCOMPLETE)
        return false;
    for (uint32_t i = 0; i < n; i++)
        if (p[i].MSize == 16 && p[i].NSize == 16 && p[i].KSize == 16 && p[i].AType == VK_COMPONENT_TYPE_FLOAT16_NV &&
            p[i].BType == VK_COMPONENT_TYPE_FLOAT16_NV && p[i].CType == VK_COMPONENT_TYPE_FLOAT32_NV &&
            p[i].DType == VK_COMPONENT_TYPE_FLOAT32_NV && p[i].scope == VK_SCOPE_SUBGROUP_NV)
            return true;
    return false;
}

/* Integer dot products of packed 8-bit vectors (OpSDot, OpSUDot) where the
 * device has VK_KHR_shader_integer_dot_product: the block-typed matvec
 * kernels then take their integer form (loom_builtin_kernel.code_idot). */
static bool integer_dot(loom_rt *rt)
{
    if (!device_has_extension(rt->phys, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME))
        return false;
    VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR idp = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR
    };
    VkPhysicalDeviceFeatures2 f = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &idp };
    vkGetPhysicalDeviceFeatures2(rt->phys, &f);
    return idp.shaderIntegerDotProduct == VK_TRUE;
}

/* LOOM_KERNEL_STATS=1: the driver's statistics of every pipeline
 * (registers, spills, ...) on stderr, where the device reports them.
 * Tracing aligns GPU time to the host clock through calibrated timestamps
 * where the device has them. */
static void device_extensions(loom_rt *rt, device_features *f, const char **exts, uint32_t *n_exts)
{
    const char *stats = getenv("LOOM_KERNEL_STATS");
    if (stats && *stats && strcmp(stats, "0") &&
        device_has_extension(rt->phys, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) {
        exts[(*n_exts)++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
        f->want11.pNext = &f->pep;
        rt->kernel_stats = true;
    }
    const char *ext = rt_trace_device_extension(rt);
    if (ext)
        exts[(*n_exts)++] = ext;
    /* LOOM_COOPMAT=0: run as on a device without cooperative matrices (the
     * tiled matmul forms; benchmarks, tests). Their kernels use the Vulkan
     * memory model (glslang declares it with the extension). */
    const char *cm = getenv("LOOM_COOPMAT");
    if (!(cm && !strcmp(cm, "0")) && f->want12.vulkanMemoryModel && coopmat_shape(rt, f->want12.shaderFloat16)) {
        exts[(*n_exts)++] = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
        f->coopmat = (VkPhysicalDeviceCooperativeMatrixFeaturesNV){
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
            .pNext = f->want11.pNext,
            .cooperativeMatrix = VK_TRUE,
        };
        f->want11.pNext = &f->coopmat;
        rt->coopmat = true;
    } else {
        f->want12.vulkanMemoryModel = VK_FALSE;
    }
    /* LOOM_INT_DOT=0: run as on a device without them (the float kernels). */
    const char *idp = getenv("LOOM_INT_DOT");
    if (!(idp && !strcmp(idp, "0")) && integer_dot(rt)) {
        exts[(*n_exts)++] = VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME;
        f->int_dot = (VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR){
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR,
            .pNext = f->want11.pNext,
            .shaderIntegerDotProduct = VK_TRUE,
        };
        f->want11.pNext = &f->int_dot;
        rt->int_dot = true;
    }
    /* LOOM_ATOMIC_FLOAT=0: run as on a device without them (tests). */
    const char *af = getenv("LOOM_ATOMIC_FLOAT");
    if ((af && !strcmp(af, "0")) || !atomic_float_add(rt))
        return;
    exts[(*n_exts)++] = VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME;
    f->atomic_float = (VkPhysicalDeviceShaderAtomicFloatFeaturesEXT){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT,
        .pNext = f->want11.pNext,
        .shaderBufferFloat32AtomicAdd = VK_TRUE,
    };
    f->want11.pNext = &f->atomic_float;
    rt->atomic_float_add = true;
}

/* Awaited edges (tagged vectors; the awaits pass, passes/awaits.c, places
 * them where loom_compile_options.awaits, set from this rule, allows)
 * replace a barrier by a reader that polls its producer's output. Vulkan promises neither launch
 * order across dispatches nor forward progress between workgroups, so the
 * lowering rests on what a device is known to do (docs/design-notes.md,
 * "Awaited edges: what they assume"):
 *  A1 a queue's dispatches launch in order: no workgroup of the reader
 *     starts before every workgroup of its producer has started, so a
 *     polling workgroup never holds a slot its producer still needs;
 *  A2 a started workgroup runs to its end while others spin;
 *  A3 a 32-bit store is seen whole, and in time, by a coherent load on
 *     another unit, with no barrier between them.
 * NVIDIA's GPUs do all three (the measured plans of docs/perf.md rely on
 * them); a CPU implementation runs a queue's dispatches one after another,
 * so a reader never runs beside its producer and the polls find every word
 * landed. Any other device gets the barrier plan. LOOM_TAGS=0 turns the
 * edges off anywhere, LOOM_TAGS=1 (or keep) takes them anyway. */
static void rt_awaits_rule(loom_rt *rt)
{
    const char *e = getenv("LOOM_TAGS");
    if (e && !strcmp(e, "0")) {
        rt->awaits = false;
        rt->awaits_why = "LOOM_TAGS=0";
    } else if (e && (!strcmp(e, "1") || !strcmp(e, "keep"))) {
        rt->awaits = true;
        rt->awaits_keep = e[0] == 'k';
        rt->awaits_why = "LOOM_TAGS set: taken whatever the device";
    } else if (rt->props.vendorID == 0x10deu) {
        rt->awaits = true;
        rt->awaits_why = "NVIDIA: a queue's dispatches launch in order and a started workgroup runs beside "
                         "spinning ones (A1-A3)";
    } else if (rt->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
        rt->awaits = true;
        rt->awaits_why = "a CPU device: a queue's dispatches run one after another, so a poll finds its "
                         "producer done";
    } else {
        rt->awaits = false;
        rt->awaits_why = "launch order across dispatches not known for this vendor (Vulkan promises none): "
                         "barrier plan; LOOM_TAGS=1 takes awaited edges anyway";
    }
}

static loom_result create_device(loom_rt *rt)
{
    device_fetch(rt);
    rt_awaits_rule(rt);
    device_features f;
    features_fill(rt, &f);
    const char *exts[4];
    uint32_t n_exts = 0;
    device_extensions(rt, &f, exts, &n_exts);
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = rt->queue_family,
        .queueCount = 1,
        .pQueuePriorities = &prio,
    };
    VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = &f.want,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qci,
        .enabledExtensionCount = n_exts,
        .ppEnabledExtensionNames = n_exts ? exts : NULL,
    };
    VkResult vr = vkCreateDevice(rt->phys, &dci, NULL, &rt->device);
    if (vr != VK_SUCCESS)
        return rt_vk_fail(rt, vr, "vkCreateDevice");
    vkGetDeviceQueue(rt->device, rt->queue_family, 0, &rt->queue);
    rt_trace_device_ready(rt);
    return LOOM_OK;
}

loom_result rt_device_create(loom_rt *rt, const char *want)
{
    loom_result rc = create_instance(rt);
    if (!rc)
        rc = pick_device(rt, want);
    if (!rc)
        rc = create_device(rt);
    return rc;
}

void rt_device_destroy(loom_rt *rt)
{
    if (rt->device)
        vkDestroyDevice(rt->device, NULL);
    if (rt->messenger)
        rt->destroy_messenger(rt->instance, rt->messenger, NULL);
    if (rt->instance)
        vkDestroyInstance(rt->instance, NULL);
    rt->device = VK_NULL_HANDLE;
    rt->messenger = VK_NULL_HANDLE;
    rt->instance = VK_NULL_HANDLE;
}

/* ---- memory kinds ------------------------------------------------------ */

/* A device-local host-visible heap at least this large is a resizable BAR
 * (all of VRAM, or most of it); the classic BAR window is 256 MiB. */
#define REBAR_MIN (1ull << 30)

loom_rt_memory rt_memory_of(const VkPhysicalDeviceProperties *props, const VkPhysicalDeviceMemoryProperties *mp,
                            uint64_t *window)
{
    uint64_t win = 0;
    bool dl = false, dl_only = false;
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
        uint64_t heap = mp->memoryHeaps[mp->memoryTypes[i].heapIndex].size;
        bool local = f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, host = f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
        dl |= local;
        dl_only |= local && !host;
        if (local && host && heap > win)
            win = heap;
    }
    if (window)
        *window = win;
    /* A CPU or integrated device, or one whose device-local memory is all
     * host-visible, has no second memory to stage through. */
    if (props->deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
        props->deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU || (dl && !dl_only))
        return LOOM_RT_MEMORY_UNIFIED;
    if (!win)
        return LOOM_RT_MEMORY_DISCRETE;
    return win >= REBAR_MIN ? LOOM_RT_MEMORY_REBAR : LOOM_RT_MEMORY_BAR;
}

const char *loom_rt_memory_name(loom_rt_memory m)
{
    switch (m) {
    case LOOM_RT_MEMORY_UNIFIED: return "unified memory";
    case LOOM_RT_MEMORY_REBAR: return "device-local host-visible window (resizable BAR)";
    case LOOM_RT_MEMORY_BAR: return "small device-local host-visible window (BAR)";
    case LOOM_RT_MEMORY_DISCRETE: return "no device-local host-visible memory";
    }
    return "?";
}

/* ---- descriptive calls -------------------------------------------------- */

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
    out->max_shared_memory = rt->props.limits.maxComputeSharedMemorySize;
    out->subgroup_size = rt->subgroup_size;
    out->atomic_float_add = rt->atomic_float_add;
    out->coopmat = rt->coopmat;
    out->int_dot = rt->int_dot;
    out->debug_utils = rt->debug_utils;
    out->pipeline_cache_loaded = rt->pipeline_cache_loaded;
    out->queue_family = rt->queue_family;
    out->queue_flags = rt->queue_flags;
    out->sm_count = rt->sm_count;
    out->awaited_edges = rt->awaits;
    snprintf(out->awaited_why, sizeof out->awaited_why, "%s", rt->awaits_why ? rt->awaits_why : "");
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
                        rt_device_type_name(p.deviceType), VK_API_VERSION_MAJOR(p.apiVersion),
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
