/* The decode driver behind llama-decode and `loom bench decode`: named
 * shapes, the figures of a step plan, copy bandwidth, and the decode loop
 * that keeps steps in flight and reads tokens behind the GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "llama_run.h"
#include "loom_ops.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

void loom_llama_warm_begin(loom_rt *rt, loom_llama_warm *w)
{
    loom_rt_collect_timestamps(rt);
    loom_rt_get_counters(rt, &w->c0);
    w->window_t0 = now_us();
}

bool loom_llama_warm_end(loom_rt *rt, loom_llama_warm *w, uint32_t units, double min_s, double cap_s)
{
    loom_rt_counters c1;
    loom_rt_collect_timestamps(rt);
    loom_rt_get_counters(rt, &c1);
    uint64_t timed = c1.timed_steps - w->c0.timed_steps;
    w->prev = w->us;
    w->us = timed ? (double)(c1.gpu_ns - w->c0.gpu_ns) / 1e3 / (double)timed
                  : (now_us() - w->window_t0) / (double)units;
    w->stable = w->prev > 0 && fabs(w->us - w->prev) <= LOOM_LLAMA_WARM_AGREE * w->prev;
    double now = now_us();
    if (w->work_t0 == 0)   /* the first window's end */
        w->work_t0 = now;
    double elapsed = (now - w->t0) / 1e6, worked = (now - w->work_t0) / 1e6;
    return (w->stable && worked >= min_s) || elapsed >= cap_s;
}

/* ---- shapes and flags ----------------------------------------------------- */

loom_result loom_llama_preset(const char *name, loom_llama_config *out)
{
    loom_llama_default_config(out);
    if (!name || !strcmp(name, "tiny"))
        return LOOM_OK;
    /* The 1b and 7b shapes of issue #9: Llama-3.2-1B-like and Llama-2-7B-
     * like widths with grouped-query attention, f16 weights and KV caches,
     * context 512. */
    loom_llama_config big = { .dim = 2048, .n_layers = 16, .n_heads = 32, .n_kv_heads = 8, .head_dim = 64,
                              .ffn = 8192, .vocab = 32000, .max_seq = 512, .eps = 1e-5f, .rope_theta = 10000.0f,
                              .wtype = LOOM_F16, .kvtype = LOOM_F16, .seed = out->seed };
    if (!strcmp(name, "1b")) {
        *out = big;
        return LOOM_OK;
    }
    if (!strcmp(name, "7b")) {
        big.dim = 4096;
        big.n_layers = 32;
        big.head_dim = 128;
        big.ffn = 14336;
        *out = big;
        return LOOM_OK;
    }
    return loom_fail(LOOM_NOT_FOUND, "llama: unknown config '%s' (tiny, 1b, 7b)", name);
}

const char loom_llama_args_help[] =
    "  --config tiny|1b|7b   model shape (default tiny); the flags below override it\n"
    "  --dim D --layers L --heads H --kv-heads K --head-dim E --ffn F --vocab V --max-seq S\n"
    "  --wtype T             weight type (tiny: f32; 1b, 7b: f16): f32, f16, q8_0, q4_0, q4_k,\n"
    "                        q6_k, or q4_k_m, llama.cpp's mix: q4_k, with q6_k for the LM head and\n"
    "                        for attn_v and ffn_down of the first and last eighth of the layers and\n"
    "                        every third between. The random weights are quantized on the host.\n"
    "                        A matrix whose rows are not whole blocks (ffn_down of tiny: rows of\n"
    "                        688) falls back: a K-quant to q8_0 (rows a multiple of 32), then\n"
    "                        any block type to f16\n"
    "  --f16 | --f32         --wtype f16 | f32\n"
    "  --kv-f16 | --kv-f32   KV-cache type (tiny: f32; 1b, 7b: f16)\n"
    "  --seed N              weight seed\n";

loom_result loom_llama_args_begin(int argc, char **argv, loom_llama_args *a)
{
    memset(a, 0, sizeof *a);
    const char *name = "tiny";
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--config"))
            name = argv[i + 1];
    snprintf(a->config_name, sizeof a->config_name, "%s", name);
    return loom_llama_preset(name, &a->cfg);
}

bool loom_llama_parse_u32(const char *s, uint32_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || *s == '-' || v > 0xffffffffull)
        return false;
    *out = (uint32_t)v;
    return true;
}

