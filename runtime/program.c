/* Programs: an annotated graph made executable. Creation resolves every
 * graph buffer to memory (live loom_rt_buffers, the scratch arena, or
 * plan-owned allocations), gets a pipeline per kernel and set layout, and
 * records one command buffer (record.c); replay writes the step parameters
 * and submits it. A ring of recorded copies (loom_rt_desc.in_flight, 3 by default), each
 * with its own params buffer, lets the host submit the next steps while
 * earlier ones still run: writing the one params buffer would otherwise mean
 * waiting for the GPU on the hot path. The copies touch the same plan-owned
 * memory, which is safe because the leading barrier orders every submission
 * after the previous one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

static const char *buffer_name(const loom_graph *g, uint32_t id)
{
    const char *n = loom_graph_buffer_name(g, id);
    return n ? n : "?";
}

static rt_mem_kind host_class(const loom_buffer *b)
{
    if (b->usage == LOOM_USAGE_OUTPUT || b->cls == LOOM_CLASS_OUTPUT)
        return RT_MEM_READBACK;
    if (b->usage == LOOM_USAGE_INPUT || b->usage == LOOM_USAGE_PARAMS || b->cls == LOOM_CLASS_INPUT)
        return RT_MEM_UPLOAD;
    if (b->cls == LOOM_CLASS_STATE || b->cls == LOOM_CLASS_KV_APPEND)
        return RT_MEM_HOST_READ;
    return RT_MEM_DEVICE;
}

/* ---- buffer resolution -------------------------------------------------- */

/* First node binding buffer id, for error messages. */
static void first_user(const loom_graph *g, uint32_t id, uint32_t *node, uint32_t *slot)
{
    *node = LOOM_NONE;
    *slot = LOOM_NONE;
    for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
        const loom_node *n = loom_graph_node(g, i);
        const loom_binding *b = loom_node_bindings(g, n);
        for (uint32_t j = 0; j < n->n_bindings; j++)
            if (b[j].buffer == id) {
                *node = i;
                *slot = b[j].slot;
                return;
            }
    }
}

static loom_result resolve_buffers(loom_rt_program *p)
{
    loom_rt *rt = p->rt;
    const loom_graph *g = p->g;
    uint64_t arena_size = loom_graph_arena_size(g);
    if (arena_size) {
        loom_result rc = rt_mem_create(rt, arena_size, RT_MEM_DEVICE, &p->arena);
        if (rc)
            return loom_fail_wrap(rc, "scratch arena (%llu bytes)", (unsigned long long)arena_size);
    }
    for (uint32_t i = 0; i < p->n_slots; i++) {
        const loom_buffer *b = loom_graph_buffer(g, i);
        rt_slot *s = &p->slots[i];
        if (b->external) {
            loom_rt_buffer *e = rt_buffer_lookup(rt, b->external);
            if (!e) {
                uint32_t node, slot;
                first_user(g, i, &node, &slot);
                return loom_fail(LOOM_NOT_FOUND, "node %d binding %d: buffer %u '%s' names runtime buffer %llu, "
                                 "which is not live (released or never created)", node == LOOM_NONE ? -1 : (int)node,
                                 slot == LOOM_NONE ? -1 : (int)slot, i, buffer_name(g, i),
                                 (unsigned long long)b->external);
            }
            if (e->mem.size < b->size)
                return loom_fail(LOOM_INVALID_ARGUMENT, "buffer %u '%s': %llu bytes but runtime buffer %llu '%s' "
                                 "has %llu", i, buffer_name(g, i), (unsigned long long)b->size,
                                 (unsigned long long)e->serial, e->name, (unsigned long long)e->mem.size);
            e->refs++;
            s->ext = e;
            s->buffer = e->mem.buffer;
            s->mapped = e->mem.mapped;
        } else if (i == p->params_buffer) {
            /* Per copy: resolved when the copy is recorded. */
        } else if (b->cls == LOOM_CLASS_SCRATCH && arena_size) {
            if (b->arena_offset > arena_size || b->size > arena_size - b->arena_offset)
                return loom_fail(LOOM_INVALID_ARGUMENT, "buffer %u '%s': arena range [%llu, +%llu) exceeds the "
                                 "arena of %llu bytes", i, buffer_name(g, i), (unsigned long long)b->arena_offset,
                                 (unsigned long long)b->size, (unsigned long long)arena_size);
            s->buffer = p->arena.buffer;
            s->base = b->arena_offset;
            s->mapped = p->arena.mapped ? p->arena.mapped + b->arena_offset : NULL;
        } else {
            loom_result rc = rt_mem_create(rt, b->size, host_class(b), &s->own);
            if (rc)
                return loom_fail_wrap(rc, "buffer %u '%s' (%llu bytes)", i, buffer_name(g, i),
                                      (unsigned long long)b->size);
            s->buffer = s->own.buffer;
            s->mapped = s->own.mapped;
        }
    }
    return LOOM_OK;
}

