/* Device memory and buffers: VkDeviceMemory blocks of LOOM_RT_BLOCK_SIZE
 * carved into buffers (one allocation per buffer would hit the driver's
 * allocation-count limit and cost a kernel call each), user-visible
 * loom_rt_buffers with serial ids and deferred destruction, and host access
 * that is zero-copy on host-visible memory and staged otherwise, waiting
 * only for the submissions the access conflicts with. Where each kind of
 * buffer is placed is docs/design-notes.md's "Memory placement". */
#include <stdio.h>
#include <string.h>
#include "internal.h"

/* ---- memory types and blocks -------------------------------------------- */

static int find_type(loom_rt *rt, uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid)
{
    const VkPhysicalDeviceMemoryProperties *mp = &rt->mem_props;
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
        if ((bits & (1u << i)) && (f & want) == want && !(f & avoid))
            return (int)i;
    }
    return -1;
}

/* The coherent device-local host-visible type on the largest heap, where
 * the device maps (nearly) all its memory; else -1. */
static int window_type(loom_rt *rt, uint32_t bits)
{
    loom_rt_memory m = rt_memory_of(&rt->props, &rt->mem_props, NULL);
    if (m != LOOM_RT_MEMORY_UNIFIED && m != LOOM_RT_MEMORY_REBAR)
        return -1;
    const VkPhysicalDeviceMemoryProperties *mp = &rt->mem_props;
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                       VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int best = -1;
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++)
        if ((bits & (1u << i)) && (mp->memoryTypes[i].propertyFlags & want) == want &&
            (best < 0 || mp->memoryHeaps[mp->memoryTypes[i].heapIndex].size >
                             mp->memoryHeaps[mp->memoryTypes[best].heapIndex].size))
            best = (int)i;
    return best;
}

/* UPLOAD prefers coherent device-local host-visible memory (the GPU reads
 * it at full speed); READBACK prefers host-cached memory (host reads of
 * uncached device memory crawl over PCIe); DEVICE prefers device-local;
 * HOST_READ prefers device-local memory the host can map, but only where
 * the device maps all of it — a 256 MiB BAR window is kept for uploads. */
static int pick_type(loom_rt *rt, uint32_t bits, rt_mem_kind kind)
{
    const VkMemoryPropertyFlags HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    const VkMemoryPropertyFlags DL = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    const VkMemoryPropertyFlags HC = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
    int t;
    if (kind == RT_MEM_READBACK && (t = find_type(rt, bits, HV | HC, 0)) >= 0)
        return t;
    if (kind == RT_MEM_UPLOAD && (t = find_type(rt, bits, HV | DL, 0)) >= 0)
        return t;
    if (kind == RT_MEM_HOST_READ) {
        if ((t = window_type(rt, bits)) >= 0)
            return t;
        kind = RT_MEM_DEVICE;
    }
    if (kind != RT_MEM_DEVICE) {
        if ((t = find_type(rt, bits, HV, 0)) >= 0)
            return t;
        return find_type(rt, bits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, 0);
    }
    if ((t = find_type(rt, bits, DL, 0)) >= 0)
        return t;
    return find_type(rt, bits, 0, 0);
}

static bool type_host_visible(loom_rt *rt, uint32_t type)
{
    return rt->mem_props.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
}

static loom_result block_new(loom_rt *rt, uint32_t type, uint64_t size, bool dedicated, rt_block **out)
{
    rt_block *b = rt_alloc_bytes(rt, sizeof *b);
    if (!b)
        return loom_fail(LOOM_OUT_OF_MEMORY, "memory block: out of host memory");
    memset(b, 0, sizeof *b);
    b->size = size;
    b->type = type;
    b->dedicated = dedicated;
    VkMemoryAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = size,
                                .memoryTypeIndex = type };
    VkResult vr = rt_vk_injected(rt, "vkAllocateMemory");
    if (vr == VK_SUCCESS)
        vr = vkAllocateMemory(rt->device, &ai, NULL, &b->memory);
    if (vr == VK_SUCCESS && type_host_visible(rt, type))
        vr = vkMapMemory(rt->device, b->memory, 0, VK_WHOLE_SIZE, 0, (void **)&b->mapped);
    if (vr == VK_SUCCESS && !rt_grow(rt, (void **)&b->free, &b->cap_free, 1, sizeof *b->free))
        vr = VK_ERROR_OUT_OF_HOST_MEMORY;
    if (vr != VK_SUCCESS) {
        if (b->memory)
            vkFreeMemory(rt->device, b->memory, NULL);
        rt_free_bytes(rt, b, sizeof *b);
        return rt_vk_fail(rt, vr, "vkAllocateMemory");
    }
    b->free[0] = (rt_range){ 0, size };
    b->n_free = 1;
    b->next = rt->blocks;
    rt->blocks = b;
    *out = b;
    return LOOM_OK;
}

