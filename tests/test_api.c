/* Check suite "api": bad input at the public API returns an error, never a
 * crash or a silent wrong answer. NULL for every pointer of every public
 * call; bindings checked against their kernel's layout (built-in and
 * custom); unknown kernels fail at compile; explicit ranges checked against
 * the bindings; error messages wrapped once; device loss reported by every
 * later call (injected); the thread-local error slot; and two runtimes on
 * two threads replaying one plan. Runs on the default device under the
 * validation layer. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "loom_compiler.h"
#include "loom_ir_edit.h"
#include "loom_ops.h"
#include "loom_passes.h"
#include "loom_runtime.h"
#include "loom_shaders.h"
#include "runner.h"

/* runtime/internal.h: the failure-injection hook (not exported). */
void rt_inject_vk_failure(loom_rt *rt, const char *call, int vr);
#define VK_ERROR_OUT_OF_DEVICE_MEMORY_ (-2)
#define VK_ERROR_DEVICE_LOST_ (-4)

#define OK(expr)                                                                                  \
    do {                                                                                          \
        loom_result rc_ = (expr);                                                                 \
        ck_assert_msg(rc_ == LOOM_OK, "%s: %s: %s", #expr, loom_result_str(rc_), loom_last_error()); \
    } while (0)
#define RC(expr, want)                                                                              \
    do {                                                                                            \
        loom_result rc_ = (expr);                                                                   \
        ck_assert_msg(rc_ == (want), "%s: %s, want %s: %s", #expr, loom_result_str(rc_),             \
                      loom_result_str(want), loom_last_error());                                    \
    } while (0)
#define HAS(text) ck_assert_msg(strstr(loom_last_error(), (text)), "'%s' lacks '%s'", loom_last_error(), (text))

#define N 64u

static void quiet(void *user, loom_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

static loom_rt *make_rt(void)
{
    loom_rt *rt;
    OK(loom_rt_create(&(loom_rt_desc){ .log = quiet }, &rt));
    return rt;
}

/* Writes a value into every element of its binding 0: one writable slot. */
static const char K_FILL[] = "#version 450\n"
                             "layout(local_size_x = 64) in;\n"
                             "layout(set = 0, binding = 0) writeonly buffer A { uint a[]; };\n"
                             "void main() { a[gl_GlobalInvocationID.x] = 7u; }\n";
/* b = a + 1: slot 0 read-only, slot 1 writable. */
static const char K_INC[] = "#version 450\n"
                            "layout(local_size_x = 64) in;\n"
                            "layout(set = 0, binding = 0) readonly buffer A { uint a[]; };\n"
                            "layout(set = 0, binding = 1) writeonly buffer B { uint b[]; };\n"
                            "void main() { uint i = gl_GlobalInvocationID.x; b[i] = a[i] + 1u; }\n";

static loom_graph *graph_with(uint32_t n_buffers)
{
    loom_graph *g;
    OK(loom_graph_create(&(loom_graph_desc){ .name = "g" }, &g));
    for (uint32_t i = 0; i < n_buffers; i++)
        OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = N * 4 }, NULL));
    return g;
}

static loom_binding bind(uint32_t slot, uint32_t buffer, uint32_t access)
{
    return (loom_binding){ .buffer = buffer, .slot = slot, .offset = 0, .size = N * 4, .access = access };
}

static loom_result dispatch(loom_graph *g, const char *kernel, const loom_binding *b, uint32_t nb)
{
    return loom_graph_add_dispatch(g, &(loom_dispatch_desc){ .kernel = kernel, .groups = { 1, 1, 1 },
                                                             .bindings = b, .n_bindings = nb },
                                   NULL);
}

/* ---- NULL everywhere ---------------------------------------------------- */

