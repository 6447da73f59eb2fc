/* Profiling and tracing on the default device (lavapipe in CI) under the
 * validation layer: the group profile of a compiled plan adds up to the
 * step and has one group more than barriers; the trace file is strict JSON
 * in Chrome's trace-event format, with named CPU and GPU tracks, GPU group
 * spans nested in their steps, ordered per track, groups x steps of them,
 * and GPU time on the host clock both with calibrated timestamps and by
 * the submit rule. The example decoder's capture and compile spans too. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "loom_ir_edit.h"
#include "loom_runtime.h"
#ifdef LOOM_TEST_LLAMA
#include "llama.h"
#endif
#include "test_kernels.h"
#include "runner.h"

/* runtime/ test hook: align by the submit rule, as without calibration. */
void rt_trace_test_uncalibrated(loom_rt *rt);

#define N 256u

#define OK(expr)                                                                                    \
    do {                                                                                            \
        loom_result rc_ = (expr);                                                                   \
        ck_assert_msg(rc_ == LOOM_OK, "%s: %s: %s", #expr, loom_result_str(rc_), loom_last_error()); \
    } while (0)
#define RC(expr, want) ck_assert_int_eq((expr), (want))

/* ---- a small strict JSON reader ------------------------------------------ */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jv {
    jtype t;
    double num;
    char *str;              /* J_STR */
    struct jv *items;       /* J_ARR, J_OBJ */
    char **keys;            /* J_OBJ */
    size_t n;
} jv;

typedef struct jr {
    const char *s;
    size_t i, len;
    bool bad;
} jr;

static void jfree(jv *v)
{
    for (size_t i = 0; i < v->n; i++) {
        jfree(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
}

static void ws(jr *r)
{
    while (r->i < r->len && strchr(" \t\r\n", r->s[r->i]))
        r->i++;
}

static bool eat(jr *r, char c)
{
    ws(r);
    if (r->i < r->len && r->s[r->i] == c) {
        r->i++;
        return true;
    }
    return false;
}

static char *jstring(jr *r)
{
    if (!eat(r, '"'))
        return r->bad = true, NULL;
    char *out = malloc(r->len - r->i + 1);
    size_t k = 0;
    while (r->i < r->len && r->s[r->i] != '"') {
        unsigned char c = (unsigned char)r->s[r->i++];
        if (c < 0x20)
            r->bad = true;
        if (c == '\\') {
            char e = r->i < r->len ? r->s[r->i++] : 0;
            const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
            const char *at = e ? strchr(from, e) : NULL;
            if (e == 'u') {
                for (int h = 0; h < 4; h++)
                    r->bad |= r->i >= r->len || !strchr("0123456789abcdefABCDEF", r->s[r->i++]);
                c = '?';
            } else if (at) {
                c = (unsigned char)to[at - from];
            } else {
                r->bad = true;
            }
        }
        out[k++] = (char)c;
    }
    out[k] = 0;
    if (r->i >= r->len)
        r->bad = true;
    r->i++;
    return out;
}

static bool jnumber(jr *r, double *out)
{
    size_t i = r->i;
    if (i < r->len && r->s[i] == '-')
        i++;
    if (i >= r->len || !strchr("0123456789", r->s[i]))
        return false;
    if (r->s[i] == '0' && i + 1 < r->len && strchr("0123456789", r->s[i + 1]))
        return false;   /* no leading zeros */
    char *end;
    *out = strtod(r->s + r->i, &end);
    r->i = (size_t)(end - r->s);
    return true;
}

static void jvalue(jr *r, jv *v, int depth);

static void jcontainer(jr *r, jv *v, bool object, int depth)
{
    char close = object ? '}' : ']';
    if (eat(r, close))
        return;
    size_t cap = 0;
    do {
        if (v->n == cap) {
            cap = cap ? cap * 2 : 8;
            v->items = realloc(v->items, cap * sizeof *v->items);
            if (object)
                v->keys = realloc(v->keys, cap * sizeof *v->keys);
        }
        memset(&v->items[v->n], 0, sizeof *v->items);
        if (object) {
            ws(r);
            v->keys[v->n] = jstring(r);
            if (!eat(r, ':'))
                r->bad = true;
        }
        jvalue(r, &v->items[v->n], depth + 1);
        v->n++;
    } while (!r->bad && eat(r, ','));
    if (!eat(r, close))
        r->bad = true;
}

static void jvalue(jr *r, jv *v, int depth)
{
    ws(r);
    if (r->bad || r->i >= r->len || depth > 64) {
        r->bad = true;
        return;
    }
    char c = r->s[r->i];
    if (c == '{' || c == '[') {
        r->i++;
        v->t = c == '{' ? J_OBJ : J_ARR;
        jcontainer(r, v, c == '{', depth);
    } else if (c == '"') {
        v->t = J_STR;
        v->str = jstring(r);
    } else if (!strncmp(r->s + r->i, "true", 4) || !strncmp(r->s + r->i, "null", 4)) {
        v->t = c == 't' ? J_BOOL : J_NULL;
        r->i += 4;
    } else if (!strncmp(r->s + r->i, "false", 5)) {
        v->t = J_BOOL;
        r->i += 5;
    } else {
        v->t = J_NUM;
        r->bad |= !jnumber(r, &v->num);
    }
}

/* Parses a whole file; fails the test on anything but one JSON value. */
static jv jparse_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "no trace file %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(text, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    jr r = { .s = text, .len = (size_t)n };
    jv v = { 0 };
    jvalue(&r, &v, 0);
    ws(&r);
    ck_assert_msg(!r.bad && r.i == r.len, "%s: not JSON at byte %zu of %ld", path, r.i, n);
    free(text);
    return v;
}

static const jv *jget(const jv *o, const char *key)
{
    if (!o || o->t != J_OBJ)
        return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (!strcmp(o->keys[i], key))
            return &o->items[i];
    return NULL;
}

static double jnum(const jv *o, const char *key)
{
    const jv *v = jget(o, key);
    ck_assert_msg(v && v->t == J_NUM, "member %s is not a number", key);
    return v->num;
}

static const char *jstr(const jv *o, const char *key)
{
    const jv *v = jget(o, key);
    return v && v->t == J_STR ? v->str : NULL;
}

/* ---- kernels and graphs -------------------------------------------------- */

static void loud_log(void *user, loom_log_level level, const char *msg)
{
    (void)user;
    if (level >= LOOM_LOG_WARN)
        fprintf(stderr, "%s\n", msg);
}

static loom_rt *rt_make(loom_rt_profile_level level, const char *trace, uint32_t trace_steps)
{
    loom_rt *rt = NULL;
    loom_rt_desc d = { .validate = true, .log = loud_log, .profile = level, .trace_path = trace,
                       .trace_steps = trace_steps };
    OK(loom_rt_create(&d, &rt));
    OK(test_kernels_register(rt));
    return rt;
}

static void rt_done(loom_rt *rt)
{
    ck_assert_uint_eq(loom_rt_validation_messages(rt), 0);
    loom_rt_destroy(rt);
}

/* The buffers of the diamond graph: runtime buffers, so results can be read. */
enum { BA, BB, BC, BD, BE, BSPIN, NB };

typedef struct fixture {
    loom_rt_buffer *b[NB];
} fixture;

static void fixture_make(loom_rt *rt, fixture *fx)
{
    static const char *const names[NB] = { "a", "b", "c", "d", "e", "spin" };
    for (int i = 0; i < NB; i++)
        OK(loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ .name = names[i], .size = i == BSPIN ? 256 : N * 4,
                                                             .usage = i == BE ? LOOM_USAGE_OUTPUT : 0 },
                                 &fx->b[i]));
}

