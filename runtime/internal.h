/* runtime/ private: the structures behind loom_rt, its buffers, kernels and
 * programs, shared by the files of runtime/ only. Every Vulkan object the
 * runtime owns is reachable from struct loom_rt, so destruction is one walk.
 *
 * Layers, lowest first. A file calls functions of lower layers only, never
 * of its own layer or a higher one, so no two files call each other; each
 * file makes and destroys its own Vulkan objects. tests/scripts/
 * runtime_layers.cmake reads this list and checks it against the symbols of
 * the built library.
 *   layer 0: util.c      allocation, logging, VkResult mapping, lost check,
 *                        injected failures
 *   layer 1: groups.c    a program's group table, shared with the trace
 *   layer 2: trace.c     the Chrome trace: host spans, GPU steps, file
 *   layer 3: device.c    instance, validation messenger, physical device,
 *                        VkDevice and queue; device description
 *   layer 4: sync.c      command pool, timeline semaphore, submit, waits,
 *                        one-shot command buffers, the deferred-destroy queue
 *   layer 5: memory.c    memory blocks, rt_mem, loom_rt_buffer, host access
 *            kernel.c    shader modules, pipelines, the pipeline cache
 *   layer 6: profile.c   timestamps read back, per-group GPU time
 *            tags.c      the memory of the plan's awaited edges (tagged vectors)
 *   layer 7: record.c    a program's command buffers: sets, dispatches, barriers
 *   layer 8: program.c   programs: resolve, replay, host access, release
 *   layer 9: plan_replay.c  plans on the runtime: compile for the device,
 *                        a plan's program, replay
 *   layer 10: rt.c       loom_rt_create / loom_rt_destroy */
#ifndef LOOM_RT_INTERNAL_H
#define LOOM_RT_INTERNAL_H

#include <string.h>
#include <vulkan/vulkan.h>
#include "loom_runtime.h"
#include "loom_ir_edit.h"
#include "loom_shaders.h"   /* LOOM_TAG_BINDING, LOOM_TAG_PUSH_OFFSET, LOOM_TAG_GATE */

#define LOOM_RT_BLOCK_SIZE  (64ull << 20)   /* sub-allocation block */
#define LOOM_RT_DEFAULT_SPIN 4096u          /* counter polls before blocking */
#define LOOM_RT_MAX_SLOTS   32u             /* binding slots a layout can name */
#define LOOM_RT_DEFAULT_IN_FLIGHT 3u        /* recorded copies per program */
#define LOOM_RT_MAX_IN_FLIGHT 16u

/* ---- deferred destruction ---------------------------------------------- */

/* An object released while submissions may still use it: destroy(obj) runs
 * once step `serial` has completed. Embedded in the object it frees, so
 * deferring cannot fail; sync.c keeps the queue and knows no object types. */
typedef struct rt_deferred {
    uint64_t serial;
    void (*destroy)(void *obj);
    void *obj;
    struct rt_deferred *next;
} rt_deferred;

/* ---- memory ------------------------------------------------------------- */

typedef struct rt_range { uint64_t offset, size; } rt_range;

/* One VkDeviceMemory carved into allocations; free space kept as a sorted
 * list of ranges so neighbours merge on free. */
typedef struct rt_block {
    VkDeviceMemory memory;
    uint64_t size;
    uint32_t type;
    bool dedicated;          /* one allocation only; freed with it */
    uint8_t *mapped;         /* non-NULL when host-visible */
    rt_range *free;
    uint32_t n_free, cap_free;
    struct rt_block *next;
} rt_block;

typedef struct rt_alloc {
    rt_block *block;
    uint64_t offset, size;
} rt_alloc;

/* A VkBuffer with its memory; used for user buffers, plan-owned buffers,
 * the arena, params buffers and staging. */
typedef struct rt_mem {
    VkBuffer buffer;
    rt_alloc alloc;
    uint64_t size;
    uint8_t *mapped;         /* host pointer when host-visible */
} rt_mem;

