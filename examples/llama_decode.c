/* llama-decode: greedy decoding with the example model, the frontend loop a
 * real one would run: each step is submitted before the previous token is
 * read (tokens chained on the GPU, read behind it from a ring), up to
 * --in-flight steps queued.
 *
 *   default      decode --steps tokens and print them with the plan figures
 *   --check      the CPU reference on every step; exit 1 on any mismatch
 *   --bench      1.5 s of back-to-back warm-up, then the timed steps, and the
 *                copy bandwidth of the same device for the weight-read floor
 *   --dry-run    capture and compile only, no Vulkan device: plan figures
 *   --json       one JSON object on the last line of stdout
 *   --prompt-ids prefill by decode steps: the ids are fed one per step, then
 *                decoding goes on from the last one's argmax (any config)
 *   --max-binding-range BYTES   compile for bindings of at most BYTES (the
 *                device's, or smaller to force row-block splitting; dry run:
 *                no limit unless given here or in LOOM_MAX_BINDING_RANGE)
 *   --profile    GPU time per concurrency group over the decoded steps: the
 *                most expensive groups and the totals by op kind
 *   --profile-nodes  the same from a timestamp after every node, plus the
 *                last step's time by node
 *   --trace FILE Chrome trace-event JSON of the steps (Perfetto)
 *   --model FILE GGUF weights: the shape, the context and every matrix's
 *                dtype come from the file (quantized tensors run as stored)
 *   --wtype T    synthetic weights quantized on the host (f32 ... q4_k_m)
 *   --write-gguf FILE  the model as a GGUF file (each matrix in its own
 *                dtype, as stored), no device: for other engines to run the
 *                same weights
 *
 * A run ends with the awaited-edges line: whether the device rule allowed
 * tagged vectors (loom_rt_info.awaited_edges) and the polled waits that gave
 * up in the process (loom_rt_counters.poll_timeouts), also printed when the
 * run fails, since a poll that gives up fails its step's wait.
 *
 * Exit: 0 success, 1 mismatch, error or validation message, 2 bad usage. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gguf.h"
#include "llama_run.h"

#define TOLERANCE 2e-3f
#define WARMUP_S 1.5
#define BENCH_STEPS 512u
#define PREFILL_REPS 9u   /* timed prefills of --bench-prefill; the median is reported */

#define MAX_PROMPT 4096u

typedef struct opts {
    loom_llama_args shape;
    uint32_t steps, token, in_flight, disable, enable;   /* LOOM_DISABLE_*, LOOM_ENABLE_* */
    uint64_t max_binding_range;   /* 0: the device's (dry run: $LOOM_MAX_BINDING_RANGE, else none) */
    bool check, json, bench, dry_run, quiet, steps_set, token_set, early_log;
    loom_rt_profile_level profile;
    const char *device, *model, *trace, *write_gguf;
    uint32_t prompt[MAX_PROMPT], n_prompt;   /* --prompt-ids; 0: start from --token */
    uint32_t prefill_chunk;   /* --prefill-chunk; 0 with --prefill-by-decode */
    uint32_t bench_prefill;   /* --bench-prefill N; 0: not that benchmark */
    uint32_t bench_at;        /* --bench-at P: the timed rows' first position */
    double setup_s[3];        /* wall seconds: the runtime, the weights (made or read), the model on the device */
    bool verify;              /* --verify: its steps put every row through the LM head */
    /* The model run: the synthetic weights of shape.cfg, or --model's file,
     * whose shape then replaces shape.cfg (banner, JSON and figures all
     * describe the model that runs). NULL until made (a dry run of the
     * synthetic shape makes none); shapes only for a dry run of a file. */
    loom_llama_weights *w;
    uint32_t file_context;   /* --model: llama.context_length */
} opts;

/* Steps run: the prompt's (one, --token, without a prompt), then steps - 1
 * more: the last prompt step's argmax is the first generated token. */
static uint32_t prompt_len(const opts *o) { return o->n_prompt ? o->n_prompt : 1; }
static uint32_t total_steps(const opts *o) { return prompt_len(o) + o->steps - 1; }

/* The forms that are not the default: flag, bit, header label, JSON key. */
static const struct {
    const char *flag;
    uint32_t bit;
    const char *label, *key;
} FORMS[] = {
    { "--half-shares", LOOM_ENABLE_HALF_SHARES, "half shares", "half_shares" },
    { "--half-stage", LOOM_ENABLE_HALF_STAGE, "half stage", "half_stage" },
    { "--half-act", LOOM_ENABLE_HALF_ACT, "half FFN output", "half_act" },
    { "--long-rows", LOOM_ENABLE_LONG_ROWS, "long rows", "long_rows" },
    { "--qkv-await", LOOM_ENABLE_QKV_AWAIT, "q/k/v awaited", "qkv_await" },
};
#define N_FORMS (sizeof FORMS / sizeof FORMS[0])