static void fixture_free(fixture *fx)
{
    for (int i = 0; i < NB; i++)
        loom_rt_buffer_release(fx->b[i]);
}

static void dispatch(loom_graph *g, const char *kernel, loom_op op, const loom_binding *b, uint32_t nb,
                     const uint32_t *pc, uint32_t npc, uint32_t groups)
{
    uint32_t id;
    loom_dispatch_desc d = { .kernel = kernel, .op = op, .groups = { groups, 1, 1 }, .bindings = b,
                             .n_bindings = nb, .push = pc, .push_size = npc * 4 };
    OK(loom_graph_add_dispatch(g, &d, &id));
}

/* fill a, fill b, spin | a + 10 -> c, b + 20 -> d | 3c + d -> e: three
 * dependency levels once compiled, so three groups and two barriers. */
static loom_graph *diamond(const fixture *fx)
{
    loom_graph *g = NULL;
    OK(loom_graph_create(&(loom_graph_desc){ .name = "diamond" }, &g));
    uint32_t id[NB];
    for (int i = 0; i < NB; i++)
        OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = "buf", .size = loom_rt_buffer_size(fx->b[i]),
                                                         .external = loom_rt_buffer_id(fx->b[i]) }, &id[i]));
    for (int k = 0; k < 2; k++) {
        loom_binding b = { .buffer = id[BA + k], .slot = 0, .size = N * 4, .access = LOOM_ACCESS_WRITE };
        uint32_t pc[2] = { N, 1u + (uint32_t)k };
        dispatch(g, "t_fill", LOOM_OP_COPY, &b, 1, pc, 2, N / 64);
    }
    loom_binding sb = { .buffer = id[BSPIN], .slot = 0, .size = 256, .access = LOOM_ACCESS_WRITE };
    uint32_t spc[2] = { 64, 20000 };
    dispatch(g, "t_spin", LOOM_OP_OTHER, &sb, 1, spc, 2, 1);
    for (int k = 0; k < 2; k++) {
        loom_binding b[2] = { { .buffer = id[BA + k], .slot = 0, .size = N * 4, .access = LOOM_ACCESS_READ },
                              { .buffer = id[BC + k], .slot = 1, .size = N * 4, .access = LOOM_ACCESS_WRITE } };
        uint32_t pc[2] = { N, 10u + 10u * (uint32_t)k };
        dispatch(g, "t_addk", LOOM_OP_ADD, b, 2, pc, 2, N / 64);
    }
    loom_binding b[3] = { { .buffer = id[BC], .slot = 0, .size = N * 4, .access = LOOM_ACCESS_READ },
                          { .buffer = id[BD], .slot = 1, .size = N * 4, .access = LOOM_ACCESS_READ },
                          { .buffer = id[BE], .slot = 2, .size = N * 4, .access = LOOM_ACCESS_WRITE } };
    uint32_t pc[1] = { N };
    dispatch(g, "t_sum", LOOM_OP_OTHER, b, 3, pc, 1, N / 64);
    return g;
}