int loom_llama_args_shape(int argc, char **argv, int *i, loom_llama_args *a)
{
    const char *f = argv[*i];
    if (!strcmp(f, "--f16") || !strcmp(f, "--f32")) {
        a->cfg.wtype = f[3] == '1' ? LOOM_F16 : LOOM_F32;
        a->cfg.mix = LOOM_LLAMA_MIX_NONE;
        a->wtype_set = true;
        return 1;
    }
    if (!strcmp(f, "--kv-f16") || !strcmp(f, "--kv-f32")) {
        a->cfg.kvtype = f[6] == '1' ? LOOM_F16 : LOOM_F32;
        a->kvtype_set = true;
        return 1;
    }
    if (!strcmp(f, "--wtype")) {
        if (*i + 1 >= argc || loom_llama_wtype_parse(argv[*i + 1], &a->cfg))
            return -1;
        ++*i;
        a->wtype_set = true;
        return 1;
    }
    static const char *const names[] = { "--dim", "--layers", "--heads", "--kv-heads", "--head-dim",
                                         "--ffn", "--vocab", "--max-seq" };
    uint32_t *slots[] = { &a->cfg.dim, &a->cfg.n_layers, &a->cfg.n_heads, &a->cfg.n_kv_heads,
                          &a->cfg.head_dim, &a->cfg.ffn, &a->cfg.vocab, &a->cfg.max_seq };
    size_t k = 0;
    while (k < sizeof names / sizeof names[0] && strcmp(f, names[k]))
        k++;
    bool config = !strcmp(f, "--config"), seed = !strcmp(f, "--seed");
    if (k == sizeof names / sizeof names[0] && !config && !seed)
        return 0;
    if (*i + 1 >= argc)
        return -1;
    const char *v = argv[++*i];
    if (config)
        return 1;   /* applied by begin */
    if (seed) {
        char *end;
        a->cfg.seed = strtoull(v, &end, 10);
        return *v && !*end ? 1 : -1;
    }
    if (!loom_llama_parse_u32(v, slots[k]))
        return -1;
    a->head_dim_set |= slots[k] == &a->cfg.head_dim;
    a->max_seq_set |= slots[k] == &a->cfg.max_seq;
    a->shape_set |= slots[k] != &a->cfg.max_seq;
    a->dims_set |= slots[k] == &a->cfg.dim || slots[k] == &a->cfg.n_heads;
    return 1;
}

void loom_llama_args_finish(loom_llama_args *a)
{
    if (a->dims_set && !a->head_dim_set && a->cfg.n_heads)
        a->cfg.head_dim = a->cfg.dim / a->cfg.n_heads;
}

/* ---- plan figures --------------------------------------------------------- */

/* Layer of a buffer named "l<k>.…", else -1. */
static int layer_of(const char *name)
{
    if (!name || name[0] != 'l' || name[1] < '0' || name[1] > '9')
        return -1;
    char *end;
    long k = strtol(name + 1, &end, 10);
    return *end == '.' && k < (1L << 20) ? (int)k : -1;
}

