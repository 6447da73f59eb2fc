/* The runtime object: loom_rt_create and loom_rt_destroy walk every layer
 * of runtime/ (internal.h lists them), making each in turn and destroying
 * in the reverse order, so they sit above all of them. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"

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
        rc = rt_device_create(rt, dev);
    if (!rc)
        rc = rt_sync_create(rt);
    if (!rc)
        rc = binding_limit(rt, d.max_binding_range);
    if (!rc)
        rc = rt_pipeline_cache_open(rt, cache && *cache ? cache : NULL);
    if (rc) {
        /* Nothing made yet can fail on destruction: the slot keeps rc's message. */
        loom_rt_destroy(rt);
        return loom_fail_wrap(rc, "loom_rt_create");
    }
    rt_log(rt, LOOM_LOG_INFO, "device: %s (%s)%s", rt->props.deviceName, rt_device_type_name(rt->props.deviceType),
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
        rt_collect_all(rt);
        /* Every replay was read back as its program died: the trace is
         * complete. */
        rt_trace_destroy(rt);
        rt_buffers_destroy(rt);
        rt_kernels_destroy(rt);
        rt_pipeline_cache_close(rt);
        rt_blocks_destroy(rt);
        rt_sync_destroy(rt);
    }
    rt_trace_destroy(rt);   /* creation failed before the device: nothing recorded */
    rt_device_destroy(rt);
    loom_allocator a = rt->a;
    a.realloc(a.user, rt, sizeof *rt, 0);
}