static void block_free(loom_rt *rt, rt_block *b)
{
    for (rt_block **pp = &rt->blocks; *pp; pp = &(*pp)->next)
        if (*pp == b) {
            *pp = b->next;
            break;
        }
    vkFreeMemory(rt->device, b->memory, NULL);
    rt_free_bytes(rt, b->free, (size_t)b->cap_free * sizeof *b->free);
    rt_free_bytes(rt, b, sizeof *b);
}

void rt_blocks_destroy(loom_rt *rt)
{
    while (rt->blocks)
        block_free(rt, rt->blocks);
}

/* First fit; the aligned start may leave a gap before it, kept as free. */
static bool block_take(loom_rt *rt, rt_block *b, uint64_t size, uint64_t align, uint64_t *out)
{
    for (uint32_t i = 0; i < b->n_free; i++) {
        rt_range r = b->free[i];
        uint64_t start = rt_round_up(r.offset, align);
        if (start + size > r.offset + r.size)
            continue;
        uint64_t head = start - r.offset, tail = r.offset + r.size - (start + size);
        if (head && tail) {
            if (!rt_grow(rt, (void **)&b->free, &b->cap_free, b->n_free + 1, sizeof *b->free))
                return false;
            memmove(b->free + i + 2, b->free + i + 1, (b->n_free - i - 1) * sizeof *b->free);
            b->n_free++;
            b->free[i] = (rt_range){ r.offset, head };
            b->free[i + 1] = (rt_range){ start + size, tail };
        } else if (head) {
            b->free[i].size = head;
        } else if (tail) {
            b->free[i] = (rt_range){ start + size, tail };
        } else {
            memmove(b->free + i, b->free + i + 1, (b->n_free - i - 1) * sizeof *b->free);
            b->n_free--;
        }
        *out = start;
        return true;
    }
    return false;
}

static void block_give(loom_rt *rt, rt_block *b, uint64_t offset, uint64_t size)
{
    uint32_t i = 0;
    while (i < b->n_free && b->free[i].offset < offset)
        i++;
    bool merge_prev = i > 0 && b->free[i - 1].offset + b->free[i - 1].size == offset;
    bool merge_next = i < b->n_free && offset + size == b->free[i].offset;
    if (merge_prev && merge_next) {
        b->free[i - 1].size += size + b->free[i].size;
        memmove(b->free + i, b->free + i + 1, (b->n_free - i - 1) * sizeof *b->free);
        b->n_free--;
    } else if (merge_prev) {
        b->free[i - 1].size += size;
    } else if (merge_next) {
        b->free[i].offset = offset;
        b->free[i].size += size;
    } else {
        /* On a failed grow the range is leaked, not corrupted. */
        if (!rt_grow(rt, (void **)&b->free, &b->cap_free, b->n_free + 1, sizeof *b->free))
            return;
        memmove(b->free + i + 1, b->free + i, (b->n_free - i) * sizeof *b->free);
        b->free[i] = (rt_range){ offset, size };
        b->n_free++;
    }
}