loom_result loom_llama_figures_of(const loom_plan *plan, uint32_t n_layers, loom_llama_figures *out)
{
    if (!plan || !out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama figures: NULL plan or out");
    memset(out, 0, sizeof *out);
    const loom_plan_stats *st = loom_plan_get_stats(plan);
    const loom_graph *g = loom_plan_graph(plan);
    out->captured_nodes = st->captured_nodes;
    out->dispatches = st->dispatches;
    out->groups = st->groups;
    out->barriers = st->barriers;
    out->awaited = st->awaited;
    out->barrier_lower_bound = st->barrier_lower_bound;
    out->fused_chains = st->fused_chains;
    out->split_nodes = st->split_nodes;
    out->arena_bytes = st->arena_bytes;
    out->scratch_bytes = st->scratch_bytes;
    uint32_t nb = loom_graph_buffer_count(g), nn = loom_graph_node_count(g);
    bool *embed_only = calloc(nb ? nb : 1, sizeof *embed_only);
    bool *other_use = calloc(nb ? nb : 1, sizeof *other_use);
    if (!embed_only || !other_use) {
        free(embed_only);
        free(other_use);
        return loom_fail(LOOM_OUT_OF_MEMORY, "llama figures");
    }
    bool scheduled = loom_graph_scheduled(g);
    uint32_t layer_barriers = 0;
    uint64_t embed_rows = 0;
    for (uint32_t i = 0; i < nn; i++) {
        const loom_node *n = loom_graph_node(g, i);
        const loom_binding *b = loom_node_bindings(g, n);
        int layer = -1;
        for (uint32_t j = 0; j < n->n_bindings; j++) {
            int l = layer_of(loom_graph_buffer_name(g, b[j].buffer));
            if (l > layer)
                layer = l;
            bool embed = n->op == LOOM_OP_EMBED || n->op == LOOM_OP_EMBED_BLOCKS;
            /* table slots: all but token and out; the fused form's slot 1 */
            if ((embed && j + 2 < n->n_bindings) || (n->op == LOOM_OP_EMBED_RMS_NORM_QKV_ROPE_KV && j == 1))
                embed_only[b[j].buffer] = true;
            else
                other_use[b[j].buffer] = true;
        }
        /* One row a step, also when the split pass spread the table over
         * several EMBED nodes (counted at the one holding token 0). */
        loom_op_args pc;
        bool args = n->n_bindings && loom_op_args_of(g, i, &pc) == LOOM_OK;
        if (args && n->op == LOOM_OP_EMBED)
            embed_rows += pc.vocab ? b[0].size / pc.vocab : 0;
        else if (args && n->op == LOOM_OP_EMBED_BLOCKS)
            embed_rows += pc.block_rows && pc.first == 0 ? b[0].size / pc.block_rows : 0;
        else if (args && n->op == LOOM_OP_EMBED_RMS_NORM_QKV_ROPE_KV && n->n_bindings > 1)
            embed_rows += pc.vocab ? b[1].size / pc.vocab : 0;
        /* The same rule the runtime records by. */
        bool barrier = n->type == LOOM_NODE_BARRIER || (n->barrier != LOOM_NONE && !n->tag_in) || (!scheduled && i > 0);
        if (barrier && layer >= 0)
            layer_barriers++;
    }
    for (uint32_t i = 0; i < nb; i++) {
        const loom_buffer *b = loom_graph_buffer(g, i);
        if (b->usage == LOOM_USAGE_WEIGHT && !(embed_only[i] && !other_use[i]))
            out->weight_bytes += b->size;
    }
    out->weight_bytes += embed_rows;
    out->levels_per_layer = n_layers ? (double)layer_barriers / n_layers : 0.0;
    free(embed_only);
    free(other_use);
    return LOOM_OK;
}

loom_result loom_llama_dry_figures(const loom_llama_config *cfg, const loom_llama_weights *like,
                                   const loom_compile_options *opts, bool early_log, loom_llama_figures *out)
{
    loom_llama *m = NULL;
    loom_graph *g = NULL;
    loom_plan *p = NULL;
    loom_llama_desc d = { .chain = true, .compile = opts, .early_log = early_log };
    loom_result rc = like ? loom_llama_create_dry_like(like, &d, &m) : loom_llama_create_dry(cfg, &d, &m);
    if (like)
        cfg = &like->cfg;
    if (!rc)
        rc = loom_graph_create(&(loom_graph_desc){ .name = "llama_step" }, &g);
    if (!rc)
        rc = loom_llama_capture_step(m, g);
    if (!rc)
        rc = loom_compile(g, opts, &p);
    if (!rc)
        rc = loom_llama_figures_of(p, cfg->n_layers, out);
    loom_plan_release(p);
    loom_graph_destroy(g);
    loom_llama_destroy(m);
    return rc;
}

/* ---- copy bandwidth ------------------------------------------------------- */

#define COPY_CHUNKS 8u

loom_result loom_llama_copy_gbps(loom_rt *rt, uint64_t bytes, double min_seconds, double *gbps)
{
    *gbps = 0;
    uint64_t chunk = bytes / COPY_CHUNKS / LOOM_BIND_ALIGN * LOOM_BIND_ALIGN;
    if (!rt || chunk == 0)
        return loom_fail(LOOM_INVALID_ARGUMENT, "copy bandwidth: no runtime, or %llu bytes is too few",
                         (unsigned long long)bytes);
    /* More, smaller chunks where a chunk would not fit one binding. */
    loom_rt_info info;
    loom_rt_get_info(rt, &info);
    uint64_t most = info.max_binding_range / LOOM_BIND_ALIGN * LOOM_BIND_ALIGN;
    if (most && chunk > most)
        chunk = most;
    uint32_t n_chunks = (uint32_t)(bytes / chunk < COPY_CHUNKS ? COPY_CHUNKS : bytes / chunk);
    loom_rt_buffer *src = NULL, *dst = NULL;
    loom_graph *g = NULL;
    loom_rt_program *p = NULL;
    uint64_t total = chunk * n_chunks;
    loom_result rc = loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ .name = "copy_src", .size = total }, &src);
    if (!rc)
        rc = loom_rt_buffer_create(rt, &(loom_rt_buffer_desc){ .name = "copy_dst", .size = total }, &dst);
    if (!rc)
        rc = loom_graph_create(&(loom_graph_desc){ .name = "copy_bandwidth" }, &g);
    uint32_t s = 0, d = 0;
    if (!rc)
        rc = loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = "src", .size = total,
                                                           .external = loom_rt_buffer_id(src) }, &s);
    if (!rc)
        rc = loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = "dst", .size = total,
                                                           .external = loom_rt_buffer_id(dst) }, &d);
    uint32_t words = (uint32_t)(chunk / 4);
    /* Disjoint chunks: no hazards, so the compiled plan runs them as one
     * group with no barrier between. */
    for (uint32_t i = 0; i < n_chunks && !rc; i++)
        rc = loom_op_copy(g, (loom_tensor){ s, LOOM_U32, chunk * i, 1, words },
                          (loom_tensor){ d, LOOM_U32, chunk * i, 1, words }, NULL);
    loom_plan *plan = NULL;
    if (!rc)
        rc = loom_compile(g, NULL, &plan);
    if (!rc)
        rc = loom_rt_program_create(rt, loom_plan_graph(plan), &p);
    loom_plan_release(plan);
    uint64_t step = 0;
    if (!rc)
        rc = loom_rt_replay(rt, p, NULL, &step);
    if (!rc)
        rc = loom_rt_wait(rt, step);
    loom_rt_counters c0, c1;
    loom_rt_collect_timestamps(rt);
    loom_rt_get_counters(rt, &c0);
    double t0 = now_us();
    uint32_t reps = 0;
    while (!rc && (reps < 3 || now_us() - t0 < min_seconds * 1e6)) {
        rc = loom_rt_replay(rt, p, NULL, &step);
        reps++;
    }
    if (!rc)
        rc = loom_rt_wait_idle(rt);
    double host_us = now_us() - t0;
    loom_rt_collect_timestamps(rt);
    loom_rt_get_counters(rt, &c1);
    if (!rc) {
        uint64_t timed = c1.timed_steps - c0.timed_steps;
        double us = timed == reps ? (double)(c1.gpu_ns - c0.gpu_ns) / 1e3 : host_us;
        *gbps = us > 0 ? 2.0 * (double)total * reps / (us * 1e-6) / 1e9 : 0;
    }
    loom_rt_program_release(p);
    loom_graph_destroy(g);
    loom_rt_buffer_release(src);
    loom_rt_buffer_release(dst);
    return rc;
}

