/* loom_compile: verifies the input, runs the pass pipeline on a copy and
 * wraps the result as a plan with its statistics and key. Whatever the
 * switches, the plan is explicit: when no pass placed barriers, a barrier
 * is recorded before every node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

/* "fuse, stage, gather, reorder, barriers, lifetimes, cache, split_k": the
 * switches LOOM_DISABLE knows, the passes' from the pass table. */
static const char *known_switches(char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    for (uint32_t i = 0; i < loom_pass_count(); i++) {
        const loom_pass *p = loom_pass_at(i);
        if (p->disable && len < cap)
            len += (size_t)snprintf(buf + len, cap - len, "%s, ", p->name);
    }
    if (len < cap)
        snprintf(buf + len, cap - len, "cache, split_k");
    return buf;
}

/* The LOOM_DISABLE_* bit of one name: a pass that may be skipped, or the
 * cache, or the split K walk; 0 when unknown. */
static uint32_t switch_bit(const char *name, size_t len)
{
    if (len == 5 && memcmp(name, "cache", 5) == 0)
        return LOOM_DISABLE_CACHE;
    if (len == 7 && memcmp(name, "split_k", 7) == 0)
        return LOOM_DISABLE_SPLIT_K;
    for (uint32_t i = 0; i < loom_pass_count(); i++) {
        const loom_pass *p = loom_pass_at(i);
        if (p->disable && strlen(p->name) == len && memcmp(p->name, name, len) == 0)
            return p->disable;
    }
    return 0;
}

/* The forms LOOM_ENABLE knows. */
static const struct {
    const char *name;
    uint32_t bit;
} ENABLE_NAMES[] = {
    { "half_shares", LOOM_ENABLE_HALF_SHARES },
    { "half_stage", LOOM_ENABLE_HALF_STAGE },
    { "half_act", LOOM_ENABLE_HALF_ACT },
    { "long_rows", LOOM_ENABLE_LONG_ROWS },
    { "qkv_await", LOOM_ENABLE_QKV_AWAIT },
    { "counts", LOOM_ENABLE_COUNTS },
    { "counts_ffn", LOOM_ENABLE_COUNTS_FFN },
    { "counts_qkv", LOOM_ENABLE_COUNTS_QKV },
};
#define N_ENABLE_NAMES (sizeof ENABLE_NAMES / sizeof ENABLE_NAMES[0])

/* "half_shares, half_stage, ...": the names of ENABLE_NAMES. */
static const char *known_forms(char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < N_ENABLE_NAMES && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", ENABLE_NAMES[i].name);
    return buf;
}

/* The LOOM_ENABLE_* bit of one name; 0 when unknown. */
static uint32_t enable_bit(const char *name, size_t len)
{
    for (size_t i = 0; i < N_ENABLE_NAMES; i++)
        if (strlen(ENABLE_NAMES[i].name) == len && memcmp(ENABLE_NAMES[i].name, name, len) == 0)
            return ENABLE_NAMES[i].bit;
    return 0;
}

/* The bits a list of names (separated by commas or spaces) stands for,
 * bit_of naming one; an unknown name fails, naming var, what a name is
 * (noun) and the known. */
static loom_result names_parse(const char *var, const char *noun, const char *list,
                               uint32_t (*bit_of)(const char *, size_t), const char *known, uint32_t *out)
{
    *out = 0;
    for (const char *p = list ? list : ""; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        if (e == p)
            break;
        uint32_t bit = bit_of(p, (size_t)(e - p));
        if (!bit)
            return loom_fail(LOOM_INVALID_ARGUMENT, "%s: unknown %s '%.*s' (known: %s)", var, noun, (int)(e - p),
                             p, known);
        *out |= bit;
        p = e;
    }
    return LOOM_OK;
}

static loom_result disable_parse(const char *list, uint32_t *out)
{
    char known[160];
    return names_parse("LOOM_DISABLE", "switch", list, switch_bit, known_switches(known, sizeof known), out);
}

/* The environment is read on every call, so a process can change it
 * between compiles (tests do); both are a few string compares. */