struct loom_rt_buffer {
    loom_rt *rt;
    char name[64];
    uint64_t serial;
    loom_usage usage;
    rt_mem mem;
    uint32_t refs;           /* the caller's reference + one per program */
    bool released;           /* caller dropped its reference */
    uint64_t last_use;       /* step of the last submission using it */
    uint64_t last_write;     /* step of the last submission writing it */
    uint64_t host_visible;   /* last step whose writes were made host-visible */
    rt_deferred dead;        /* queued once the last reference is dropped */
};

/* ---- kernels ------------------------------------------------------------ */

typedef struct rt_pipeline {
    uint32_t slot_mask;      /* binding slots in the set layout */
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
    VkPipeline pipeline;
} rt_pipeline;

typedef struct rt_kernel {
    char *name;
    VkShaderModule module;
    rt_pipeline **variants;  /* one per distinct slot mask */
    uint32_t n_variants;
} rt_kernel;

/* ---- programs ----------------------------------------------------------- */

/* Where a graph buffer's bytes live once the program is made. */
typedef struct rt_slot {
    VkBuffer buffer;         /* VK_NULL_HANDLE for the per-copy params buffer */
    uint64_t base;           /* offset of the graph buffer inside it */
    uint8_t *mapped;         /* host pointer of byte 0 of the graph buffer, or NULL */
    loom_rt_buffer *ext;     /* external buffer, else NULL */
    rt_mem own;              /* plan-owned allocation (not arena, not params) */
    bool written, read;      /* by some node of the program */
} rt_slot;

/* One recorded command buffer with its own params buffer and descriptor
 * sets: while some copies are in flight, a free one can be written and
 * submitted without waiting. */
typedef struct rt_copy {
    bool recorded;
    VkCommandBuffer cmd;
    rt_mem params;
    VkDescriptorSet *sets;   /* per node; VK_NULL_HANDLE for barriers */
    /* Timestamps: query 0 before the nodes, the last after them (profiling
     * adds one after each node in between). */
    VkQueryPool queries;
    uint64_t last_step;
    uint64_t fault_seen;     /* last step whose fault word was read (sync.c) */
    uint64_t timed_step;     /* last step whose GPU time is in the counters */
    uint64_t submit_ns;      /* tracing: host clock at the last submit */
} rt_copy;

/* The concurrency groups of a program as recorded (a new group at every
 * recorded barrier, except one before the first node), their labels, and
 * which timestamp ends each. Shared by the program and the trace's steps,
 * which outlive it: reference-counted. */
typedef struct rt_groups {
    uint32_t refs;
    uint32_t n;              /* groups, at least 1 */
    uint32_t *first;         /* n + 1: group g is nodes [first[g], first[g + 1]) */
    uint32_t *end_query;     /* n: the timestamp written after group g */
    uint32_t *dispatches;    /* n */
    uint32_t *label;         /* n: offsets into text */
    char *text;
    size_t bytes;            /* of the one allocation behind all of the above */
    char program[48];        /* the graph's name */
} rt_groups;

/* A dispatch that reads or writes a tagged vector (tag.glsl; the plan's
 * node tag_in / tag_out): the vector numbers it pushes at byte
 * LOOM_TAG_PUSH_OFFSET for its x and its y (0: a plain binding). Its
 * kernel, the plan's, is a tagged form. The step number is at binding
 * LOOM_TAG_BINDING, a word the replay writes after the step parameters. */
typedef struct rt_tag {
    uint32_t in, out;
    /* Counted edges (tag.glsl's TAG_COUNTS): pushed at byte
     * LOOM_COUNT_PUSH_OFFSET where the kernel has the counters' binding:
     * cnt_in = the counter waited on | its producer's workgroups << 8,
     * cnt_out = the counter this node counts into; 0: none. */
    uint32_t cnt_in, cnt_out;
    bool counts;             /* the kernel binds the counters (LOOM_COUNT_BINDING) */
} rt_tag;
#define RT_TAG_MAX 127u          /* vectors a plan may tag */
/* Does node i push tag or count words (a tagged or counted form)? */
static inline bool rt_tagged(const rt_tag *t, uint32_t i)
{
    return t && (t[i].in || t[i].out || t[i].cnt_in || t[i].cnt_out);
}
#define RT_TAG_GATE LOOM_TAG_GATE   /* in rt_tag.in: the reader waits for all of x first */