/* ---- the decode loop ------------------------------------------------------ */

typedef struct loop {
    loom_rt *rt;
    loom_llama *m;
    const loom_llama_run_opts *o;
    uint32_t vocab, max_seq;
    loom_llama_ref *ref;     /* check mode */
    float *gl, *rl;          /* check mode: logits of the GPU and the reference */
    float tol;
    uint32_t submitted, collected;   /* positions */
    /* Submitted steps not yet collected, oldest first: the model's step
     * index, the run position of its first row, its rows. */
    struct {
        uint32_t index, i0, rows;
    } q[LOOM_LLAMA_RING];
    uint32_t q_head, q_n;
    uint32_t input;          /* check: the token the next collected step was fed */
    const uint32_t *prompt;  /* fed to the run's first n_prompt steps */
    uint32_t n_prompt;
    loom_llama_result *r;
} loop;

/* Check mode: the GPU's KV cache rows [pos, pos + rows) of every layer
 * against the reference's; a mismatch is an element off by more than tol
 * relative to max(1, max |ref|) of the layer's rows. */
static loom_result check_kv(loop *L, uint32_t pos, uint32_t rows, bool *ok, float *worst)
{
    const loom_llama_config *c = loom_llama_get_config(L->m);
    size_t n = (size_t)rows * c->n_kv_heads * c->head_dim;
    float *k = malloc(n * sizeof *k), *v = malloc(n * sizeof *v);
    loom_result rc = k && v ? LOOM_OK : loom_fail(LOOM_OUT_OF_MEMORY, "llama run: KV check");
    *ok = true;
    for (uint32_t l = 0; !rc && l < c->n_layers; l++) {
        if ((rc = loom_llama_read_kv(L->m, l, pos, rows, k, v)))
            break;
        const float *got[2] = { k, v };
        const float *want[2] = { loom_llama_ref_kcache(L->ref, l), loom_llama_ref_vcache(L->ref, l) };
        for (int s = 0; s < 2; s++) {
            const float *w = want[s] + (size_t)pos * c->n_kv_heads * c->head_dim;
            float scale = 1, err = 0;
            for (size_t j = 0; j < n; j++) {
                float d = fabsf(got[s][j] - w[j]);
                scale = fmaxf(scale, fabsf(w[j]));
                err = d > err || d != d ? d : err;
            }
            if (err > *worst || err != err)
                *worst = err;
            if (!(err <= L->tol * scale)) {
                *ok = false;
                fprintf(stderr, "llama run: layer %u %s cache rows [%u, %u): max|err| %.3g (scale %.3g)\n", l,
                        s ? "V" : "K", pos, pos + rows, err, scale);
            }
        }
    }
    free(k);
    free(v);
    return rc;
}

