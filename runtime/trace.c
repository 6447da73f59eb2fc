/* The trace: a Chrome trace-event JSON file (Perfetto and chrome://tracing
 * open it) of the steps a runtime ran. Two tracks: the host thread, with
 * spans for capture (the frontend's, via loom_rt_trace_span), compile,
 * record, submit and wait; and the GPU queue, with a span per step holding
 * a span per concurrency group.
 *
 * GPU time comes from the group timestamps (profile.c) and is put on the
 * host clock (CLOCK_MONOTONIC) by VK_EXT_calibrated_timestamps where the
 * device offers it, re-calibrated every CALIBRATE_NS; otherwise by one
 * offset for the whole file, the smallest that starts no step before its
 * submit. The file's otherData says which.
 *
 * Memory is bounded: the newest trace_steps steps (a ring; 1024 by default)
 * and 8 host spans per step. The file is written whole, beside its final
 * name and then renamed, on loom_rt_trace_flush and loom_rt_destroy. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "internal.h"

#define DEFAULT_STEPS 1024u
#define MAX_STEPS (1u << 20)
#define SPANS_PER_STEP 8u
#define CALIBRATE_NS (100ull * 1000 * 1000)
#define TEXT 24u

enum { PID = 1, TID_CPU = 1, TID_GPU = 2 };

typedef struct span {
    uint64_t t0, t1, step;   /* host ns; step 0: none */
    char name[TEXT], key[TEXT], value[TEXT];
} span;

typedef struct gstep {
    uint64_t step, submit_ns;
    rt_groups *groups;       /* referenced */
    int64_t *ns;             /* groups->n + 1 boundaries: host ns if on_host, else GPU ns since tick0 */
    uint32_t cap;
    bool on_host;
} gstep;

struct rt_trace {
    char *path;
    gstep *steps;
    uint32_t cap_steps, n_steps, next_step;
    span *spans;
    uint32_t cap_spans, n_spans, next_span;
    uint64_t steps_seen, spans_seen;
    /* Calibration: (cal_tick, cal_host) read together. */
    bool want_calibration;
    PFN_vkGetCalibratedTimestampsEXT calibrate;
    uint64_t cal_tick, cal_host, cal_at, max_deviation, calibrations;
    uint64_t tick0;          /* uncalibrated: GPU ns are counted from here */
    bool have_tick0;
    uint32_t valid_bits;
    uint64_t created_ns;
};

uint64_t rt_trace_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t loom_rt_trace_clock(void) { return rt_trace_now(); }

bool loom_rt_tracing(const loom_rt *rt) { return rt && rt->trace; }

/* ---- setup -------------------------------------------------------------- */

loom_result rt_trace_create(loom_rt *rt, const char *path, uint32_t steps)
{
    if (!path)
        path = getenv("LOOM_TRACE");
    if (!path || !*path)
        return LOOM_OK;
    if (steps > MAX_STEPS)
        return loom_fail(LOOM_INVALID_ARGUMENT, "trace: trace_steps %u exceeds %u", steps, MAX_STEPS);
    rt_trace *t = rt_alloc_bytes(rt, sizeof *t);
    if (!t)
        return loom_fail(LOOM_OUT_OF_MEMORY, "trace: out of memory");
    memset(t, 0, sizeof *t);
    rt->trace = t;
    t->cap_steps = steps ? steps : DEFAULT_STEPS;
    t->cap_spans = t->cap_steps * SPANS_PER_STEP;
    t->path = rt_strdup(rt, path);
    t->steps = rt_alloc_bytes(rt, (size_t)t->cap_steps * sizeof *t->steps);
    t->spans = rt_alloc_bytes(rt, (size_t)t->cap_spans * sizeof *t->spans);
    if (!t->path || !t->steps || !t->spans)
        return loom_fail(LOOM_OUT_OF_MEMORY, "trace: out of memory for %u steps", t->cap_steps);
    memset(t->steps, 0, (size_t)t->cap_steps * sizeof *t->steps);
    t->created_ns = rt_trace_now();
    return LOOM_OK;
}