/* Fills p->tags, p->tag_at, p->tag_mem and p->all_barriers (tags.c) for
 * the plan's awaited edges; LOOM_INVALID_ARGUMENT naming the node for a
 * plan whose edges this program cannot hold, LOOM_OUT_OF_MEMORY or a
 * Vulkan failure of the zero fill. */
loom_result rt_tags_plan(loom_rt_program *p);

/* Records copy c of program p (record.c): its descriptor sets, then every
 * node, with a host span in the trace. */
loom_result rt_record_traced(loom_rt_program *p, rt_copy *c);
/* After a poll gave up (p->tag_fault): every copy recorded again with every
 * barrier, once none is in flight (record.c). */
loom_result rt_tags_fallback(loom_rt_program *p);

struct loom_rt_program {
    loom_rt *rt;
    rt_tag *tags;            /* per node, NULL unless some vector is tagged */
    uint32_t n_polled;       /* barriers left out for them */
    bool all_barriers;       /* the awaited edges' barriers recorded too (tags.c says when) */
    uint64_t tag_seq_at;     /* the step word's offset in a copy's params */
    rt_mem tag_mem;          /* the tagged vectors, apart from the arena */
    uint64_t *tag_at;        /* per graph buffer: its offset in tag_mem, or UINT64_MAX */
    uint64_t cnt_at;         /* the counters' offset in tag_mem (LOOM_COUNT_STRIDE bytes each) */
    uint32_t n_counts;       /* counters 0..n_counts - 1 bound (0: none) */
    uint32_t cnt_groups[LOOM_COUNT_MAX + 1];   /* per counter: its producer's workgroups, or 0 */
    uint32_t tag_steps;      /* replays so far: the step word */
    bool tag_fault;          /* a poll gave up: record every barrier before the next replay */
    uint32_t tag_probe;      /* LOOM_PROBE_DROP_TAG=N (test builds): the next copy recorded drops the N-th tagged write; 0: none */
    loom_graph *g;
    rt_slot *slots;          /* per graph buffer */
    uint32_t n_slots;
    rt_pipeline **pipes;     /* per node; NULL for barrier sentinels */
    rt_mem arena;
    uint32_t params_buffer;  /* graph buffer id or LOOM_NONE */
    VkDescriptorPool pool;
    rt_copy *copies;         /* the ring of replays in flight */
    uint32_t n_copies;
    uint32_t n_queries;      /* per copy; 0 without timestamps */
    /* Profiling or tracing: the groups, the timestamps of one replay as
     * read back, and the sums over profiled replays. NULL/0 otherwise. */
    rt_groups *groups;
    uint64_t *ticks;         /* n_queries */
    uint64_t *group_ticks;   /* groups->n: summed over profiled replays */
    uint64_t prof_steps, prof_step_ticks;
    uint32_t n_dispatches, n_barriers;
    bool host_barrier;       /* a buffer the host may read is written: end with a host-read barrier */
    uint64_t last_step;
    uint64_t host_visible;   /* last step whose writes were made host-visible */
    bool released;
    rt_deferred dead;        /* queued on release */
    /* On rt->live_programs until released, then on rt->released_programs
     * until destroyed: timestamps are read back from both. */
    struct loom_rt_program *prev_live, *next_live;
};

/* ---- the runtime -------------------------------------------------------- */

struct loom_rt {
    loom_allocator a;
    void (*log)(void *user, loom_log_level level, const char *msg);
    void *log_user;
    uint32_t spin_polls;

    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    bool validate, debug_utils;
    PFN_vkCmdBeginDebugUtilsLabelEXT begin_label;
    PFN_vkCmdEndDebugUtilsLabelEXT end_label;
    PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger;