/* Reads back the oldest uncollected step of the run, waiting for it alone;
 * in check mode runs the reference on the same input (every row of a
 * multi-token step) and compares the last row's logits and, for a
 * multi-token step, the KV cache rows it wrote. */
static loom_result collect_one(loop *L)
{
    uint32_t index = L->q[L->q_head].index, i0 = L->q[L->q_head].i0, rows = L->q[L->q_head].rows;
    uint32_t i = i0 + rows - 1, tok = 0;
    L->q_head = (L->q_head + 1) % LOOM_LLAMA_RING;
    L->q_n--;
    loom_result rc = loom_llama_collect(L->m, index, &tok, L->o->check ? L->gl : NULL);
    if (rc)
        return rc;
    for (uint32_t j = i0; L->o->tokens && j < i; j++)
        L->o->tokens[j] = LOOM_LLAMA_NO_TOKEN;   /* a row before the last of a multi-token step */
    if (L->o->tokens)
        L->o->tokens[i] = tok;
    if (L->o->check) {
        uint32_t rarg = 0;
        for (uint32_t j = i0; j <= i && !rc; j++)
            rc = loom_llama_ref_step(L->ref, j == i0 ? L->input : L->prompt[j], j, j == i ? L->rl : NULL, &rarg);
        if (rc)
            return rc;
        loom_llama_diff d;
        bool ok = loom_llama_compare(L->gl, tok, L->rl, rarg, L->vocab, L->tol, &d);
        if (ok && rows > 1 && (rc = check_kv(L, i0, rows, &ok, &d.max_abs)))
            return rc;
        L->r->mismatches += !ok;
        if (d.max_abs > L->r->max_err)
            L->r->max_err = d.max_abs;
        FILE *out = L->o->log ? L->o->log : stderr;
        if ((L->o->log || !ok) && rows > 1)
            fprintf(out, "%4u..%u (%u rows) -> %6u ref %6u  max|err| %.3g%s\n", i0, i, rows, tok, rarg,
                    d.max_abs, ok ? "" : "  MISMATCH");
        else if (L->o->log || !ok)
            fprintf(out, "%4u %6u -> %6u ref %6u  max|err| %.3g%s\n", i, L->input, tok, rarg, d.max_abs,
                    ok ? "" : "  MISMATCH");
        /* Both sides go on from the prompt, then from the GPU's token as
         * chain mode does, so one near tie does not derail the rest. */
        L->input = i + 1 < L->n_prompt ? L->prompt[i + 1] : tok;
    } else if (L->o->log) {
        if (rows > 1)
            fprintf(L->o->log, "%4u..%u -> %u\n", i0, i, tok);
        else
            fprintf(L->o->log, "%4u -> %u\n", i, tok);
    }
    L->collected += rows;
    return LOOM_OK;
}

/* Submits n positions pos0, pos0+1, … (mod max_seq): the prompt's in
 * steps of prefill_chunk rows (one per step when it is 0 or 1), the rest
 * one decode step each; a step is collected once the uncollected ones
 * would fill the runtime's copies: with K copies, K - 1 steps stay queued
 * behind the one the host waits for. */
