/* Submission and waiting: every submit signals the queue's timeline
 * semaphore with the next step id, so "is step N done" is one counter read.
 * Waiting reads the counter, spins a bounded number of polls, then blocks.
 * Released objects wait in one queue until their last step has completed;
 * their own files say how to free them. The queue, the command pool and the
 * timeline semaphore are made and destroyed here. */
#include <string.h>
#include "internal.h"

/* Blocking waits give up after this long and report LOOM_TIMEOUT rather
 * than hang a caller on a wedged device. */
#define WAIT_TIMEOUT_NS (60ull * 1000 * 1000 * 1000)

loom_result rt_submit(loom_rt *rt, VkCommandBuffer cmd, uint64_t *out_step)
{
    if (rt->lost)
        return loom_fail(LOOM_DEVICE_LOST, "submit: the device was lost");
    uint64_t step = rt->submitted + 1;
    VkTimelineSemaphoreSubmitInfo ts = {
        .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
        .signalSemaphoreValueCount = 1,
        .pSignalSemaphoreValues = &step,
    };
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .pNext = &ts,
        .commandBufferCount = 1,
        .pCommandBuffers = &cmd,
        .signalSemaphoreCount = 1,
        .pSignalSemaphores = &rt->timeline,
    };
    VkResult vr = rt_vk_injected(rt, "vkQueueSubmit");
    if (vr == VK_SUCCESS)
        vr = vkQueueSubmit(rt->queue, 1, &si, VK_NULL_HANDLE);
    if (vr != VK_SUCCESS)
        return rt_vk_fail(rt, vr, "vkQueueSubmit");
    rt->submitted = step;
    rt->counters.submits++;
    *out_step = step;
    return LOOM_OK;
}

loom_result rt_poll(loom_rt *rt)
{
    if (rt->lost)
        return loom_fail(LOOM_DEVICE_LOST, "the device was lost");
    uint64_t v;
    VkResult vr = vkGetSemaphoreCounterValue(rt->device, rt->timeline, &v);
    if (vr != VK_SUCCESS)
        return rt_vk_fail(rt, vr, "vkGetSemaphoreCounterValue");
    if (v > rt->completed)
        rt->completed = v;
    return LOOM_OK;
}

void rt_defer(loom_rt *rt, rt_deferred *d, uint64_t serial, void (*destroy)(void *obj), void *obj)
{
    if (rt->completed >= serial) {
        destroy(obj);
        return;
    }
    *d = (rt_deferred){ .serial = serial, .destroy = destroy, .obj = obj, .next = rt->deferred };
    rt->deferred = d;
}

/* An entry is unlinked before it runs: destroying one object may defer
 * another (a program drops its buffers), which joins the queue's head. */
static void run_deferred(loom_rt *rt, bool all)
{
    for (rt_deferred **pp = &rt->deferred; *pp;) {
        rt_deferred *d = *pp;
        if (all || rt->completed >= d->serial) {
            *pp = d->next;
            d->destroy(d->obj);
        } else {
            pp = &d->next;
        }
    }
}

void rt_collect(loom_rt *rt) { run_deferred(rt, false); }

void rt_collect_all(loom_rt *rt)
{
    while (rt->deferred)
        run_deferred(rt, true);
}

loom_result rt_wait_quiet(loom_rt *rt, uint64_t step)
{
    if (!rt)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_wait: rt is NULL");
    loom_result rc = rt_check_lost(rt, "loom_rt_wait");
    if (rc)
        return rc;
    if (step > rt->submitted)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_wait: step %llu was never submitted (last %llu)",
                         (unsigned long long)step, (unsigned long long)rt->submitted);
    if (step <= rt->completed) {
        rt->counters.waits_fast++;
        return LOOM_OK;
    }
    if ((rc = rt_poll(rt)))
        return rc;
    if (step <= rt->completed) {
        rt->counters.waits_fast++;
        rt_collect(rt);
        return LOOM_OK;
    }
    uint64_t t0 = rt->trace ? rt_trace_now() : 0;
    for (uint32_t i = 0; i < rt->spin_polls; i++) {
        if ((rc = rt_poll(rt)))
            return rc;
        if (step <= rt->completed) {
            rt->counters.waits_spun++;
            if (t0)
                rt_trace_cpu(rt, "wait", t0, rt_trace_now(), step, "how", "spin");
            rt_collect(rt);
            return LOOM_OK;
        }
    }
    VkSemaphoreWaitInfo wi = {
        .sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
        .semaphoreCount = 1,
        .pSemaphores = &rt->timeline,
        .pValues = &step,
    };
    VkResult vr = vkWaitSemaphores(rt->device, &wi, WAIT_TIMEOUT_NS);
    if (vr == VK_TIMEOUT)
        return loom_fail(LOOM_TIMEOUT, "loom_rt_wait: step %llu not done after %llu s", (unsigned long long)step,
                         WAIT_TIMEOUT_NS / 1000000000ull);
    if (vr != VK_SUCCESS)
        return rt_vk_fail(rt, vr, "vkWaitSemaphores");
    rt->counters.waits_blocked++;
    if (t0)
        rt_trace_cpu(rt, "wait", t0, rt_trace_now(), step, "how", "block");
    if ((rc = rt_poll(rt)))
        return rc;
    rt_collect(rt);
    return LOOM_OK;
}