START_TEST(test_null_ir)
{
    loom_graph *g = graph_with(2);
    uint32_t id;
    loom_hash h;
    loom_str s;
    uint8_t *buf = NULL;
    size_t cap = 0, len = 0;
    const uint8_t *nodes;
    size_t nodes_len;
    /* Accessors have no result code: a NULL graph reads as an empty one. */
    ck_assert_uint_eq(loom_graph_node_count(NULL), 0);
    ck_assert_uint_eq(loom_graph_buffer_count(NULL), 0);
    ck_assert_uint_eq(loom_graph_kernel_count(NULL), 0);
    ck_assert_ptr_null(loom_graph_node(NULL, 0));
    ck_assert_ptr_null(loom_graph_buffer(NULL, 0));
    ck_assert_str_eq(loom_graph_buffer_name(NULL, 0), "?");
    ck_assert_str_eq(loom_graph_kernel_name(NULL, 0), "?");
    ck_assert_str_eq(loom_graph_name(NULL), "?");
    ck_assert_ptr_null(loom_node_bindings(NULL, NULL));
    ck_assert_ptr_null(loom_node_bindings(g, NULL));
    ck_assert_ptr_null(loom_node_reads(g, NULL));
    ck_assert_ptr_null(loom_node_writes(g, NULL));
    ck_assert_ptr_null(loom_node_push(g, NULL));
    ck_assert(!loom_graph_scheduled(NULL));
    ck_assert_uint_eq(loom_graph_barrier_count(NULL), 0);
    ck_assert_ptr_null(loom_graph_barrier_info(NULL, 0));
    ck_assert(!loom_op_from_name(NULL, NULL));
    ck_assert(!loom_op_from_name("ADD", NULL));
    ck_assert(!loom_usage_from_name(NULL, NULL));
    ck_assert(!loom_usage_from_name("weight", NULL));
    ck_assert(!loom_class_from_name("WEIGHT", NULL));
    ck_assert(!loom_format_from_name("text", NULL));
    ck_assert(!loom_format_from_name(NULL, NULL));
    loom_hash_bytes(NULL, 5);
    loom_hash_concat(2, NULL, NULL);
    loom_str_init(NULL, NULL);
    loom_str_free(NULL);
    loom_str_append(NULL, "x", 1);
    loom_str_printf(NULL, "%d", 1);
    loom_str_init(&s, NULL);
    loom_str_append(&s, NULL, 3);
    ck_assert(s.failed);
    loom_str_free(&s);
    loom_graph_destroy(NULL);
    loom_graph_reset(NULL);

    RC(loom_graph_create(NULL, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_clone(NULL, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_clone(g, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_add_buffer(NULL, &(loom_buffer_desc){ .size = 4 }, &id), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_add_buffer(g, NULL, &id), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_kernel(NULL, "k", &id), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_kernel(g, NULL, &id), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_kernel(g, "k", NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_add_dispatch(NULL, &(loom_dispatch_desc){ .kernel = "k" }, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_add_dispatch(g, NULL, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_add_dispatch(g, &(loom_dispatch_desc){ .kernel = NULL, .groups = { 1, 1, 1 } }, NULL),
       LOOM_INVALID_ARGUMENT);
    RC(loom_graph_add_barrier(NULL, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_params(NULL, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_verify(NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_encode(NULL, &buf, &cap, &len), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_encode(g, NULL, &cap, &len), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_encode_parts(g, &buf, &cap, &len, NULL, &nodes_len), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_encode_parts(NULL, &buf, &cap, &len, &nodes, &nodes_len), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_hash(NULL, &h), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_hash(g, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_dump(NULL, LOOM_FORMAT_TEXT, &s), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_dump(g, LOOM_FORMAT_TEXT, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_parse_json(NULL, 3, NULL, &g), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_parse_json("{}", 2, NULL, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_load(NULL, NULL, &g), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_load("x.json", NULL, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_save(NULL, LOOM_FORMAT_TEXT, "x"), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_save(g, LOOM_FORMAT_TEXT, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_kernel_layout_from_spirv(NULL, 20, &(loom_kernel_layout){ 0 }), LOOM_INVALID_ARGUMENT);
    RC(loom_kernel_layout_from_spirv((const uint32_t[5]){ 0 }, 20, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_kernel_declare(NULL, &(loom_kernel_layout){ 0 }), LOOM_INVALID_ARGUMENT);
    RC(loom_kernel_declare("k", NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_kernel_find(NULL, &(loom_kernel_layout){ 0 }, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_kernel_find("add", NULL, NULL), LOOM_INVALID_ARGUMENT);

    /* The edit API. */
    ck_assert_ptr_null(loom_graph_node_mut(NULL, 0));
    ck_assert_ptr_null(loom_graph_buffer_mut(NULL, 0));
    ck_assert_ptr_nonnull(loom_graph_allocator(NULL));
    ck_assert_uint_eq(loom_graph_arena_size(NULL), 0);
    loom_graph_clear_schedule(NULL);
    loom_graph_set_scheduled(NULL, true);
    loom_graph_set_arena_size(NULL, 1);
    ck_assert_int_eq(loom_nodes_conflict(NULL, NULL, NULL, NULL), LOOM_HAZARD_NONE);
    RC(loom_graph_permute(NULL, NULL, 0), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_permute(g, NULL, 1), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_add_barrier_info(NULL, &(loom_barrier_info){ 0 }, &id), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_add_barrier_info(g, NULL, &id), LOOM_INVALID_ARGUMENT);
    RC(loom_graph_add_barrier_info(g, &(loom_barrier_info){ 0 }, NULL), LOOM_INVALID_ARGUMENT);

    /* Op builders. */
    loom_tensor v = loom_vec(0, N);
    RC(loom_op_copy(NULL, v, v, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_op_embed(NULL, v, 0, 0, v, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_op_rms_norm(NULL, v, v, 1e-5f, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_op_rms_norm_mul(NULL, v, v, v, 1e-5f, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_op_mul(NULL, v, v, v, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_op_add(NULL, v, v, v, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_op_add_rms_norm(NULL, v, v, v, v, 1e-5f, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_op_add_rms_norm_mul(NULL, v, v, v, v, v, 1e-5f, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_op_matvec(NULL, v, v, v, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_op_matvec_add(NULL, v, v, v, v, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_op_silu_mul(NULL, v, v, v, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_op_matvec_silu_mul(NULL, v, v, v, v, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_op_rope(NULL, v, v, 1, N, 1e4f, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_op_kv_append(NULL, v, v, v, v, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_op_attention(NULL, v, v, v, v, 1, 1, N, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_op_softmax(NULL, v, v, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_op_argmax(NULL, v, v, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_op_step_log(NULL, v, v, 0, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_op_rms_norm_matvec_argmax_log(NULL, v, v, v, v, v, v, 1e-5f, NULL), LOOM_INVALID_ARGUMENT);
    loom_graph_destroy(g);
}
END_TEST

START_TEST(test_null_passes_compiler)
{
    loom_pass_ctx ctx = { 0 };
    loom_plan *p;
    loom_cache *c;
    bool hit;
    RC(loom_pass_verify(NULL, &ctx), LOOM_INVALID_ARGUMENT);
    RC(loom_pass_fuse(NULL, &ctx), LOOM_INVALID_ARGUMENT);
    RC(loom_pass_reorder(NULL, &ctx), LOOM_INVALID_ARGUMENT);
    RC(loom_pass_barriers(NULL, &ctx), LOOM_INVALID_ARGUMENT);
    RC(loom_pass_lifetimes(NULL, &ctx), LOOM_INVALID_ARGUMENT);
    RC(loom_schedule_serial(NULL, &ctx), LOOM_INVALID_ARGUMENT);
    RC(loom_pipeline_run(NULL, NULL, &ctx, NULL), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_pass_index(NULL), -1);
    ck_assert_ptr_null(loom_pass_at(loom_pass_count()));

    loom_graph *g = graph_with(1);
    RC(loom_pipeline_run(g, NULL, NULL, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_compile(NULL, NULL, &p), LOOM_INVALID_ARGUMENT);
    RC(loom_compile(g, NULL, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_cache_create(NULL, NULL), LOOM_INVALID_ARGUMENT);
    OK(loom_cache_create(NULL, &c));
    RC(loom_cache_compile(NULL, g, NULL, &p, &hit), LOOM_INVALID_ARGUMENT);
    RC(loom_cache_compile(c, NULL, NULL, &p, &hit), LOOM_INVALID_ARGUMENT);
    RC(loom_cache_compile(c, g, NULL, NULL, &hit), LOOM_INVALID_ARGUMENT);
    loom_cache_get_stats(NULL, NULL);
    loom_cache_get_stats(c, NULL);
    loom_cache_force_key(NULL, NULL);
    loom_cache_destroy(c);
    loom_cache_destroy(NULL);
    loom_plan_retain(NULL);
    loom_plan_release(NULL);
    ck_assert_ptr_null(loom_plan_graph(NULL));
    ck_assert_ptr_null(loom_plan_get_stats(NULL));
    loom_plan_key(NULL);
    loom_plan_set_attachment(NULL, NULL);
    ck_assert_ptr_null(loom_plan_get_attachment(NULL));
    ck_assert_ptr_null(loom_plan_find_attachment(NULL, NULL));
    ck_assert_ptr_null(loom_plan_attach(NULL, NULL));
    OK(loom_compile(g, NULL, &p));
    ck_assert_ptr_null(loom_plan_attach(p, NULL));
    loom_plan_release(p);
    loom_graph_destroy(g);
}
END_TEST

START_TEST(test_null_runtime)
{
    loom_rt *rt = make_rt();
    loom_rt_buffer *b;
    loom_rt_program *prog;
    loom_plan *plan;
    uint64_t step;
    uint8_t data[4];
    bool hit;
    loom_rt_counters counters;
    loom_rt_info info;
    loom_cache_stats cs;
    loom_graph *g = graph_with(1);
    OK(loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ .size = 16 }, &b));

    RC(loom_rt_create(NULL, NULL), LOOM_INVALID_ARGUMENT);
    loom_rt_destroy(NULL);
    ck_assert_uint_eq(loom_rt_validation_messages(NULL), 0);
    loom_rt_get_info(NULL, NULL);
    loom_rt_get_info(NULL, &info);
    loom_rt_get_info(rt, NULL);
    loom_rt_get_counters(NULL, NULL);
    loom_rt_get_counters(rt, NULL);
    loom_rt_get_counters(NULL, &counters);
    loom_rt_get_cache_stats(NULL, NULL);
    loom_rt_get_cache_stats(NULL, &cs);
    RC(loom_rt_describe_devices(NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_buffer_create(NULL, &(loom_rt_buffer_desc){ .size = 16 }, &b), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_buffer_create(rt, NULL, &b), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ .size = 16 }, NULL), LOOM_INVALID_ARGUMENT);
    OK(loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ .size = 16 }, &b));
    loom_rt_buffer_release(NULL);
    ck_assert_uint_eq(loom_rt_buffer_id(NULL), 0);
    ck_assert_uint_eq(loom_rt_buffer_size(NULL), 0);
    RC(loom_rt_buffer_write(NULL, b, 0, data, 4), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_buffer_write(rt, NULL, 0, data, 4), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_buffer_write(rt, b, 0, NULL, 4), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_buffer_read(NULL, b, 0, data, 4), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_buffer_read(rt, NULL, 0, data, 4), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_buffer_read(rt, b, 0, NULL, 4), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_kernel_glsl(NULL, "k", K_FILL), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_kernel_glsl(rt, NULL, K_FILL), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_kernel_glsl(rt, "k", NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_kernel_spirv(NULL, "k", (const uint32_t *)data, 4), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_kernel_spirv(rt, NULL, (const uint32_t *)data, 4), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_kernel_spirv(rt, "k", NULL, 4), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_program_create(NULL, g, &prog), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_program_create(rt, NULL, &prog), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_program_create(rt, g, NULL), LOOM_INVALID_ARGUMENT);
    loom_rt_program_release(NULL);
    RC(loom_rt_replay(NULL, NULL, NULL, &step), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_replay(rt, NULL, NULL, &step), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_wait(NULL, 0), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_wait_idle(NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_program_read(NULL, NULL, 0, 0, data, 4), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_program_read(rt, NULL, 0, 0, data, 4), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_program_write(NULL, NULL, 0, 0, data, 4), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_program_write(rt, NULL, 0, 0, data, 4), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_program_timings(NULL, NULL, NULL, 0, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_program_timings(rt, NULL, NULL, 0, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_run_graph(NULL, g, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_run_graph(rt, NULL, NULL), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_compile(NULL, g, NULL, &plan, &hit), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_compile(rt, NULL, NULL, &plan, &hit), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_compile(rt, g, NULL, NULL, &hit), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_replay_plan(NULL, NULL, NULL, &step), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_replay_plan(rt, NULL, NULL, &step), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_plan_program(NULL, NULL, &prog), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_plan_program(rt, NULL, &prog), LOOM_INVALID_ARGUMENT);
    ck_assert(!loom_rt_program_busy(NULL, NULL));
    ck_assert(!loom_rt_program_busy(rt, NULL));
    ck_assert_uint_eq(loom_rt_validation_messages(rt), 0);
    loom_graph_destroy(g);
    loom_rt_destroy(rt);
}
END_TEST

/* ---- kernel layouts ----------------------------------------------------- */

/* A raw dispatch of the built-in "add" (a, b read-only; y written). */
START_TEST(test_layout_builtin)
{
    loom_kernel_layout l;
    bool builtin;
    OK(loom_kernel_find("add", &l, &builtin));
    ck_assert(builtin);
    ck_assert_uint_eq(l.slots, 0x7);
    ck_assert_uint_eq(l.writable, 0x4);
    loom_binding ok[3] = { bind(0, 0, LOOM_ACCESS_READ), bind(1, 1, LOOM_ACCESS_READ), bind(2, 2, LOOM_ACCESS_WRITE) };
    loom_graph *g = graph_with(3);
    OK(dispatch(g, "add", ok, 3));
    OK(loom_graph_verify(g));

    /* Slot 1 left unbound: the kernel would read through a missing descriptor. */
    loom_graph_destroy(g);
    g = graph_with(3);
    loom_binding missing[2] = { ok[0], ok[2] };
    OK(dispatch(g, "add", missing, 2));
    RC(loom_graph_verify(g), LOOM_VERIFY);
    HAS("node 0 (OTHER)");
    HAS("slot 1");

    /* An extra slot the kernel does not declare. */
    loom_graph_destroy(g);
    g = graph_with(4);
    loom_binding extra[4] = { ok[0], ok[1], ok[2], bind(3, 3, LOOM_ACCESS_READ) };
    OK(dispatch(g, "add", extra, 4));
    RC(loom_graph_verify(g), LOOM_VERIFY);
    HAS("node 0 (OTHER)");
    HAS("slot 3");

    /* The written slot bound read-only: a write the hazards would not see. */
    loom_graph_destroy(g);
    g = graph_with(3);
    loom_binding ro[3] = { ok[0], ok[1], bind(2, 2, LOOM_ACCESS_READ) };
    OK(dispatch(g, "add", ro, 3));
    RC(loom_graph_verify(g), LOOM_VERIFY);
    HAS("slot 2");
    loom_graph_destroy(g);
}
END_TEST

/* A custom kernel's layout comes from its registration: a missing slot is a
 * verify error at compile, not a crash inside the validation layer at
 * record time. */
START_TEST(test_layout_custom)
{
    loom_rt *rt = make_rt();
    OK(loom_rt_kernel_glsl(rt, "api_inc", K_INC));
    loom_kernel_layout l;
    bool builtin = true;
    OK(loom_kernel_find("api_inc", &l, &builtin));
    ck_assert(!builtin);
    ck_assert_uint_eq(l.slots, 0x3);
    ck_assert_uint_eq(l.writable, 0x2);
    loom_graph *g = graph_with(2);
    loom_binding b[2] = { bind(0, 0, LOOM_ACCESS_READ), bind(1, 1, LOOM_ACCESS_WRITE) };
    OK(dispatch(g, "api_inc", b + 1, 1));   /* slot 0 left unbound */
    loom_plan *plan;
    RC(loom_rt_compile(rt, g, NULL, &plan, NULL), LOOM_VERIFY);
    HAS("node 0");
    HAS("slot 0");
    ck_assert_ptr_null(plan);
    RC(loom_rt_run_graph(rt, g, NULL), LOOM_VERIFY);

    /* Bound right, it runs. */
    loom_graph_reset(g);
    OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = N * 4 }, NULL));
    OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = N * 4 }, NULL));
    OK(dispatch(g, "api_inc", b, 2));
    OK(loom_rt_run_graph(rt, g, NULL));
    ck_assert_uint_eq(loom_rt_validation_messages(rt), 0);
    loom_graph_destroy(g);
    loom_rt_destroy(rt);
}
END_TEST

/* Shared memory: the SPIR-V count of built-in kernels equals what the
 * NVIDIA driver reported for them (LOOM_KERNEL_STATS=1: "Shared Memory
 * Size", on an H100; the attention's on an H200, its _o16 form), and a
 * custom kernel declaring more than the device allows is refused by name
 * at registration; one within it runs. */
START_TEST(test_shared_memory)
{
    static const struct { const char *kernel; uint64_t bytes; } driver[] = {
        { "matmul_coop_l64_f16", 30720 },    { "matmul_add_coop_l64_f16", 30720 },
        { "matmul_coop_ks_f16", 28672 },     { "attention_rows_coop_kh_h64", 23808 },
    };
    for (size_t i = 0; i < sizeof driver / sizeof driver[0]; i++) {
        const loom_builtin_kernel *bk = loom_builtin_kernel_find(driver[i].kernel);
        ck_assert_msg(bk, "%s", driver[i].kernel);
        uint64_t n = 0;
        loom_kernel_layout l;
        OK(loom_kernel_reflect(bk->code, bk->size, &l, &n));
        ck_assert_msg(n == driver[i].bytes, "%s: %llu bytes, the driver said %llu", driver[i].kernel,
                      (unsigned long long)n, (unsigned long long)driver[i].bytes);
    }
    loom_rt *rt = make_rt();
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    ck_assert_uint_ge(info.max_shared_memory, 16384);   /* the Vulkan minimum */
    static const char body[] = "#version 450\n"
                               "layout(local_size_x = 64) in;\n"
                               "layout(set = 0, binding = 0) buffer A { uint a[]; };\n"
                               "struct S { uvec4 v; float f[3]; };\n"
                               "shared S s[%u];\n"
                               "void main() {\n"
                               "    uint i = gl_LocalInvocationID.x;\n"
                               "    s[i].v = uvec4(a[i]); s[i].f[2] = 1.0;\n"
                               "    barrier();\n"
                               "    a[i] = s[(i + 1u) %% 64u].v.x + uint(s[i].f[2]);\n"
                               "}\n";
    char src[640];
    /* 28 bytes a struct: one more than the limit holds */
    snprintf(src, sizeof src, body, info.max_shared_memory / 28 + 1);
    RC(loom_rt_kernel_glsl(rt, "api_big_shared", src), LOOM_UNSUPPORTED);
    HAS("api_big_shared");
    HAS("maxComputeSharedMemorySize");
    snprintf(src, sizeof src, body, 64u);
    OK(loom_rt_kernel_glsl(rt, "api_small_shared", src));
    loom_graph *g = graph_with(1);
    loom_binding b = bind(0, 0, LOOM_ACCESS_RW);
    OK(dispatch(g, "api_small_shared", &b, 1));
    OK(loom_rt_run_graph(rt, g, NULL));
    ck_assert_uint_eq(loom_rt_validation_messages(rt), 0);
    loom_graph_destroy(g);
    loom_rt_destroy(rt);
}
END_TEST

/* local_size_x of a SPIR-V module (OpExecutionMode LocalSize), 0 if none. */
static uint32_t spirv_local_x(const uint32_t *code, size_t size)
{
    for (size_t i = 5, n = size / 4; i < n;) {
        uint32_t len = code[i] >> 16, op = code[i] & 0xffffu;
        if (!len)
            break;
        if (op == 16 && len >= 6 && code[i + 2] == 17)   /* OpExecutionMode, LocalSize */
            return code[i + 3];
        i += len;
    }
    return 0;
}

/* The residual projections' integer forms take 512 invocations, 64 a row
 * (matvec.glsl MV_WG: their workgroups fill x into shared memory first,
 * and are few), and so do q/k/v's, one row each; their float forms, the
 * gated FFN, the LM head and the multi-column matmul and q/k/v forms keep
 * 256; and the widest fits the 32 KiB of shared memory that lavapipe,
 * the CI device, allows. */
START_TEST(test_wide_residual_projections)
{
    static const char *const types[] = { "q8_0", "q4_0", "q4_k", "q6_k" };
    static const struct { const char *form; uint32_t idot; } forms[] = {
        { "matvec_add", 512 },           { "matvec_add_stage_tq", 512 },
        { "matvec_add_stage_tag_tq_xqt", 512 }, { "matvec_add_stage_tag_tq", 512 },
        { "matvec_add_stage_comb_h_tq", 512 },  { "matvec", 256 },
        { "rms_norm_matvec_silu_mul_pre_tag_xq_yqt", 256 }, { "rms_norm_qkv_rope_kh_pre_xq", 512 },
        { "rms_norm_matvec_argmax_log_pre_xq", 256 }, { "embed_rms_norm_qkv_rope_kh", 512 },
        { "rms_norm_qkv_rope", 512 }, { "matmul_silu_mul", 256 }, { "matmul", 256 }, { "matmul_add", 256 },
        { "rms_norm_qkv_rope_rows_kh", 256 },
    };
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
            char name[96];
            snprintf(name, sizeof name, "%s_%s", forms[f].form, types[t]);
            const loom_builtin_kernel *bk = loom_builtin_kernel_find(name);
            ck_assert_msg(bk && bk->code_idot, "%s: no integer form", name);
            ck_assert_msg(spirv_local_x(bk->code, bk->size) == 256, "%s: float form", name);
            uint32_t x = spirv_local_x(bk->code_idot, bk->size_idot);
            ck_assert_msg(x == forms[f].idot, "%s: integer form %u invocations, not %u", name, x, forms[f].idot);
            uint64_t bytes = 0;
            loom_kernel_layout l;
            OK(loom_kernel_reflect(bk->code_idot, bk->size_idot, &l, &bytes));
            ck_assert_msg(bytes <= 32768, "%s: %llu bytes of shared memory", name, (unsigned long long)bytes);
        }
}
END_TEST

#ifdef LOOM_PROBES
/* LOOM_KERNEL_DIR (test and benchmark builds): a built-in kernel is taken
 * from DIR/<name>.spv where that file is, the embedded code elsewhere, and
 * a file that is not SPIR-V fails by name. Here "add" is given mul's code:
 * an ADD node then multiplies, so a runtime that ignored the directory
 * would fail the check. */
static void run_add(loom_rt *rt, float *out)
{
    loom_graph *g;
    OK(loom_graph_create(&(loom_graph_desc){ .name = "kdir" }, &g));
    uint32_t a, b, y;
    OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = "a", .size = N * 4, .usage = LOOM_USAGE_STATE }, &a));
    OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = "b", .size = N * 4, .usage = LOOM_USAGE_STATE }, &b));
    OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = "y", .size = N * 4, .usage = LOOM_USAGE_STATE }, &y));
    OK(loom_op_add(g, loom_vec(a, N), loom_vec(b, N), loom_vec(y, N), NULL));
    loom_rt_program *p;
    OK(loom_rt_program_create(rt, g, &p));
    float va[N], vb[N];
    for (uint32_t i = 0; i < N; i++) {
        va[i] = (float)i + 2.0f;
        vb[i] = 3.0f;
    }
    OK(loom_rt_program_write(rt, p, a, 0, va, sizeof va));
    OK(loom_rt_program_write(rt, p, b, 0, vb, sizeof vb));
    uint64_t step;
    OK(loom_rt_replay(rt, p, NULL, &step));
    OK(loom_rt_wait(rt, step));
    OK(loom_rt_program_read(rt, p, y, 0, out, N * 4));
    loom_rt_program_release(p);
    loom_graph_destroy(g);
}

START_TEST(test_kernel_dir)
{
    char dir[] = "/tmp/loom-kdir-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/add.spv", dir);
    const loom_builtin_kernel *mul = loom_builtin_kernel_find("mul");
    ck_assert_ptr_nonnull(mul);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(mul->code, 1, mul->size, f), mul->size);
    fclose(f);
    setenv("LOOM_KERNEL_DIR", dir, 1);
    float out[N];
    loom_rt *rt = make_rt();
    run_add(rt, out);
    for (uint32_t i = 0; i < N; i++)
        ck_assert_msg(out[i] == ((float)i + 2.0f) * 3.0f, "y[%u] = %g: add.spv was not taken", i, out[i]);
    ck_assert_uint_eq(loom_rt_validation_messages(rt), 0);
    loom_rt_destroy(rt);
    /* Not SPIR-V: refused, naming the kernel. */
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs("not a kernel", f);
    fclose(f);
    rt = make_rt();
    loom_graph *g = graph_with(3);
    loom_binding b[3] = { bind(0, 0, LOOM_ACCESS_READ), bind(1, 1, LOOM_ACCESS_READ), bind(2, 2, LOOM_ACCESS_WRITE) };
    OK(dispatch(g, "add", b, 3));
    RC(loom_rt_run_graph(rt, g, NULL), LOOM_INVALID_ARGUMENT);
    HAS("'add'");
    loom_graph_destroy(g);
    loom_rt_destroy(rt);
    /* No file: the built-in kernel. */
    remove(path);
    rt = make_rt();
    run_add(rt, out);
    for (uint32_t i = 0; i < N; i++)
        ck_assert_msg(out[i] == (float)i + 5.0f, "y[%u] = %g", i, out[i]);
    loom_rt_destroy(rt);
    unsetenv("LOOM_KERNEL_DIR");
    rmdir(dir);
}
END_TEST
#endif

/* A kernel the runtime does not know fails at compile, naming the node. */
START_TEST(test_unknown_kernel)
{
    loom_rt *rt = make_rt();
    loom_graph *g = graph_with(1);
    loom_binding b = bind(0, 0, LOOM_ACCESS_WRITE);
    OK(dispatch(g, "no_such_kernel", &b, 1));
    loom_plan *plan = NULL;
    bool hit = true;
    RC(loom_rt_compile(rt, g, NULL, &plan, &hit), LOOM_NOT_FOUND);
    HAS("node 0");
    HAS("no_such_kernel");
    ck_assert_ptr_null(plan);
    /* Still not found the second time (nothing was cached). */
    RC(loom_rt_compile(rt, g, NULL, &plan, &hit), LOOM_NOT_FOUND);
    loom_graph_destroy(g);
    loom_rt_destroy(rt);
}
END_TEST

/* ---- explicit ranges against bindings ------------------------------------ */

START_TEST(test_ranges_vs_bindings)
{
    loom_binding b[3] = { bind(0, 0, LOOM_ACCESS_READ), bind(1, 1, LOOM_ACCESS_READ), bind(2, 2, LOOM_ACCESS_WRITE) };
    loom_range r[2] = { { 0, 0, 0, N * 4 }, { 1, 0, 0, N * 4 } };
    loom_range w_ok = { 2, 0, 0, 16 }, w_ro = { 1, 0, 0, 16 }, w_out = { 2, 0, 64, 16 };
    const struct { const loom_range *w; loom_result want; const char *says; } cases[] = {
        { &w_ok, LOOM_OK, NULL },
        /* The write declared on a buffer bound read-only: the real write to
         * buffer 2 would be invisible and its barrier removed. */
        { &w_ro, LOOM_VERIFY, "write range 0" },
        { &w_out, LOOM_VERIFY, "write range 0" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        loom_graph *g = graph_with(3);
        OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = N * 8 }, NULL));
        if (cases[i].w == &w_out)
            b[2].size = 32;   /* the write lies in the buffer, beyond the binding */
        OK(loom_graph_add_dispatch(g, &(loom_dispatch_desc){ .kernel = "add", .groups = { 1, 1, 1 }, .bindings = b,
                                                             .n_bindings = 3, .reads = r, .n_reads = 2,
                                                             .writes = cases[i].w, .n_writes = 1 },
                                   NULL));
        RC(loom_graph_verify(g), cases[i].want);
        if (cases[i].says)
            HAS(cases[i].says);
        b[2].size = N * 4;
        loom_graph_destroy(g);
    }
    /* A writable binding no write range covers. */
    loom_graph *g = graph_with(4);
    loom_range w_other = { 3, 0, 0, 16 };
    loom_binding b4[4] = { b[0], b[1], b[2], bind(3, 3, LOOM_ACCESS_WRITE) };
    OK(loom_graph_add_dispatch(g, &(loom_dispatch_desc){ .kernel = "k4", .groups = { 1, 1, 1 }, .bindings = b4,
                                                         .n_bindings = 4, .reads = r, .n_reads = 2,
                                                         .writes = &w_other, .n_writes = 1 },
                               NULL));
    RC(loom_graph_verify(g), LOOM_VERIFY);
    HAS("binding 2 slot 2");
    HAS("no write range covers it");
    loom_graph_destroy(g);
}
END_TEST

/* ---- error messages ----------------------------------------------------- */

START_TEST(test_fail_wrap)
{
    loom_fail(LOOM_IO, "inner %d", 1);
    RC(loom_fail_wrap(LOOM_NOT_FOUND, "outer '%s'", "x"), LOOM_NOT_FOUND);
    ck_assert_str_eq(loom_last_error(), "outer 'x': inner 1");
    loom_clear_error();
    loom_fail_wrap(LOOM_IO, "alone");
    ck_assert_str_eq(loom_last_error(), "alone");
    /* Too long together: the outer part whole, then as much of the inner as
     * fits, terminated. */
    char inner[600];
    memset(inner, 'i', sizeof inner - 1);
    inner[sizeof inner - 1] = 0;
    loom_fail(LOOM_IO, "%s", inner);
    loom_fail_wrap(LOOM_IO, "outer");
    const char *e = loom_last_error();
    ck_assert_uint_eq(strlen(e), 511);
    ck_assert(strncmp(e, "outer: iii", 10) == 0);
    ck_assert_int_eq(e[510], 'i');
}
END_TEST

/* A failure deep in the runtime, wrapped by each level once. */
START_TEST(test_wrapped_runtime_message)
{
    loom_rt *rt = make_rt();
    loom_graph *g;
    OK(loom_graph_create(&(loom_graph_desc){ .name = "g" }, &g));
    OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = "w", .size = 1024 }, NULL));
    rt_inject_vk_failure(rt, "vkAllocateMemory", VK_ERROR_OUT_OF_DEVICE_MEMORY_);
    loom_rt_program *p;
    RC(loom_rt_program_create(rt, g, &p), LOOM_DEVICE_OOM);
    ck_assert_str_eq(loom_last_error(),
                     "program 'g': buffer 0 'w' (1024 bytes): vkAllocateMemory: VK_ERROR_OUT_OF_DEVICE_MEMORY");
    loom_graph_destroy(g);
    loom_rt_destroy(rt);
}
END_TEST

/* ---- device loss -------------------------------------------------------- */

START_TEST(test_device_lost)
{
    loom_rt *rt = make_rt();
    loom_rt_buffer *b;
    OK(loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ .size = N * 4, .usage = LOOM_USAGE_OUTPUT }, &b));
    loom_graph *g;
    OK(loom_graph_create(&(loom_graph_desc){ .name = "g" }, &g));
    OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ "y", N * 4, LOOM_USAGE_OUTPUT, loom_rt_buffer_id(b) }, NULL));
    OK(loom_rt_kernel_glsl(rt, "api_fill", K_FILL));
    loom_binding bd = bind(0, 0, LOOM_ACCESS_WRITE);
    OK(dispatch(g, "api_fill", &bd, 1));
    loom_plan *plan;
    OK(loom_rt_compile(rt, g, NULL, &plan, NULL));
    /* The first replay creates the pipeline: the driver reports the loss there. */
    rt_inject_vk_failure(rt, "vkCreateComputePipelines", VK_ERROR_DEVICE_LOST_);
    uint64_t step;
    RC(loom_rt_replay_plan(rt, plan, NULL, &step), LOOM_DEVICE_LOST);
    /* From now on every call says so. */
    uint32_t data[4] = { 0 };
    loom_rt_buffer *b2;
    loom_rt_program *prog;
    loom_plan *p2;
    RC(loom_rt_replay_plan(rt, plan, NULL, &step), LOOM_DEVICE_LOST);
    RC(loom_rt_compile(rt, g, NULL, &p2, NULL), LOOM_DEVICE_LOST);
    RC(loom_rt_plan_program(rt, plan, &prog), LOOM_DEVICE_LOST);
    RC(loom_rt_program_create(rt, g, &prog), LOOM_DEVICE_LOST);
    RC(loom_rt_run_graph(rt, g, NULL), LOOM_DEVICE_LOST);
    RC(loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ .size = 16 }, &b2), LOOM_DEVICE_LOST);
    RC(loom_rt_buffer_write(rt, b, 0, data, sizeof data), LOOM_DEVICE_LOST);
    RC(loom_rt_buffer_read(rt, b, 0, data, sizeof data), LOOM_DEVICE_LOST);
    RC(loom_rt_kernel_glsl(rt, "api_fill2", K_FILL), LOOM_DEVICE_LOST);
    RC(loom_rt_wait(rt, 0), LOOM_DEVICE_LOST);
    RC(loom_rt_wait_idle(rt), LOOM_DEVICE_LOST);
    loom_plan_release(plan);
    loom_graph_destroy(g);
    loom_rt_buffer_release(b);
    loom_rt_destroy(rt);
}
END_TEST

/* ---- threads ------------------------------------------------------------ */

static void *fail_on_thread(void *arg)
{
    (void)arg;
    loom_fail(LOOM_IO, "the other thread's failure");
    return NULL;
}

/* The error slot is thread-local: another thread's failure leaves this
 * thread's message as it was. */
START_TEST(test_error_slot_per_thread)
{
    loom_fail(LOOM_VERIFY, "mine");
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, fail_on_thread, NULL), 0);
    pthread_join(t, NULL);
    ck_assert_str_eq(loom_last_error(), "mine");
}
END_TEST

typedef struct replayer {
    loom_plan *plan;
    uint32_t value;
    int ok;
} replayer;

/* Each thread has its own runtime and buffer and replays the shared plan. */
static void *replay_thread(void *arg)
{
    replayer *r = arg;
    loom_rt *rt;
    if (loom_rt_create(&(loom_rt_desc){ .log = quiet }, &rt))
        return NULL;
    const loom_graph *pg = loom_plan_graph(r->plan);
    uint32_t a[N], out[N];
    for (uint32_t i = 0; i < N; i++)
        a[i] = r->value + i;
    loom_rt_program *p;
    int ok = loom_rt_kernel_glsl(rt, "api_inc", K_INC) == LOOM_OK;
    for (int step = 0; ok && step < 8; step++) {
        uint64_t s;
        ok = loom_rt_plan_program(rt, r->plan, &p) == LOOM_OK &&
             loom_rt_program_write(rt, p, 0, 0, a, sizeof a) == LOOM_OK &&
             loom_rt_replay_plan(rt, r->plan, NULL, &s) == LOOM_OK && loom_rt_wait(rt, s) == LOOM_OK &&
             loom_rt_program_read(rt, p, 1, 0, out, sizeof out) == LOOM_OK;
        for (uint32_t i = 0; ok && i < N; i++)
            ok = out[i] == a[i] + 1;
        for (uint32_t i = 0; i < N; i++)
            a[i] += 3;
    }
    (void)pg;
    ok = ok && loom_rt_validation_messages(rt) == 0;
    /* The plan owns this runtime's program: wait for the other thread to be
     * done before the plan goes (the test joins, then releases). */
    r->ok = ok;
    loom_rt_wait_idle(rt);
    /* Keep rt alive until the plan is released: returned to the caller. */
    return rt;
}

START_TEST(test_two_threads_one_plan)
{
    loom_graph *g;
    OK(loom_graph_create(&(loom_graph_desc){ .name = "shared" }, &g));
    OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = "a", .size = N * 4, .usage = LOOM_USAGE_STATE }, NULL));
    OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = "b", .size = N * 4, .usage = LOOM_USAGE_STATE }, NULL));
    loom_binding b[2] = { bind(0, 0, LOOM_ACCESS_READ), bind(1, 1, LOOM_ACCESS_WRITE) };
    loom_kernel_layout l = { 0x3, 0x2, 0 };
    OK(loom_kernel_declare("api_inc", &l));
    OK(dispatch(g, "api_inc", b, 2));
    loom_plan *plan;
    OK(loom_compile(g, NULL, &plan));
    replayer r[2] = { { plan, 100, 0 }, { plan, 5000, 0 } };
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, replay_thread, &r[i]), 0);
    loom_rt *rts[2];
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], (void **)&rts[i]);
    for (int i = 0; i < 2; i++)
        ck_assert_msg(r[i].ok, "thread %d replayed wrongly", i);
    loom_plan_release(plan);   /* destroys both programs, on this thread */
    for (int i = 0; i < 2; i++)
        loom_rt_destroy(rts[i]);
    loom_graph_destroy(g);
}
END_TEST

static Suite *api_suite(void)
{
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("null");
    tcase_add_test(tc, test_null_ir);
    tcase_add_test(tc, test_null_passes_compiler);
    tcase_add_test(tc, test_null_runtime);
    suite_add_tcase(s, tc);
    tc = tcase_create("layouts");
    tcase_add_test(tc, test_layout_builtin);
    tcase_add_test(tc, test_layout_custom);
    tcase_add_test(tc, test_shared_memory);
    tcase_add_test(tc, test_wide_residual_projections);
    tcase_add_test(tc, test_unknown_kernel);
#ifdef LOOM_PROBES
    tcase_add_test(tc, test_kernel_dir);
#endif
    tcase_add_test(tc, test_ranges_vs_bindings);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, test_fail_wrap);
    tcase_add_test(tc, test_wrapped_runtime_message);
    tcase_add_test(tc, test_device_lost);
    tcase_add_test(tc, test_error_slot_per_thread);
    suite_add_tcase(s, tc);
    tc = tcase_create("threads");
    tcase_add_test(tc, test_two_threads_one_plan);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

void loom_test_register(loom_test_runner *r, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    loom_test_add_suite(r, api_suite());
}