static loom_result decode(loop *L, uint32_t n, uint32_t pos0, uint32_t token, uint32_t k)
{
    loom_result rc = LOOM_OK;
    uint32_t chunk = L->o->prefill_chunk;
    for (uint32_t t = 0; t < n && !rc;) {
        uint32_t pos = (pos0 + t) % L->max_seq, rows = 1, index = 0;
        if (L->submitted < L->n_prompt && chunk > 1) {
            rows = L->n_prompt - L->submitted;
            rows = rows < chunk ? rows : chunk;
            rows = rows < n - t ? rows : n - t;
            rows = rows < L->max_seq - pos ? rows : L->max_seq - pos;
            rc = loom_llama_submit_rows(L->m, pos, rows, &index);
        } else if (L->submitted < L->n_prompt) {
            rc = loom_llama_feed(L->m, L->prompt[L->submitted], pos, &index);
        } else {
            rc = loom_llama_submit(L->m, token, pos, &index);
        }
        if (rc)
            break;
        uint32_t slot = (L->q_head + L->q_n) % LOOM_LLAMA_RING;
        L->q[slot].index = index;
        L->q[slot].i0 = L->submitted;
        L->q[slot].rows = rows;
        L->q_n++;
        L->submitted += rows;
        t += rows;
        while (!rc && L->q_n >= k)
            rc = collect_one(L);
    }
    while (!rc && L->q_n)
        rc = collect_one(L);
    return rc;
}

