/* The leaf of runtime/: what every other file uses and that uses no other
 * runtime file — allocation through the runtime's allocator, logging,
 * VkResult mapping and names, the lost-device check, and the test hook
 * that injects a Vulkan failure. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "internal.h"

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