static void check_result(loom_rt *rt, const fixture *fx)
{
    uint32_t e[N];
    OK(loom_rt_buffer_read(rt, fx->b[BE], 0, e, sizeof e));
    for (uint32_t i = 0; i < N; i++)
        ck_assert_uint_eq(e[i], (1 + 10) * 3 + (2 + 20));
}

/* ---- profile ------------------------------------------------------------- */

/* The per-group report adds up to the step, groups == barriers + 1, and the
 * op kinds share out the groups' time. */
START_TEST(test_profile_groups)
{
    loom_rt *rt = rt_make(LOOM_PROFILE_GROUPS, NULL, 0);
    ck_assert_int_eq(loom_rt_profiling(rt), LOOM_PROFILE_GROUPS);
    fixture fx;
    fixture_make(rt, &fx);
    loom_graph *g = diamond(&fx);
    loom_plan *plan = NULL;
    OK(loom_compile(g, NULL, &plan));
    const loom_plan_stats *st = loom_plan_get_stats(plan);
    ck_assert_uint_eq(st->groups, 3);
    ck_assert_uint_eq(st->barriers, 2);
    loom_rt_program *p;
    OK(loom_rt_program_create(rt, loom_plan_graph(plan), &p));
    loom_rt_profile prof;
    RC(loom_rt_profile_get(rt, p, &prof), LOOM_NOT_FOUND);   /* nothing ran yet */
    const uint32_t steps = 5;
    uint64_t step;
    for (uint32_t i = 0; i < steps; i++)
        OK(loom_rt_replay(rt, p, NULL, &step));
    OK(loom_rt_wait_idle(rt));
    check_result(rt, &fx);
    OK(loom_rt_profile_get(rt, p, &prof));
    ck_assert_uint_eq(prof.steps, steps);
    ck_assert_uint_eq(prof.groups, st->groups);
    ck_assert_uint_eq(prof.groups, prof.barriers + 1);
    ck_assert_uint_eq(prof.dispatches, 6);
    ck_assert(prof.step_us > 0);

    loom_rt_profile_group gr[8];
    uint32_t n = 0;
    OK(loom_rt_profile_groups(rt, p, gr, 8, &n));
    ck_assert_uint_eq(n, prof.groups);
    double sum = 0;
    uint32_t next = 0, disp = 0;
    for (uint32_t i = 0; i < n; i++) {
        ck_assert_uint_eq(gr[i].index, i);
        ck_assert_uint_eq(gr[i].first_node, next);   /* the groups tile the plan */
        next += gr[i].n_nodes;
        disp += gr[i].dispatches;
        ck_assert(gr[i].us >= 0);
        sum += gr[i].us;
    }
    ck_assert_uint_eq(next, loom_graph_node_count(loom_plan_graph(plan)));
    ck_assert_uint_eq(disp, prof.dispatches);
    ck_assert_msg(fabs(sum - prof.step_us) <= 1e-6 * prof.step_us + 0.01, "groups %.3f us, step %.3f us", sum,
                  prof.step_us);
    /* Two fills in the first group; the spin, being independent, too. */
    ck_assert_ptr_nonnull(strstr(gr[0].label, "COPY x2"));
    ck_assert_str_eq(gr[1].label, "ADD x2");
    ck_assert_str_eq(gr[2].label, "OTHER");

    double ops = 0;
    for (int op = 0; op < LOOM_OP_COUNT; op++)
        ops += prof.ops[op].us;
    ck_assert(fabs(ops - prof.step_us) <= 1e-6 * prof.step_us + 0.01);
    ck_assert_uint_eq(prof.ops[LOOM_OP_COPY].nodes, 2);
    ck_assert_uint_eq(prof.ops[LOOM_OP_COPY].groups, 1);
    ck_assert_uint_eq(prof.ops[LOOM_OP_ADD].nodes, 2);
    ck_assert_uint_eq(prof.ops[LOOM_OP_OTHER].nodes, 2);
    ck_assert_uint_eq(prof.ops[LOOM_OP_OTHER].groups, 2);
    /* Split evenly: COPY has two of the first group's three dispatches. */
    ck_assert(fabs(prof.ops[LOOM_OP_COPY].us - gr[0].us * 2 / 3) < 1e-6 * gr[0].us + 1e-9);

    /* The step counters see the same replays. */
    loom_rt_counters c;
    loom_rt_get_counters(rt, &c);
    ck_assert_uint_eq(c.timed_steps, steps);
    ck_assert(fabs((double)c.gpu_ns / 1e3 - prof.step_us * steps) <= 0.001 * steps + 1e-6 * c.gpu_ns);

    loom_rt_profile_reset(rt, p);
    RC(loom_rt_profile_get(rt, p, &prof), LOOM_NOT_FOUND);
    OK(loom_rt_replay(rt, p, NULL, &step));
    OK(loom_rt_wait(rt, step));
    OK(loom_rt_profile_get(rt, p, &prof));
    ck_assert_uint_eq(prof.steps, 1);
    /* Per-node timings are a level of their own. */
    double node_us[16];
    RC(loom_rt_program_timings(rt, p, node_us, 16, NULL), LOOM_UNSUPPORTED);

    loom_rt_program_release(p);
    loom_plan_release(plan);
    loom_graph_destroy(g);
    fixture_free(&fx);
    rt_done(rt);
}
END_TEST