loom_result plan_opts_resolve(const loom_compile_options *o, plan_opts *out)
{
    out->pipeline = o && o->pipeline ? o->pipeline : LOOM_DEFAULT_PIPELINE;
    out->window = o && o->window ? o->window : LOOM_DEFAULT_WINDOW;
    out->disable = o ? o->disable : 0;
    out->max_binding_range = o ? o->max_binding_range : 0;
    out->enable = o ? o->enable : 0;
    out->wave_groups = o ? o->wave_groups : 0;
    out->coopmat = o && o->coopmat;
    out->awaits = o && o->awaits;
    out->cache = !(out->disable & LOOM_DISABLE_CACHE);
    const char *passes = getenv("LOOM_PASSES"), *off = getenv("LOOM_DISABLE");
    if (passes && passes[0]) {
        loom_result rc = loom_pipeline_check(passes);
        if (rc)
            return loom_fail_wrap(rc, "LOOM_PASSES='%s'", passes);
        out->pipeline = passes;
    }
    if (off && off[0]) {
        uint32_t bits;
        loom_result rc = disable_parse(off, &bits);
        if (rc)
            return rc;
        out->disable |= bits;
        out->cache &= !(bits & LOOM_DISABLE_CACHE);
    }
    out->disable &= ~(uint32_t)LOOM_DISABLE_CACHE;
    const char *on = getenv("LOOM_ENABLE");
    if (on && on[0]) {
        uint32_t bits;
        char known[160];
        loom_result rc =
            names_parse("LOOM_ENABLE", "form", on, enable_bit, known_forms(known, sizeof known), &bits);
        if (rc)
            return rc;
        out->enable |= bits;
    }
    return LOOM_OK;
}

size_t plan_opts_bytes(const plan_opts *o, uint8_t *dst)
{
    size_t plen = strlen(o->pipeline);
    uint32_t words[PLAN_OPTS_FIXED / 4] = { (uint32_t)plen, o->window, o->disable, (uint32_t)o->max_binding_range,
                                            (uint32_t)(o->max_binding_range >> 32), o->enable, o->wave_groups,
                                            (uint32_t)o->coopmat, (uint32_t)o->awaits };
    memcpy(dst, words, sizeof words);
    memcpy(dst + sizeof words, o->pipeline, plen);
    return sizeof words + plen;
}

loom_result plan_key_bytes(const loom_graph *g, const plan_opts *o, uint8_t **buf, size_t *cap, size_t *len)
{
    loom_result rc = loom_graph_encode(g, buf, cap, len);
    if (rc)
        return rc;
    size_t need = *len + PLAN_OPTS_FIXED + strlen(o->pipeline);
    if (need > *cap) {
        const loom_allocator *a = loom_graph_allocator(g);
        uint8_t *q = a->realloc(a->user, *buf, *cap, need);
        if (!q)
            return loom_fail(LOOM_OUT_OF_MEMORY, "plan key: out of memory");
        *buf = q;
        *cap = need;
    }
    *len += plan_opts_bytes(o, *buf + *len);
    return LOOM_OK;
}

/* With a binding limit, no binding of the plan may exceed it: a pipeline
 * without the split pass says so here rather than at program creation. */
static loom_result check_limit(const loom_graph *g, uint64_t limit)
{
    for (uint32_t i = 0; limit && i < loom_graph_node_count(g); i++) {
        const loom_node *n = loom_graph_node(g, i);
        const loom_binding *b = loom_node_bindings(g, n);
        for (uint32_t k = 0; k < n->n_bindings; k++)
            if (b[k].size > limit)
                return loom_fail(LOOM_LIMIT,
                                 "node %u (%s): binding slot %u on buffer %u '%s' is %llu bytes, above "
                                 "max_binding_range %llu, and the pipeline has no 'split' pass to cut it",
                                 i, loom_op_name((loom_op)n->op), b[k].slot, b[k].buffer,
                                 loom_graph_buffer_name(g, b[k].buffer), (unsigned long long)b[k].size,
                                 (unsigned long long)limit);
    }
    return LOOM_OK;
}

