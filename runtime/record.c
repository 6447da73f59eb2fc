/* Recording a program's command buffers: its descriptor sets, then every
 * node's dispatch with the plan's barriers between levels (and the
 * profiling timestamps, debug labels and tag pushes the runtime asks
 * for), into one copy of the program. A program records each copy once,
 * on its first use (runtime/program.c); replays only submit it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

static loom_result write_sets(loom_rt_program *p, rt_copy *c)
{
    loom_rt *rt = p->rt;
    const loom_graph *g = p->g;
    for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
        const loom_node *n = loom_graph_node(g, i);
        if (n->type != LOOM_NODE_DISPATCH)
            continue;
        VkDescriptorSetAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                           .descriptorPool = p->pool, .descriptorSetCount = 1,
                                           .pSetLayouts = &p->pipes[i]->set_layout };
        VkResult vr = vkAllocateDescriptorSets(rt->device, &ai, &c->sets[i]);
        if (vr != VK_SUCCESS)
            return rt_vk_fail(rt, vr, "vkAllocateDescriptorSets");
        const loom_binding *b = loom_node_bindings(g, n);
        VkDescriptorBufferInfo info[LOOM_MAX_BINDINGS + 2];
        VkWriteDescriptorSet w[LOOM_MAX_BINDINGS + 2];
        for (uint32_t j = 0; j < n->n_bindings; j++) {
            const rt_slot *s = &p->slots[b[j].buffer];
            bool params = b[j].buffer == p->params_buffer;
            /* A tagged vector lives in tag_mem (tags.c), not where its slot says. */
            bool tagged = p->tag_at && p->tag_at[b[j].buffer] != UINT64_MAX;
            /* Exactly the bound range, so validation sees the true extent. */
            info[j] = (VkDescriptorBufferInfo){
                .buffer = tagged ? p->tag_mem.buffer : params ? c->params.buffer : s->buffer,
                .offset = (tagged ? p->tag_at[b[j].buffer] : s->base) + b[j].offset, .range = b[j].size };
            w[j] = (VkWriteDescriptorSet){ .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = c->sets[i],
                                           .dstBinding = b[j].slot, .descriptorCount = 1,
                                           .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                           .pBufferInfo = &info[j] };
        }
        uint32_t nw = n->n_bindings;
        if (rt_tagged(p->tags, i)) {
            info[nw] = (VkDescriptorBufferInfo){ .buffer = c->params.buffer, .offset = p->tag_seq_at, .range = 8 };
            w[nw] = (VkWriteDescriptorSet){ .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = c->sets[i],
                                            .dstBinding = LOOM_TAG_BINDING, .descriptorCount = 1,
                                            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                            .pBufferInfo = &info[nw] };
            nw++;
        }
        if (rt_tagged(p->tags, i) && p->tags[i].counts) {   /* the counters (tag.glsl, TAG_COUNTS) */
            info[nw] = (VkDescriptorBufferInfo){ .buffer = p->tag_mem.buffer, .offset = p->cnt_at,
                                                 .range = rt_count_bytes(p) };
            w[nw] = (VkWriteDescriptorSet){ .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = c->sets[i],
                                            .dstBinding = LOOM_COUNT_BINDING, .descriptorCount = 1,
                                            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                            .pBufferInfo = &info[nw] };
            nw++;
        }
        vkUpdateDescriptorSets(rt->device, nw, w, 0, NULL);
    }
    return LOOM_OK;
}

static void cmd_barrier(VkCommandBuffer cmd)
{
    VkMemoryBarrier mb = { .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                           .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                           .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT };
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb,
                         0, NULL, 0, NULL);
}

static void label(loom_rt *rt, VkCommandBuffer cmd, const char *text, float r, float g, float b)
{
    VkDebugUtilsLabelEXT l = { .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, .pLabelName = text,
                               .color = { r, g, b, 1.0f } };
    rt->begin_label(cmd, &l);
}