static loom_result mem_alloc(loom_rt *rt, const VkMemoryRequirements *req, rt_mem_kind kind, rt_alloc *out)
{
    int type = pick_type(rt, req->memoryTypeBits, kind);
    if (type < 0)
        return loom_fail(LOOM_UNSUPPORTED, "no %s memory type fits buffer memory bits 0x%x",
                         kind == RT_MEM_UPLOAD || kind == RT_MEM_READBACK ? "host-visible" : "device",
                         req->memoryTypeBits);
    uint64_t align = req->alignment;
    uint64_t sa = rt->props.limits.minStorageBufferOffsetAlignment;
    if (sa > align)
        align = sa;
    if (req->size > LOOM_RT_BLOCK_SIZE / 2) {
        rt_block *b;
        loom_result rc = block_new(rt, (uint32_t)type, req->size, true, &b);
        if (rc)
            return rc;
        *out = (rt_alloc){ b, 0, req->size };
        b->n_free = 0;
        return LOOM_OK;
    }
    for (rt_block *b = rt->blocks; b; b = b->next) {
        uint64_t off;
        if (!b->dedicated && b->type == (uint32_t)type && block_take(rt, b, req->size, align, &off)) {
            *out = (rt_alloc){ b, off, req->size };
            return LOOM_OK;
        }
    }
    rt_block *b;
    loom_result rc = block_new(rt, (uint32_t)type, LOOM_RT_BLOCK_SIZE, false, &b);
    if (rc)
        return rc;
    uint64_t off;
    if (!block_take(rt, b, req->size, align, &off))
        return loom_fail(LOOM_OUT_OF_MEMORY, "memory block: out of host memory");
    *out = (rt_alloc){ b, off, req->size };
    return LOOM_OK;
}

static void mem_free(loom_rt *rt, rt_alloc *a)
{
    if (!a->block)
        return;
    if (a->block->dedicated)
        block_free(rt, a->block);
    else
        block_give(rt, a->block, a->offset, a->size);
    a->block = NULL;
}

loom_result rt_mem_create(loom_rt *rt, uint64_t size, rt_mem_kind kind, rt_mem *out)
{
    memset(out, 0, sizeof *out);
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkResult vr = vkCreateBuffer(rt->device, &bci, NULL, &out->buffer);
    if (vr != VK_SUCCESS)
        return rt_vk_fail(rt, vr, "vkCreateBuffer");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(rt->device, out->buffer, &req);
    loom_result rc = mem_alloc(rt, &req, kind, &out->alloc);
    /* A full window leaves plain device memory, read through staging. */
    if (rc == LOOM_DEVICE_OOM && kind == RT_MEM_HOST_READ &&
        pick_type(rt, req.memoryTypeBits, kind) != pick_type(rt, req.memoryTypeBits, RT_MEM_DEVICE))
        rc = mem_alloc(rt, &req, RT_MEM_DEVICE, &out->alloc);
    if (rc) {
        vkDestroyBuffer(rt->device, out->buffer, NULL);
        out->buffer = VK_NULL_HANDLE;
        return rc;
    }
    vr = vkBindBufferMemory(rt->device, out->buffer, out->alloc.block->memory, out->alloc.offset);
    if (vr != VK_SUCCESS) {
        rt_mem_destroy(rt, out);
        return rt_vk_fail(rt, vr, "vkBindBufferMemory");
    }
    out->size = size;
    out->mapped = out->alloc.block->mapped ? out->alloc.block->mapped + out->alloc.offset : NULL;
    return LOOM_OK;
}

void rt_mem_destroy(loom_rt *rt, rt_mem *m)
{
    if (m->buffer)
        vkDestroyBuffer(rt->device, m->buffer, NULL);
    mem_free(rt, &m->alloc);
    memset(m, 0, sizeof *m);
}

/* ---- staging ------------------------------------------------------------ */

loom_result rt_host_read_barrier(loom_rt *rt)
{
    VkCommandBuffer cmd;
    loom_result rc = rt_oneshot_begin(rt, &cmd);
    if (rc)
        return rc;
    VkMemoryBarrier mb = { .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                           .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                           .dstAccessMask = VK_ACCESS_HOST_READ_BIT };
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    return rt_oneshot_end(rt, cmd);
}