/* Plan-owned STATE buffers (kernel workspaces: partial results and the
 * completion counters of multi-workgroup reductions) start at zero; the
 * kernels leave their counters at zero, so this happens once per program.
 * Mapped memory is cleared on the host (the leading barrier of every replay
 * makes host writes visible); the rest in one transfer submission. */
static loom_result zero_state(loom_rt_program *p)
{
    loom_rt *rt = p->rt;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    loom_result rc = LOOM_OK;
    for (uint32_t i = 0; i < p->n_slots && !rc; i++) {
        const loom_buffer *b = loom_graph_buffer(p->g, i);
        rt_slot *s = &p->slots[i];
        if (b->external || b->usage != LOOM_USAGE_STATE || !s->own.buffer)
            continue;
        if (s->own.mapped) {
            memset(s->own.mapped, 0, s->own.size);
            continue;
        }
        if (!cmd && (rc = rt_oneshot_begin(rt, &cmd)))
            break;
        vkCmdFillBuffer(cmd, s->own.buffer, 0, VK_WHOLE_SIZE, 0);
    }
    if (cmd) {
        loom_result end = rt_oneshot_end(rt, cmd);
        if (!rc)
            rc = end;
    }
    return rc;
}

/* Checks bindings against limits and alignment; gets each node's pipeline. */
static loom_result resolve_nodes(loom_rt_program *p, uint32_t *n_sets, uint32_t *n_descs)
{
    loom_rt *rt = p->rt;
    const loom_graph *g = p->g;
    uint64_t align = rt->props.limits.minStorageBufferOffsetAlignment;
    uint64_t max_range = rt->max_binding_range;
    *n_sets = *n_descs = 0;
    for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
        const loom_node *n = loom_graph_node(g, i);
        if (n->type != LOOM_NODE_DISPATCH)
            continue;
        if (n->op == LOOM_OP_MATVEC_ADD_STAGE && !rt->atomic_float_add)
            return loom_fail(LOOM_UNSUPPORTED, "node %u (MATVEC_ADD_STAGE): its kernel adds floats with atomics, and "
                             "device '%s' has no shaderBufferFloat32AtomicAdd (VK_EXT_shader_atomic_float) enabled: "
                             "compile with loom_rt_compile, which leaves the stage pass out there", i,
                             rt->props.deviceName);
        const loom_binding *b = loom_node_bindings(g, n);
        uint32_t mask = 0;
        for (uint32_t j = 0; j < n->n_bindings; j++) {
            const char *op = loom_op_name((loom_op)n->op);
            if (b[j].slot >= LOOM_RT_MAX_SLOTS || (mask & (1u << b[j].slot)))
                return loom_fail(LOOM_LIMIT, "node %u (%s): binding %u slot %u is >= %u or bound twice", i, op, j,
                                 b[j].slot, LOOM_RT_MAX_SLOTS);
            mask |= 1u << b[j].slot;
            uint64_t off = p->slots[b[j].buffer].base + b[j].offset;
            if (off % align)
                return loom_fail(LOOM_INVALID_ARGUMENT, "node %u (%s): binding slot %u on buffer %u '%s' starts at "
                                 "byte %llu, not a multiple of minStorageBufferOffsetAlignment %llu", i, op,
                                 b[j].slot, b[j].buffer, buffer_name(g, b[j].buffer), (unsigned long long)off,
                                 (unsigned long long)align);
            if (b[j].size == 0 || b[j].size > max_range)
                return loom_fail(LOOM_LIMIT, "node %u (%s): binding slot %u on buffer %u '%s' is %llu bytes, 0 or "
                                 "above the binding limit %llu (maxStorageBufferRange or loom_rt_desc."
                                 "max_binding_range): compile with loom_rt_compile, or with loom_compile_options."
                                 "max_binding_range, to cut it into row blocks", i, op, b[j].slot, b[j].buffer,
                                 buffer_name(g, b[j].buffer), (unsigned long long)b[j].size,
                                 (unsigned long long)max_range);
            if (b[j].access & LOOM_ACCESS_WRITE)
                p->slots[b[j].buffer].written = true;
            if (b[j].access & LOOM_ACCESS_READ)
                p->slots[b[j].buffer].read = true;
        }
        const loom_range *w = loom_node_writes(g, n);
        for (uint32_t j = 0; j < n->n_writes; j++)
            p->slots[w[j].buffer].written = true;
        bool tagged = rt_tagged(p->tags, i), counts = tagged && p->tags[i].counts;
        if (tagged)
            mask |= 1u << LOOM_TAG_BINDING | (counts ? 1u << LOOM_COUNT_BINDING : 0);
        loom_result rc = rt_pipeline_get(rt, loom_graph_kernel_name(g, n->kernel), mask, &p->pipes[i]);
        if (rc)
            return loom_fail_wrap(rc, "node %u (%s)", i, loom_op_name((loom_op)n->op));
        (*n_sets)++;
        *n_descs += n->n_bindings + tagged + counts;
    }
    /* Any buffer the host may read — everything but SCRATCH, externals
     * included — ends the step host-visible, so a read waits for its writer
     * alone, never for a barrier submitted behind the queue. */
    for (uint32_t i = 0; i < p->n_slots; i++)
        if (p->slots[i].written && loom_graph_buffer(g, i)->cls != LOOM_CLASS_SCRATCH)
            p->host_barrier = true;
    return LOOM_OK;
}