/* Per node: the node timings of the last step and the group profile agree. */
START_TEST(test_profile_nodes)
{
    loom_rt *rt = rt_make(LOOM_PROFILE_NODES, NULL, 0);
    fixture fx;
    fixture_make(rt, &fx);
    loom_graph *g = diamond(&fx);
    loom_plan *plan = NULL;
    OK(loom_compile(g, NULL, &plan));
    loom_rt_program *p;
    OK(loom_rt_program_create(rt, loom_plan_graph(plan), &p));
    uint64_t step;
    OK(loom_rt_replay(rt, p, NULL, &step));
    OK(loom_rt_wait(rt, step));
    check_result(rt, &fx);
    uint32_t nn = loom_graph_node_count(loom_plan_graph(plan));
    double node_us[16], total = 0, sum = 0;
    OK(loom_rt_program_timings(rt, p, node_us, 16, &total));
    loom_rt_profile prof;
    loom_rt_profile_group gr[8];
    uint32_t n;
    OK(loom_rt_profile_get(rt, p, &prof));
    OK(loom_rt_profile_groups(rt, p, gr, 8, &n));
    ck_assert_uint_eq(prof.steps, 1);
    ck_assert(fabs(prof.step_us - total) < 0.01);
    for (uint32_t i = 0; i < n; i++) {
        double nodes = 0;
        for (uint32_t k = gr[i].first_node; k < gr[i].first_node + gr[i].n_nodes; k++)
            nodes += node_us[k];
        ck_assert(fabs(nodes - gr[i].us) < 0.01);
        sum += gr[i].us;
    }
    ck_assert(nn <= 16 && fabs(sum - total) < 0.01);
    loom_rt_program_release(p);
    loom_plan_release(plan);
    loom_graph_destroy(g);
    fixture_free(&fx);
    rt_done(rt);
}
END_TEST