static void usage(FILE *f)
{
    fprintf(f,
            "usage: llama-decode [options]\n"
            "%s"
            "  --steps N             tokens to generate (default 16; --bench: %u timed)\n"
            "  --token T             first token (default 1): the same as --prompt-ids T\n"
            "  --prompt-ids 1,2,3    prompt token ids, prefilled in multi-token steps of at most\n"
            "                        --prefill-chunk ids; generation goes on from the last one's argmax\n"
            "  --prefill-chunk N     rows of one prefill step, 1..%u (default %u; a step of T rows\n"
            "                        replays the plan of the smallest power of two >= T)\n"
            "  --prefill-by-decode   feed the prompt one id per decode step instead\n"
            "  --bench-prefill N     time a prefill of N ids (1 < N < max-seq; --prompt-ids, else ids\n"
            "                        drawn from the seed) after the warm-up, as tokens/s, and the time to\n"
            "                        the first token (prefill + one decode step)\n"
            "  --bench-at P          --bench-prefill's timed rows start at position P, after P ids\n"
            "                        prefilled once, untimed (a verification deep in a context;\n"
            "                        default 0; with --prompt-ids, P + N ids)\n"
            "  --verify              --bench-prefill's steps verify: every row's argmax (speculative\n"
            "                        decoding's check of N drafted tokens)\n"
            "  --device NAME         Vulkan device index or name substring\n"
            "  --check               CPU reference every step; fail on a mismatch\n"
            "  --bench               warm the clock %.1f s, then time the steps back to back\n"
            "  --dry-run             capture and compile only (no device): plan figures\n"
            "  --json                one JSON object on the last line of stdout\n"
            "  --in-flight K         steps in flight (default 3)\n"
            "  --max-binding-range BYTES  bytes one binding may cover (default: the device's\n"
            "                        maxStorageBufferRange, or LOOM_MAX_BINDING_RANGE; a dry run has\n"
            "                        no limit unless given): larger weights are split into row blocks\n"
            "  --no-fuse --no-stage --no-gather --no-reorder --barrier-every --no-cache\n"
            "                        ablations\n"
            "  --early-log           log each step's token at the start of the next step, in\n"
            "                        its first level, not in the LM head's dispatch (collect waits\n"
            "                        a step longer)\n"
            "  --half-shares         f16 weights: the attention's shares that the o-projection\n"
            "                        combines are stored as f16 (LOOM_ENABLE_HALF_SHARES)\n"
            "  --half-stage          f16 weights: the staged norm input the q/k/v, gated FFN and\n"
            "                        LM head read is stored as f16 (LOOM_ENABLE_HALF_STAGE)\n"
            "  --half-act            f16 weights: the gated FFN's output, read by the down\n"
            "                        projection, is stored as f16 (LOOM_ENABLE_HALF_ACT)\n"
            "  --long-rows           f16 weights: residual-add projections whose rows span two\n"
            "                        or more chunks an invocation load two a trip (LOOM_ENABLE_LONG_ROWS)\n"
            "  --qkv-await           the attention polls q/k/v's tagged output instead of waiting at\n"
            "                        a barrier (LOOM_ENABLE_QKV_AWAIT; slower on an H200)\n"
            "  --no-split-k          prompts: no matrix splits its K walk between two workgroups\n"
            "                        a tile where its tiles are too few (LOOM_DISABLE_SPLIT_K)\n"
            "  --model FILE.gguf     GGUF weights: the shape, the context (at most %u unless --max-seq\n"
            "                        says more; --max-seq may only lower the file's) and each matrix's\n"
            "                        type (f32, f16, bf16 as f32, q8_0, q4_0, q4_k, q6_k, mixed per\n"
            "                        tensor) come from the file, so --wtype and the shape flags do not\n"
            "                        apply; quantized tensors go to the GPU as stored. KV caches f16\n"
            "                        unless --kv-f32\n"
            "  --profile             GPU time per concurrency group and per op kind (LOOM_PROFILE=1)\n"
            "  --profile-nodes       also a timestamp after every node (LOOM_PROFILE=2)\n"
            "  --trace FILE.json     Chrome trace of the steps, for Perfetto (LOOM_TRACE=FILE)\n"
            "  --write-gguf FILE     write the model's weights as GGUF (each matrix in its own type, as\n"
            "                        stored; llama.cpp's layout) and exit; no device\n"
            "  --quiet               no per-step lines\n",
            loom_llama_args_help, BENCH_STEPS, LOOM_LLAMA_MAX_ROWS, LOOM_LLAMA_MAX_ROWS, WARMUP_S,
            LOOM_LLAMA_GGUF_DEFAULT_MAX_SEQ);
}

static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s < '0' || *s > '9' || *end)
        return false;
    *out = v;
    return true;
}

/* "1,2,3": at least one id, no empty entries. */
static bool parse_ids(const char *s, opts *o)
{
    o->n_prompt = 0;
    for (;;) {
        const char *e = s;
        while (*e && *e != ',')
            e++;
        char one[16];
        size_t len = (size_t)(e - s);
        if (len == 0 || len >= sizeof one || o->n_prompt == MAX_PROMPT)
            return false;
        memcpy(one, s, len);
        one[len] = 0;
        if (!loom_llama_parse_u32(one, &o->prompt[o->n_prompt++]))
            return false;
        if (!*e)
            return true;
        s = e + 1;
    }
}

static int bad(const char *what, const char *value)
{
    fprintf(stderr, "llama-decode: %s%s%s\n", what, value ? " " : "", value ? value : "");
    usage(stderr);
    return 2;
}

/* Every prompt id (or --token) must name a token of the vocabulary:
 * returns -1 when they do, else 2 (usage) with the first one that does not. */
static int check_ids(const opts *o, uint32_t vocab)
{
    if (!o->n_prompt && o->token >= vocab) {
        fprintf(stderr, "llama-decode: --token %u is not a token id: the vocabulary has %u (ids 0..%u)\n", o->token,
                vocab, vocab - 1);
        return 2;
    }
    for (uint32_t i = 0; i < o->n_prompt; i++)
        if (o->prompt[i] >= vocab) {
            fprintf(stderr, "llama-decode: --prompt-ids: id %u (position %u) is not a token id: the vocabulary has "
                    "%u (ids 0..%u)\n", o->prompt[i], i, vocab, vocab - 1);
            return 2;
        }
    return -1;
}

/* The steps and ids fit the model's context and vocabulary: -1 when they
 * do, else 2 (usage). */
static int check_run(const opts *o)
{
    const loom_llama_config *c = &o->shape.cfg;
    if (o->bench_prefill && (o->bench_at >= c->max_seq || o->bench_prefill >= c->max_seq - o->bench_at)) {
        fprintf(stderr, "llama-decode: --bench-at %u --bench-prefill %u needs max-seq above their sum (%u): the "
                "first generated token takes the position after the prompt\n", o->bench_at, o->bench_prefill,
                c->max_seq);
        return 2;
    }
    if (o->steps == 0 || (o->check && total_steps(o) > c->max_seq) || prompt_len(o) > c->max_seq) {
        fprintf(stderr, "llama-decode: need steps >= 1, a prompt of at most max-seq %u ids, and with --check "
                "prompt + steps - 1 <= max-seq (got %u + %u - 1)\n", c->max_seq, prompt_len(o), o->steps);
        return 2;
    }
    return check_ids(o, c->vocab);
}