static void fill_stats(const loom_graph *in, const loom_graph *out, const loom_pass_ctx *ctx,
                       const loom_pipeline_report *rep, loom_plan_stats *s)
{
    memset(s, 0, sizeof *s);
    s->nodes = loom_graph_node_count(out);
    s->captured_nodes = loom_graph_node_count(in);
    uint32_t last_group = LOOM_NONE;
    for (uint32_t i = 0; i < s->nodes; i++) {
        const loom_node *n = loom_graph_node(out, i);
        s->dispatches += n->type == LOOM_NODE_DISPATCH;
        s->barriers += n->barrier != LOOM_NONE && !loom_node_awaited(n);   /* an awaited edge polls instead */
        s->awaited += loom_node_awaited(n);
        if (n->group != last_group)
            s->groups++;
        last_group = n->group;
    }
    s->barrier_lower_bound = ctx->barrier_lower_bound;
    s->fused_chains = ctx->fused_chains;
    s->split_nodes = ctx->split_nodes;
    s->scratch_bytes = ctx->scratch_bytes;
    s->arena_bytes = ctx->arena_bytes;
    s->arena_lower_bound = ctx->arena_lower_bound;
    s->n_passes = rep->n_passes < LOOM_MAX_PASSES ? rep->n_passes : LOOM_MAX_PASSES;
    for (uint32_t i = 0; i < s->n_passes; i++) {
        s->pass_names[i] = rep->names[i];
        s->pass_ns[i] = rep->ns[i];
    }
}

loom_result plan_compile(const loom_graph *g, const loom_compile_options *opts, const plan_opts *resolved,
                         const loom_hash *key, loom_plan **out)
{
    plan_opts po = *resolved;
    loom_result rc = loom_pipeline_check(po.pipeline);
    if (rc)
        return rc;
    if ((rc = loom_graph_verify(g)))
        return rc;
    const loom_allocator *a = loom_graph_allocator(g);
    loom_plan *p = a->realloc(a->user, NULL, 0, sizeof *p);
    if (!p)
        return loom_fail(LOOM_OUT_OF_MEMORY, "loom_compile: out of memory");
    memset(p, 0, sizeof *p);
    p->a = a;
    p->refs = 1;
    p->key = *key;
    if ((rc = loom_graph_clone(g, &p->graph)))
        goto fail;
    loom_graph_clear_schedule(p->graph);

    loom_pass_ctx ctx = { .window = po.window, .max_binding_range = po.max_binding_range, .enable = po.enable,
                          .wave_groups = po.wave_groups, .coopmat = po.coopmat, .awaits = po.awaits,
                          .split_k = !(po.disable & LOOM_DISABLE_SPLIT_K) };
    loom_pipeline_report rep;
    loom_pipeline_desc d = {
        .pipeline = po.pipeline,
        .skip = loom_pass_skip_mask(po.disable),
        .verify_each = opts && opts->verify_each,
        .time_each = true,   /* a clock read per pass is noise next to any pass */
        .dump_dir = opts ? opts->dump_dir : NULL,
    };
    if ((rc = loom_pipeline_run(p->graph, &d, &ctx, &rep)))
        goto fail;
    if (!loom_graph_scheduled(p->graph) && (rc = loom_schedule_serial(p->graph, &ctx)))
        goto fail;
    if ((rc = check_limit(p->graph, po.max_binding_range)))
        goto fail;
    fill_stats(g, p->graph, &ctx, &rep, &p->stats);
    *out = p;
    return LOOM_OK;
fail:
    loom_plan_release(p);
    return rc;
}

loom_result loom_compile(const loom_graph *g, const loom_compile_options *opts, loom_plan **out)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_compile: out is NULL");
    *out = NULL;
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_compile: graph is NULL");
    plan_opts po;
    loom_result rc = plan_opts_resolve(opts, &po);
    if (rc)
        return rc;
    uint8_t *buf = NULL;
    size_t cap = 0, len = 0;
    rc = plan_key_bytes(g, &po, &buf, &cap, &len);
    loom_hash key = rc ? (loom_hash){ 0, 0 } : loom_hash_bytes(buf, len);
    if (buf) {
        const loom_allocator *a = loom_graph_allocator(g);
        a->realloc(a->user, buf, cap, 0);
    }
    if (rc)
        return rc;
    return plan_compile(g, opts, &po, &key, out);
}