/* Without timestamps the profile says so; with step timestamps only, too. */
START_TEST(test_profile_off)
{
    loom_rt *rt = rt_make(LOOM_PROFILE_OFF, NULL, 0);
    ck_assert(!loom_rt_tracing(rt));
    fixture fx;
    fixture_make(rt, &fx);
    loom_graph *g = diamond(&fx);
    loom_rt_program *p;
    OK(loom_rt_program_create(rt, g, &p));
    uint64_t step;
    OK(loom_rt_replay(rt, p, NULL, &step));
    OK(loom_rt_wait(rt, step));
    loom_rt_profile prof;
    uint32_t n = 7;
    RC(loom_rt_profile_get(rt, p, &prof), LOOM_UNSUPPORTED);
    RC(loom_rt_profile_groups(rt, p, NULL, 0, &n), LOOM_UNSUPPORTED);
    ck_assert_uint_eq(n, 0);
    RC(loom_rt_profile_get(rt, NULL, &prof), LOOM_INVALID_ARGUMENT);
    RC(loom_rt_profile_get(rt, p, NULL), LOOM_INVALID_ARGUMENT);
    loom_rt_profile_reset(rt, p);   /* harmless */
    OK(loom_rt_trace_flush(rt));    /* not tracing: nothing to do */
    loom_rt_trace_span(rt, "capture", 1, 2, NULL, NULL);
    loom_rt_trace_span(NULL, "capture", 1, 2, NULL, NULL);
    ck_assert(!loom_rt_tracing(NULL));
    RC(loom_rt_trace_flush(NULL), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_rt_profiling(NULL), LOOM_PROFILE_OFF);
    loom_rt_program_release(p);
    loom_graph_destroy(g);
    fixture_free(&fx);
    rt_done(rt);
}
END_TEST

/* ---- trace --------------------------------------------------------------- */

static void trace_path(char *buf, size_t n, const char *tag)
{
    const char *dir = getenv("TMPDIR");
    snprintf(buf, n, "%s/loom-test-trace-%s-%d.json", dir && *dir ? dir : "/tmp", tag, (int)getpid());
}

typedef struct trace_facts {
    size_t cpu_spans, gpu_steps, gpu_groups, submits, compiles_hit, compiles_miss, captures, idles;
    double min_lead_us;      /* smallest GPU step start - its submit start */
    bool cpu_named, gpu_named;
} trace_facts;

static bool is_track(const jv *e, int tid) { return jnum(e, "pid") == 1 && jnum(e, "tid") == tid; }

/* The host time of the last span the tests add once the queue is idle:
 * every GPU span ended before it, since the host saw that work complete. */
static double idle_ts(const jv *ev)
{
    double ts = INFINITY;
    for (size_t i = 0; i < ev->n; i++) {
        const char *name = jstr(&ev->items[i], "name");
        if (name && !strcmp(name, "idle"))
            ts = jnum(&ev->items[i], "ts");
    }
    return ts;
}