uint32_t loom_rt_in_flight(const loom_rt *rt)
{
    if (!rt)
        return 0;
    uint32_t k = rt->in_flight ? rt->in_flight : LOOM_RT_DEFAULT_IN_FLIGHT;
    return k > LOOM_RT_MAX_IN_FLIGHT ? LOOM_RT_MAX_IN_FLIGHT : k;
}

/* ---- create / destroy --------------------------------------------------- */

/* Unlinks p from the list it is on; program_create links it on success. */
static void unlink_program(loom_rt_program *p, loom_rt_program **head)
{
    if (p->prev_live)
        p->prev_live->next_live = p->next_live;
    else
        *head = p->next_live;
    if (p->next_live)
        p->next_live->prev_live = p->prev_live;
    p->prev_live = p->next_live = NULL;
}

static void link_program(loom_rt_program *p, loom_rt_program **head)
{
    p->prev_live = NULL;
    p->next_live = *head;
    if (*head)
        (*head)->prev_live = p;
    *head = p;
}

static void program_destroy(void *obj)
{
    loom_rt_program *p = obj;
    loom_rt *rt = p->rt;
    uint32_t n_nodes = p->g ? loom_graph_node_count(p->g) : 0;
    if (p->released)
        unlink_program(p, &rt->released_programs);
    /* Destroyed only once its submissions completed: count their time. */
    rt_harvest_program(rt, p);
    rt_profile_destroy(p);
    for (uint32_t i = 0; i < p->n_copies; i++) {
        rt_copy *c = &p->copies[i];
        if (c->cmd)
            vkFreeCommandBuffers(rt->device, rt->cmd_pool, 1, &c->cmd);
        if (c->queries)
            vkDestroyQueryPool(rt->device, c->queries, NULL);
        rt_mem_destroy(rt, &c->params);
        rt_free_bytes(rt, c->sets, n_nodes * sizeof *c->sets);
    }
    if (p->pool)
        vkDestroyDescriptorPool(rt->device, p->pool, NULL);
    for (uint32_t i = 0; i < p->n_slots; i++) {
        rt_mem_destroy(rt, &p->slots[i].own);
        if (p->slots[i].ext)
            rt_buffer_unref(p->slots[i].ext);
    }
    rt_mem_destroy(rt, &p->arena);
    rt_free_bytes(rt, p->copies, p->n_copies * sizeof *p->copies);
    rt_free_bytes(rt, p->slots, p->n_slots * sizeof *p->slots);
    rt_free_bytes(rt, p->pipes, n_nodes * sizeof *p->pipes);
    if (p->tags)
        rt_free_bytes(rt, p->tags, n_nodes * sizeof *p->tags);
    if (p->tag_at)
        rt_free_bytes(rt, p->tag_at, loom_graph_buffer_count(p->g) * sizeof *p->tag_at);
    rt_mem_destroy(rt, &p->tag_mem);
    loom_graph_destroy(p->g);
    rt_free_bytes(rt, p, sizeof *p);
}