/* Records the node loop; counts barriers and dispatches as it goes. */
static void record_nodes(loom_rt_program *p, rt_copy *c)
{
    loom_rt *rt = p->rt;
    const loom_graph *g = p->g;
    VkCommandBuffer cmd = c->cmd;
    bool scheduled = loom_graph_scheduled(g);
    bool labels = rt->debug_utils;
    bool per_node = c->queries && rt->profile == LOOM_PROFILE_NODES;
    /* Group timestamps: one before each barrier that opens a new group. */
    const uint32_t *group_first = c->queries && p->groups && !per_node ? p->groups->first : NULL;
    uint32_t group_at = 1, group = LOOM_NONE, barriers = 0, dispatches = 0;
    bool group_open = false;
    VkPipeline bound = VK_NULL_HANDLE;
    char text[160];
    /* LOOM_PROBE_SKIP_BARRIER=NAME: no barrier in front of the dispatches
     * whose kernel name contains NAME, so that they overlap what runs
     * before them. Their results are wrong (the validation layer reports
     * the hazard): it prices what one dependency of a plan costs, for
     * timing only (tools/probe-barriers.sh, docs/perf.md). Built into test
     * and benchmark builds only (CMake option LOOM_PROBES). */
    const char *probe = NULL;
#ifdef LOOM_PROBES
    probe = getenv("LOOM_PROBE_SKIP_BARRIER");
    if (probe && !*probe)
        probe = NULL;
#endif
    uint32_t drop = p->tag_probe, producers = 0;
    for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
        const loom_node *n = loom_graph_node(g, i);
        if (labels && scheduled && n->group != group) {
            if (group_open)
                rt->end_label(cmd);
            group = n->group;
            snprintf(text, sizeof text, "group %d", group == LOOM_NONE ? -1 : (int)group);
            label(rt, cmd, text, 0.3f, 0.6f, 0.9f);
            group_open = true;
        }
        if (group_first && group_at < p->groups->n && i == group_first[group_at])
            vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, group_at++);
        bool need = rt_node_barrier(n, i, scheduled) || (p->all_barriers && loom_node_awaited(n));
        if (need && probe && n->type == LOOM_NODE_DISPATCH && strstr(loom_graph_kernel_name(g, n->kernel), probe))
            need = false;
        if (need) {
            cmd_barrier(cmd);
            barriers++;
        }
        if (n->type != LOOM_NODE_DISPATCH) {
            if (per_node)
                vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, i + 1);
            continue;
        }
        rt_pipeline *pipe = p->pipes[i];
        if (labels) {
            snprintf(text, sizeof text, "node %u %s %s", i, loom_op_name((loom_op)n->op),
                     loom_graph_kernel_name(g, n->kernel));
            label(rt, cmd, text, 0.9f, 0.6f, 0.2f);
        }
        if (pipe->pipeline != bound) {
            vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe->pipeline);
            bound = pipe->pipeline;
        }
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe->layout, 0, 1, &c->sets[i], 0, NULL);
        if (n->push_size)
            vkCmdPushConstants(cmd, pipe->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, n->push_size,
                               loom_node_push(g, n));
        if (rt_tagged(p->tags, i)) {
            /* cnt_in, cnt_out, tag_in, tag_out: the count words only where
             * the kernel has them, right before the tag words */
            uint32_t words[4] = { p->tags[i].cnt_in, p->tags[i].cnt_out, p->tags[i].in, p->tags[i].out };
            /* LOOM_PROBE_DROP_TAG=N: the first copy recorded has its N-th
             * tagged or counting producer write plain words and count
             * nothing, so its reader's polls give up (the fault and the
             * fallback, tests only). */
            if (drop && (words[1] || words[3]) && ++producers == drop) {
                words[1] = words[3] = 0;
                drop = 0;
                p->tag_probe = 0;
            }
            if (p->tags[i].counts)
                vkCmdPushConstants(cmd, pipe->layout, VK_SHADER_STAGE_COMPUTE_BIT, LOOM_COUNT_PUSH_OFFSET, 16, words);
            else
                vkCmdPushConstants(cmd, pipe->layout, VK_SHADER_STAGE_COMPUTE_BIT, LOOM_TAG_PUSH_OFFSET, 8, words + 2);
        }
        vkCmdDispatch(cmd, n->groups[0], n->groups[1], n->groups[2]);
        dispatches++;
        if (per_node)
            vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, i + 1);
        if (labels)
            rt->end_label(cmd);
    }
    if (group_open)
        rt->end_label(cmd);
    p->n_barriers = barriers;
    p->n_dispatches = dispatches;
}

/* Copy c's command buffer: every node, then the host-read barrier. Its
 * params, descriptor sets and query pool are made once (record_copy); a
 * program that falls back to barriers records its commands again. */
