/* llama-peer: llama.cpp's side of loom's decode comparison, against the
 * prebuilt llama.cpp libraries bench/peer/setup.sh fetches (README.md next
 * to this file). A benchmark tool only: nothing in loom links it.
 *
 *   bench FILE.gguf    greedy single-token decode, all layers on the GPU,
 *                      flash attention on: warm up until two successive
 *                      200-step windows agree within 1% (at most 10 s), then
 *                      time --tokens steps from position 0; --pp N also times
 *                      one N-token prompt batch
 *   tokens FILE.gguf   greedy generation from --prompt-ids: the generated ids
 *                      and each step's margin between the two largest logits
 *   quantize IN OUT T  llama_model_quantize to q8_0, q4_0 or q4_k_m
 *   devices            the devices the backends found
 *
 * Exit: 0 success, 1 failure, 2 bad usage. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "llama.h"

#define WINDOW 200          /* warm-up window, steps */
#define WINDOW_AGREE 0.01   /* successive windows within 1% */
#define WARMUP_CAP_S 10.0
#define PP_REPS 9
#define PP_WARM_S 1.5   /* untimed prompt batches back to back before the timed ones */
#define MAX_PROMPT 4096

typedef struct opts {
    const char *cmd, *model, *out, *qtype;
    int tokens, ctx, pp, steps, threads, n_prompt;
    int prompt[MAX_PROMPT];
    int json, cpu, verbose, serial;
} opts;

static int verbose_log;

/* llama.cpp's log, errors only unless --verbose; a continuation line
 * follows the decision made for the line it continues. */
static void log_cb(enum ggml_log_level level, const char *text, void *user)
{
    static int last_shown;
    (void)user;
    int show = level == GGML_LOG_LEVEL_CONT ? last_shown : verbose_log || level >= GGML_LOG_LEVEL_ERROR;
    last_shown = show;
    if (show)
        fputs(text, stderr);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: llama-peer bench FILE.gguf [--tokens N] [--ctx N] [--pp N] [--json]\n"
            "       llama-peer tokens FILE.gguf --prompt-ids 1,2,3 --steps N [--serial] [--ctx N] [--json]\n"
            "       llama-peer quantize IN.gguf OUT.gguf q8_0|q4_0|q4_k_m\n"
            "       llama-peer devices\n"
            "  --tokens N      timed decode steps (default 512)\n"
            "  --ctx N         context (KV cache) size (default 512; positions cycle through it)\n"
            "  --pp N          also time one N-token prompt batch (e.g. 512: pp512)\n"
            "  --prompt-ids L  prompt token ids, comma-separated\n"
            "  --steps N       tokens to generate (default 16)\n"
            "  --serial        feed the prompt one token per decode, as loom's llama-decode does\n"
            "                  (default: one batch)\n"
            "  --cpu           no GPU: every layer on the CPU backend\n"
            "  --threads N     CPU threads (default: llama.cpp's default, at most the CPUs online)\n"
            "  --json          one JSON object on the last line of stdout\n"
            "  --verbose       llama.cpp's own log on stderr\n");
}

static int parse_int(const char *s, int lo, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s < '0' || *s > '9' || *end || v < lo || v > INT_MAX)
        return 0;
    *out = (int)v;
    return 1;
}

static int parse_ids(const char *s, opts *o)
{
    o->n_prompt = 0;
    for (;;) {
        char *end;
        long v = strtol(s, &end, 10);
        if (*s < '0' || *s > '9' || v > INT_MAX || o->n_prompt == MAX_PROMPT || (*end && *end != ','))
            return 0;
        o->prompt[o->n_prompt++] = (int)v;
        if (!*end)
            return 1;
        s = end + 1;
    }
}

static int bad(const char *what, const char *value)
{
    fprintf(stderr, "llama-peer: %s%s%s\n", what, value ? " " : "", value ? value : "");
    usage(stderr);
    return 2;
}