static loom_result staged_copy(loom_rt *rt, rt_mem *m, uint64_t offset, void *data, uint64_t size, bool upload)
{
    rt_mem st;
    loom_result rc = rt_mem_create(rt, size, RT_MEM_READBACK, &st);
    if (rc)
        return rc;
    if (upload)
        memcpy(st.mapped, data, size);
    VkCommandBuffer cmd;
    rc = rt_oneshot_begin(rt, &cmd);
    if (!rc) {
        VkBufferCopy region = { .srcOffset = upload ? 0 : offset, .dstOffset = upload ? offset : 0, .size = size };
        vkCmdCopyBuffer(cmd, upload ? st.buffer : m->buffer, upload ? m->buffer : st.buffer, 1, &region);
        if (!upload) {
            VkMemoryBarrier mb = { .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                   .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                                   .dstAccessMask = VK_ACCESS_HOST_READ_BIT };
            vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0,
                                 NULL, 0, NULL);
        }
        rc = rt_oneshot_end(rt, cmd);
    }
    if (!rc && !upload)
        memcpy(data, st.mapped, size);
    rt_mem_destroy(rt, &st);
    return rc;
}

loom_result rt_mem_write(loom_rt *rt, rt_mem *m, uint64_t offset, const void *data, uint64_t size)
{
    if (m->mapped) {
        memcpy(m->mapped + offset, data, size);
        return LOOM_OK;
    }
    return staged_copy(rt, m, offset, (void *)data, size, true);
}

loom_result rt_mem_read(loom_rt *rt, rt_mem *m, uint64_t offset, void *data, uint64_t size)
{
    if (m->mapped) {
        memcpy(data, m->mapped + offset, size);
        return LOOM_OK;
    }
    return staged_copy(rt, m, offset, data, size, false);
}

/* ---- loom_rt_buffer ----------------------------------------------------- */

static rt_mem_kind usage_kind(loom_usage u)
{
    switch (u) {
    case LOOM_USAGE_OUTPUT: return RT_MEM_READBACK;
    case LOOM_USAGE_INPUT:
    case LOOM_USAGE_PARAMS: return RT_MEM_UPLOAD;
    case LOOM_USAGE_STATE:
    case LOOM_USAGE_KV_CACHE: return RT_MEM_HOST_READ;
    default: return RT_MEM_DEVICE;
    }
}

loom_result loom_rt_buffer_create(loom_rt *rt, const loom_rt_buffer_desc *desc, loom_rt_buffer **out)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_buffer_create: out is NULL");
    *out = NULL;
    if (!rt || !desc)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_buffer_create: NULL argument");
    if (rt->lost)
        return loom_fail(LOOM_DEVICE_LOST, "loom_rt_buffer_create: the device was lost");
    if (desc->size == 0 || (unsigned)desc->usage >= LOOM_USAGE_COUNT)
        return loom_fail(LOOM_INVALID_ARGUMENT, "buffer '%s': size %llu / usage %d is invalid",
                         desc->name ? desc->name : "", (unsigned long long)desc->size, (int)desc->usage);
    rt_collect(rt);
    if (!rt_grow(rt, (void **)&rt->live, &rt->cap_live, rt->n_live + 1, sizeof *rt->live))
        return loom_fail(LOOM_OUT_OF_MEMORY, "buffer '%s': out of memory", desc->name ? desc->name : "");
    loom_rt_buffer *b = rt_alloc_bytes(rt, sizeof *b);
    if (!b)
        return loom_fail(LOOM_OUT_OF_MEMORY, "buffer '%s': out of memory", desc->name ? desc->name : "");
    memset(b, 0, sizeof *b);
    b->rt = rt;
    snprintf(b->name, sizeof b->name, "%s", desc->name ? desc->name : "buffer");
    b->usage = desc->usage;
    b->refs = 1;
    loom_result rc = rt_mem_create(rt, desc->size, usage_kind(desc->usage), &b->mem);
    if (rc) {
        rt_free_bytes(rt, b, sizeof *b);
        return loom_fail_wrap(rc, "buffer '%s' (%llu bytes)", desc->name ? desc->name : "",
                              (unsigned long long)desc->size);
    }
    b->serial = rt->next_serial++;
    rt->live[rt->n_live++] = b;
    *out = b;
    return LOOM_OK;
}