/* The fault words of the tagged programs' completed steps (shaders/
 * tag.glsl: a poll that gave up sets it): each step's read once, cleared,
 * counted; the program falls back to barriers at its next replay
 * (rt_tags_fallback). Reads fields only: programs live higher up. */
static loom_result tags_check(loom_rt *rt)
{
    loom_result rc = LOOM_OK;
    for (loom_rt_program *p = rt->live_programs; p; p = p->next_live) {
        if (!p->tags)
            continue;
        for (uint32_t i = 0; i < p->n_copies; i++) {
            rt_copy *c = &p->copies[i];
            if (!c->recorded || !c->params.mapped || !c->last_step || c->last_step > rt->completed ||
                c->fault_seen >= c->last_step)
                continue;
            c->fault_seen = c->last_step;
            uint32_t fault;
            memcpy(&fault, c->params.mapped + p->tag_seq_at + 4, sizeof fault);
            if (!fault)
                continue;
            memset(c->params.mapped + p->tag_seq_at + 4, 0, sizeof fault);
            rt->counters.poll_timeouts++;
            p->tag_fault = true;
            if (!rc)
                rc = loom_fail(LOOM_TIMEOUT, "program '%s': step %llu: a polled wait gave up (a tagged input "
                               "never carried the step's tag); the program records every barrier from its next "
                               "replay on", loom_graph_name(p->g), (unsigned long long)c->last_step);
        }
    }
    return rc;
}

loom_result loom_rt_wait(loom_rt *rt, uint64_t step)
{
    loom_result rc = rt_wait_quiet(rt, step);
    return rc ? rc : tags_check(rt);
}

loom_result rt_host_wait(loom_rt *rt, uint64_t step, bool write)
{
    bool pending = step > rt->completed;
    loom_result rc = LOOM_OK;
    if (pending && !(rc = rt_poll(rt)))
        pending = step > rt->completed;
    if (!rc && pending)
        rc = loom_rt_wait(rt, step);
    if (rc)
        return rc;
    loom_rt_counters *c = &rt->counters;
    (*(write ? (pending ? &c->host_writes_waited : &c->host_writes_ready)
             : (pending ? &c->host_reads_waited : &c->host_reads_ready)))++;
    return LOOM_OK;
}

loom_result loom_rt_wait_idle(loom_rt *rt)
{
    if (!rt)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_wait_idle: rt is NULL");
    return loom_rt_wait(rt, rt->submitted);
}

void rt_cmd_leading_barrier(VkCommandBuffer cmd)
{
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                         VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    vkCmdPipelineBarrier(cmd,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                             VK_PIPELINE_STAGE_HOST_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0,
                         NULL, 0, NULL);
}

loom_result rt_oneshot_begin(loom_rt *rt, VkCommandBuffer *out)
{
    if (rt->lost)
        return loom_fail(LOOM_DEVICE_LOST, "the device was lost");
    VkCommandBufferAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = rt->cmd_pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1 };
    VkResult vr = vkAllocateCommandBuffers(rt->device, &ai, out);
    if (vr != VK_SUCCESS)
        return rt_vk_fail(rt, vr, "vkAllocateCommandBuffers");
    VkCommandBufferBeginInfo bi = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT };
    vr = vkBeginCommandBuffer(*out, &bi);
    if (vr != VK_SUCCESS) {
        vkFreeCommandBuffers(rt->device, rt->cmd_pool, 1, out);
        return rt_vk_fail(rt, vr, "vkBeginCommandBuffer");
    }
    rt_cmd_leading_barrier(*out);
    return LOOM_OK;
}

loom_result rt_oneshot_end(loom_rt *rt, VkCommandBuffer cmd)
{
    VkResult vr = vkEndCommandBuffer(cmd);
    loom_result rc = vr == VK_SUCCESS ? LOOM_OK : rt_vk_fail(rt, vr, "vkEndCommandBuffer");
    uint64_t step = 0;
    if (!rc)
        rc = rt_submit(rt, cmd, &step);
    /* Counted apart from the caller's waits: staging is not a replay. */
    loom_rt_counters saved = rt->counters;
    if (!rc)
        rc = loom_rt_wait(rt, step);
    saved.submits = rt->counters.submits;
    rt->counters = saved;
    if (!rc || !step)
        vkFreeCommandBuffers(rt->device, rt->cmd_pool, 1, &cmd);
    return rc;
}

loom_result rt_sync_create(loom_rt *rt)
{
    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = rt->queue_family,
    };
    VkResult vr = vkCreateCommandPool(rt->device, &pci, NULL, &rt->cmd_pool);
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

void rt_sync_destroy(loom_rt *rt)
{
    if (rt->timeline)
        vkDestroySemaphore(rt->device, rt->timeline, NULL);
    if (rt->cmd_pool)
        vkDestroyCommandPool(rt->device, rt->cmd_pool, NULL);
    rt->timeline = VK_NULL_HANDLE;
    rt->cmd_pool = VK_NULL_HANDLE;
}