static loom_result program_setup(loom_rt_program *p)
{
    loom_rt *rt = p->rt;
    uint32_t n_nodes = loom_graph_node_count(p->g);
    uint32_t n_slots = loom_graph_buffer_count(p->g);
    p->params_buffer = LOOM_NONE;
    for (uint32_t i = 0; i < n_slots && p->params_buffer == LOOM_NONE; i++) {
        const loom_buffer *b = loom_graph_buffer(p->g, i);
        if (b->usage == LOOM_USAGE_PARAMS && !b->external)
            p->params_buffer = i;
    }
    uint32_t k = loom_rt_in_flight(rt);
    if ((n_slots && !(p->slots = rt_alloc_bytes(rt, n_slots * sizeof *p->slots))) ||
        (n_nodes && !(p->pipes = rt_alloc_bytes(rt, n_nodes * sizeof *p->pipes))) ||
        !(p->copies = rt_alloc_bytes(rt, k * sizeof *p->copies)))
        return loom_fail(LOOM_OUT_OF_MEMORY, "program: out of memory");
    memset(p->copies, 0, k * sizeof *p->copies);
    p->n_copies = k;
    p->n_queries = rt->timestamps ? 2 : 0;
    p->n_slots = n_slots;
    if (p->n_slots)
        memset(p->slots, 0, p->n_slots * sizeof *p->slots);
    if (n_nodes)
        memset(p->pipes, 0, n_nodes * sizeof *p->pipes);
    loom_result rc = rt_profile_setup(p);   /* may set n_queries */
    if (!rc)
        rc = resolve_buffers(p);
    uint32_t n_sets = 0, n_descs = 0;
    if (!rc)
        rc = zero_state(p);
    if (!rc)
        rc = rt_tags_plan(p);
#ifdef LOOM_PROBES
    /* LOOM_PROBE_DROP_TAG=N (test builds): the N-th tagged producer's
     * write dropped in the first copy recorded (record.c), so that a poll
     * gives up: the fault and the fallback, proven on any device. */
    const char *drop = getenv("LOOM_PROBE_DROP_TAG");
    unsigned long nth = drop ? strtoul(drop, NULL, 10) : 0;
    p->tag_probe = !rc && p->tags && nth > 0 && nth < 256 ? (uint32_t)nth : 0;
#endif
    if (!rc)
        rc = resolve_nodes(p, &n_sets, &n_descs);
    if (rc)
        return rc;
    if (n_sets) {
        /* Room for every copy's sets up front: the others are recorded on
         * the replay path, where growing a pool would be one more failure
         * mode. */
        VkDescriptorPoolSize ps = { .type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = k * n_descs };
        VkDescriptorPoolCreateInfo ci = { .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                          .maxSets = k * n_sets, .poolSizeCount = n_descs ? 1 : 0,
                                          .pPoolSizes = &ps };
        VkResult vr = vkCreateDescriptorPool(rt->device, &ci, NULL, &p->pool);
        if (vr != VK_SUCCESS)
            return rt_vk_fail(rt, vr, "vkCreateDescriptorPool");
    }
    return rt_record_traced(p, &p->copies[0]);
}