/* Returns -1 to go on, else the exit code. */
static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){ .tokens = 512, .ctx = 512, .steps = 16 };
    if (argc < 2)
        return bad("needs a command", NULL);
    o->cmd = argv[1];
    if (!strcmp(o->cmd, "-h") || !strcmp(o->cmd, "--help")) {
        usage(stdout);
        return 0;
    }
    int want = !strcmp(o->cmd, "quantize") ? 3 : !strcmp(o->cmd, "devices") ? 0 : 1, got = 0;
    if (strcmp(o->cmd, "bench") && strcmp(o->cmd, "tokens") && strcmp(o->cmd, "quantize") && strcmp(o->cmd, "devices"))
        return bad("unknown command", o->cmd);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (a[0] != '-') {
            const char **slot[3] = { &o->model, &o->out, &o->qtype };
            if (got == want)
                return bad("too many arguments at", a);
            *slot[got++] = a;
            continue;
        }
        if (!strcmp(a, "--json"))
            o->json = 1;
        else if (!strcmp(a, "--cpu"))
            o->cpu = 1;
        else if (!strcmp(a, "--verbose"))
            o->verbose = 1;
        else if (!strcmp(a, "--serial"))
            o->serial = 1;
        else if (!v)
            return bad(a, "is not an option, or needs a value");
        else if (!strcmp(a, "--tokens") ? !parse_int(v, 1, &o->tokens)
                 : !strcmp(a, "--ctx")  ? !parse_int(v, 16, &o->ctx)
                 : !strcmp(a, "--pp")   ? !parse_int(v, 1, &o->pp)
                 : !strcmp(a, "--steps") ? !parse_int(v, 1, &o->steps)
                 : !strcmp(a, "--threads") ? !parse_int(v, 1, &o->threads)
                 : !strcmp(a, "--prompt-ids") ? !parse_ids(v, o)
                                             : 1)
            return bad("bad option or value:", a);
        else
            i++;
    }
    if (got != want)
        return bad("missing arguments for", o->cmd);
    if (!strcmp(o->cmd, "tokens") && !o->n_prompt)
        return bad("tokens needs --prompt-ids", NULL);
    return -1;
}

/* ---- backends and devices ------------------------------------------------ */

/* The backends are shared objects next to this program (GGML_BACKEND_DL):
 * load every one found there, whatever the working directory. */
static void load_backends(void)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = 0;
        ggml_backend_load_all_from_path(exe);
    } else {
        ggml_backend_load_all();
    }
}

static const char *dev_type_name(enum ggml_backend_dev_type t)
{
    switch (t) {
    case GGML_BACKEND_DEVICE_TYPE_CPU:
        return "cpu";
    case GGML_BACKEND_DEVICE_TYPE_GPU:
        return "gpu";
    case GGML_BACKEND_DEVICE_TYPE_IGPU:
        return "igpu";
    default:
        return "other";
    }
}

/* The device the layers go to: the first GPU (integrated ones too, as
 * llama.cpp takes them when there is no other), or NULL for the CPU. */
static ggml_backend_dev_t gpu_device(const opts *o)
{
    if (o->cpu)
        return NULL;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
            ggml_backend_dev_t d = ggml_backend_dev_get(i);
            enum ggml_backend_dev_type t = ggml_backend_dev_type(d);
            if (t == (pass ? GGML_BACKEND_DEVICE_TYPE_IGPU : GGML_BACKEND_DEVICE_TYPE_GPU))
                return d;
        }
    return NULL;
}

static void device_label(const opts *o, char *buf, size_t n)
{
    ggml_backend_dev_t d = gpu_device(o);
    if (d)
        snprintf(buf, n, "%s (%s)", ggml_backend_dev_description(d), ggml_backend_dev_name(d));
    else
        snprintf(buf, n, "CPU%s", o->cpu ? "" : " (no GPU device found)");
}

static int cmd_devices(void)
{
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t d = ggml_backend_dev_get(i);
        size_t free_b = 0, total_b = 0;
        ggml_backend_dev_memory(d, &free_b, &total_b);
        printf("%zu: %s (%s), %s, %.1f GiB\n", i, ggml_backend_dev_name(d), ggml_backend_dev_description(d),
               dev_type_name(ggml_backend_dev_type(d)), (double)total_b / (1 << 30));
    }
    return 0;
}

/* ---- model and context --------------------------------------------------- */

typedef struct peer {
    struct llama_model *model;
    struct llama_context *ctx;
    int n_vocab, n_ctx, pos;
    int gpu;               /* layers on a GPU */
    llama_token tok;
    char device[256], desc[128];
} peer;

static void peer_free(peer *p)
{
    if (p->ctx)
        llama_free(p->ctx);
    if (p->model)
        llama_model_free(p->model);
}

/* All layers on the GPU (none with --cpu), flash attention on, batches of
 * up to batch tokens. */