loom_result loom_llama_run(loom_rt *rt, loom_llama *m, const loom_llama_weights *w, const loom_llama_run_opts *opts,
                           float tol, loom_llama_result *out)
{
    if (!rt || !m || !opts || !out || !opts->steps)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama run: NULL argument or zero steps");
    memset(out, 0, sizeof *out);
    const loom_llama_config *cfg = loom_llama_get_config(m);
    if (opts->check && (!w || opts->steps > cfg->max_seq))
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama run: check mode needs the weights and steps <= max_seq %u",
                         cfg->max_seq);
    if (opts->n_prompt && (!opts->prompt || opts->n_prompt > opts->steps || opts->n_prompt > cfg->max_seq))
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama run: a prompt of %u ids needs ids, at most steps (%u) and at "
                         "most max_seq (%u) of them", opts->n_prompt, opts->steps, cfg->max_seq);
    for (uint32_t i = 0; i < opts->n_prompt; i++)
        if (opts->prompt[i] >= cfg->vocab)
            return loom_fail(LOOM_INVALID_ARGUMENT, "llama run: prompt id %u (position %u) is not below vocab %u",
                             opts->prompt[i], i, cfg->vocab);
    if (opts->prefill_chunk > LOOM_LLAMA_MAX_ROWS)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama run: prefill_chunk %u is more than %u rows",
                         opts->prefill_chunk, LOOM_LLAMA_MAX_ROWS);
    uint32_t k = loom_rt_in_flight(rt);
    if (k > LOOM_LLAMA_RING)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama run: %u steps in flight, more than the ring's %u", k,
                         LOOM_LLAMA_RING);
    if (opts->prefill_chunk > 1 && opts->n_prompt) {
        loom_result prc = loom_llama_set_prompt(m, opts->prompt, opts->n_prompt, 0);
        if (prc)
            return prc;
    }
    loop L = { .rt = rt, .m = m, .o = opts, .vocab = cfg->vocab, .max_seq = cfg->max_seq, .tol = tol,
               .input = opts->n_prompt ? opts->prompt[0] : opts->token, .prompt = opts->prompt,
               .n_prompt = opts->n_prompt, .r = out };
    loom_result rc = LOOM_OK;
    if (opts->check) {
        L.gl = malloc((size_t)cfg->vocab * sizeof *L.gl);
        L.rl = malloc((size_t)cfg->vocab * sizeof *L.rl);
        if (!L.gl || !L.rl)
            rc = loom_fail(LOOM_OUT_OF_MEMORY, "llama run: logits");
        if (!rc)
            rc = loom_llama_ref_create(w, &L.ref);
    }
    /* Warm-up: the same loop, unchecked and unrecorded, in windows of
     * LOOM_LLAMA_WARM_WINDOW steps (passes of at most 64 positions), by the
     * warm-up rule (loom_llama_warm_end). Every window starts at position
     * 0, so two windows are the same work: a window that went on where the
     * last one stopped would attend over other lengths, and on a GPU two
     * such windows differ by more than the rule's 1% at any clock. */
    loom_llama_warm wu = { .t0 = now_us() };
    double cap_s = opts->warmup_cap_s > 0 ? opts->warmup_cap_s : LOOM_LLAMA_WARM_CAP_S;
    while (!rc && opts->warmup_s > 0) {
        uint32_t pos = 0;
        loom_llama_warm_begin(rt, &wu);
        for (uint32_t done = 0; !rc && done < LOOM_LLAMA_WARM_WINDOW;) {
            loom_llama_run_opts quiet = { .token = opts->token };
            loop W = { .rt = rt, .m = m, .o = &quiet, .vocab = cfg->vocab, .max_seq = cfg->max_seq, .r = out };
            uint32_t n = cfg->max_seq < 64 ? cfg->max_seq : 64;
            rc = decode(&W, n, pos, opts->token, k);
            pos = (pos + n) % cfg->max_seq;
            out->warmup_steps += n;
            done += n;
        }
        bool over = loom_llama_warm_end(rt, &wu, LOOM_LLAMA_WARM_WINDOW, opts->warmup_s, cap_s);
        out->warmup_window_us = wu.us;
        out->warmup_stable = wu.stable;
        if (over)
            break;
    }
    out->warmup_s = (now_us() - wu.t0) / 1e6;
    /* The timed run starts from an idle queue at position 0. */
    if (!rc)
        rc = loom_rt_wait_idle(rt);
    loom_rt_counters c0, c1;
    uint64_t h0, m0, h1, m1;
    /* A group profile covers the timed steps only. */
    loom_rt_profile_reset(rt, loom_llama_program(m));
    loom_rt_collect_timestamps(rt);
    loom_rt_get_counters(rt, &c0);
    loom_llama_cache_counts(m, &h0, &m0);
    double t0 = now_us();
    if (!rc)
        rc = decode(&L, opts->steps, 0, opts->token, k);
    if (!rc)
        rc = loom_rt_wait_idle(rt);
    double wall = now_us() - t0;
    loom_rt_collect_timestamps(rt);
    loom_rt_get_counters(rt, &c1);
    loom_llama_cache_counts(m, &h1, &m1);
    if (!rc) {
        double n = opts->steps;
        out->steps = opts->steps;
        out->wall_us_per_token = wall / n;
        uint64_t timed = c1.timed_steps - c0.timed_steps;
        out->gpu_us_per_token = timed ? (double)(c1.gpu_ns - c0.gpu_ns) / 1e3 / (double)timed : 0.0;
        out->dispatches_per_token = (double)(c1.dispatches - c0.dispatches) / n;
        out->barriers_per_token = (double)(c1.barriers - c0.barriers) / n;
        out->polled_per_token = (double)(c1.polled - c0.polled) / n;
        out->host_waits_per_token = (double)(c1.waits_spun - c0.waits_spun + c1.waits_blocked - c0.waits_blocked) / n;
        out->submits_per_token = (double)(c1.submits - c0.submits) / n;
        out->replay_waits_per_token = (double)(c1.replay_waits - c0.replay_waits) / n;
        out->cache_hits = h1 - h0;
        out->cache_misses = m1 - m0;
    }
    loom_llama_ref_destroy(L.ref);
    free(L.gl);
    free(L.rl);
    return rc;
}

/* ---- prefill benchmark ---------------------------------------------------- */

/* The prompt's n positions from at in steps of chunk rows; *last is the
 * last step's index. */