/* Checks what every trace must hold and gathers counts for the caller. */
static trace_facts check_trace(const char *path, uint32_t groups_per_step)
{
    trace_facts tf = { .min_lead_us = INFINITY };
    jv root = jparse_file(path);
    ck_assert_int_eq(root.t, J_OBJ);
    const jv *ev = jget(&root, "traceEvents");
    ck_assert_msg(ev && ev->t == J_ARR, "no traceEvents array");
    const jv *other = jget(&root, "otherData");
    ck_assert_ptr_nonnull(jstr(other, "gpu_alignment"));
    const jv *dev = jget(other, "calibration_max_deviation_ns");
    double idle = idle_ts(ev), slack = 0.0015 + (dev ? dev->num / 1e3 : 0);
    double last_ts[3] = { -1, -1, -1 };
    const jv *step = NULL;
    double step_end = 0, group_sum = 0;
    uint32_t groups_in_step = 0;
    for (size_t i = 0; i < ev->n; i++) {
        const jv *e = &ev->items[i];
        ck_assert_int_eq(e->t, J_OBJ);
        const char *ph = jstr(e, "ph"), *name = jstr(e, "name");
        ck_assert_ptr_nonnull(ph);
        ck_assert_ptr_nonnull(name);
        if (!strcmp(ph, "M")) {
            const char *track = jstr(jget(e, "args"), "name");
            if (!strcmp(name, "thread_name") && track) {
                tf.cpu_named |= jnum(e, "tid") == 1 && strstr(track, "CPU") != NULL;
                tf.gpu_named |= jnum(e, "tid") == 2 && strstr(track, "GPU") != NULL;
            }
            continue;
        }
        ck_assert_str_eq(ph, "X");
        double ts = jnum(e, "ts"), dur = jnum(e, "dur");
        int tid = (int)jnum(e, "tid");
        ck_assert(is_track(e, 1) || is_track(e, 2));
        ck_assert_msg(ts >= 0 && dur >= 0, "%s: ts %f dur %f", name, ts, dur);
        ck_assert_msg(ts >= last_ts[tid], "track %d goes back in time at %s (%f < %f)", tid, name, ts, last_ts[tid]);
        last_ts[tid] = ts;
        const jv *args = jget(e, "args");
        const char *cat = jstr(e, "cat");
        if (tid == 1) {
            tf.cpu_spans++;
            tf.submits += !strcmp(name, "submit");
            tf.captures += !strcmp(name, "capture");
            tf.idles += !strcmp(name, "idle");
            if (!strcmp(name, "compile")) {
                const char *cache = jstr(args, "cache");
                ck_assert_ptr_nonnull(cache);
                tf.compiles_hit += !strcmp(cache, "hit");
                tf.compiles_miss += !strcmp(cache, "miss");
            }
            continue;
        }
        ck_assert_ptr_nonnull(cat);
        ck_assert_msg(ts + dur <= idle + slack, "%s ends %.3f us after the host saw the queue idle", name,
                      ts + dur - idle);
        if (!strcmp(cat, "gpu.step")) {
            ck_assert_msg(!step || groups_in_step == groups_per_step, "a step with %u groups", groups_in_step);
            ck_assert(!step || fabs(group_sum - (step_end - jnum(step, "ts"))) < 0.0015 * groups_per_step);
            step = e;
            step_end = ts + dur;
            group_sum = 0;
            groups_in_step = 0;
            tf.gpu_steps++;
            /* Aligned: the step starts after its submit began on the host. */
            double id = jnum(args, "step");
            for (size_t k = 0; k < ev->n; k++) {
                const jv *s = &ev->items[k];
                const char *sn = jstr(s, "name");
                if (sn && !strcmp(sn, "submit") && jnum(jget(s, "args"), "step") == id) {
                    double lead = ts - jnum(s, "ts");
                    ck_assert_msg(lead > -slack, "step %.0f starts %.3f us before its submit", id, -lead);
                    tf.min_lead_us = lead < tf.min_lead_us ? lead : tf.min_lead_us;
                }
            }
        } else {
            ck_assert_str_eq(cat, "gpu.group");
            ck_assert_msg(step != NULL, "a group span outside any step");
            ck_assert_msg(ts >= jnum(step, "ts") && ts + dur <= step_end + 1e-6, "group %s sticks out of its step",
                          name);
            ck_assert(jnum(args, "step") == jnum(jget(step, "args"), "step"));
            ck_assert(jnum(args, "group") == groups_in_step);
            groups_in_step++;
            group_sum += dur;
            tf.gpu_groups++;
        }
    }
    ck_assert(!step || groups_in_step == groups_per_step);
    ck_assert(tf.cpu_named && tf.gpu_named);
    jfree(&root);
    return tf;
}

/* Runs `steps` compile + replay rounds of the diamond through the
 * runtime's plan cache, with a frontend capture span each; the first is a
 * miss when fresh. */