    VkPhysicalDevice phys;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties mem_props;
    uint32_t subgroup_size;
    bool atomic_float_add;   /* shaderBufferFloat32AtomicAdd enabled (the stage pass's sums of squares) */
    bool int_dot;            /* shaderIntegerDotProduct enabled: block-typed matvecs take their integer form */
    bool storage16;          /* storageBuffer16BitAccess enabled (kernels that need it: LOOM_KERNEL_NEEDS_STORAGE16) */
    bool coopmat;            /* VK_NV_cooperative_matrix enabled with 16x16x16 f16 -> f32 by subgroups of 32
                                (kernels that need it: LOOM_KERNEL_NEEDS_COOPMAT; loom_compile_options.coopmat) */
    bool kernel_stats;       /* LOOM_KERNEL_STATS: print each pipeline's compiler statistics */
    bool awaits;             /* awaited edges allowed (rt_awaits_rule): tagged vectors may replace barriers */
    const char *awaits_why;  /* the rule that decided it, for `loom info` */
    bool awaits_keep;        /* LOOM_TAGS=keep: the tagged kernels with every barrier recorded */
    VkDevice device;
    uint32_t queue_family;
    uint32_t queue_flags;   /* VkQueueFlags of queue_family */
    uint32_t sm_count;      /* streaming multiprocessors (VK_NV_shader_sm_builtins); 0: not told */
    uint32_t wave_groups;   /* the argmax forms' workgroup cap: LOOM_WAVE_GROUPS, else 4 an SM; 0: none */
    VkQueue queue;
    VkCommandPool cmd_pool;
    VkSemaphore timeline;
    uint64_t submitted;      /* last step id signalled */
    uint64_t completed;      /* last counter value read */
    bool lost;
    uint64_t max_binding_range;  /* bytes a binding may cover (loom_rt_desc) */

    VkPipelineCache pipeline_cache;
    char *pipeline_cache_path;
    uint64_t pipeline_cache_loaded;
    void *shaderc;           /* shaderc_compiler_t, made on first GLSL */

    rt_kernel *kernels;
    uint32_t n_kernels, cap_kernels;

    rt_block *blocks;
    uint64_t next_serial;
    loom_rt_buffer **live;   /* serial lookup; released buffers leave it */
    uint32_t n_live, cap_live;
    loom_rt_program *live_programs;
    loom_rt_program *released_programs;  /* released, not yet destroyed */
    rt_deferred *deferred;   /* sync.c's queue of objects awaiting their step */

    loom_cache *plans;       /* loom_rt_compile's cache, made on first use */
    uint32_t plan_cache_capacity;
    loom_rt_profile_level profile;
    bool timestamps;         /* a timestamp pair around every replay */
    struct rt_trace *trace;  /* NULL unless tracing */
    uint32_t in_flight;      /* copies per program; 0: LOOM_RT_DEFAULT_IN_FLIGHT */
    volatile uint64_t validation_messages;
    loom_rt_counters counters;
    /* Test hook (rt_inject_vk_failure): the next call of this Vulkan entry
     * point that goes through rt_vk_injected fails with inject_result. */
    const char *inject_call;
    VkResult inject_result;
};

/* ---- util.c ------------------------------------------------------------ */