static loom_result prefill_once(loom_llama *m, uint32_t at, uint32_t n, uint32_t chunk, bool verify, uint32_t *last)
{
    loom_result rc = LOOM_OK;
    for (uint32_t pos = at; pos < at + n && !rc; pos += chunk) {
        uint32_t rows = at + n - pos < chunk ? at + n - pos : chunk;
        rc = verify ? loom_llama_submit_verify(m, pos, rows, last) : loom_llama_submit_rows(m, pos, rows, last);
    }
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, uint32_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

loom_result loom_llama_bench_prefill(loom_rt *rt, loom_llama *m, const uint32_t *ids, uint32_t at, uint32_t n,
                                     uint32_t chunk, bool verify, double warmup_s, uint32_t reps,
                                     loom_llama_prefill_result *out)
{
    if (!rt || !m || !ids || !out || !reps)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama bench prefill: NULL argument or zero reps");
    memset(out, 0, sizeof *out);
    const loom_llama_config *cfg = loom_llama_get_config(m);
    if (n < 1 || at >= cfg->max_seq || n >= cfg->max_seq - at)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama bench prefill: %u ids from position %u need at + n <= %u "
                         "(max_seq - 1: the first generated token needs a position)", n, at, cfg->max_seq - 1);
    if (chunk < 1 || chunk > LOOM_LLAMA_MAX_ROWS)
        return loom_fail(LOOM_INVALID_ARGUMENT, "llama bench prefill: chunk %u is not in [1, %u]", chunk,
                         LOOM_LLAMA_MAX_ROWS);
    double *gpu = malloc(reps * sizeof *gpu), *wall = malloc(reps * sizeof *wall);
    double *ttft = malloc(reps * sizeof *ttft);
    loom_result rc = gpu && wall && ttft ? LOOM_OK : loom_fail(LOOM_OUT_OF_MEMORY, "llama bench prefill");
    if (!rc)
        rc = loom_llama_set_prompt(m, ids, at + n, 0);
    uint32_t last = 0, tok = 0;
    /* The context before the timed rows: its cache rows written once. */
    if (!rc && at > 0 && !(rc = prefill_once(m, 0, at, LOOM_LLAMA_MAX_ROWS, false, &last)))
        rc = loom_rt_wait(rt, loom_llama_step_id(m, last));
    /* Warm-up: the timed work back to back, in windows of
     * LOOM_LLAMA_WARM_PREFILLS prefills, by the warm-up rule. */
    loom_llama_warm wu = { .t0 = now_us() };
    while (!rc && warmup_s > 0) {
        loom_llama_warm_begin(rt, &wu);
        for (uint32_t i = 0; i < LOOM_LLAMA_WARM_PREFILLS && !rc; i++) {
            rc = prefill_once(m, at, n, chunk, verify, &last);
            out->warmup_reps++;
        }
        if (!rc)
            rc = loom_rt_wait_idle(rt);
        bool over = loom_llama_warm_end(rt, &wu, LOOM_LLAMA_WARM_PREFILLS, warmup_s, LOOM_LLAMA_WARM_CAP_S);
        out->warmup_stable = wu.stable;
        if (over)
            break;
    }
    if (!rc)
        rc = loom_rt_wait_idle(rt);
    out->warmup_s = (now_us() - wu.t0) / 1e6;
    /* Time to first token: the prefill, then one decode step going on from
     * its token, until that step's token is on the host. */
    for (uint32_t r = 0; r < reps && !rc; r++) {
        double w0 = now_us();
        uint32_t index = 0;
        rc = prefill_once(m, at, n, chunk, verify, &last);
        if (!rc)
            rc = loom_llama_submit(m, 0, at + n, &index);
        if (!rc)
            rc = loom_llama_collect(m, index, &tok, NULL);
        ttft[r] = now_us() - w0;
    }
    /* Then one prefill at a time, each from an idle queue (last, so the
     * model's program, and its profile, are the prefill's): its GPU time (the sum
     * of its steps' timestamps) and wall time. */
    for (uint32_t r = 0; r < reps && !rc; r++) {
        loom_rt_counters c0, c1;
        loom_rt_collect_timestamps(rt);
        loom_rt_get_counters(rt, &c0);
        double w0 = now_us();
        rc = prefill_once(m, at, n, chunk, verify, &last);
        if (!rc)
            rc = loom_rt_wait(rt, loom_llama_step_id(m, last));
        wall[r] = now_us() - w0;
        loom_rt_collect_timestamps(rt);
        loom_rt_get_counters(rt, &c1);
        gpu[r] = c1.timed_steps > c0.timed_steps ? (double)(c1.gpu_ns - c0.gpu_ns) / 1e3 : 0;
    }
    if (!rc) {
        out->rows = n;
        out->chunk = chunk;
        out->reps = reps;
        out->gpu_us = median(gpu, reps);
        out->wall_us = median(wall, reps);
        out->ttft_us = median(ttft, reps);
        double us = out->gpu_us > 0 ? out->gpu_us : out->wall_us;
        out->tokens_per_s = us > 0 ? n / (us * 1e-6) : 0;
        out->first_token = tok;
    }
    free(gpu);
    free(wall);
    free(ttft);
    return rc;
}