static void buffer_destroy(void *obj)
{
    loom_rt_buffer *b = obj;
    rt_mem_destroy(b->rt, &b->mem);
    rt_free_bytes(b->rt, b, sizeof *b);
}

void rt_buffers_destroy(loom_rt *rt)
{
    for (uint32_t i = 0; i < rt->n_live; i++)
        buffer_destroy(rt->live[i]);
    rt_free_bytes(rt, rt->live, (size_t)rt->cap_live * sizeof *rt->live);
    rt->live = NULL;
    rt->n_live = rt->cap_live = 0;
}

/* Serials grow monotonically and live[] keeps creation order, so a binary
 * search finds one. */
loom_rt_buffer *rt_buffer_lookup(loom_rt *rt, uint64_t serial)
{
    uint32_t lo = 0, hi = rt->n_live;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        uint64_t s = rt->live[mid]->serial;
        if (s == serial)
            return rt->live[mid];
        if (s < serial)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void rt_buffer_unref(loom_rt_buffer *b)
{
    if (!--b->refs)
        rt_defer(b->rt, &b->dead, b->last_use, buffer_destroy, b);
}

void loom_rt_buffer_release(loom_rt_buffer *b)
{
    if (!b || b->released)
        return;
    loom_rt *rt = b->rt;
    b->released = true;
    for (uint32_t i = 0; i < rt->n_live; i++)
        if (rt->live[i] == b) {
            memmove(rt->live + i, rt->live + i + 1, (rt->n_live - i - 1) * sizeof *rt->live);
            rt->n_live--;
            break;
        }
    rt_poll(rt);
    rt_buffer_unref(b);
}

uint64_t loom_rt_buffer_id(const loom_rt_buffer *b) { return b ? b->serial : 0; }
uint64_t loom_rt_buffer_size(const loom_rt_buffer *b) { return b ? b->mem.size : 0; }

static loom_result check_range(const loom_rt_buffer *b, uint64_t offset, const void *data, uint64_t size,
                               const char *what)
{
    if (!data || offset > b->mem.size || size > b->mem.size - offset)
        return loom_fail(LOOM_INVALID_ARGUMENT, "%s '%s': range [%llu, +%llu) outside %llu bytes (or data NULL)",
                         what, b->name, (unsigned long long)offset, (unsigned long long)size,
                         (unsigned long long)b->mem.size);
    return LOOM_OK;
}

loom_result loom_rt_buffer_write(loom_rt *rt, loom_rt_buffer *b, uint64_t offset, const void *data, uint64_t size)
{
    if (!rt || !b || b->rt != rt)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_buffer_write: NULL or foreign argument");
    loom_result rc = rt_check_lost(rt, "loom_rt_buffer_write");
    if (!rc)
        rc = check_range(b, offset, data, size, "buffer write");
    /* Every submission that read or wrote it; an INPUT is only ever read. */
    if (!rc)
        rc = rt_host_wait(rt, b->last_use, true);
    if (!rc && size)
        rc = rt_mem_write(rt, &b->mem, offset, data, size);
    return rc;
}

loom_result loom_rt_buffer_read(loom_rt *rt, loom_rt_buffer *b, uint64_t offset, void *data, uint64_t size)
{
    if (!rt || !b || b->rt != rt)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_buffer_read: NULL or foreign argument");
    loom_result rc = rt_check_lost(rt, "loom_rt_buffer_read");
    if (!rc)
        rc = check_range(b, offset, data, size, "buffer read");
    /* Its last writer alone: later submissions that only read it (or do not
     * touch it) may still run. A buffer no graph writes never waits. */
    if (!rc)
        rc = rt_host_wait(rt, b->last_write, false);
    /* Every program that writes a buffer the host may read ends with a
     * host-read barrier, so this never fires for writes by replays; it is
     * the safety net for any other writer, and costs a submission behind
     * the whole queue. */
    if (!rc && b->mem.mapped && b->host_visible < b->last_write) {
        rc = rt_host_read_barrier(rt);
        if (!rc)
            b->host_visible = b->last_write;
    }
    if (!rc && size)
        rc = rt_mem_read(rt, &b->mem, offset, data, size);
    return rc;
}