static loom_result record_commands(loom_rt_program *p, rt_copy *c)
{
    loom_rt *rt = p->rt;
    VkCommandBufferAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = rt->cmd_pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1 };
    VkResult vr = vkAllocateCommandBuffers(rt->device, &ai, &c->cmd);
    if (vr != VK_SUCCESS)
        return rt_vk_fail(rt, vr, "vkAllocateCommandBuffers");
    VkCommandBufferBeginInfo bi = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO };
    if ((vr = vkBeginCommandBuffer(c->cmd, &bi)) != VK_SUCCESS)
        return rt_vk_fail(rt, vr, "vkBeginCommandBuffer");
    if (c->queries)
        vkCmdResetQueryPool(c->cmd, c->queries, 0, p->n_queries);
    rt_cmd_leading_barrier(c->cmd);
    /* BOTTOM_OF_PIPE after the leading barrier: written once everything
     * submitted before has finished, so back-to-back steps do not overlap in
     * the sum of their spans. */
    if (c->queries)
        vkCmdWriteTimestamp(c->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, 0);
    record_nodes(p, c);
    /* The step's end (and the last group's); per node, the last node wrote it. */
    if (c->queries && rt->profile != LOOM_PROFILE_NODES)
        vkCmdWriteTimestamp(c->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, p->n_queries - 1);
    if (p->host_barrier || p->tags) {   /* tagged programs: the fault word (tag.glsl) is read by the host */
        VkMemoryBarrier mb = { .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                               .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                               .dstAccessMask = VK_ACCESS_HOST_READ_BIT };
        vkCmdPipelineBarrier(c->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb,
                             0, NULL, 0, NULL);
    }
    if ((vr = vkEndCommandBuffer(c->cmd)) != VK_SUCCESS)
        return rt_vk_fail(rt, vr, "vkEndCommandBuffer");
    c->recorded = true;
    rt->counters.records++;
    return LOOM_OK;
}

static loom_result record_copy(loom_rt_program *p, rt_copy *c)
{
    loom_rt *rt = p->rt;
    loom_result rc;
    uint32_t n_nodes = loom_graph_node_count(p->g);
    if (p->params_buffer != LOOM_NONE) {
        const loom_buffer *b = loom_graph_buffer(p->g, p->params_buffer);
        if ((rc = rt_mem_create(rt, p->tags ? p->tag_seq_at + 16 : b->size, RT_MEM_UPLOAD, &c->params)))
            return loom_fail_wrap(rc, "step-parameter buffer");
        if (!c->params.mapped)
            return loom_fail(LOOM_UNSUPPORTED, "step-parameter buffer: no host-visible memory");
        memset(c->params.mapped, 0, c->params.size);
    }
    if (n_nodes && !(c->sets = rt_alloc_bytes(rt, n_nodes * sizeof *c->sets)))
        return loom_fail(LOOM_OUT_OF_MEMORY, "program: out of memory");
    if (n_nodes)
        memset(c->sets, 0, n_nodes * sizeof *c->sets);
    if ((rc = write_sets(p, c)))
        return rc;
    if (p->n_queries) {
        VkQueryPoolCreateInfo qi = { .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                     .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = p->n_queries };
        VkResult vr = vkCreateQueryPool(rt->device, &qi, NULL, &c->queries);
        if (vr != VK_SUCCESS)
            return rt_vk_fail(rt, vr, "vkCreateQueryPool");
    }
    return record_commands(p, c);
}

/* A program whose poll gave up (rt_tags_check) keeps its tagged kernels
 * but records every barrier again, in every copy already recorded, once
 * none is in flight. */
loom_result rt_tags_fallback(loom_rt_program *p)
{
    loom_rt *rt = p->rt;
    loom_result rc = LOOM_OK;
    for (uint32_t i = 0; i < p->n_copies && !rc; i++)
        if (p->copies[i].recorded && p->copies[i].last_step > rt->completed)
            rc = rt_wait_quiet(rt, p->copies[i].last_step);
    if (rc)
        return rc;
    /* A counter whose producer lost a signal stays behind the steps for
     * good: each is set to what the replays so far have added (tag.glsl,
     * "Counted edges"), now that none is in flight. */
    if (p->n_counts) {
        VkCommandBuffer cmd;
        if ((rc = rt_oneshot_begin(rt, &cmd)))
            return rc;
        for (uint32_t k = 1; k < p->n_counts; k++)
            if (p->cnt_groups[k])
                vkCmdFillBuffer(cmd, p->tag_mem.buffer, p->cnt_at + (uint64_t)k * LOOM_COUNT_STRIDE, 4,
                                p->tag_steps * p->cnt_groups[k]);
        if ((rc = rt_oneshot_end(rt, cmd)))
            return rc;
    }
    p->all_barriers = true;
    p->n_polled = 0;
    p->tag_fault = false;
    for (uint32_t i = 0; i < p->n_copies && !rc; i++) {
        rt_copy *c = &p->copies[i];
        if (!c->recorded)
            continue;
        vkFreeCommandBuffers(rt->device, rt->cmd_pool, 1, &c->cmd);
        c->cmd = VK_NULL_HANDLE;
        c->recorded = false;
        rc = record_commands(p, c);
    }
    return rc;
}

/* record_copy with a host span in the trace: recording is CPU time a
 * replay pays on a copy's first use. */
loom_result rt_record_traced(loom_rt_program *p, rt_copy *c)
{
    uint64_t t0 = p->rt->trace ? rt_trace_now() : 0;
    loom_result rc = record_copy(p, c);
    if (t0)
        rt_trace_cpu(p->rt, "record", t0, rt_trace_now(), 0, "program", loom_graph_name(p->g));
    return rc;
}