loom_result loom_rt_program_create(loom_rt *rt, const loom_graph *g, loom_rt_program **out)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_program_create: out is NULL");
    *out = NULL;
    if (!rt || !g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_program_create: NULL rt or graph");
    if (rt->lost)
        return loom_fail(LOOM_DEVICE_LOST, "loom_rt_program_create: the device was lost");
    loom_result rc = loom_graph_verify(g);
    if (rc)
        return rc;
    rt_poll(rt);
    rt_collect(rt);
    loom_rt_program *p = rt_alloc_bytes(rt, sizeof *p);
    if (!p)
        return loom_fail(LOOM_OUT_OF_MEMORY, "program: out of memory");
    memset(p, 0, sizeof *p);
    p->rt = rt;
    if ((rc = loom_graph_clone(g, &p->g))) {
        rt_free_bytes(rt, p, sizeof *p);
        return rc;
    }
    if ((rc = program_setup(p))) {
        program_destroy(p);   /* fails nothing: the slot keeps setup's message */
        return loom_fail_wrap(rc, "program '%s'", loom_graph_name(g));
    }
    link_program(p, &rt->live_programs);
    rt->counters.programs++;
    *out = p;
    return LOOM_OK;
}

void loom_rt_program_release(loom_rt_program *p)
{
    if (!p || p->released)
        return;
    loom_rt *rt = p->rt;
    p->released = true;
    unlink_program(p, &rt->live_programs);
    link_program(p, &rt->released_programs);
    rt_poll(rt);
    rt_defer(rt, &p->dead, p->last_step, program_destroy, p);
}

/* ---- replay ------------------------------------------------------------- */

/* A recorded copy whose last submission has completed; else a copy not yet
 * recorded (recorded now); else the oldest in flight, after waiting for it
 * alone. */
static loom_result pick_copy(loom_rt *rt, loom_rt_program *p, rt_copy **out)
{
    rt_copy *fresh = NULL, *oldest = NULL;
    for (uint32_t i = 0; i < p->n_copies; i++) {
        rt_copy *c = &p->copies[i];
        if (!c->recorded) {
            if (!fresh)
                fresh = c;
        } else if (c->last_step <= rt->completed) {
            *out = c;
            return LOOM_OK;
        } else if (!oldest || c->last_step < oldest->last_step) {
            oldest = c;
        }
    }
    loom_result rc;
    if (fresh) {
        if ((rc = rt_record_traced(p, fresh)))
            return rc;
        *out = fresh;
        return LOOM_OK;
    }
    rt->counters.replay_waits++;
    rc = loom_rt_wait(rt, oldest->last_step);
    *out = oldest;
    return rc;
}

loom_result loom_rt_replay(loom_rt *rt, loom_rt_program *p, const loom_step_params *params, uint64_t *out_step)
{
    if (out_step)
        *out_step = 0;
    if (!rt || !p || p->released || p->rt != rt)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_replay: NULL, released or foreign program");
    if (rt->lost)
        return rt_check_lost(rt, "loom_rt_replay");
    loom_result rc = rt_poll(rt);
    if (rc)
        return rc;
    rt_collect(rt);
    if (p->tag_fault && (rc = rt_tags_fallback(p)))
        return rc;
    rt_copy *c;
    if ((rc = pick_copy(rt, p, &c)))
        return rc;
    rt_harvest(rt, p, c);   /* its timestamps are about to be overwritten */
    uint64_t t0 = rt->trace ? rt_trace_now() : 0;
    if (params && c->params.mapped) {
        uint64_t n = c->params.size < sizeof *params ? c->params.size : sizeof *params;
        memcpy(c->params.mapped, params, n);
    }
    if (p->tags && c->params.mapped) {
        uint32_t seq = ++p->tag_steps;   /* this program's own count: its last step is one behind */
        memcpy(c->params.mapped + p->tag_seq_at, &seq, sizeof seq);
    }
    uint64_t step;
    if ((rc = rt_submit(rt, c->cmd, &step)))
        return rc;
    if (t0) {
        c->submit_ns = t0;
        rt_trace_cpu(rt, "submit", t0, rt_trace_now(), step, NULL, NULL);
    }
    c->last_step = step;
    __atomic_store_n(&p->last_step, step, __ATOMIC_RELEASE);   /* read by attachment_busy on other threads */
    if (p->host_barrier)
        p->host_visible = step;
    rt->counters.dispatches += p->n_dispatches;
    rt->counters.barriers += p->n_barriers;
    rt->counters.polled += p->n_polled;
    for (uint32_t i = 0; i < p->n_slots; i++) {
        loom_rt_buffer *e = p->slots[i].ext;
        if (!e)
            continue;
        e->last_use = step;
        if (p->slots[i].written) {
            e->last_write = step;
            if (p->host_barrier)
                e->host_visible = step;
        }
    }
    if (out_step)
        *out_step = step;
    return LOOM_OK;
}