static int peer_open(peer *p, const opts *o, int n_ctx, int batch)
{
    static ggml_backend_dev_t no_devices[1] = { NULL };
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = o->cpu ? 0 : -1;
    if (o->cpu)
        mp.devices = no_devices;
    *p = (peer){ .n_ctx = n_ctx, .tok = 1, .gpu = gpu_device(o) != NULL };
    device_label(o, p->device, sizeof p->device);
    p->model = llama_model_load_from_file(o->model, mp);
    if (!p->model) {
        fprintf(stderr, "llama-peer: cannot load %s (--verbose says why)\n", o->model);
        return 0;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = cp.n_ubatch = (uint32_t)batch;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    /* llama.cpp's default, but no more threads than CPUs: spinning threads
     * sharing a core slow a CPU decode down many times over. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = o->threads ? o->threads : cpus > 0 && cpus < cp.n_threads ? (int)cpus : cp.n_threads;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.no_perf = true;
    p->ctx = llama_init_from_model(p->model, cp);
    if (!p->ctx) {
        fprintf(stderr, "llama-peer: cannot make a context of %d for %s (--verbose says why)\n", n_ctx, o->model);
        peer_free(p);
        return 0;
    }
    p->n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(p->model));
    p->n_ctx = (int)llama_n_ctx(p->ctx);
    llama_model_desc(p->model, p->desc, sizeof p->desc);
    return 1;
}

static void peer_reset(peer *p)
{
    llama_memory_clear(llama_get_memory(p->ctx), false);
    p->pos = 0;
}

/* Index of the largest logit; *margin: its lead over the next largest,
 * *second: that one's index. */
static int argmax(const float *l, int n, float *margin, int *second)
{
    int best = 0, next = -1;
    for (int i = 1; i < n; i++)
        if (l[i] > l[best]) {
            next = best;
            best = i;
        } else if (next < 0 || l[i] > l[next]) {
            next = i;
        }
    if (margin)
        *margin = next >= 0 ? l[best] - l[next] : 0;
    if (second)
        *second = next;
    return best;
}

/* Decodes n tokens from ids at the next positions; the argmax of the last
 * one's logits becomes p->tok (margin and second as argmax's; may be NULL). */
static int peer_decode(peer *p, llama_token *ids, int n, float *margin, int *second)
{
    if (p->pos + n > p->n_ctx) {
        fprintf(stderr, "llama-peer: position %d + %d tokens is past the context of %d\n", p->pos, n, p->n_ctx);
        return 0;
    }
    int rc = llama_decode(p->ctx, llama_batch_get_one(ids, n));
    if (rc) {
        fprintf(stderr, "llama-peer: llama_decode returned %d at position %d\n", rc, p->pos);
        return 0;
    }
    p->pos += n;
    const float *logits = llama_get_logits_ith(p->ctx, -1);
    if (!logits) {
        fprintf(stderr, "llama-peer: no logits at position %d\n", p->pos);
        return 0;
    }
    p->tok = argmax(logits, p->n_vocab, margin, second);
    return 1;
}

/* One greedy step: decode the last argmax; positions cycle through the
 * context (a new sequence each time round). */
static int peer_step(peer *p)
{
    if (p->pos == p->n_ctx)
        peer_reset(p);
    llama_token t = p->tok;
    return peer_decode(p, &t, 1, NULL, NULL);
}

/* ---- bench ---------------------------------------------------------------- */

typedef struct bench_result {
    int warmup_windows;
    double warmup_s, last_us[2];   /* the last two windows, us/token */
    double us_per_token;
    double pp_tps[PP_REPS], pp_median, pp_min, pp_max, pp_warm_s;
    int pp_warm_batches;
} bench_result;

static int timed_steps(peer *p, int n, double *us)
{
    double t0 = now_s();
    for (int i = 0; i < n; i++)
        if (!peer_step(p))
            return 0;
    *us = (now_s() - t0) * 1e6 / n;
    return 1;
}

static int warm_up(peer *p, bench_result *r)
{
    double t0 = now_s(), prev = 0, cur = 0;
    do {
        prev = cur;
        if (!timed_steps(p, WINDOW, &cur))
            return 0;
        r->warmup_windows++;
    } while ((r->warmup_windows < 2 || cur > prev * (1 + WINDOW_AGREE) || cur < prev * (1 - WINDOW_AGREE)) &&
             now_s() - t0 < WARMUP_CAP_S);
    r->warmup_s = now_s() - t0;
    r->last_us[0] = prev;
    r->last_us[1] = cur;
    return 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One batch of ids into an empty cache, finished on the GPU; *s: its
 * seconds, the emptying of the cache not counted. */
static int pp_batch(peer *p, llama_token *ids, int n, double *s)
{
    peer_reset(p);
    double t0 = now_s();
    int ok = peer_decode(p, ids, n, NULL, NULL);
    llama_synchronize(p->ctx);
    *s = now_s() - t0;
    return ok;
}

/* One untimed batch (it compiles its kernels), then untimed batches back
 * to back for PP_WARM_S (at least three), which bring the clock up as
 * loom's --bench-prefill warm-up does, then PP_REPS timed, each into an
 * empty cache. */
static int time_pp(peer *p, int n, bench_result *r)
{
    llama_token *ids = malloc((size_t)n * sizeof *ids);
    if (!ids)
        return 0;
    for (int i = 0; i < n; i++)
        ids[i] = (llama_token)((7u * (unsigned)i + 3u) % (unsigned)p->n_vocab);
    /* The first batch compiles the kernels it needs (seconds): the warm-up
     * is counted from its end. */
    double s;
    int ok = pp_batch(p, ids, n, &s);
    double w0 = now_s();
    for (r->pp_warm_batches = 0; ok && (r->pp_warm_batches < 3 || now_s() - w0 < PP_WARM_S); r->pp_warm_batches++)
        ok = pp_batch(p, ids, n, &s);
    r->pp_warm_s = now_s() - w0;
    for (int rep = 0; rep < PP_REPS && ok; rep++) {
        ok = pp_batch(p, ids, n, &s);
        r->pp_tps[rep] = n / s;
    }
    free(ids);
    double sorted[PP_REPS];
    memcpy(sorted, r->pp_tps, sizeof sorted);
    qsort(sorted, PP_REPS, sizeof sorted[0], cmp_double);
    r->pp_median = sorted[PP_REPS / 2];
    r->pp_min = sorted[0];
    r->pp_max = sorted[PP_REPS - 1];
    return ok;
}

static void json_str(const char *key, const char *s)
{
    printf("\"%s\":\"", key);
    for (; *s; s++)
        if (*s != '"' && *s != '\\' && (unsigned char)*s >= 0x20)
            putchar(*s);
    printf("\"");
}

static void print_bench(const opts *o, const peer *p, const bench_result *r)
{
    printf("llama.cpp %s on %s: %s, %.1f MB, %s, flash attention on, context %d\n", llama_version(), p->device,
           p->desc, llama_model_size(p->model) / 1e6, p->gpu ? "all layers on the GPU" : "CPU only", p->n_ctx);
    printf("warm-up: %d windows of %d steps in %.1f s (last two %.1f and %.1f us/token%s)\n", r->warmup_windows,
           WINDOW, r->warmup_s, r->last_us[0], r->last_us[1],
           r->warmup_s >= WARMUP_CAP_S ? ", stopped at the cap" : "");
    printf("decode: %d tokens from position 0: %.1f us/token, %.1f tokens/s\n", o->tokens, r->us_per_token,
           1e6 / r->us_per_token);
    if (o->pp)
        printf("pp%d: %.1f tokens/s (median of %d, %.1f to %.1f, after one untimed batch and %d more in %.2f s)\n", o->pp,
               r->pp_median, PP_REPS, r->pp_min, r->pp_max, r->pp_warm_batches, r->pp_warm_s);
    if (!o->json)
        return;
    printf("{\"peer\":\"llama.cpp\",");
    json_str("version", llama_version());
    printf(",");
    json_str("device", p->device);
    printf(",");
    json_str("model", o->model);
    printf(",");
    json_str("desc", p->desc);
    printf(",\"gpu_layers\":\"%s\",\"flash_attn\":true,\"ctx\":%d,\"warmup_windows\":%d,\"warmup_s\":%.3f,"
           "\"tokens\":%d,\"us_per_token\":%.2f,\"tokens_per_s\":%.2f",
           p->gpu ? "all" : "none", p->n_ctx, r->warmup_windows, r->warmup_s, o->tokens, r->us_per_token,
           1e6 / r->us_per_token);
    if (o->pp)
        printf(",\"pp\":%d,\"pp_tokens_per_s\":%.2f", o->pp, r->pp_median);
    printf("}\n");
}

static int cmd_bench(const opts *o)
{
    peer p;
    int ctx = o->ctx > o->pp ? o->ctx : o->pp;
    if (!peer_open(&p, o, ctx, o->pp > 512 ? o->pp : 512))
        return 1;
    bench_result r = { 0 };
    int ok = warm_up(&p, &r);
    if (ok) {
        peer_reset(&p);
        ok = timed_steps(&p, o->tokens, &r.us_per_token);
    }
    if (ok && o->pp)
        ok = time_pp(&p, o->pp, &r);
    if (ok)
        print_bench(o, &p, &r);
    peer_free(&p);
    return ok ? 0 : 1;
}

/* ---- tokens --------------------------------------------------------------- */

static int cmd_tokens(const opts *o)
{
    peer p;
    int need = o->n_prompt + o->steps, ctx = o->ctx > need ? o->ctx : need;
    if (!peer_open(&p, o, ctx, o->n_prompt > 512 ? o->n_prompt : 512))
        return 1;
    int *toks = malloc(sizeof *toks * (size_t)o->steps), *seconds = malloc(sizeof *seconds * (size_t)o->steps);
    float *margins = malloc(sizeof *margins * (size_t)o->steps);
    llama_token prompt[MAX_PROMPT];
    int ok = toks && seconds && margins;
    for (int i = 0; i < o->n_prompt; i++)
        prompt[i] = o->prompt[i];
    /* The prompt: one batch, or one decode per id. */
    for (int i = 0; ok && i < o->n_prompt; i += o->serial ? 1 : o->n_prompt)
        ok = peer_decode(&p, prompt + i, o->serial ? 1 : o->n_prompt, &margins[0], &seconds[0]);
    for (int s = 0; ok && s < o->steps; s++) {
        toks[s] = p.tok;
        if (s + 1 < o->steps) {
            llama_token t = p.tok;
            ok = peer_decode(&p, &t, 1, &margins[s + 1], &seconds[s + 1]);
        }
    }
    if (ok) {
        printf("llama.cpp %s on %s: %s; prompt of %d ids (%s), %d steps, flash attention on\n", llama_version(),
               p.device, p.desc, o->n_prompt, o->serial ? "one per decode" : "one batch", o->steps);
        const char *labels[3] = { "tokens:", "second:", "margins:" };
        for (int k = 0; k < 3; k++) {
            printf("%s", labels[k]);
            for (int s = 0; s < o->steps; s++)
                k == 2 ? printf(" %.6g", margins[s]) : printf(" %d", k ? seconds[s] : toks[s]);
            printf("\n");
        }
    }
    if (ok && o->json) {
        printf("{\"peer\":\"llama.cpp\",");
        json_str("device", p.device);
        printf(",\"tokens\":[");
        for (int s = 0; s < o->steps; s++)
            printf("%s%d", s ? "," : "", toks[s]);
        printf("],\"margins\":[");
        for (int s = 0; s < o->steps; s++)
            printf("%s%.6g", s ? "," : "", margins[s]);
        printf("]}\n");
    }
    free(toks);
    free(seconds);
    free(margins);
    peer_free(&p);
    return ok ? 0 : 1;
}

/* ---- quantize ------------------------------------------------------------- */

static int cmd_quantize(const opts *o)
{
    static const struct { const char *name; enum llama_ftype ftype; } types[] = {
        { "q8_0", LLAMA_FTYPE_MOSTLY_Q8_0 },
        { "q4_0", LLAMA_FTYPE_MOSTLY_Q4_0 },
        { "q4_k_m", LLAMA_FTYPE_MOSTLY_Q4_K_M },
    };
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    size_t k = 0;
    while (k < sizeof types / sizeof types[0] && strcmp(types[k].name, o->qtype))
        k++;
    if (k == sizeof types / sizeof types[0])
        return bad("quantize takes q8_0, q4_0 or q4_k_m, not", o->qtype);
    qp.ftype = types[k].ftype;
    qp.nthread = o->threads;   /* 0: every hardware thread */
    double t0 = now_s();
    uint32_t rc = llama_model_quantize(o->model, o->out, &qp);
    if (rc) {
        fprintf(stderr, "llama-peer: llama_model_quantize %s -> %s (%s) returned %u (--verbose says why)\n", o->model,
                o->out, o->qtype, rc);
        return 1;
    }
    printf("quantized %s -> %s (%s) in %.1f s\n", o->model, o->out, o->qtype, now_s() - t0);
    return 0;
}

int main(int argc, char **argv)
{
    opts o;
    int code = parse(argc, argv, &o);
    if (code >= 0)
        return code;
    verbose_log = o.verbose;
    llama_log_set(log_cb, NULL);
    ggml_log_set(log_cb, NULL);
    load_backends();
    llama_backend_init();
    if (!strcmp(o.cmd, "devices"))
        code = cmd_devices();
    else if (!strcmp(o.cmd, "bench"))
        code = cmd_bench(&o);
    else if (!strcmp(o.cmd, "tokens"))
        code = cmd_tokens(&o);
    else
        code = cmd_quantize(&o);
    llama_backend_free();
    return code;
}