/* Returns -1 to go on, else the exit code. */
static int parse(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->steps = 16;
    o->token = 1;
    o->prefill_chunk = LOOM_LLAMA_MAX_ROWS;
    if (loom_llama_args_begin(argc, argv, &o->shape))
        return bad(loom_last_error(), NULL);
    static const struct { const char *name; uint32_t bit; } ablations[] = {
        { "--no-fuse", LOOM_DISABLE_FUSE }, { "--no-stage", LOOM_DISABLE_STAGE }, { "--no-gather", LOOM_DISABLE_GATHER },
        { "--no-reorder", LOOM_DISABLE_REORDER },
        { "--barrier-every", LOOM_DISABLE_BARRIERS }, { "--no-cache", LOOM_DISABLE_CACHE },
        { "--no-split-k", LOOM_DISABLE_SPLIT_K },
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int s = loom_llama_args_shape(argc, argv, &i, &o->shape);
        if (s < 0)
            return bad("bad value for", a);
        if (s > 0)
            continue;
        bool flag = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--check")) {
            o->check = true;
        } else if (!strcmp(a, "--json")) {
            o->json = true;
        } else if (!strcmp(a, "--bench")) {
            o->bench = true;
        } else if (!strcmp(a, "--dry-run")) {
            o->dry_run = true;
        } else if (!strcmp(a, "--early-log")) {
            o->early_log = true;
        } else if (!strcmp(a, "--verify")) {
            o->verify = true;
        } else if (!strcmp(a, "--prefill-by-decode")) {
            o->prefill_chunk = 0;
        } else if (!strcmp(a, "--quiet")) {
            o->quiet = true;
        } else if (!strcmp(a, "--profile")) {
            o->profile = o->profile > LOOM_PROFILE_GROUPS ? o->profile : LOOM_PROFILE_GROUPS;
        } else if (!strcmp(a, "--profile-nodes")) {
            o->profile = LOOM_PROFILE_NODES;
        } else {
            flag = false;
            for (size_t k = 0; k < sizeof ablations / sizeof ablations[0]; k++)
                if (!strcmp(a, ablations[k].name)) {
                    o->disable |= ablations[k].bit;
                    flag = true;
                }
            for (size_t k = 0; k < N_FORMS; k++)
                if (!strcmp(a, FORMS[k].flag)) {
                    o->enable |= FORMS[k].bit;
                    flag = true;
                }
        }
        if (flag)
            continue;
        if (i + 1 >= argc)
            return bad(a, "is not an option, or needs a value");
        const char *v = argv[++i];
        if (!strcmp(a, "--steps")) {
            if (!loom_llama_parse_u32(v, &o->steps))
                return bad("bad --steps", v);
            o->steps_set = true;
        } else if (!strcmp(a, "--token")) {
            if (!loom_llama_parse_u32(v, &o->token))
                return bad("bad --token", v);
            o->token_set = true;
        } else if (!strcmp(a, "--in-flight")) {
            if (!loom_llama_parse_u32(v, &o->in_flight) || o->in_flight == 0 || o->in_flight >= LOOM_LLAMA_RING ||
                o->in_flight > 16)
                return bad("--in-flight needs 1..16, got", v);
        } else if (!strcmp(a, "--max-binding-range")) {
            if (!parse_u64(v, &o->max_binding_range) || o->max_binding_range == 0)
                return bad("--max-binding-range needs a byte count above 0, got", v);
        } else if (!strcmp(a, "--device")) {
            o->device = v;
        } else if (!strcmp(a, "--model")) {
            o->model = v;
        } else if (!strcmp(a, "--write-gguf")) {
            o->write_gguf = v;
        } else if (!strcmp(a, "--trace")) {
            o->trace = v;
        } else if (!strcmp(a, "--prefill-chunk")) {
            if (!loom_llama_parse_u32(v, &o->prefill_chunk) || o->prefill_chunk == 0 ||
                o->prefill_chunk > LOOM_LLAMA_MAX_ROWS)
                return bad("--prefill-chunk needs 1..512 rows, got", v);
        } else if (!strcmp(a, "--bench-prefill")) {
            if (!loom_llama_parse_u32(v, &o->bench_prefill) || o->bench_prefill < 2)
                return bad("--bench-prefill needs a prompt of at least 2 ids, got", v);
        } else if (!strcmp(a, "--bench-at")) {
            if (!loom_llama_parse_u32(v, &o->bench_at))
                return bad("--bench-at needs a position, got", v);
        } else if (!strcmp(a, "--prompt-ids")) {
            if (!parse_ids(v, o))
                return bad("--prompt-ids needs comma-separated token ids (at most 4096), got", v);
        } else {
            return bad(a, "is not an option");
        }
    }
    loom_llama_args_finish(&o->shape);
    if (o->bench && !o->steps_set)
        o->steps = BENCH_STEPS;
    if (o->bench && o->check)
        return bad("--bench and --check exclude each other (the reference would idle the GPU)", NULL);
    if (o->n_prompt && o->token_set)
        return bad("--token and --prompt-ids exclude each other (--token T is --prompt-ids T)", NULL);
    if (o->verify && !o->bench_prefill)
        return bad("--verify needs --bench-prefill N", NULL);
    if (o->bench_prefill && (o->bench || o->check || o->dry_run))
        return bad("--bench-prefill excludes --bench, --check and --dry-run", NULL);
    if (o->bench_at && !o->bench_prefill)
        return bad("--bench-at needs --bench-prefill N", NULL);
    if (o->bench_prefill && o->n_prompt && o->n_prompt != o->bench_at + o->bench_prefill)
        return bad("--bench-prefill N with --prompt-ids needs N ids (P + N with --bench-at P)", NULL);
    if (o->write_gguf && o->dry_run)
        return bad("--write-gguf and --dry-run exclude each other (a dry run has no weights to write)", NULL);
    if (o->model && (o->shape.wtype_set || o->shape.shape_set))
        return bad("--model: the shape and the weight types come from the file; --wtype, --f16, --f32 and the "
                   "shape flags (but --max-seq, to lower the context) do not apply", NULL);
    /* With --model the context and vocabulary are the file's: checked once
     * it is read. */
    return o->model ? -1 : check_run(o);
}


/* The weights' type in a word: the synthetic --wtype, or a file's one
 * matrix dtype, or "mixed". */