/* ---- host access to plan-owned buffers ---------------------------------- */

static loom_result owned_slot(loom_rt_program *p, uint32_t buffer, uint64_t offset, const void *data,
                              uint64_t size, rt_mem **mem, uint64_t *base)
{
    if (!p || buffer >= p->n_slots)
        return loom_fail(LOOM_INVALID_ARGUMENT, "program access: buffer %u does not exist", buffer);
    const loom_buffer *b = loom_graph_buffer(p->g, buffer);
    rt_slot *s = &p->slots[buffer];
    if (!data || offset > b->size || size > b->size - offset)
        return loom_fail(LOOM_INVALID_ARGUMENT, "program access: buffer %u '%s': range [%llu, +%llu) outside %llu "
                         "bytes (or data NULL)", buffer, buffer_name(p->g, buffer), (unsigned long long)offset,
                         (unsigned long long)size, (unsigned long long)b->size);
    if (s->ext || buffer == p->params_buffer)
        return loom_fail(LOOM_INVALID_ARGUMENT, "program access: buffer %u '%s' is %s", buffer,
                         buffer_name(p->g, buffer),
                         s->ext ? "external: use loom_rt_buffer_read/write" : "the step parameters: pass them to replay");
    if (s->own.buffer) {
        *mem = &s->own;
        *base = 0;
    } else {
        *mem = &p->arena;
        *base = s->base;
    }
    return LOOM_OK;
}

loom_result loom_rt_program_read(loom_rt *rt, loom_rt_program *p, uint32_t buffer, uint64_t offset, void *data,
                                 uint64_t size)
{
    rt_mem *m = NULL;
    uint64_t base = 0;
    if (!rt || !p || p->rt != rt)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_program_read: NULL or foreign argument");
    loom_result rc = rt_check_lost(rt, "loom_rt_program_read");
    if (!rc)
        rc = owned_slot(p, buffer, offset, data, size, &m, &base);
    if (rc)
        return rc;
    const loom_buffer *b = loom_graph_buffer(p->g, buffer);
    if (b->cls == LOOM_CLASS_SCRATCH && m == &p->arena)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_program_read: buffer %u '%s' is SCRATCH: its bytes in the "
                         "arena are shared with other buffers; keep it for the host (loom_graph_keep_buffer) to "
                         "read it", buffer, buffer_name(p->g, buffer));
    /* Not written by the program (a WEIGHT): no wait at all. */
    if ((rc = rt_host_wait(rt, p->slots[buffer].written ? p->last_step : 0, false)))
        return rc;
    if (p->slots[buffer].written) {
        if (m->mapped && p->host_visible < p->last_step) {
            if ((rc = rt_host_read_barrier(rt)))
                return rc;
            p->host_visible = p->last_step;
        }
    }
    return size ? rt_mem_read(rt, m, base + offset, data, size) : LOOM_OK;
}

loom_result loom_rt_program_write(loom_rt *rt, loom_rt_program *p, uint32_t buffer, uint64_t offset,
                                  const void *data, uint64_t size)
{
    rt_mem *m = NULL;
    uint64_t base = 0;
    if (!rt || !p || p->rt != rt)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_program_write: NULL or foreign argument");
    loom_result rc = rt_check_lost(rt, "loom_rt_program_write");
    if (!rc)
        rc = owned_slot(p, buffer, offset, data, size, &m, &base);
    if (rc)
        return rc;
    /* Every replay of the program that uses it; an INPUT is only read. */
    const rt_slot *s = &p->slots[buffer];
    if ((rc = rt_host_wait(rt, s->read || s->written ? p->last_step : 0, true)))
        return rc;
    return size ? rt_mem_write(rt, m, base + offset, data, size) : LOOM_OK;
}