static bool has_domains(loom_rt *rt)
{
    PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT domains =
        (PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT)vkGetInstanceProcAddr(
            rt->instance, "vkGetPhysicalDeviceCalibrateableTimeDomainsEXT");
    VkTimeDomainEXT d[8];
    uint32_t n = 8;
    if (!domains || domains(rt->phys, &n, d) < 0)
        return false;
    bool device = false, mono = false;
    for (uint32_t i = 0; i < n; i++) {
        device |= d[i] == VK_TIME_DOMAIN_DEVICE_EXT;
        mono |= d[i] == VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT;
    }
    return device && mono;
}

const char *rt_trace_device_extension(loom_rt *rt)
{
    if (!rt->trace)
        return NULL;
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(rt->phys, NULL, &n, NULL) != VK_SUCCESS || !n)
        return NULL;
    VkExtensionProperties *e = rt_alloc_bytes(rt, n * sizeof *e);
    bool found = false;
    if (e && vkEnumerateDeviceExtensionProperties(rt->phys, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = !strcmp(e[i].extensionName, VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME);
    rt_free_bytes(rt, e, n * sizeof *e);
    rt->trace->want_calibration = found && has_domains(rt);
    return rt->trace->want_calibration ? VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME : NULL;
}

static bool calibrate(loom_rt *rt, rt_trace *t)
{
    VkCalibratedTimestampInfoEXT info[2] = {
        { .sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT, .timeDomain = VK_TIME_DOMAIN_DEVICE_EXT },
        { .sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT, .timeDomain = VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT },
    };
    uint64_t ts[2], deviation = 0;
    if (!t->calibrate || t->calibrate(rt->device, 2, info, ts, &deviation) != VK_SUCCESS)
        return false;
    t->cal_tick = ts[0];
    t->cal_host = ts[1];
    t->cal_at = ts[1];
    t->calibrations++;
    if (deviation > t->max_deviation)
        t->max_deviation = deviation;
    return true;
}

void rt_trace_device_ready(loom_rt *rt)
{
    rt_trace *t = rt->trace;
    if (!t)
        return;
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(rt->phys, &n, NULL);
    VkQueueFamilyProperties q[16];
    n = n > 16 ? 16 : n;
    vkGetPhysicalDeviceQueueFamilyProperties(rt->phys, &n, q);
    t->valid_bits = rt->queue_family < n ? q[rt->queue_family].timestampValidBits : 64;
    if (t->valid_bits == 0)
        rt_log(rt, LOOM_LOG_WARN, "trace: the queue has no timestamps; the GPU track will be wrong");
    if (t->want_calibration)
        t->calibrate = (PFN_vkGetCalibratedTimestampsEXT)vkGetDeviceProcAddr(rt->device,
                                                                            "vkGetCalibratedTimestampsEXT");
    if (t->want_calibration && !calibrate(rt, t))
        t->calibrate = NULL;
}

void rt_trace_test_uncalibrated(loom_rt *rt)
{
    if (rt && rt->trace)
        rt->trace->calibrate = NULL;
}

/* ---- recording ---------------------------------------------------------- */

static void copy_text(char *dst, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    n = n < TEXT - 1 ? n : TEXT - 1;
    if (n)
        memcpy(dst, src, n);
    dst[n] = 0;
}

void rt_trace_cpu(loom_rt *rt, const char *name, uint64_t t0, uint64_t t1, uint64_t step, const char *key,
                  const char *value)
{
    rt_trace *t = rt->trace;
    span *s = &t->spans[t->next_span];
    t->next_span = (t->next_span + 1) % t->cap_spans;
    t->n_spans += t->n_spans < t->cap_spans;
    t->spans_seen++;
    s->t0 = t0;
    s->t1 = t1 > t0 ? t1 : t0;
    s->step = step;
    copy_text(s->name, name);
    copy_text(s->key, key && value ? key : NULL);
    copy_text(s->value, key && value ? value : NULL);
}

void loom_rt_trace_span(loom_rt *rt, const char *name, uint64_t begin_ns, uint64_t end_ns, const char *key,
                        const char *value)
{
    if (rt && rt->trace && name)
        rt_trace_cpu(rt, name, begin_ns, end_ns ? end_ns : rt_trace_now(), 0, key, value);
}

/* Ticks since `from`, sign kept, for a counter of valid_bits bits. */
static int64_t tick_delta(const rt_trace *t, uint64_t tick, uint64_t from)
{
    uint64_t d = tick - from;
    if (t->valid_bits && t->valid_bits < 64) {
        unsigned shift = 64 - t->valid_bits;
        return (int64_t)(d << shift) >> shift;
    }
    return (int64_t)d;
}

void rt_trace_gpu(loom_rt *rt, loom_rt_program *p, uint64_t step, uint64_t submit_ns, const uint64_t *ticks)
{
    rt_trace *t = rt->trace;
    rt_groups *gr = p->groups;
    gstep *s = &t->steps[t->next_step];
    if (s->cap < gr->n + 1) {
        int64_t *ns = rt_alloc_bytes(rt, (size_t)(gr->n + 1) * sizeof *ns);
        if (!ns)
            return;   /* this step is left out; the trace stays consistent */
        rt_free_bytes(rt, s->ns, (size_t)s->cap * sizeof *s->ns);
        s->ns = ns;
        s->cap = gr->n + 1;
    }
    t->next_step = (t->next_step + 1) % t->cap_steps;
    t->n_steps += t->n_steps < t->cap_steps;
    t->steps_seen++;
    rt_groups_unref(rt, s->groups);
    gr->refs++;
    s->groups = gr;
    s->step = step;
    s->submit_ns = submit_ns;
    if (t->calibrate && rt_trace_now() - t->cal_at > CALIBRATE_NS)
        calibrate(rt, t);
    s->on_host = t->calibrate != NULL;
    if (!s->on_host && !t->have_tick0) {
        t->tick0 = ticks[0];
        t->have_tick0 = true;
    }
    double period = rt->props.limits.timestampPeriod;
    uint64_t from = s->on_host ? t->cal_tick : t->tick0;
    int64_t base = s->on_host ? (int64_t)t->cal_host : 0;
    for (uint32_t g = 0; g <= gr->n; g++) {
        uint64_t tick = ticks[g ? gr->end_query[g - 1] : 0];
        s->ns[g] = base + (int64_t)((double)tick_delta(t, tick, from) * period);
    }
}

/* ---- writing ------------------------------------------------------------ */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* Microseconds with ns digits, from integer ns: exact, so spans nest. */
static void json_us(FILE *f, uint64_t ns) { fprintf(f, "%llu.%03llu", (unsigned long long)(ns / 1000), (unsigned long long)(ns % 1000)); }

static void event_head(FILE *f, const char *name, const char *cat, int tid, uint64_t ts, uint64_t dur)
{
    fputs(",\n{\"name\":", f);
    json_str(f, name);
    fprintf(f, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", cat, PID, tid);
    json_us(f, ts);
    fputs(",\"dur\":", f);
    json_us(f, dur);
}

static int cmp_span(const void *a, const void *b)
{
    const span *x = *(const span *const *)a, *y = *(const span *const *)b;
    if (x->t0 != y->t0)
        return x->t0 < y->t0 ? -1 : 1;
    uint64_t dx = x->t1 - x->t0, dy = y->t1 - y->t0;   /* the enclosing span first */
    return dx > dy ? -1 : dx < dy;
}

static int cmp_step(const void *a, const void *b)
{
    const gstep *x = *(const gstep *const *)a, *y = *(const gstep *const *)b;
    return x->step < y->step ? -1 : x->step > y->step;
}

/* Where GPU ns not on the host clock go: the smallest offset that starts no
 * step before its submit. */
static int64_t submit_offset(gstep **st, uint32_t n)
{
    int64_t off = 0;
    bool any = false;
    for (uint32_t i = 0; i < n; i++)
        if (!st[i]->on_host) {
            int64_t need = (int64_t)st[i]->submit_ns - st[i]->ns[0];
            off = !any || need > off ? need : off;
            any = true;
        }
    return off;
}

static void write_metadata(FILE *f, const loom_rt *rt)
{
    fputs("{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":", f);
    char name[300];
    snprintf(name, sizeof name, "loom on %s", rt->props.deviceName);
    json_str(f, name);
    fputs("}}", f);
    static const struct { int tid; const char *name; } tracks[] = {
        { TID_CPU, "CPU: host thread (capture, compile, record, submit, wait)" },
        { TID_GPU, "GPU: queue (steps, concurrency groups)" },
    };
    for (int i = 0; i < 2; i++) {
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", PID,
                tracks[i].tid);
        json_str(f, tracks[i].name);
        fprintf(f, "}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":"
                "{\"sort_index\":%d}}", PID, tracks[i].tid, tracks[i].tid);
    }
}

static void write_spans(FILE *f, span **sp, uint32_t n, uint64_t origin)
{
    for (uint32_t i = 0; i < n; i++) {
        const span *s = sp[i];
        event_head(f, s->name, "cpu", TID_CPU, s->t0 - origin, s->t1 - s->t0);
        bool args = s->step || s->key[0];
        if (args)
            fputs(",\"args\":{", f);
        if (s->step)
            fprintf(f, "\"step\":%llu%s", (unsigned long long)s->step, s->key[0] ? "," : "");
        if (s->key[0]) {
            json_str(f, s->key);
            fputc(':', f);
            json_str(f, s->value);
        }
        fputs(args ? "}}" : "}", f);
    }
}

/* One step and its groups. Steps never overlap on the track: a step that
 * calibration error puts before the previous step's end moves to it. */
static void write_step(FILE *f, const gstep *s, int64_t offset, uint64_t origin, uint64_t *prev_end)
{
    const rt_groups *gr = s->groups;
    int64_t shift = s->on_host ? 0 : offset;
    if ((uint64_t)(s->ns[0] + shift) < *prev_end)
        shift += (int64_t)(*prev_end - (uint64_t)(s->ns[0] + shift));
    uint64_t b0 = (uint64_t)(s->ns[0] + shift), end = (uint64_t)(s->ns[gr->n] + shift);
    char name[40];
    snprintf(name, sizeof name, "step %llu", (unsigned long long)s->step);
    event_head(f, name, "gpu.step", TID_GPU, b0 - origin, end - b0);
    fprintf(f, ",\"args\":{\"step\":%llu,\"program\":", (unsigned long long)s->step);
    json_str(f, gr->program);
    fprintf(f, ",\"groups\":%u,\"submit_to_start_us\":", gr->n);
    if (b0 >= s->submit_ns)
        json_us(f, b0 - s->submit_ns);
    else
        fputs("0", f);
    fputs("}}", f);
    for (uint32_t g = 0; g < gr->n; g++) {
        uint64_t a = (uint64_t)(s->ns[g] + shift), b = (uint64_t)(s->ns[g + 1] + shift);
        event_head(f, gr->text + gr->label[g], "gpu.group", TID_GPU, a - origin, b - a);
        fprintf(f, ",\"args\":{\"step\":%llu,\"group\":%u,\"first_node\":%u,\"nodes\":%u,\"dispatches\":%u}}",
                (unsigned long long)s->step, g, gr->first[g], gr->first[g + 1] - gr->first[g], gr->dispatches[g]);
    }
    *prev_end = end;
}

static void write_other(FILE *f, const loom_rt *rt, const rt_trace *t, uint64_t origin, int64_t offset)
{
    fputs("\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"device\":", f);
    json_str(f, rt->props.deviceName);
    fprintf(f, ",\"clock\":\"CLOCK_MONOTONIC; ts and dur in microseconds from origin_ns\",\"origin_ns\":%llu",
            (unsigned long long)origin);
    fputs(",\"gpu_alignment\":", f);
    if (t->calibrate) {
        json_str(f, "calibrated: VK_EXT_calibrated_timestamps (device, CLOCK_MONOTONIC) pairs, re-read every "
                    "100 ms; ticks x timestamp_period_ns from the latest pair");
        fprintf(f, ",\"calibrations\":%llu,\"calibration_max_deviation_ns\":%llu",
                (unsigned long long)t->calibrations, (unsigned long long)t->max_deviation);
    } else {
        json_str(f, "submit: no calibrated timestamps; GPU ns (ticks x timestamp_period_ns) shifted by one offset, "
                    "the smallest that starts no step before the host submitted it");
        fprintf(f, ",\"submit_offset_ns\":%lld", (long long)offset);
    }
    fprintf(f, ",\"timestamp_period_ns\":%.6g,\"timestamp_valid_bits\":%u,\"profile_level\":%d",
            rt->props.limits.timestampPeriod, t->valid_bits, (int)rt->profile);
    fprintf(f, ",\"group_time\":\"from the end of the group before (or the step's start) to the group's end: the "
            "barrier in front of a group is in its span\"");
    fprintf(f, ",\"steps_kept\":%u,\"steps_recorded\":%llu,\"steps_dropped\":%llu,\"step_capacity\":%u",
            t->n_steps, (unsigned long long)t->steps_seen, (unsigned long long)(t->steps_seen - t->n_steps),
            t->cap_steps);
    fprintf(f, ",\"spans_kept\":%u,\"spans_dropped\":%llu}}\n", t->n_spans,
            (unsigned long long)(t->spans_seen - t->n_spans));
}

static loom_result write_file(loom_rt *rt, rt_trace *t)
{
    size_t ps = (size_t)t->n_spans * sizeof(span *), gs = (size_t)t->n_steps * sizeof(gstep *);
    span **sp = ps ? rt_alloc_bytes(rt, ps) : NULL;
    gstep **st = gs ? rt_alloc_bytes(rt, gs) : NULL;
    if ((ps && !sp) || (gs && !st)) {
        rt_free_bytes(rt, sp, ps);
        rt_free_bytes(rt, st, gs);
        return loom_fail(LOOM_OUT_OF_MEMORY, "trace: out of memory writing %s", t->path);
    }
    for (uint32_t i = 0; i < t->n_spans; i++)
        sp[i] = &t->spans[i];
    for (uint32_t i = 0, k = 0; i < t->cap_steps && k < t->n_steps; i++)
        if (t->steps[i].groups)
            st[k++] = &t->steps[i];
    if (sp)
        qsort(sp, t->n_spans, sizeof *sp, cmp_span);
    if (st)
        qsort(st, t->n_steps, sizeof *st, cmp_step);
    int64_t offset = submit_offset(st, t->n_steps);
    uint64_t origin = t->created_ns;
    if (t->n_spans && sp[0]->t0 < origin)
        origin = sp[0]->t0;
    for (uint32_t i = 0; i < t->n_steps; i++) {
        int64_t b0 = st[i]->ns[0] + (st[i]->on_host ? 0 : offset);
        if (b0 >= 0 && (uint64_t)b0 < origin)
            origin = (uint64_t)b0;
    }
    size_t len = strlen(t->path);
    char *tmp = rt_alloc_bytes(rt, len + 5);
    FILE *f = NULL;
    if (tmp) {
        memcpy(tmp, t->path, len);
        memcpy(tmp + len, ".tmp", 5);
        f = fopen(tmp, "w");
    }
    loom_result rc = LOOM_OK;
    if (!f) {
        rc = tmp ? loom_fail(LOOM_IO, "trace: cannot write %s", tmp) : loom_fail(LOOM_OUT_OF_MEMORY, "trace");
    } else {
        write_metadata(f, rt);
        write_spans(f, sp, t->n_spans, origin);
        uint64_t prev_end = 0;
        for (uint32_t i = 0; i < t->n_steps; i++)
            write_step(f, st[i], offset, origin, &prev_end);
        write_other(f, rt, t, origin, offset);
        bool bad = ferror(f) != 0;
        bad |= fclose(f) != 0;
        if (bad || rename(tmp, t->path) != 0) {
            remove(tmp);
            rc = loom_fail(LOOM_IO, "trace: writing %s failed", t->path);
        }
    }
    rt_free_bytes(rt, tmp, len + 5);
    rt_free_bytes(rt, sp, ps);
    rt_free_bytes(rt, st, gs);
    return rc;
}

loom_result rt_trace_write(loom_rt *rt) { return rt->trace ? write_file(rt, rt->trace) : LOOM_OK; }

void rt_trace_destroy(loom_rt *rt)
{
    rt_trace *t = rt->trace;
    if (!t)
        return;
    if (rt->device && t->path && t->steps && t->spans && write_file(rt, t))
        rt_log(rt, LOOM_LOG_ERROR, "%s", loom_last_error());
    if (t->steps)
        for (uint32_t i = 0; i < t->cap_steps; i++) {
            rt_groups_unref(rt, t->steps[i].groups);
            rt_free_bytes(rt, t->steps[i].ns, (size_t)t->steps[i].cap * sizeof *t->steps[i].ns);
        }
    rt_free_bytes(rt, t->steps, (size_t)t->cap_steps * sizeof *t->steps);
    rt_free_bytes(rt, t->spans, (size_t)t->cap_spans * sizeof *t->spans);
    rt_free_bytes(rt, t->path, t->path ? strlen(t->path) + 1 : 0);
    rt_free_bytes(rt, t, sizeof *t);
    rt->trace = NULL;
}