static const char *wtype_label(const opts *o)
{
    const loom_llama_config *c = &o->shape.cfg;
    if (!o->model)
        return loom_llama_wtype_name(c);
    char types[128];
    loom_llama_describe_types(c, o->w, types, sizeof types);
    return strchr(types, ',') ? "mixed" : loom_dtype_name(c->wtype);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* The weights (unless --model read them) and the model on the device,
 * each timed for the setup line. */
static loom_result make_model(opts *o, loom_rt *rt, const loom_llama_desc *d, loom_llama **m)
{
    double t0 = now_s();
    loom_result rc = o->w ? LOOM_OK : loom_llama_weights_create(&o->shape.cfg, &o->w);
    o->setup_s[1] += now_s() - t0;
    t0 = now_s();
    if (!rc)
        rc = loom_llama_create(rt, o->w, d, m);
    o->setup_s[2] = now_s() - t0;
    return rc;
}

static void print_header(const opts *o, const char *device)
{
    const loom_llama_config *c = &o->shape.cfg;
    char types[160], context[48] = "";
    loom_llama_describe_types(c, o->w, types, sizeof types);
    if (o->model)
        snprintf(context, sizeof context, " (the file's %u)", o->file_context);
    printf("llama-decode on %s: %s %s: dim %u, %u layers, %u/%u heads x %u, ffn %u, vocab %u, context %u%s, "
           "%s weights (%s), %s KV cache; %u steps in flight%s%s%s%s%s%s",
           device, o->model ? "model" : "config", o->model ? o->model : o->shape.config_name, c->dim, c->n_layers,
           c->n_heads, c->n_kv_heads, c->head_dim, c->ffn, c->vocab, c->max_seq, context, wtype_label(o), types,
           loom_dtype_name(c->kvtype), o->in_flight ? o->in_flight : 3,
           o->disable & LOOM_DISABLE_FUSE ? ", no fuse" : "", o->disable & LOOM_DISABLE_REORDER ? ", no reorder" : "",
           o->disable & LOOM_DISABLE_BARRIERS ? ", barrier every dispatch" : "",
           o->disable & LOOM_DISABLE_CACHE ? ", no cache" : "", o->disable & LOOM_DISABLE_SPLIT_K ? ", no split K" : "",
           o->early_log ? ", early log" : "");
    for (size_t k = 0; k < N_FORMS; k++)
        if (o->enable & FORMS[k].bit)
            printf(", %s", FORMS[k].label);
    printf("\n");
    /* Where a benchmark's start goes, before its warm-up. */
    if (o->bench || o->bench_prefill)
        printf("setup: runtime %.2f s, weights %.2f s (%s), model on the device %.2f s\n", o->setup_s[0],
               o->setup_s[1], o->model ? "read" : "made on the host", o->setup_s[2]);
}

static void print_figures(const loom_llama_figures *f, uint64_t binding_limit)
{
    printf("plan: %u captured nodes -> %u dispatches in %u groups, %u fused chains\n", f->captured_nodes,
           f->dispatches, f->groups, f->fused_chains);
    if (binding_limit)
        printf("binding limit: %llu bytes; %u nodes split into row blocks\n", (unsigned long long)binding_limit,
               f->split_nodes);
    /* The plan's lower bound counts levels: a dependency is one whether it
     * is a barrier or awaited in the shader. */
    printf("barriers: %u per token (levels' lower bound %u, barriers and awaited together), %.2f levels per layer\n",
           f->barriers, f->barrier_lower_bound, f->levels_per_layer);
    printf("dependencies per token: %u barriers, %u awaited\n", f->barriers, f->awaited);
    printf("weights read per token: %.1f MB; arena: %.2f MB packed of %.2f MB\n", f->weight_bytes / 1e6,
           f->arena_bytes / 1e6, f->scratch_bytes / 1e6);
}

/* The awaited-edges verdict and the process's polled waits that gave up:
 * the figures a run under load is judged by (bench/load_check.sh). */
static void print_awaits(loom_rt *rt)
{
    loom_rt_info info;
    loom_rt_counters c;
    loom_rt_get_info(rt, &info);
    loom_rt_get_counters(rt, &c);
    printf("awaited edges: %s (%s); %llu poll timeouts\n", info.awaited_edges ? "on" : "off", info.awaited_why,
           (unsigned long long)c.poll_timeouts);
}

/* Numbers that may be unknown (no timestamps): JSON null. */
static void json_num(loom_str *s, const char *key, double v, bool known)
{
    if (known && isfinite(v))
        loom_str_printf(s, ",\"%s\":%.4f", key, v);
    else
        loom_str_printf(s, ",\"%s\":null", key);
}

/* v as a JSON string, or null for NULL. */
static void json_string(loom_str *s, const char *v)
{
    if (!v) {
        loom_str_append(s, "null", 4);
        return;
    }
    loom_str_append(s, "\"", 1);
    for (const char *p = v; *p; p++)
        if (*p == '"' || *p == '\\')
            loom_str_printf(s, "\\%c", *p);
        else if ((unsigned char)*p < 0x20)
            loom_str_printf(s, "\\u%04x", (unsigned)(unsigned char)*p);
        else
            loom_str_append(s, p, 1);
    loom_str_append(s, "\"", 1);
}

/* rt: NULL for a dry run (no awaited-edges fields). */
static void print_json(const opts *o, loom_rt *rt, const char *device, const loom_llama_figures *f,
                       const loom_llama_result *r, double copy_gbps, const uint32_t *tokens)
{
    const loom_llama_config *c = &o->shape.cfg;
    loom_str s;
    loom_str_init(&s, NULL);
    char types[160];
    loom_llama_describe_types(c, o->w, types, sizeof types);
    loom_str_printf(&s, "{\"config\":\"%s\",\"model\":", o->model ? "gguf" : o->shape.config_name);
    json_string(&s, o->model);
    loom_str_append(&s, ",\"device\":", 10);
    json_string(&s, device);
    loom_str_printf(&s, ",\"mode\":\"%s\",\"dim\":%u,\"layers\":%u,\"heads\":%u,\"kv_heads\":%u,\"head_dim\":%u,"
                    "\"ffn\":%u,\"vocab\":%u,\"max_seq\":%u,\"wtype\":\"%s\",\"weight_types\":\"%s\","
                    "\"kvtype\":\"%s\"",
                    o->dry_run ? "dry-run" : o->bench ? "bench" : o->check ? "check" : "decode", c->dim,
                    c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, c->ffn, c->vocab, c->max_seq,
                    wtype_label(o), types, loom_dtype_name(c->kvtype));
    loom_str_printf(&s, ",\"no_fuse\":%s,\"no_reorder\":%s,\"barrier_every\":%s,\"no_cache\":%s,\"no_split_k\":%s",
                    o->disable & LOOM_DISABLE_FUSE ? "true" : "false",
                    o->disable & LOOM_DISABLE_REORDER ? "true" : "false",
                    o->disable & LOOM_DISABLE_BARRIERS ? "true" : "false",
                    o->disable & LOOM_DISABLE_CACHE ? "true" : "false",
                    o->disable & LOOM_DISABLE_SPLIT_K ? "true" : "false");
    loom_str_printf(&s, ",\"early_log\":%s", o->early_log ? "true" : "false");
    for (size_t k = 0; k < N_FORMS; k++)
        loom_str_printf(&s, ",\"%s\":%s", FORMS[k].key, o->enable & FORMS[k].bit ? "true" : "false");
    loom_str_printf(&s, ",\"split_nodes\":%u", f->split_nodes);
    loom_str_printf(&s, ",\"captured_nodes\":%u,\"dispatches\":%u,\"barriers\":%u,\"barrier_lower_bound\":%u,"
                    "\"awaited\":%u,\"levels_per_layer\":%.3f,\"weight_bytes\":%llu,\"arena_bytes\":%llu,\"scratch_bytes\":%llu",
                    f->captured_nodes, f->dispatches, f->barriers, f->barrier_lower_bound, f->awaited, f->levels_per_layer,
                    (unsigned long long)f->weight_bytes, (unsigned long long)f->arena_bytes,
                    (unsigned long long)f->scratch_bytes);
    bool ran = r != NULL;
    json_num(&s, "dispatches_per_token", ran ? r->dispatches_per_token : f->dispatches, true);
    json_num(&s, "barriers_per_token", ran ? r->barriers_per_token : f->barriers, true);
    json_num(&s, "polled_per_token", ran ? r->polled_per_token : 0, ran);
    bool gpu = ran && r->gpu_us_per_token > 0;
    json_num(&s, "gpu_us_per_token", gpu ? r->gpu_us_per_token : 0, gpu);
    json_num(&s, "wall_us_per_token", ran ? r->wall_us_per_token : 0, ran);
    json_num(&s, "tokens_per_s", ran && r->wall_us_per_token > 0 ? 1e6 / r->wall_us_per_token : 0, ran);
    json_num(&s, "copy_gbps", copy_gbps, copy_gbps > 0);
    double floor_us = copy_gbps > 0 ? f->weight_bytes / (copy_gbps * 1e3) : 0;
    json_num(&s, "floor_us", floor_us, copy_gbps > 0);
    json_num(&s, "floor_share", gpu && floor_us > 0 ? floor_us / r->gpu_us_per_token : 0, gpu && floor_us > 0);
    if (ran) {
        loom_str_printf(&s, ",\"warmup_s\":%.3f,\"warmup_stable\":%s", r->warmup_s,
                        r->warmup_stable ? "true" : "false");
        loom_str_printf(&s, ",\"in_flight\":%u,\"steps\":%u,\"warmup_steps\":%llu,\"cache_hits\":%llu,"
                        "\"cache_misses\":%llu", o->in_flight ? o->in_flight : 3, r->steps,
                        (unsigned long long)r->warmup_steps, (unsigned long long)r->cache_hits,
                        (unsigned long long)r->cache_misses);
        json_num(&s, "host_waits_per_token", r->host_waits_per_token, true);
        json_num(&s, "submits_per_token", r->submits_per_token, true);
        json_num(&s, "replay_waits_per_token", r->replay_waits_per_token, true);
        if (rt) {
            loom_rt_info info;
            loom_rt_counters c;
            loom_rt_get_info(rt, &info);
            loom_rt_get_counters(rt, &c);
            loom_str_printf(&s, ",\"awaited_edges\":%s,\"poll_timeouts\":%llu",
                            info.awaited_edges ? "true" : "false", (unsigned long long)c.poll_timeouts);
        }
        if (o->check)
            loom_str_printf(&s, ",\"mismatches\":%u,\"max_err\":%.6g", r->mismatches, r->max_err);
        loom_str_append(&s, ",\"prompt\":[", 11);
        for (uint32_t i = 0; i < o->n_prompt; i++)
            loom_str_printf(&s, "%s%u", i ? "," : "", o->prompt[i]);
        loom_str_append(&s, "],\"tokens\":[", 12);
        for (uint32_t i = 0; i < o->steps; i++)   /* generated: the prompt steps' outputs but the last are not */
            loom_str_printf(&s, "%s%u", i ? "," : "", tokens[i]);
        loom_str_append(&s, "]", 1);
    } else {
        loom_str_append(&s, ",\"tokens\":[]", 12);
    }
    loom_str_append(&s, "}", 1);
    if (!s.failed)
        printf("%s\n", s.data);
    loom_str_free(&s);
}

/* GPU time of the last replay by op kind (timestamps after every node). */
static loom_result print_node_profile(loom_rt *rt, loom_llama *m)
{
    const loom_graph *g = loom_plan_graph(loom_llama_plan(m));
    uint32_t n = loom_graph_node_count(g);
    double *us = calloc(n ? n : 1, sizeof *us), total = 0, by_op[LOOM_OP_COUNT] = { 0 };
    bool *done = calloc(n ? n : 1, sizeof *done);   /* the by-kernel table's nodes already counted */
    uint32_t count[LOOM_OP_COUNT] = { 0 }, after_barrier[LOOM_OP_COUNT] = { 0 };
    if (!us || !done) {
        free(us);
        free(done);
        return loom_fail(LOOM_OUT_OF_MEMORY, "profile: out of memory");
    }
    loom_result rc = loom_rt_program_timings(rt, loom_llama_program(m), us, n, &total);
    for (uint32_t i = 0; i < n && !rc; i++) {
        const loom_node *node = loom_graph_node(g, i);
        by_op[node->op] += us[i];
        count[node->op]++;
        after_barrier[node->op] += node->barrier != LOOM_NONE && !loom_node_awaited(node);
    }
    if (!rc) {
        printf("last step by node: %.1f us (a timestamp after every node; a barrier's drain is charged to the "
               "node after it)\n%-18s %6s %9s %9s %8s\n", total, "op", "nodes", "after-bar", "us", "us/node");
        for (int op = 0; op < LOOM_OP_COUNT; op++)
            if (count[op])
                printf("%-18s %6u %9u %9.1f %8.2f\n", loom_op_name((loom_op)op), count[op], after_barrier[op],
                       by_op[op], by_op[op] / count[op]);
        /* The same by kernel, in the plan's order of first use: forms of
         * one kind (an o-projection and a down projection, a Q4_K and a
         * Q6_K one) apart. */
        printf("by kernel:\n%-44s %6s %9s %8s\n", "kernel", "nodes", "us", "us/node");
        for (uint32_t i = 0; i < n; i++) {
            const loom_node *a = loom_graph_node(g, i);
            if (done[i] || a->type != LOOM_NODE_DISPATCH)
                continue;
            double sum = 0;
            uint32_t cnt = 0;
            for (uint32_t j = i; j < n; j++) {
                const loom_node *b = loom_graph_node(g, j);
                if (b->type == LOOM_NODE_DISPATCH && b->kernel == a->kernel) {
                    done[j] = true;
                    sum += us[j];
                    cnt++;
                }
            }
            printf("%-44s %6u %9.1f %8.2f\n", loom_graph_kernel_name(g, a->kernel), cnt, sum, sum / cnt);
        }
    }
    free(us);
    free(done);
    return rc;
}

/* The dry run's binding limit: --max-binding-range, else the variable a
 * runtime would read, else none (no device to ask). */
static bool dry_binding_limit(const opts *o, uint64_t *out)
{
    const char *env = getenv("LOOM_MAX_BINDING_RANGE");
    *out = o->max_binding_range;
    if (!*out && env && *env && !parse_u64(env, out)) {
        fprintf(stderr, "llama-decode: LOOM_MAX_BINDING_RANGE '%s' is not a byte count\n", env);
        return false;
    }
    return true;
}

#define TOP_GROUPS 12u

static int by_us_desc(const void *a, const void *b)
{
    double x = ((const loom_rt_profile_group *)a)->us, y = ((const loom_rt_profile_group *)b)->us;
    return x > y ? -1 : x < y;
}

/* The group profile of the decoded steps: the most expensive groups, then
 * the totals by op kind. */
static loom_result print_group_profile(loom_rt *rt, loom_llama *m)
{
    loom_rt_program *p = loom_llama_program(m);
    loom_rt_profile prof;
    uint32_t n = 0;
    loom_result rc = loom_rt_profile_get(rt, p, &prof);
    if (!rc)
        rc = loom_rt_profile_groups(rt, p, NULL, 0, &n);
    loom_rt_profile_group *gr = rc ? NULL : calloc(n ? n : 1, sizeof *gr);
    if (!rc && !gr)
        rc = loom_fail(LOOM_OUT_OF_MEMORY, "profile: out of memory");
    if (!rc)
        rc = loom_rt_profile_groups(rt, p, gr, n, &n);
    if (rc) {
        free(gr);
        return rc;
    }
    double sum = 0;
    for (uint32_t i = 0; i < n; i++)
        sum += gr[i].us;
    qsort(gr, n, sizeof *gr, by_us_desc);
    double step = prof.step_us > 0 ? prof.step_us : 1;
    printf("GPU profile of %llu steps: %.1f us per step in %u groups (%u barriers), %u dispatches; the groups sum "
           "to %.1f us\n", (unsigned long long)prof.steps, prof.step_us, prof.groups, prof.barriers, prof.dispatches,
           sum);
    printf("most expensive groups (a group's time includes the drain of the barrier before it):\n"
           "%6s %11s %5s %9s %6s  %s\n", "group", "nodes", "disp", "us", "share", "ops");
    for (uint32_t i = 0; i < n && i < TOP_GROUPS; i++) {
        char nodes[24];
        snprintf(nodes, sizeof nodes, "%u-%u", gr[i].first_node, gr[i].first_node + gr[i].n_nodes - 1);
        printf("%6u %11s %5u %9.2f %5.1f%%  %s\n", gr[i].index, nodes, gr[i].dispatches, gr[i].us,
               100.0 * gr[i].us / step, gr[i].label);
    }
    printf("by op kind (a group's time split evenly among its dispatches):\n%-26s %6s %6s %9s %6s %8s\n", "op",
           "nodes", "groups", "us", "share", "us/node");
    bool done[LOOM_OP_COUNT] = { false };
    for (;;) {
        int best = -1;
        for (int op = 0; op < LOOM_OP_COUNT; op++)
            if (!done[op] && prof.ops[op].nodes && (best < 0 || prof.ops[op].us > prof.ops[best].us))
                best = op;
        if (best < 0)
            break;
        done[best] = true;
        const loom_rt_profile_op *o = &prof.ops[best];
        printf("%-26s %6u %6u %9.2f %5.1f%% %8.2f\n", loom_op_name((loom_op)best), o->nodes, o->groups, o->us,
               100.0 * o->us / step, o->us / o->nodes);
    }
    free(gr);
    return LOOM_OK;
}

static int dry_run(const opts *o)
{
    loom_llama_figures f;
    /* Awaited edges as a device whose rule allows them gets them (NVIDIA:
     * docs/design-notes.md), unless LOOM_TAGS=0 says otherwise, as it
     * would at device creation. */
    const char *tags = getenv("LOOM_TAGS");
    loom_compile_options co = { .disable = o->disable & ~(uint32_t)LOOM_DISABLE_CACHE, .enable = o->enable,
                                .awaits = !(tags && !strcmp(tags, "0")) };
    if (!dry_binding_limit(o, &co.max_binding_range))
        return 2;
    loom_result rc = loom_llama_dry_figures(&o->shape.cfg, o->w, &co, o->early_log, &f);
    if (rc) {
        fprintf(stderr, "llama-decode: dry run: %s: %s\n", loom_result_str(rc), loom_last_error());
        return 1;
    }
    print_header(o, "no device (dry run)");
    print_figures(&f, co.max_binding_range);
    printf(co.awaits ? "(dry run: awaited edges where a device allowing them, such as NVIDIA's, gets them; "
                       "LOOM_TAGS=0: none)\n"
                     : "(dry run: no awaited edges, LOOM_TAGS=0)\n");
    if (o->json)
        print_json(o, NULL, "none", &f, NULL, 0, NULL);
    return 0;
}

/* --model: the file's model, shapes only for a dry run, becomes the one
 * described and run: its shape, context (lowered by --max-seq), vocabulary
 * and matrix dtypes; KV caches f16 unless --kv-f32. Returns -1 to go on,
 * else the exit code. */
static int load_model(opts *o)
{
    loom_gguf *g = NULL;
    loom_result rc = loom_gguf_open_file(o->model, &g);
    uint32_t ctx = 0, want = o->shape.max_seq_set ? o->shape.cfg.max_seq : 0;
    /* The context is checked here to name the flag; the loader checks it
     * again, and reports a missing key. */
    if (!rc && !loom_gguf_get_u32(g, "llama.context_length", &ctx) && want > ctx) {
        fprintf(stderr, "llama-decode: --max-seq %u exceeds the context of %s (llama.context_length %u); it may "
                "only lower it\n", want, o->model, ctx);
        loom_gguf_close(g);
        return 2;
    }
    /* The f32 copies of quantized and f16 matrices are the reference's. */
    loom_llama_gguf_desc d = { .max_seq = want, .shapes_only = o->dry_run, .raw_only = !o->check };
    if (!rc)
        rc = loom_llama_weights_from_gguf_reader(g, &d, &o->w);
    loom_gguf_close(g);
    if (rc) {
        fprintf(stderr, "llama-decode: %s: %s: %s\n", o->model, loom_result_str(rc), loom_last_error());
        return 1;
    }
    o->file_context = ctx;
    o->w->cfg.kvtype = o->shape.kvtype_set ? o->shape.cfg.kvtype : LOOM_F16;
    o->shape.cfg = o->w->cfg;
    return check_run(o);
}

/* --write-gguf: the weights (made, or read with --model) as a GGUF file,
 * each matrix in its own dtype. */
static int write_gguf(opts *o)
{
    loom_result rc = o->w ? LOOM_OK : loom_llama_weights_create(&o->shape.cfg, &o->w);
    const loom_llama_config *c = &o->shape.cfg;
    if (!rc) {
        loom_gguf_llama_desc d = { .as_stored = true, .name = o->model ? NULL : o->shape.config_name };
        rc = loom_llama_weights_to_gguf(o->w, &d, o->write_gguf);
    }
    char types[160];
    if (!rc)
        printf("wrote %s: dim %u, %u layers, %u/%u heads x %u, ffn %u, vocab %u, context %u, %s matrices (%s)\n",
               o->write_gguf, c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, c->ffn, c->vocab,
               c->max_seq, wtype_label(o), loom_llama_describe_types(c, o->w, types, sizeof types));
    else
        fprintf(stderr, "llama-decode: --write-gguf: %s: %s\n", loom_result_str(rc), loom_last_error());
    return rc ? 1 : 0;
}

/* --bench-prefill N: one prefill of N ids timed after the warm-up, and
 * the time to the first token. */
static int bench_prefill(opts *o, loom_rt *rt, const char *device)
{
    const loom_llama_config *c = &o->shape.cfg;
    uint32_t n = o->bench_prefill, at = o->bench_at, chunk = o->prefill_chunk ? o->prefill_chunk : 1;
    uint32_t *ids = malloc((size_t)(at + n) * sizeof *ids);
    loom_llama *m = NULL;
    loom_compile_options co = { .disable = o->disable, .enable = o->enable };
    loom_result rc = ids ? LOOM_OK : loom_fail(LOOM_OUT_OF_MEMORY, "prompt ids");
    /* The prompt: --prompt-ids, else ids drawn from the seed. */
    uint64_t x = o->shape.cfg.seed * 0x9e3779b97f4a7c15ull + 1;
    for (uint32_t i = 0; ids && i < at + n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ids[i] = o->n_prompt ? o->prompt[i] : (uint32_t)(x % c->vocab);
    }
    if (!rc)
        rc = make_model(o, rt, &(loom_llama_desc){ .chain = true, .compile = &co }, &m);
    loom_llama_prefill_result r;
    bool shown = false;   /* the awaited-edges line, printed once */
    if (!rc) {
        print_header(o, device);
        rc = loom_llama_bench_prefill(rt, m, ids, at, n, chunk, o->verify, WARMUP_S, PREFILL_REPS, &r);
    }
    if (!rc) {
        printf("%s of %u ids from position %u in steps of at most %u rows (warm-up %.2f s, %llu prefills, %s; "
               "median of %u):\n", o->verify ? "verification (every row's argmax)" : "prefill", n, at, chunk,
               r.warmup_s, (unsigned long long)r.warmup_reps, r.warmup_stable ? "stable" : "stopped at the cap",
               r.reps);
        printf("  %.1f us GPU, %.1f us wall: %.0f tokens/s\n", r.gpu_us, r.wall_us, r.tokens_per_s);
        printf("  time to first token: %.1f us (prefill + one decode step, wall); first token %u\n", r.ttft_us,
               r.first_token);
        print_awaits(rt);
        shown = true;
        if (o->profile)
            rc = print_group_profile(rt, m);
        if (!rc && o->profile == LOOM_PROFILE_NODES)
            rc = print_node_profile(rt, m);
        if (o->json) {
            loom_rt_info info;
            loom_rt_counters k;
            loom_rt_get_info(rt, &info);
            loom_rt_get_counters(rt, &k);
            printf("{\"mode\":\"%s\",\"device\":\"%s\",\"config\":\"%s\",\"rows\":%u,\"at\":%u,\"chunk\":%u,"
                   "\"gpu_us\":%.3f,\"wall_us\":%.3f,\"tokens_per_s\":%.1f,\"ttft_us\":%.3f,\"first_token\":%u,"
                   "\"warmup_s\":%.3f,"
                   "\"awaited_edges\":%s,\"poll_timeouts\":%llu}\n",
                   o->verify ? "bench-verify" : "bench-prefill", device, o->model ? "gguf" : o->shape.config_name, n,
                   at, chunk, r.gpu_us, r.wall_us, r.tokens_per_s, r.ttft_us, r.first_token, r.warmup_s,
                   info.awaited_edges ? "true" : "false", (unsigned long long)k.poll_timeouts);
        }
    }
    if (rc) {
        fprintf(stderr, "llama-decode: %s: %s\n", loom_result_str(rc), loom_last_error());
        if (!shown)
            print_awaits(rt);
    }
    loom_llama_destroy(m);
    free(ids);
    return rc ? 1 : 0;
}

static int run(opts *o, loom_rt *rt, const char *device)
{
    const loom_llama_config *c = &o->shape.cfg;
    loom_llama *m = NULL;
    uint32_t total = total_steps(o), first = prompt_len(o) - 1;   /* tokens[first..]: generated */
    uint32_t *tokens = calloc(total, sizeof *tokens);
    loom_compile_options co = { .disable = o->disable, .enable = o->enable };
    loom_llama_result r;
    loom_llama_figures f;
    double copy_gbps = 0;
    int status = 1;
    bool shown = false;   /* the awaited-edges line, printed once */
    o->in_flight = loom_rt_in_flight(rt);
    loom_result rc = tokens ? LOOM_OK : loom_fail(LOOM_OUT_OF_MEMORY, "token ids");
    if (!rc)
        rc = make_model(o, rt, &(loom_llama_desc){ .chain = true, .compile = &co, .keep_logits = o->check,
                                                   .early_log = o->early_log },
                        &m);
    const loom_llama_weights *w = o->w;
    if (rc)
        goto out;
    print_header(o, device);
    if (o->check && !o->quiet)
        printf("step  input -> gpu    ref      max|err|\n");
    loom_llama_run_opts ro = { .steps = total, .token = o->token, .prompt = o->prompt, .n_prompt = o->n_prompt,
                               .prefill_chunk = o->prefill_chunk, .check = o->check, .warmup_s = o->bench ? WARMUP_S : 0,
                               .log = o->quiet ? NULL : stdout, .tokens = tokens };
    if (!o->check)
        ro.log = NULL;   /* the ids are printed in one line below */
    float tol = loom_llama_check_tol(rt, w, TOLERANCE);
    if ((rc = loom_llama_run(rt, m, w, &ro, tol, &r)))
        goto out;
    /* After the decode, so the clock is still warm. */
    uint64_t copy_bytes = o->bench ? (1ull << 30) : (16ull << 20);
    if ((rc = loom_llama_copy_gbps(rt, copy_bytes, o->bench ? 0.5 : 0.0, &copy_gbps)))
        goto out;
    if ((rc = loom_llama_figures_of(loom_llama_plan(m), c->n_layers, &f)))
        goto out;
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    print_figures(&f, info.max_binding_range < info.max_storage_buffer_range || f.split_nodes
                          ? info.max_binding_range : 0);
    if (o->n_prompt) {
        if (o->prefill_chunk > 1)
            printf("prompt (%u ids, in steps of at most %u):", o->n_prompt, o->prefill_chunk);
        else
            printf("prompt (%u ids, fed one per step):", o->n_prompt);
        for (uint32_t i = 0; i < o->n_prompt; i++)
            printf(" %u", o->prompt[i]);
        printf("\n");
    }
    printf("tokens:");
    for (uint32_t i = first; i < r.steps; i++)
        printf(" %u", tokens[i]);
    printf("\n");
    double floor_us = copy_gbps > 0 ? f.weight_bytes / (copy_gbps * 1e3) : 0;
    if (o->bench)
        printf("warm-up: %.2f s, %llu steps; %s (last window %.1f us a step)\n", r.warmup_s,
               (unsigned long long)r.warmup_steps,
               r.warmup_stable ? "ended on two windows of 200 steps within 1%" : "stopped at the cap, not stable",
               r.warmup_window_us);
    printf("%u steps%s: %.1f tokens/s, %.1f us/token wall, ", r.steps,
           o->bench ? " (after warm-up)" : "", r.wall_us_per_token > 0 ? 1e6 / r.wall_us_per_token : 0,
           r.wall_us_per_token);
    if (r.gpu_us_per_token > 0)
        printf("%.1f us/token GPU (%.0f%% of the weight-read floor %.1f us at %.0f GB/s copy)\n",
               r.gpu_us_per_token, 100.0 * floor_us / r.gpu_us_per_token, floor_us, copy_gbps);
    else
        printf("GPU time n/a (no timestamps); weight-read floor %.1f us at %.0f GB/s copy\n", floor_us,
               copy_gbps);
    printf("per token: %.1f dispatches, %.1f barriers and %.1f polled (plan lower bound %u for both), %.2f host waits, "
           "%.2f submits, %.2f replay waits; cache %llu hits, %llu misses\n",
           r.dispatches_per_token, r.barriers_per_token, r.polled_per_token, f.barrier_lower_bound,
           r.host_waits_per_token,
           r.submits_per_token, r.replay_waits_per_token, (unsigned long long)r.cache_hits,
           (unsigned long long)r.cache_misses);
    if (o->check)
        printf("check: %u mismatches in %u steps, max |err| %.3g (tolerance %.g relative)\n", r.mismatches, r.steps,
               r.max_err, (double)tol);
    print_awaits(rt);
    shown = true;
    if (o->profile && (rc = print_group_profile(rt, m)))
        goto out;
    if (o->profile == LOOM_PROFILE_NODES && (rc = print_node_profile(rt, m)))
        goto out;
    if (o->json)
        print_json(o, rt, device, &f, &r, copy_gbps, tokens + first);
    status = o->check && r.mismatches ? 1 : 0;
out:
    if (rc) {
        fprintf(stderr, "llama-decode: %s: %s\n", loom_result_str(rc), loom_last_error());
        if (!shown)
            print_awaits(rt);
    }
    loom_llama_destroy(m);
    free(tokens);
    return status;
}

int main(int argc, char **argv)
{
    opts o;
    int code = parse(argc, argv, &o);
    double t0 = now_s();
    if (code < 0 && o.model)
        code = load_model(&o);
    o.setup_s[1] = now_s() - t0;
    if (code >= 0 || o.dry_run || o.write_gguf) {
        code = code >= 0 ? code : o.dry_run ? dry_run(&o) : write_gguf(&o);
        loom_llama_weights_destroy(o.w);
        return code;
    }
    loom_rt *rt = NULL;
    loom_rt_desc d = { .device = o.device, .in_flight = o.in_flight, .timestamps = true, .profile = o.profile,
                       .max_binding_range = o.max_binding_range, .trace_path = o.trace };
    t0 = now_s();
    loom_result rc = loom_rt_create(&d, &rt);
    o.setup_s[0] = now_s() - t0;
    if (rc) {
        fprintf(stderr, "llama-decode: no Vulkan device: %s: %s\n", loom_result_str(rc), loom_last_error());
        return 1;
    }
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    int status = o.bench_prefill ? bench_prefill(&o, rt, info.device_name) : run(&o, rt, info.device_name);
    loom_rt_wait_idle(rt);
    uint64_t vmsg = loom_rt_validation_messages(rt);
    loom_rt_destroy(rt);
    loom_llama_weights_destroy(o.w);
    if (vmsg) {
        fprintf(stderr, "llama-decode: %llu validation messages\n", (unsigned long long)vmsg);
        status = 1;
    }
    return status;
}