loom_result loom_rt_buffer_read_behind(loom_rt *rt, loom_rt_buffer *b, uint64_t step, uint64_t offset, void *data,
                                       uint64_t size)
{
    if (!rt || !b || !data || offset > b->mem.size || size > b->mem.size - offset)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_buffer_read_behind: NULL argument or range [%llu, +%llu) "
                         "outside the buffer", (unsigned long long)offset, (unsigned long long)size);
    if (step > rt->submitted)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_buffer_read_behind: step %llu was never submitted",
                         (unsigned long long)step);
    /* Only where the bytes are mapped and every writer ends with a host-read
     * barrier is waiting for `step` alone enough; elsewhere, the full wait. */
    if (b->usage != LOOM_USAGE_OUTPUT || !b->mem.mapped || step >= b->last_write)
        return loom_rt_buffer_read(rt, b, offset, data, size);
    loom_result rc = rt_host_wait(rt, step, false);
    if (!rc && size)
        memcpy(data, b->mem.mapped + offset, size);
    return rc;
}

loom_result loom_rt_run_graph(loom_rt *rt, const loom_graph *g, const loom_step_params *params)
{
    loom_rt_program *p;
    loom_result rc = loom_rt_program_create(rt, g, &p);
    if (rc)
        return rc;
    uint64_t step;
    rc = loom_rt_replay(rt, p, params, &step);
    if (!rc)
        rc = loom_rt_wait(rt, step);
    loom_rt_program_release(p);
    return rc;
}

loom_result loom_rt_program_timings(loom_rt *rt, loom_rt_program *p, double *node_us, uint32_t n, double *total_us)
{
    if (!rt || !p || p->rt != rt || (n && !node_us))
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_program_timings: NULL or foreign argument");
    if (rt->lost)
        return rt_check_lost(rt, "loom_rt_program_timings");
    uint32_t n_nodes = loom_graph_node_count(p->g);
    if (n < n_nodes)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_rt_program_timings: room for %u nodes, the program has %u", n,
                         n_nodes);
    rt_copy *c = &p->copies[0];
    for (uint32_t i = 1; i < p->n_copies; i++)
        if (p->copies[i].last_step > c->last_step)
            c = &p->copies[i];
    if (!c->queries || rt->profile != LOOM_PROFILE_NODES)
        return loom_fail(LOOM_UNSUPPORTED, "loom_rt_program_timings: the runtime was created without .profile = "
                         "LOOM_PROFILE_NODES (LOOM_PROFILE=2)");
    if (!c->last_step)
        return loom_fail(LOOM_NOT_FOUND, "loom_rt_program_timings: the program has not been replayed");
    loom_result rc = loom_rt_wait(rt, c->last_step);
    if (rc)
        return rc;
    uint64_t *t = rt_alloc_bytes(rt, (size_t)(n_nodes + 1) * sizeof *t);
    if (!t)
        return loom_fail(LOOM_OUT_OF_MEMORY, "loom_rt_program_timings: out of memory");
    VkResult vr = vkGetQueryPoolResults(rt->device, c->queries, 0, n_nodes + 1, (size_t)(n_nodes + 1) * sizeof *t, t,
                                        sizeof *t, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    if (vr == VK_SUCCESS) {
        double ns = rt->props.limits.timestampPeriod;
        for (uint32_t i = 0; i < n_nodes; i++)
            node_us[i] = (double)(t[i + 1] - t[i]) * ns / 1000.0;
        if (total_us)
            *total_us = (double)(t[n_nodes] - t[0]) * ns / 1000.0;
    }
    rt_free_bytes(rt, t, (size_t)(n_nodes + 1) * sizeof *t);
    return vr == VK_SUCCESS ? LOOM_OK : rt_vk_fail(rt, vr, "vkGetQueryPoolResults");
}