static void run_steps(loom_rt *rt, const fixture *fx, uint32_t steps, bool fresh)
{
    for (uint32_t i = 0; i < steps; i++) {
        uint64_t t0 = loom_rt_trace_clock();
        loom_graph *g = diamond(fx);
        loom_rt_trace_span(rt, "capture", t0, 0, NULL, NULL);
        loom_plan *plan = NULL;
        bool hit = false;
        OK(loom_rt_compile(rt, g, NULL, &plan, &hit));
        ck_assert(hit == (i > 0 || !fresh));
        uint64_t step;
        OK(loom_rt_replay_plan(rt, plan, NULL, &step));
        loom_plan_release(plan);
        loom_graph_destroy(g);
    }
}

/* Any number of steps, with and without calibration, and a ring that
 * keeps fewer steps than ran: the file is JSON with groups x steps spans. */
static const struct { uint32_t steps, ring; bool uncalibrated; } trace_cases[] = {
    { 0, 0, false }, { 1, 0, false }, { 4, 0, false }, { 4, 0, true }, { 6, 2, false },
};

START_TEST(test_trace_file)
{
    uint32_t steps = trace_cases[_i].steps, ring = trace_cases[_i].ring;
    char path[512], tag[16];
    snprintf(tag, sizeof tag, "c%d", _i);
    trace_path(path, sizeof path, tag);
    loom_rt *rt = rt_make(LOOM_PROFILE_OFF, path, ring);
    ck_assert(loom_rt_tracing(rt));
    if (trace_cases[_i].uncalibrated)
        rt_trace_test_uncalibrated(rt);
    fixture fx;
    fixture_make(rt, &fx);
    run_steps(rt, &fx, steps, true);
    OK(loom_rt_wait_idle(rt));
    loom_rt_trace_span(rt, "idle", loom_rt_trace_clock(), 0, NULL, NULL);
    if (steps)
        check_result(rt, &fx);
    fixture_free(&fx);
    rt_done(rt);   /* writes the file */

    trace_facts tf = check_trace(path, 3);
    ck_assert_uint_eq(tf.idles, 1);
    uint32_t kept = ring && ring < steps ? ring : steps;
    ck_assert_uint_eq(tf.gpu_steps, kept);
    ck_assert_uint_eq(tf.gpu_groups, 3 * kept);
    if (ring) {
        /* 8 host spans per step kept: the newest. */
        ck_assert_uint_le(tf.cpu_spans, 8 * ring);
        ck_assert_uint_le(tf.submits, steps);
    } else {
        ck_assert_uint_eq(tf.submits, steps);
        ck_assert_uint_eq(tf.captures, steps);
        ck_assert_uint_eq(tf.compiles_miss, steps ? 1 : 0);
        ck_assert_uint_eq(tf.compiles_hit, steps ? steps - 1 : 0);
    }
    /* By the submit rule one step starts right at its submit. */
    if (trace_cases[_i].uncalibrated)
        ck_assert_msg(fabs(tf.min_lead_us) < 0.0015, "no step starts at its submit (%.3f us)", tf.min_lead_us);
    jv root = jparse_file(path);
    const jv *other = jget(&root, "otherData");
    ck_assert_int_eq(strncmp(jstr(other, "gpu_alignment"), trace_cases[_i].uncalibrated ? "submit" : "calibrated",
                             5), 0);
    ck_assert(jnum(other, "steps_dropped") == steps - kept);
    jfree(&root);
    unlink(path);
}
END_TEST

/* A flush writes the steps so far and tracing goes on; the file is JSON at
 * every flush. The trace also fills the group profile. */
START_TEST(test_trace_flush)
{
    char path[512];
    trace_path(path, sizeof path, "flush");
    loom_rt *rt = rt_make(LOOM_PROFILE_OFF, path, 0);
    fixture fx;
    fixture_make(rt, &fx);
    OK(loom_rt_trace_flush(rt));
    ck_assert_uint_eq(check_trace(path, 3).gpu_steps, 0);
    run_steps(rt, &fx, 2, true);
    OK(loom_rt_wait_idle(rt));
    loom_rt_trace_span(rt, "idle", loom_rt_trace_clock(), 0, NULL, NULL);
    OK(loom_rt_trace_flush(rt));
    trace_facts tf = check_trace(path, 3);
    ck_assert_uint_eq(tf.gpu_steps, 2);
    ck_assert_uint_eq(tf.gpu_groups, 6);
    /* The trace's timestamps feed the group profile too. */
    loom_graph *g = diamond(&fx);
    loom_plan *plan = NULL;
    loom_rt_program *p = NULL;
    OK(loom_rt_compile(rt, g, NULL, &plan, NULL));
    OK(loom_rt_plan_program(rt, plan, &p));
    loom_rt_profile prof;
    OK(loom_rt_profile_get(rt, p, &prof));
    ck_assert_uint_eq(prof.steps, 2);
    ck_assert_uint_eq(prof.groups, 3);
    loom_plan_release(plan);
    loom_graph_destroy(g);
    run_steps(rt, &fx, 1, false);   /* a hit: the plan cache outlives the flush */
    OK(loom_rt_wait_idle(rt));
    loom_rt_trace_span(rt, "idle", loom_rt_trace_clock(), 0, NULL, NULL);
    fixture_free(&fx);
    rt_done(rt);
    tf = check_trace(path, 3);
    ck_assert_uint_eq(tf.gpu_steps, 3);
    ck_assert_uint_eq(tf.compiles_miss, 1);
    unlink(path);
}
END_TEST

