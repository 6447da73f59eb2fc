/* loom runtime: a Vulkan device, buffers, kernels, and programs — an
 * annotated graph recorded once into a command buffer and replayed.
 *
 * Threading: a loom_rt and everything made from it are used from one thread
 * at a time. Failure: every call returns a loom_result; the detail is in
 * loom_last_error(). Out-parameters are NULL/0 on failure. Nothing aborts on
 * caller input; VK_ERROR_DEVICE_LOST makes later calls return
 * LOOM_DEVICE_LOST. */
#ifndef LOOM_RUNTIME_H
#define LOOM_RUNTIME_H

#include "loom_ir.h"
#include "loom_compiler.h"

#ifdef __cplusplus
extern "C" {
#endif
/* The library is built with hidden visibility; what is declared here is its
 * public API, exported from the shared library. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

typedef struct loom_rt loom_rt;
typedef struct loom_rt_buffer loom_rt_buffer;
typedef struct loom_rt_program loom_rt_program;

typedef enum loom_log_level { LOOM_LOG_DEBUG, LOOM_LOG_INFO, LOOM_LOG_WARN, LOOM_LOG_ERROR } loom_log_level;

/* What GPU timestamps a program records (see loom_rt_profile_get). */
typedef enum loom_rt_profile_level {
    LOOM_PROFILE_OFF = 0,
    /* One timestamp at the step's start and one at the end of every
     * concurrency group (the nodes between two barriers), written just
     * before the barrier that ends it, where the queue drains anyway. */
    LOOM_PROFILE_GROUPS = 1,
    /* One after every node as well (loom_rt_program_timings): finer, but a
     * timestamp inside a group costs GPU time of its own. */
    LOOM_PROFILE_NODES = 2,
} loom_rt_profile_level;

typedef struct loom_rt_desc {
    /* Device index or name substring; NULL: $LOOM_DEVICE, else the first
     * discrete GPU, then integrated, then CPU. */
    const char *device;
    /* Enable VK_LAYER_KHRONOS_validation with synchronization validation;
     * also on when $LOOM_VALIDATE=1. Messages go to log and are counted. */
    bool validate;
    /* Pipeline cache file; NULL: $LOOM_PIPELINE_CACHE, else none. */
    const char *pipeline_cache_path;
    const loom_allocator *allocator;   /* host memory; NULL: default */
    void (*log)(void *user, loom_log_level level, const char *msg);  /* NULL: stderr for WARN+ */
    void *log_user;
    uint32_t spin_polls;               /* wait: counter polls before blocking; 0: default */
    uint32_t plan_cache_capacity;      /* plans kept by loom_rt_compile; 0: 64 */
    /* GPU timestamps per concurrency group or per node, read with
     * loom_rt_profile_get. $LOOM_PROFILE=1 (or "groups") and =2 (or
     * "nodes") raise it; 0 and unset leave it. Applies to programs made
     * after creation. */
    loom_rt_profile_level profile;
    /* Replays of one program that may be in flight at once: each has its own
     * recorded command buffer and step-parameter buffer, recorded on first
     * need. 0: 3; at most 16. */
    uint32_t in_flight;
    /* A GPU timestamp pair around every replay's command buffer; their sum
     * goes to loom_rt_counters.gpu_ns (see loom_rt_collect_timestamps).
     * Costs two timestamp writes per replay. */
    bool timestamps;
    /* Bytes one binding may cover: the device's maxStorageBufferRange, or
     * less to force row-block splitting (tests); above the device's it is
     * the device's. 0: $LOOM_MAX_BINDING_RANGE (decimal bytes; 0 or unset:
     * the device's). loom_rt_compile compiles for it; programs refuse bindings
     * above it. */
    uint64_t max_binding_range;
    /* Chrome trace-event JSON of the steps run (CPU spans and, on a GPU
     * track, every group of every step), written to this file by
     * loom_rt_trace_flush and by loom_rt_destroy; NULL: $LOOM_TRACE, else
     * none. Implies group timestamps. See docs/profiling.md. */
    const char *trace_path;
    /* Steps the trace keeps, the newest (a ring; older ones are dropped and
     * counted in the file's metadata), and 8 host spans per step. 0: 1024. */
    uint32_t trace_steps;
} loom_rt_desc;

loom_result loom_rt_create(const loom_rt_desc *desc, loom_rt **out);
/* Waits for the device to go idle, then frees everything. NULL is fine. */
void loom_rt_destroy(loom_rt *rt);

/* Validation messages seen so far (errors and warnings); tests assert 0. */
uint64_t loom_rt_validation_messages(const loom_rt *rt);

/* How the host reaches device memory; it decides where each buffer class
 * lives (docs/design-notes.md, "Memory placement"). */
typedef enum loom_rt_memory {
    LOOM_RT_MEMORY_UNIFIED = 0,  /* integrated GPU or CPU device: device memory is host memory */
    LOOM_RT_MEMORY_REBAR,        /* discrete, device-local memory mapped through a window of >= 1 GiB
                                    (resizable BAR): zero-copy host access, slow host reads */
    LOOM_RT_MEMORY_BAR,          /* discrete, a small device-local host-visible window (typically 256 MiB) */
    LOOM_RT_MEMORY_DISCRETE,     /* discrete, no device-local host-visible memory */
} loom_rt_memory;

/* "unified memory", "device-local host-visible window (resizable BAR)", … */
const char *loom_rt_memory_name(loom_rt_memory m);

typedef struct loom_rt_info {
    char device_name[256];
    uint32_t device_type;              /* VkPhysicalDeviceType */
    uint32_t vendor_id, device_id, driver_version, api_version;
    bool unified_memory;               /* memory == LOOM_RT_MEMORY_UNIFIED: every device-local byte is the host's */
    uint32_t memory;                   /* loom_rt_memory */
    uint64_t host_window_bytes;        /* heap behind the largest device-local host-visible type; 0: none */
    float timestamp_period_ns;
    uint64_t min_storage_offset_alignment;
    uint64_t max_storage_buffer_range;  /* the device's limit */
    uint64_t max_binding_range;         /* the one in force (loom_rt_desc.max_binding_range) */
    uint32_t max_push_constants;
    uint32_t max_shared_memory;        /* maxComputeSharedMemorySize: a kernel declaring more is refused */
    uint32_t subgroup_size;
    bool int_dot;                      /* integer dot products enabled: block-typed matvecs quantize x to int8 per block of 32 */
    bool atomic_float_add;             /* float atomic adds on storage buffers enabled (the stage pass's sums of squares) */
    bool coopmat;                      /* NV cooperative matrices (16x16x16, f16 inputs, f32 sums, subgroups of 32)
                                          enabled: the matmul kinds' coopmat forms run (loom_compile_options.coopmat) */
    bool debug_utils;
    uint64_t pipeline_cache_loaded;    /* bytes of a valid pipeline-cache file used at creation; 0: none */
    /* The queue family submitted to: one with graphics as well as compute
     * where the device has one, else any with compute; LOOM_QUEUE=compute
     * prefers a compute-only family (docs/cli.md). */
    uint32_t queue_family;
    uint32_t queue_flags;              /* its VkQueueFlags: LOOM_RT_QUEUE_* */
    uint32_t sm_count;                 /* streaming multiprocessors, where the driver tells (VK_NV_shader_sm_builtins); 0: not told */
    /* Whether programs may await a dependency in the shader instead of a
     * barrier (tagged vectors), and the device rule that decided it. */
    bool awaited_edges;
    char awaited_why[192];
} loom_rt_info;
#define LOOM_RT_QUEUE_GRAPHICS 0x1u    /* VK_QUEUE_GRAPHICS_BIT */
#define LOOM_RT_QUEUE_COMPUTE 0x2u     /* VK_QUEUE_COMPUTE_BIT */
void loom_rt_get_info(const loom_rt *rt, loom_rt_info *out);

/* Lists every Vulkan device (index, name, type, memory types) to out; used by
 * `loom info`. Needs no loom_rt. */
loom_result loom_rt_describe_devices(loom_str *out);

/* ---- buffers ------------------------------------------------------------ */

typedef struct loom_rt_buffer_desc {
    const char *name;
    uint64_t size;
    /* Decides the memory (docs/design-notes.md, "Memory placement"):
     * INPUT/PARAMS upload memory, OUTPUT host-cached memory, STATE and
     * KV_CACHE device-local memory the host can map where there is a large
     * window, anything else device-local. */
    loom_usage usage;
} loom_rt_buffer_desc;

loom_result loom_rt_buffer_create(loom_rt *rt, const loom_rt_buffer_desc *desc, loom_rt_buffer **out);
/* Drops the caller's reference. The memory lives on until every submission
 * that uses it has completed. */
void loom_rt_buffer_release(loom_rt_buffer *b);
/* Serial number, never reused within a loom_rt: put it in
 * loom_buffer_desc.external so a graph refers to this buffer. */
uint64_t loom_rt_buffer_id(const loom_rt_buffer *b);
uint64_t loom_rt_buffer_size(const loom_rt_buffer *b);

/* Host access, by what the graphs did with the buffer: a read waits only
 * for the last submission that wrote it (never, for a buffer no graph
 * writes: a WEIGHT or an INPUT), a write only for the last submission that
 * used it (for an INPUT, the last that read it) — not for the whole queue.
 * Every program that writes a buffer the host may read ends with a
 * host-read barrier, so mapped memory is read in place once its writer is
 * done. Memory that is not host-visible (device-local KV caches and state
 * on a discrete GPU without a resizable BAR) is staged through a copy on
 * the queue, which runs after everything submitted before it.
 * loom_rt_counters.host_* count which accesses waited. */
loom_result loom_rt_buffer_write(loom_rt *rt, loom_rt_buffer *b, uint64_t offset, const void *data, uint64_t size);
loom_result loom_rt_buffer_read(loom_rt *rt, loom_rt_buffer *b, uint64_t offset, void *data, uint64_t size);

/* ---- kernels ------------------------------------------------------------ */

/* Registers a kernel from GLSL compute source, compiled with libshaderc.
 * Compile errors come back as LOOM_SHADER_COMPILE with the shader's line
 * numbers. Built-in kernels (shaders/) are registered at creation. */
loom_result loom_rt_kernel_glsl(loom_rt *rt, const char *name, const char *source);
loom_result loom_rt_kernel_spirv(loom_rt *rt, const char *name, const uint32_t *code, size_t size_bytes);

/* ---- programs ----------------------------------------------------------- */

/* A program is an annotated graph made executable: pipelines, descriptor
 * sets, plan-owned memory (the scratch arena and buffers with external == 0),
 * recorded into one command buffer. Node order is the graph's; a barrier is
 * recorded before each node whose .barrier is set, but for an awaited edge
 * (.tag_in set: the node polls instead; docs/design-notes.md) — or before
 * every node when the graph is not scheduled. Buffers with external != 0 must name live
 * loom_rt_buffers. The graph is copied; the caller keeps its own. */
loom_result loom_rt_program_create(loom_rt *rt, const loom_graph *g, loom_rt_program **out);
/* Deferred like buffers: freed once no submission uses it. */
void loom_rt_program_release(loom_rt_program *p);

/* Writes the step parameters and submits the recorded command buffer. Each
 * program keeps a ring of in_flight recorded copies: a replay takes a copy
 * whose last submission has completed (recording it on first need) and
 * waits, for the oldest copy only, when all are in flight. Returns the step
 * id to wait for. */
loom_result loom_rt_replay(loom_rt *rt, loom_rt_program *p, const loom_step_params *params, uint64_t *out_step);
/* Returns at once when the step is done; else spins, then blocks. Then
 * reads the fault words of every finished step of a program with tagged
 * vectors: where a poll gave up (a producer's tagged write never landed),
 * LOOM_TIMEOUT naming the program and the step, counted in
 * loom_rt_counters.poll_timeouts; that program records every barrier from
 * its next replay on. */
loom_result loom_rt_wait(loom_rt *rt, uint64_t step);
loom_result loom_rt_wait_idle(loom_rt *rt);

/* Copies of a program the runtime keeps in flight (loom_rt_desc.in_flight). */
uint32_t loom_rt_in_flight(const loom_rt *rt);

/* Reads a buffer behind the GPU: waits for submission `step` only, not for
 * the buffer's last writer. The caller vouches that no submission after
 * `step` writes [offset, offset + size) — a ring slot, say. Zero-copy for an
 * OUTPUT buffer in host-visible memory (every program that writes one ends
 * with a host-read barrier); any other buffer takes loom_rt_buffer_read's
 * path, which waits for the last writer. */
loom_result loom_rt_buffer_read_behind(loom_rt *rt, loom_rt_buffer *b, uint64_t step, uint64_t offset, void *data,
                                       uint64_t size);

/* Host access to plan-owned buffers (external == 0), by graph buffer id,
 * with loom_rt_buffer_read/write's waits (the program's last replay). A
 * SCRATCH buffer cannot be read — its arena bytes are shared with other
 * buffers — and gives LOOM_INVALID_ARGUMENT naming it: keep it for the
 * host with loom_graph_keep_buffer before compiling. */
loom_result loom_rt_program_read(loom_rt *rt, loom_rt_program *p, uint32_t buffer, uint64_t offset, void *data,
                                 uint64_t size);
loom_result loom_rt_program_write(loom_rt *rt, loom_rt_program *p, uint32_t buffer, uint64_t offset,
                                  const void *data, uint64_t size);

/* GPU time of the program's last completed replay, per node in plan order:
 * node_us[i] is the time from the end of node i-1 (or the step's start) to
 * the end of node i, so a barrier's drain is charged to the node after it.
 * Needs a runtime created with .profile = LOOM_PROFILE_NODES; waits for the
 * last replay. n is the capacity of node_us (the graph's node count);
 * total_us may be NULL. */
loom_result loom_rt_program_timings(loom_rt *rt, loom_rt_program *p, double *node_us, uint32_t n, double *total_us);

/* Adds the GPU time of every completed replay not yet counted to
 * loom_rt_counters.gpu_ns and .timed_steps (runtime made with .timestamps
 * or .profile). Never waits: call loom_rt_wait_idle first for a complete
 * sum. Replays are also counted when their copy is reused or freed. */
void loom_rt_collect_timestamps(loom_rt *rt);

/* ---- profile: GPU time per concurrency group and per op kind ------------ */

/* A group is a run of nodes in plan order between two recorded barriers.
 * Its time runs from the timestamp that ends the group before it (or the
 * step's first timestamp) to its own: the drain and refill of the barrier
 * in front of it are charged to it, and the groups of a step add up to the
 * step. */
typedef struct loom_rt_profile_group {
    uint32_t index;                 /* the group's place in plan order */
    uint32_t first_node, n_nodes;   /* nodes [first_node, first_node + n_nodes) of the program's graph */
    uint32_t dispatches;
    double us;                      /* mean GPU time per profiled step */
    char label[64];                 /* its op kinds, e.g. "MATVEC_ADD" or "COPY x8" or "ADD x2 + MUL" */
} loom_rt_profile_group;

typedef struct loom_rt_profile_op {
    /* A group's time split evenly among its dispatches, summed by op kind:
     * the kinds add up to the step. */
    double us;                      /* mean per profiled step */
    uint32_t nodes;                 /* dispatches of this kind per step */
    uint32_t groups;                /* groups holding at least one of them */
} loom_rt_profile_op;

typedef struct loom_rt_profile {
    uint64_t steps;                 /* completed replays summed (since creation or reset) */
    /* Per step. groups == barriers + 1, except where the graph opens with
     * a barrier sentinel: that barrier starts no group. An awaited edge's
     * reader is in its producer's group (as in loom_plan_stats); where the
     * runtime records that barrier too (validation layer, LOOM_TAGS=keep,
     * after a poll gave up) barriers counts it, inside the group. */
    uint32_t groups, barriers, dispatches;
    double step_us;                 /* mean GPU time of a step: first to last timestamp */
    loom_rt_profile_op ops[LOOM_OP_COUNT];
} loom_rt_profile;

/* The profile of program p: every completed replay is counted once, when
 * its copy is reused or by this call (which never waits: loom_rt_wait_idle
 * first for the newest). Needs group timestamps (.profile, or tracing),
 * else LOOM_UNSUPPORTED; LOOM_NOT_FOUND before the first completed replay. */
loom_result loom_rt_profile_get(loom_rt *rt, loom_rt_program *p, loom_rt_profile *out);
/* The groups in plan order: up to cap of them into out (may be NULL when
 * cap is 0); *n gets the program's group count. Same rules as above. */
loom_result loom_rt_profile_groups(loom_rt *rt, loom_rt_program *p, loom_rt_profile_group *out, uint32_t cap,
                                   uint32_t *n);
/* Forgets the replays summed so far (e.g. after a warm-up). */
void loom_rt_profile_reset(loom_rt *rt, loom_rt_program *p);
/* The level the runtime records at (desc and $LOOM_PROFILE together). */
loom_rt_profile_level loom_rt_profiling(const loom_rt *rt);

/* ---- trace: Chrome trace-event JSON ------------------------------------- */

/* True when the runtime records a trace (.trace_path or $LOOM_TRACE). */
bool loom_rt_tracing(const loom_rt *rt);
/* The host clock of the trace, in ns (CLOCK_MONOTONIC). */
uint64_t loom_rt_trace_clock(void);
/* Adds a span [begin_ns, end_ns) to the host track, e.g. a frontend's
 * capture; end_ns 0 means now. Names and the optional argument (key and
 * value may be NULL) are copied, cut to 23 bytes. Does nothing when not
 * tracing. The runtime itself records compile (loom_rt_compile), record,
 * submit and wait spans. */
void loom_rt_trace_span(loom_rt *rt, const char *name, uint64_t begin_ns, uint64_t end_ns, const char *key,
                        const char *value);
/* Writes the trace file now with every completed step recorded so far
 * (never waits for the GPU); the file is replaced whole (written beside it,
 * then renamed), so it is valid JSON whenever it exists. Tracing goes on.
 * LOOM_IO naming the path on failure; LOOM_OK and nothing when not tracing;
 * LOOM_INVALID_ARGUMENT for a NULL rt. */
loom_result loom_rt_trace_flush(loom_rt *rt);

/* Convenience for tests and tools: program_create + replay + wait + release. */
loom_result loom_rt_run_graph(loom_rt *rt, const loom_graph *g, const loom_step_params *params);

/* ---- plans: compile through the cache, replay the recorded plan ---------- */

/* The frontend's per-token call: looks g up in the runtime's plan cache
 * (XXH3-128 key, confirmed on the canonical bytes) and compiles on a miss,
 * for this runtime's binding limit (opts->max_binding_range where that is
 * smaller and not 0), so matrices larger than one binding are split.
 * Returns a new plan reference in *out; *hit (may be NULL) says which. A hit
 * records nothing and creates no pipeline. Release plans before destroying
 * the runtime. */
loom_result loom_rt_compile(loom_rt *rt, const loom_graph *g, const loom_compile_options *opts, loom_plan **out,
                            bool *hit);
/* The options as loom_rt_compile adapts them to this device, in place: the
 * binding limit at most the runtime's, the stage pass off without float
 * atomic adds, the LOOM_ENABLE_HALF_* forms off where subgroups hold one
 * invocation, coopmat as the device has cooperative matrices
 * (loom_rt_info.coopmat). For a frontend that compiles through a cache of its own. */
void loom_rt_device_options(const loom_rt *rt, loom_compile_options *o);
/* Replays a plan: its program (pipelines, descriptor sets, plan-owned
 * memory, recorded command buffers) is made on the first replay on this
 * runtime and hangs on the plan, under this runtime, until the plan dies;
 * later replays only write the step parameters and submit. Several
 * runtimes, each on its own thread, may replay one plan at once: each gets
 * its own program. Drop the plan's last reference where none of those
 * runtimes is in use by another thread (it destroys their programs). */
loom_result loom_rt_replay_plan(loom_rt *rt, loom_plan *plan, const loom_step_params *params, uint64_t *out_step);
/* The plan's program (made if needed), e.g. to read plan-owned buffers. */
loom_result loom_rt_plan_program(loom_rt *rt, loom_plan *plan, loom_rt_program **out);
/* True while a submitted replay of this program has not completed. */
bool loom_rt_program_busy(loom_rt *rt, loom_rt_program *p);
void loom_rt_get_cache_stats(const loom_rt *rt, loom_cache_stats *out);

/* ---- counters ----------------------------------------------------------- */

typedef struct loom_rt_counters {
    uint64_t dispatches;        /* recorded dispatches executed (per submit) */
    uint64_t barriers;          /* recorded barriers executed (per submit) */
    uint64_t submits;
    uint64_t waits_fast;        /* returned on the counter read */
    uint64_t waits_spun;        /* returned while spinning */
    uint64_t waits_blocked;     /* blocked in vkWaitSemaphores */
    uint64_t records;           /* command buffers recorded */
    uint64_t pipelines;         /* compute pipelines created */
    uint64_t programs;          /* programs created */
    uint64_t replay_waits;      /* replays that waited: every copy of the program was in flight */
    /* Host reads and writes of buffers (loom_rt_buffer_* and
     * loom_rt_program_*): "waited" found the submission they depend on
     * still running and waited for it, "ready" found it done (or none). */
    uint64_t host_reads_waited, host_reads_ready;
    uint64_t host_writes_waited, host_writes_ready;
    uint64_t timed_steps;       /* replays whose GPU time is in gpu_ns */
    uint64_t gpu_ns;            /* GPU time of those replays, from their timestamp pairs */
    /* Dependencies recorded without a barrier (per submit): the plan's
     * awaited edges, whose reader polls a tagged vector its producer
     * writes (loom_plan_stats.awaited; 0 where the runtime records their
     * barriers too: validation layer, LOOM_TAGS=keep, a poll that gave up). */
    uint64_t polled;
    /* Steps in which a polled wait gave up (the fault word of shaders/
     * tag.glsl): loom_rt_wait returned LOOM_TIMEOUT naming the program,
     * which then records every barrier. */
    uint64_t poll_timeouts;
} loom_rt_counters;

void loom_rt_get_counters(const loom_rt *rt, loom_rt_counters *out);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif
#endif