void *rt_alloc_bytes(loom_rt *rt, size_t n);
void rt_free_bytes(loom_rt *rt, void *p, size_t n);
bool rt_grow(loom_rt *rt, void **p, uint32_t *cap, uint32_t need, size_t es);
char *rt_strdup(loom_rt *rt, const char *s);
void rt_log(loom_rt *rt, loom_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Maps a VkResult to a loom_result with a message naming the call; marks the
 * runtime lost on VK_ERROR_DEVICE_LOST. */
loom_result rt_vk_fail(loom_rt *rt, VkResult vr, const char *what);
const char *rt_vk_str(VkResult vr);
/* Failure injection for tests: makes the next rt_vk_injected(rt, call)
 * return vr (an int, so tests need no Vulkan header). */
void rt_inject_vk_failure(loom_rt *rt, const char *call, int vr);
/* VK_SUCCESS, or the failure injected for `call`; a call site runs the real
 * call only on VK_SUCCESS. */
static inline VkResult rt_vk_injected(loom_rt *rt, const char *call)
{
    if (!rt->inject_call || strcmp(rt->inject_call, call))
        return VK_SUCCESS;
    rt->inject_call = NULL;
    return rt->inject_result;
}
/* LOOM_DEVICE_LOST naming fn once the device was lost, else LOOM_OK: every
 * public entry point that can fail asks first. */
loom_result rt_check_lost(const loom_rt *rt, const char *fn);

/* groups.c */
/* Builds the group table of g (refs 1); per_node: a timestamp after every
 * node rather than after every group. */
loom_result rt_groups_build(loom_rt *rt, const loom_graph *g, bool per_node, rt_groups **out);
void rt_groups_unref(loom_rt *rt, rt_groups *gr);
/* Whether a barrier is recorded before node i: the rule record_nodes
 * follows and the group table mirrors. Unscheduled graphs get one between
 * every pair; the leading barrier already orders the first node. */
/* A barrier in front of node i, as the plan says: an awaited edge (tag_in)
 * polls instead of its barrier. */
static inline bool rt_node_barrier(const loom_node *n, uint32_t i, bool scheduled)
{
    return n->type == LOOM_NODE_BARRIER || (n->barrier != LOOM_NONE && !loom_node_awaited(n)) || (!scheduled && i > 0);
}

/* The bytes of tag_mem binding LOOM_COUNT_BINDING covers (tags.c places
 * them; at least one counter's, so that the range is never empty). */
static inline uint64_t rt_count_bytes(const loom_rt_program *p)
{
    return (uint64_t)(p->n_counts ? p->n_counts : 1) * LOOM_COUNT_STRIDE;
}

/* trace.c */
typedef struct rt_trace rt_trace;
/* Parses $LOOM_TRACE / desc; rt->trace stays NULL when not tracing. */
loom_result rt_trace_create(loom_rt *rt, const char *path, uint32_t steps);
/* After the device exists: clock calibration where the device offers it. */
void rt_trace_device_ready(loom_rt *rt);
/* The device extension to enable for calibration, or NULL. */
const char *rt_trace_device_extension(loom_rt *rt);
/* Writes the file now (when tracing). */
loom_result rt_trace_write(loom_rt *rt);
/* Writes the file (when tracing) and frees the trace. */
void rt_trace_destroy(loom_rt *rt);
uint64_t rt_trace_now(void);
/* Test hook: forget the calibration, so the trace aligns GPU time by the
 * submit rule as on a device without calibrated timestamps. */
void rt_trace_test_uncalibrated(loom_rt *rt);
/* A host span; step 0: none; key/value may be NULL. */
void rt_trace_cpu(loom_rt *rt, const char *name, uint64_t t0, uint64_t t1, uint64_t step, const char *key,
                  const char *value);
/* One completed replay of p: its step id, the host clock at submit and
 * every timestamp (p->n_queries ticks). */
void rt_trace_gpu(loom_rt *rt, loom_rt_program *p, uint64_t step, uint64_t submit_ns, const uint64_t *ticks);

/* device.c */
/* Instance (with validation when rt->validate), the physical device
 * (`want`: an index or a name substring; NULL: by type), VkDevice, queue. */
loom_result rt_device_create(loom_rt *rt, const char *want);
void rt_device_destroy(loom_rt *rt);
const char *rt_device_type_name(VkPhysicalDeviceType t);
/* What the device's memory types say about host access; *window (may be
 * NULL) gets the heap size behind the largest device-local host-visible
 * type, 0 when there is none. */
loom_rt_memory rt_memory_of(const VkPhysicalDeviceProperties *props, const VkPhysicalDeviceMemoryProperties *mp,
                            uint64_t *window);

/* sync.c */
/* Submits cmd signalling the next step; *out_step gets it. */
loom_result rt_submit(loom_rt *rt, VkCommandBuffer cmd, uint64_t *out_step);
/* Refreshes rt->completed from the semaphore. */
loom_result rt_poll(loom_rt *rt);
/* loom_rt_wait without reading the tagged programs' fault words (which
 * loom_rt_wait does once the step is done). */
loom_result rt_wait_quiet(loom_rt *rt, uint64_t step);
/* Waits for step before a host access to a buffer and counts the access in
 * loom_rt_counters.host_{reads,writes}_{waited,ready}. */
loom_result rt_host_wait(loom_rt *rt, uint64_t step, bool write);
/* The command pool and the timeline semaphore. */
loom_result rt_sync_create(loom_rt *rt);
void rt_sync_destroy(loom_rt *rt);
/* Queues destroy(obj) to run once step `serial` has completed, through the
 * entry d the object embeds; runs it now when the step already has. */
void rt_defer(loom_rt *rt, rt_deferred *d, uint64_t serial, void (*destroy)(void *obj), void *obj);
/* Runs the queued destructions whose steps have completed. */
void rt_collect(loom_rt *rt);
/* At runtime destroy, once the device is idle: runs every one. */
void rt_collect_all(loom_rt *rt);
/* One-shot command buffer for staging and barriers: begin, then end+submit+wait. */
loom_result rt_oneshot_begin(loom_rt *rt, VkCommandBuffer *out);
loom_result rt_oneshot_end(loom_rt *rt, VkCommandBuffer cmd);
/* The leading barrier every command buffer starts with: orders it after
 * whatever ran before on the queue (compute, transfer) and after host writes. */
void rt_cmd_leading_barrier(VkCommandBuffer cmd);

/* memory.c */
/* Where memory should live, by who touches it. On a discrete GPU the
 * host-visible device-local types are a PCIe window: fine for the host to
 * write and the GPU to read (UPLOAD), very slow for the host to read, so
 * READBACK prefers host-cached system memory the GPU writes into. */
/* HOST_READ is device memory the host may read now and then (KV caches,
 * state, kept buffers): device-local, and host-visible too where the
 * device maps all of it (unified memory, resizable BAR), so a read needs
 * no copy on the queue. */
typedef enum rt_mem_kind { RT_MEM_DEVICE = 0, RT_MEM_UPLOAD = 1, RT_MEM_READBACK = 2, RT_MEM_HOST_READ = 3 } rt_mem_kind;
loom_result rt_mem_create(loom_rt *rt, uint64_t size, rt_mem_kind kind, rt_mem *out);
void rt_mem_destroy(loom_rt *rt, rt_mem *m);
void rt_blocks_destroy(loom_rt *rt);
/* At runtime destroy: frees every buffer the caller has not released. */
void rt_buffers_destroy(loom_rt *rt);
loom_rt_buffer *rt_buffer_lookup(loom_rt *rt, uint64_t serial);
/* Drops a reference; the last one queues the buffer's destruction behind
 * its last use. */
void rt_buffer_unref(loom_rt_buffer *b);
/* Host access to a range of an rt_mem (mapped or staged). */
loom_result rt_mem_write(loom_rt *rt, rt_mem *m, uint64_t offset, const void *data, uint64_t size);
loom_result rt_mem_read(loom_rt *rt, rt_mem *m, uint64_t offset, void *data, uint64_t size);
/* Makes device writes visible to the host (a compute→host barrier submit). */
loom_result rt_host_read_barrier(loom_rt *rt);

/* kernel.c */
loom_result rt_pipeline_get(loom_rt *rt, const char *kernel, uint32_t slot_mask, rt_pipeline **out);
/* Registered with this runtime or built in. */
bool rt_kernel_known(loom_rt *rt, const char *name);
void rt_kernels_destroy(loom_rt *rt);
loom_result rt_pipeline_cache_open(loom_rt *rt, const char *path);
void rt_pipeline_cache_close(loom_rt *rt);

/* profile.c */
/* x rounded up to a multiple of align (> 0). */
static inline uint64_t rt_round_up(uint64_t x, uint64_t align) { return (x + align - 1) / align * align; }

/* Group timestamps are wanted: profiling or tracing. */
static inline bool rt_group_queries(const loom_rt *rt) { return rt->profile != LOOM_PROFILE_OFF || rt->trace; }
/* Makes p->groups, p->ticks and p->group_ticks and sets p->n_queries, when
 * rt_group_queries(rt). */
loom_result rt_profile_setup(loom_rt_program *p);
void rt_profile_destroy(loom_rt_program *p);
/* Reads back copy c's completed replay, once: counts its GPU time and,
 * with group timestamps, adds it to the profile and the trace. */
void rt_harvest(loom_rt *rt, loom_rt_program *p, rt_copy *c);
void rt_harvest_program(loom_rt *rt, loom_rt_program *p);

#endif