/* A path that cannot be written: flush says LOOM_IO, nothing else breaks. */
START_TEST(test_trace_bad_path)
{
    loom_rt *rt = rt_make(LOOM_PROFILE_OFF, "/nonexistent-dir/loom/trace.json", 0);
    RC(loom_rt_trace_flush(rt), LOOM_IO);
    loom_rt_destroy(rt);   /* logs the failure; no validation messages are involved */
}
END_TEST

#ifdef LOOM_TEST_LLAMA
/* The example decoder: its capture and compile spans, one group span per
 * group of its plan per step, and the profile's groups == the plan's. */
START_TEST(test_trace_llama)
{
    char path[512];
    trace_path(path, sizeof path, "llama");
    loom_rt *rt = NULL;
    OK(loom_rt_create(&(loom_rt_desc){ .validate = true, .log = loud_log, .profile = LOOM_PROFILE_GROUPS,
                                       .trace_path = path }, &rt));
    loom_llama_config cfg;
    loom_llama_default_config(&cfg);
    cfg.n_layers = 2;
    loom_llama_weights *w = NULL;
    loom_llama *m = NULL;
    OK(loom_llama_weights_create(&cfg, &w));
    OK(loom_llama_create(rt, w, &(loom_llama_desc){ .chain = true }, &m));
    const uint32_t steps = 3;
    uint32_t tok = 1;
    for (uint32_t i = 0; i < steps; i++)
        OK(loom_llama_step(m, tok, i, NULL, &tok));
    OK(loom_rt_wait_idle(rt));
    loom_rt_trace_span(rt, "idle", loom_rt_trace_clock(), 0, NULL, NULL);
    const loom_plan_stats *st = loom_plan_get_stats(loom_llama_plan(m));
    loom_rt_profile prof;
    OK(loom_rt_profile_get(rt, loom_llama_program(m), &prof));
    ck_assert_uint_eq(prof.groups, st->groups);
    ck_assert_uint_eq(prof.groups, st->barriers + 1);
    ck_assert_uint_eq(prof.steps, steps);
    uint32_t groups = prof.groups;
    loom_llama_destroy(m);
    loom_llama_weights_destroy(w);
    rt_done(rt);
    trace_facts tf = check_trace(path, groups);
    ck_assert_uint_eq(tf.gpu_steps, steps);
    ck_assert_uint_eq(tf.gpu_groups, (size_t)groups * steps);
    ck_assert_uint_eq(tf.captures, steps);
    ck_assert_uint_eq(tf.compiles_miss, 1);
    ck_assert_uint_eq(tf.compiles_hit, steps - 1);
    unlink(path);
}
END_TEST
#endif

static Suite *profile_suite(void)
{
    Suite *s = suite_create("profile");
    struct { const char *name; const TTest *test; } cases[] = {
        { "profile_groups", test_profile_groups },
        { "profile_nodes", test_profile_nodes },
        { "profile_off", test_profile_off },
        { "trace_flush", test_trace_flush },
        { "trace_bad_path", test_trace_bad_path },
#ifdef LOOM_TEST_LLAMA
        { "trace_llama", test_trace_llama },
#endif
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
    TCase *tc = tcase_create("trace_file");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_trace_file, 0, (int)(sizeof trace_cases / sizeof trace_cases[0]));
    suite_add_tcase(s, tc);
    return s;
}

void loom_test_register(loom_test_runner *r, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    loom_test_add_suite(r, profile_suite());
}
