/* awaits: which dependencies of a scheduled plan are awaited in the shader
 * instead of recorded as barriers (tagged vectors, shaders/tag.glsl), and
 * the kernel form each node of such an edge takes.
 *
 * With ctx->awaits (loom_compile_options.awaits: the device's rule), the
 * output y of a producer on a form with a tagged variant becomes tagged
 * vector v, and the reader right after it polls v instead of waiting at a
 * barrier, where
 * - the producer and the reader are levels of their own, one after the
 *   other, and the reader reads y whole as its x: each of its workgroups
 *   has then seen every producer workgroup finish (a producer workgroup
 *   writes its part of y after all its reads) before it writes anything,
 *   so no write of the reader overtakes a read of the producer (nor one
 *   the lifetimes pass let share the producer's inputs' arena bytes);
 * - y is all the producer writes, but for buffers no other node touches
 *   (the attention's own state), so nothing after the reader can find an
 *   untagged write of the producer not yet landed: the barrier after the
 *   reader orders what the pair did for everything later;
 * - y is SCRATCH (plan-owned, never seen by the host: the runtime keeps
 *   tagged vectors in memory of their own) and the graph has a step-
 *   parameter buffer (the runtime's step word sits after it).
 * Both nodes take their tagged kernels (forms.def: MV_TAG, ATT_TAG; an
 * f16 reader after a gate producer MV_TAG MV_TAG_GATE; a block-typed gated FFN
 * and a block-typed reader pass the vector as tagged int8 quads, MV_YQT and
 * MV_XQT, where both have such a form). The reader keeps its
 * barrier reason (what the poll stands in for; the runtime records it
 * after a poll gave up) and joins its producer's group: a group is what
 * runs between two recorded barriers. Runs after lifetimes (it needs the
 * classes and the barriers); without either it leaves the plan as is. */
#include <string.h>
#include "internal.h"
#include "loom_ops.h"

/* The forms with a tagged variant, and the slots of their x and y (-1:
 * not one the form tags). Two producers (docs/perf.md, "Tagged vectors"):
 * - the gated FFN: its workgroups run in several waves, and the down
 *   projection's workgroups take the slots its last wave frees, issue
 *   their weight loads and poll h;
 * - the attention (gate): its few workgroups leave most SMs idle, and the
 *   o-projection's workgroups wait there, resident, for its output. An
 *   f16 reader (2 rows a workgroup, thousands of them) waits for all of
 *   it before loading its weights (MV_TAG_GATE): had they loaded their
 *   weights first, the stream and the polls would slow the attention by
 *   more than the barrier costs. A block-typed reader (16 rows a
 *   workgroup, dim / 16 of them) has no gate form: it loads its first
 *   weights and polls word by word as it quantizes x, which on an H200
 *   took the `1b` Q4_K_M step 598.7 -> 591.4 us and `7b` with 8 layers
 *   667.5 -> 665.7 (docs/perf-log.md, "the o-projection not gated").
 * - q/k/v (MV_QKV), only with LOOM_ENABLE_QKV_AWAIT (on an H200 the
 *   polls cost more than the barrier: docs/perf-log.md, "q/k/v awaited"):
 *   its tagged y is q and then the step's k and v rows
 *   (the bytes of y's buffer grow to hold them), and the attention behind
 *   it (ATT_QKVT) polls its head's q words and takes the step's own row
 *   from the k and v words, the cache rows before it from the caches,
 *   written by earlier steps. An attention workgroup polls only its head,
 *   so that edge also needs the attention's writes to meet none of q/k/v's
 *   reads, in the arena too; the o-projection behind the attention sees
 *   every q/k/v workgroup finished through the attention's (each of their
 *   words is polled by some attention workgroup, the k and v rows by the
 *   workgroup of the last share of each head).
 * Tagging the other vectors of a layer gained nothing: behind a one-wave
 * producer nothing starts early. */
static const struct tag_form {
    const char *form, *tag_flags, *gate_flags;
    int x, y;
    bool gate;   /* as a producer: an f16 reader waits for all of y before loading anything */
    bool block_reader;   /* as a producer: only a reader of block-typed weights polls */
    const char *read_flags;   /* as a reader, where they differ from tag_flags */
    bool qkv;   /* as a producer: q/k/v, y tagged with the step's k and v rows after q */
} tag_forms[] = {
    { "attention", "ATT_TAG", NULL, 1, 4, true, false, "ATT_QKVT", false },
    { "attention_kh", "ATT_TAG", NULL, 1, 4, true, false, "ATT_QKVT", false },
    { "attention_qkvt", "ATT_TAG", NULL, -1, 4, true, false, NULL, false },
    { "attention_kh_qkvt", "ATT_TAG", NULL, -1, 4, true, false, NULL, false },
    /* tagged already (q/k/v's edges are marked last): as readers only */
    { "attention_tag", "ATT_TAG", NULL, 1, -1, true, false, "ATT_QKVT", false },
    { "attention_kh_tag", "ATT_TAG", NULL, 1, -1, true, false, "ATT_QKVT", false },
    { "attention_wide_tag", "ATT_TAG", NULL, 1, -1, true, true, "ATT_QKVT", false },
    { "attention_wide_kh_tag", "ATT_TAG", NULL, 1, -1, true, true, "ATT_QKVT", false },
    /* The wide attention (head_dim 128): on an H200 its o-projection
     * polling took the 7b Q4_K_M step 2,486.2 -> 2,457.7 us, and the f16
     * step with 8 layers 1,066.9 -> 1,078.6 (docs/perf-log.md, "wider
     * residual projections"): f16's 2048 o-projection workgroups of 2 rows
     * spin beside the attention where Q4_K's 256 of 16 rows do not. */
    { "attention_wide", "ATT_TAG", NULL, 1, 4, true, true, "ATT_QKVT", false },
    { "attention_wide_kh", "ATT_TAG", NULL, 1, 4, true, true, "ATT_QKVT", false },
    { "attention_wide_qkvt", "ATT_TAG", NULL, -1, 4, true, true, NULL, false },
    { "attention_wide_kh_qkvt", "ATT_TAG", NULL, -1, 4, true, true, NULL, false },
    /* q/k/v: y at binding 6 (7 where the form also reads the embedding) */
    { "rms_norm_qkv_rope", "MV_TAG", NULL, -1, 6, false, false, NULL, true },
    { "rms_norm_qkv_rope_pre", "MV_TAG", NULL, -1, 6, false, false, NULL, true },
    { "rms_norm_qkv_rope_pre_x16", "MV_TAG", NULL, -1, 6, false, false, NULL, true },
    { "rms_norm_qkv_rope_pre_xq", "MV_TAG", NULL, -1, 6, false, false, NULL, true },
    { "rms_norm_qkv_rope_kh", "MV_TAG", NULL, -1, 6, false, false, NULL, true },
    { "rms_norm_qkv_rope_kh_pre", "MV_TAG", NULL, -1, 6, false, false, NULL, true },
    { "rms_norm_qkv_rope_kh_pre_x16", "MV_TAG", NULL, -1, 6, false, false, NULL, true },
    { "rms_norm_qkv_rope_kh_pre_xq", "MV_TAG", NULL, -1, 6, false, false, NULL, true },
    { "embed_rms_norm_qkv_rope", "MV_TAG", NULL, -1, 7, false, false, NULL, true },
    { "embed_rms_norm_qkv_rope_kh", "MV_TAG", NULL, -1, 7, false, false, NULL, true },
    { "rms_norm_matvec_silu_mul", "MV_TAG", NULL, -1, 4, false, false, NULL, false },
    { "rms_norm_matvec_silu_mul_pre", "MV_TAG", NULL, -1, 4, false, false, NULL, false },
    { "rms_norm_matvec_silu_mul_pre_xq", "MV_TAG", NULL, -1, 4, false, false, NULL, false },
    { "matvec_add", "MV_TAG", "MV_TAG MV_TAG_GATE", 1, -1, false, false, NULL, false },
    { "matvec_add_stage", "MV_TAG", "MV_TAG MV_TAG_GATE", 1, -1, false, false, NULL, false },
    { "matvec_add_stage_tq", "MV_TAG", NULL, 1, -1, false, false, NULL, false },
};

/* Node n's tagged kernels, where its form has them for its weights:
 * tag_name as a producer, read_name (gate_name behind a gate producer) as a
 * reader. */
typedef struct tag_kernel {
    const char *tag_name, *read_name, *gate_name;
    int x, y;
    bool gate, block_reader, qkv;
} tag_kernel;

static bool tag_kernel_of(const loom_graph *g, const loom_node *n, tag_kernel *out)
{
    if (n->type != LOOM_NODE_DISPATCH)
        return false;
    const char *name = loom_graph_kernel_name(g, n->kernel), *row = loom_form_row(name);
    for (size_t k = 0; row && k < sizeof tag_forms / sizeof tag_forms[0]; k++)
        if (!strcmp(row, tag_forms[k].form)) {
            const struct tag_form *f = &tag_forms[k];
            const char *tag = loom_form_variant(name, f->tag_flags, NULL);
            *out = (tag_kernel){ tag, f->read_flags ? loom_form_variant(name, f->read_flags, NULL) : tag,
                                 f->gate_flags ? loom_form_variant(name, f->gate_flags, NULL) : NULL, f->x, f->y,
                                 f->gate, f->block_reader, f->qkv };
            return out->tag_name != NULL && (out->x < 0 || out->read_name != NULL);
        }
    return false;
}

/* Node j + 1, if it is the one other node touching y's bytes, reading all
 * of them as the x of a tagged form and writing none. */
static bool sole_reader(const loom_graph *g, uint32_t j, const loom_binding *y)
{
    if (loom_graph_buffer(g, y->buffer)->cls != LOOM_CLASS_SCRATCH)
        return false;
    uint32_t reader = LOOM_NONE;
    for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
        const loom_node *n = loom_graph_node(g, i);
        const loom_range *w = loom_node_writes(g, n), *r = loom_node_reads(g, n);
        bool reads = false, writes = false;
        for (uint32_t k = 0; k < n->n_writes; k++)
            writes |= loom_range_meets(&w[k], y);
        for (uint32_t k = 0; k < n->n_reads; k++)
            reads |= loom_range_meets(&r[k], y);
        if (i == j || !(reads || writes))
            continue;
        tag_kernel t;
        if (reader != LOOM_NONE || writes || !tag_kernel_of(g, n, &t) || t.x < 0 ||
            !loom_binding_same(loom_node_slot(g, n, (uint32_t)t.x), y))
            return false;
        reader = i;
    }
    return reader == j + 1;
}

/* Is y all node j writes, but for buffers no other node touches? */
static bool writes_only(const loom_graph *g, uint32_t j, const loom_binding *y)
{
    const loom_node *n = loom_graph_node(g, j);
    const loom_range *w = loom_node_writes(g, n);
    for (uint32_t k = 0; k < n->n_writes; k++) {
        if (w[k].buffer == y->buffer && w[k].offset == y->offset && w[k].size == y->size)
            continue;
        for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
            const loom_node *m = loom_graph_node(g, i);
            const loom_range *r[2] = { loom_node_reads(g, m), loom_node_writes(g, m) };
            uint32_t nr[2] = { m->n_reads, m->n_writes };
            for (int a = 0; i != j && a < 2; a++)
                for (uint32_t b = 0; b < nr[a]; b++)
                    if (r[a][b].buffer == w[k].buffer)
                        return false;
        }
    }
    return true;
}

/* A barrier (recorded or awaited) in front of node i, or i is first. */
static bool level_starts(const loom_graph *g, uint32_t i)
{
    const loom_node *n = loom_graph_node(g, i);
    return i == 0 || n->type == LOOM_NODE_BARRIER || n->barrier != LOOM_NONE;
}

/* Does node i make a level of its own? */
static bool level_alone(const loom_graph *g, uint32_t i)
{
    return level_starts(g, i) && (i + 1 == loom_graph_node_count(g) || level_starts(g, i + 1));
}

static bool has_params(const loom_graph *g)
{
    for (uint32_t b = 0; b < loom_graph_buffer_count(g); b++)
        if (loom_graph_buffer(g, b)->usage == LOOM_USAGE_PARAMS && !loom_graph_buffer(g, b)->external)
            return true;
    return false;
}

/* Is buffer b an awaited edge's vector already (it then lives apart from
 * the arena: runtime/tags.c)? */
static bool tagged_vector(const loom_graph *g, uint32_t b)
{
    for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
        const loom_node *n = loom_graph_node(g, i);
        const loom_binding *y = n->tag_out ? loom_node_slot(g, n, n->tag_out_slot) : NULL;
        if (y && y->buffer == b)
            return true;
    }
    return false;
}

/* Do ranges a and b share a byte, in their buffer or, both scratch, in the
 * arena the lifetimes pass packed them into? */
static bool placed_meet(const loom_graph *g, const loom_range *a, const loom_range *b)
{
    if (a->buffer == b->buffer)
        return loom_ranges_overlap(a, b);
    const loom_buffer *ba = loom_graph_buffer(g, a->buffer), *bb = loom_graph_buffer(g, b->buffer);
    if (ba->cls != LOOM_CLASS_SCRATCH || bb->cls != LOOM_CLASS_SCRATCH)
        return false;
    uint64_t a0 = ba->arena_offset + a->offset, b0 = bb->arena_offset + b->offset;
    return a0 < b0 + b->size && b0 < a0 + a->size && !tagged_vector(g, a->buffer) && !tagged_vector(g, b->buffer);
}

/* q/k/v (j) before an attention (j + 1) polling only its head: is every
 * write of j but y to bytes no node other than the two touches, the
 * attention only reading them (the caches: it takes the step's own row
 * from y), and does no write of the attention meet a read of j? */
static bool qkv_pair_ok(const loom_graph *g, uint32_t j, const loom_binding *y)
{
    const loom_node *p = loom_graph_node(g, j), *r = loom_graph_node(g, j + 1);
    const loom_range *pw = loom_node_writes(g, p), *pr = loom_node_reads(g, p), *rw = loom_node_writes(g, r);
    for (uint32_t k = 0; k < p->n_writes; k++) {
        if (pw[k].buffer == y->buffer)
            continue;
        for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
            const loom_node *m = loom_graph_node(g, i);
            const loom_range *mr = loom_node_reads(g, m), *mw = loom_node_writes(g, m);
            for (uint32_t b = 0; i != j && b < m->n_writes; b++)
                if (placed_meet(g, &mw[b], &pw[k]))
                    return false;
            for (uint32_t b = 0; i != j && i != j + 1 && b < m->n_reads; b++)
                if (placed_meet(g, &mr[b], &pw[k]))
                    return false;
        }
    }
    for (uint32_t a = 0; a < r->n_writes; a++)
        for (uint32_t b = 0; b < p->n_reads; b++)
            if (placed_meet(g, &rw[a], &pr[b]))
                return false;
    return true;
}

/* The bytes q/k/v's tagged y needs (q, then the step's k and v rows); 0
 * where y does not bind its buffer whole or the buffer cannot grow to
 * them inside the arena. */
static uint64_t qkv_tagged_bytes(const loom_graph *g, uint32_t j, const loom_binding *y)
{
    loom_op_args a;
    const loom_buffer *b = loom_graph_buffer(g, y->buffer);
    if (loom_op_args_of(g, j, &a) || y->offset != 0 || y->size != b->size || y->size != (uint64_t)a.q_rows * 4)
        return 0;
    uint64_t bytes = ((uint64_t)a.q_rows + 2ull * a.kv_rows) * 4;
    return bytes <= loom_graph_arena_size(g) ? bytes : 0;
}

/* y's buffer grows to bytes (its words live apart from the arena once
 * tagged: runtime/tags.c; placed at the arena's start where it would
 * reach past the end, so that it stays inside), and with it every binding
 * and range of it in nodes j and j + 1, the only ones touching it. */
static void qkv_widen(loom_graph *g, uint32_t j, uint32_t buffer, uint64_t bytes)
{
    loom_buffer *b = loom_graph_buffer_mut(g, buffer);
    if (b->arena_offset + bytes > loom_graph_arena_size(g))
        b->arena_offset = 0;
    b->size = bytes;
    for (uint32_t i = j; i <= j + 1; i++) {
        loom_node *n = loom_graph_node_mut(g, i);
        loom_binding *bd = (loom_binding *)loom_node_bindings(g, n);
        loom_range *rg = (loom_range *)loom_node_reads(g, n);   /* the reads, then the writes */
        for (uint32_t k = 0; k < n->n_bindings; k++)
            if (bd[k].buffer == buffer)
                bd[k].size = bytes;
        for (uint32_t k = 0; k < (uint32_t)n->n_reads + n->n_writes; k++)
            if (rg[k].buffer == buffer)
                rg[k].size = bytes;
    }
}

/* Producer j and reader j + 1 with the vector y (at the producer's slot
 * t->y and the reader's u->x) become awaited edge v; gate: the reader on
 * its gate form; grow: the bytes y's buffer grows to (q/k/v; 0: as it is). */
static loom_result mark(loom_graph *g, uint32_t j, const tag_kernel *t, const tag_kernel *u, bool gate, uint64_t grow,
                        uint32_t v)
{
    uint32_t kp, kr;
    const char *pk = t->tag_name, *rk = gate ? u->gate_name : u->read_name;
    /* Block-typed on both sides: the vector as tagged int8 quads (MV_YQT,
     * MV_XQT), which the reader takes as its integer dots do, instead of
     * quantizing the producer's f32 words itself. */
    const char *pq = t->gate ? NULL : loom_form_variant(pk, "MV_YQT", NULL);
    const char *rq = pq ? loom_form_variant(rk, "MV_XQT", NULL) : NULL;
    if (pq && rq) {
        pk = pq;
        rk = rq;
    }
    loom_result rc = loom_graph_kernel(g, pk, &kp);
    if (!rc)
        rc = loom_graph_kernel(g, rk, &kr);
    if (rc)
        return rc;
    if (grow)
        qkv_widen(g, j, loom_node_slot(g, loom_graph_node(g, j), (uint32_t)t->y)->buffer, grow);
    loom_node *p = loom_graph_node_mut(g, j), *r = loom_graph_node_mut(g, j + 1);
    p->kernel = kp;
    p->tag_out = (uint16_t)v;
    p->tag_out_slot = (uint8_t)t->y;
    r->kernel = kr;
    r->tag_in = (uint16_t)(v | (gate ? LOOM_AWAIT_GATE : 0));
    r->tag_in_slot = (uint8_t)u->x;
    return LOOM_OK;
}

/* ---- counted edges ---------------------------------------------------------
 * A residual projection's outputs (y, the next norm's quads t and the
 * squares it sums by atomics) cannot be tagged words, so its edge to the
 * norm-folded reader behind it (the gated FFN behind the o-projection, the
 * next layer's q/k/v behind the down projection) was a barrier. Counted
 * instead (tag.glsl, "Counted edges"): the producer's workgroups count
 * themselves once their writes are fenced, and the reader waits for all
 * of them before reading t and the squares (its first weight loads in
 * flight); a later reader of y in the same run of unbarriered levels (the
 * down projection reading the o-projection's y as its residual) waits on
 * the same counter before it reads y. Only block-typed forms: their
 * residual projections run dim / 16 workgroups, one count each, where
 * f16's run thousands (a counter tried on f16 on 2026-11-26 cost more than
 * the barriers: docs/perf-log.md, "Barriers replaced by waits"). */

/* Kernel name k's counted form (MV_CNT: the counters at binding
 * LOOM_COUNT_BINDING_SLOT); NULL: none. */
static const char *counted_kernel(const char *k)
{
    const char *t = loom_form_has(k, "MV_CNT") ? k : loom_form_variant(k, "MV_TAG MV_CNT", NULL);
    loom_kernel_layout l;
    return t && loom_kernel_find(t, &l, NULL) == LOOM_OK && (l.slots & 1u << LOOM_COUNT_BINDING_SLOT) ? t : NULL;
}

/* Is a barrier recorded in front of node i (not an awaited edge's)? */
static bool recorded(const loom_graph *g, uint32_t i)
{
    const loom_node *n = loom_graph_node(g, i);
    return i == 0 || n->type == LOOM_NODE_BARRIER || (n->barrier != LOOM_NONE && !loom_node_awaited(n));
}

/* The slot of node n's binding holding range r, or -1. */
static int slot_of(const loom_graph *g, const loom_node *n, const loom_range *r)
{
    const loom_binding *b = loom_node_bindings(g, n);
    for (uint32_t k = 0; k < n->n_bindings; k++)
        if (b[k].buffer == r->buffer && r->offset >= b[k].offset && r->offset - b[k].offset + r->size <= b[k].size)
            return b[k].slot;
    return -1;
}

/* Producer j and reader j + 1 as a counted edge, if every hazard across
 * the barrier it drops is one the counter orders. With no barrier in front
 * of j + 1, nodes s..j (the run since the last recorded barrier, each but s
 * awaited, so each workgroup of a later one started after every workgroup
 * of the one before it finished) and j + 1..e - 1 (up to the next one)
 * overlap. A write of s..j met by a read of j + 1..e - 1 must be j's, read
 * where the counter guards it: t and the squares by the reader (its x and
 * g), y by a residual projection's r (*also: that node, which gets the same
 * counter); a read of an earlier node's write keeps the barrier. Two
 * writes may meet only where the reader writes over j's, or over those of
 * a counting node whose counter j waited on: a chain of counts, each
 * fenced before it is counted and waited on before the next. A read of
 * s..j overtaken by a later write is ordered by the waits (each workgroup
 * writes after its reads). The reader takes x through the caches (its dot
 * loop reads it there), so no node of s..j - 1 may have read x's bytes: a
 * line such a read left in an SM's cache could hold the bytes before j
 * wrote them. */
static bool count_ok(const loom_graph *g, uint32_t j, uint32_t *also)
{
    uint32_t nn = loom_graph_node_count(g), s = j, e = j + 2;
    while (s > 0 && !recorded(g, s))
        s--;
    while (e < nn && !recorded(g, e))
        e++;
    *also = LOOM_NONE;
    for (uint32_t m = s + 1; m <= j; m++)
        if (!loom_node_awaited(loom_graph_node(g, m)))
            return false;
    const char *rk = loom_graph_kernel_name(g, loom_graph_node(g, j + 1)->kernel);
    int rx = loom_form_has(rk, "MV_SILU") ? 2 : 1;   /* matvec.glsl's B_X; B_G is B_X + 1 */
    const loom_node *nr = loom_graph_node(g, j + 1);
    const loom_binding *rb = loom_node_bindings(g, nr);
    for (uint32_t b = 0; b < nr->n_bindings; b++) {
        if (rb[b].slot != (uint32_t)rx)
            continue;
        loom_range x = { .buffer = rb[b].buffer, .offset = rb[b].offset, .size = rb[b].size };
        for (uint32_t m = s; m < j; m++) {
            const loom_node *nm = loom_graph_node(g, m);
            const loom_range *mr = loom_node_reads(g, nm);
            for (uint32_t a = 0; a < nm->n_reads; a++)
                if (placed_meet(g, &mr[a], &x))
                    return false;
        }
    }
    for (uint32_t w = s; w <= j; w++) {
        const loom_node *nw = loom_graph_node(g, w);
        const loom_range *ww = loom_node_writes(g, nw);
        for (uint32_t k = j + 1; k < e; k++) {
            const loom_node *nk = loom_graph_node(g, k);
            const loom_range *kr = loom_node_reads(g, nk), *kw = loom_node_writes(g, nk);
            bool chained = w == j || (nw->count_out && loom_graph_node(g, j)->count_in == nw->count_out);
            for (uint32_t a = 0; a < nw->n_writes; a++) {
                for (uint32_t b = 0; b < nk->n_writes; b++)
                    if (placed_meet(g, &ww[a], &kw[b]) && !(k == j + 1 && chained))
                        return false;
                for (uint32_t b = 0; b < nk->n_reads; b++) {
                    if (!placed_meet(g, &ww[a], &kr[b]))
                        continue;
                    int slot = slot_of(g, nk, &kr[b]);
                    const char *kk = loom_graph_kernel_name(g, nk->kernel);
                    if (w != j || slot < 0)
                        return false;
                    if (k == j + 1 && (slot == rx || slot == rx + 1))
                        continue;
                    /* a residual projection's r (matvec.glsl's B_R, slot 2) */
                    if (k > j + 1 && slot == 2 && loom_form_has(kk, "MV_ADD MV_TAG") && counted_kernel(kk) &&
                        !nk->count_in && (*also == LOOM_NONE || *also == k))
                        *also = k;
                    else
                        return false;
                }
            }
        }
    }
    return true;
}

/* The counted edges of a scheduled plan, numbered from 1, where enable
 * takes them (LOOM_ENABLE_COUNTS_FFN: a gated FFN reader, _QKV: a q/k/v
 * one); their count. */
static uint32_t mark_counts(loom_graph *g, uint32_t enable)
{
    uint32_t nn = loom_graph_node_count(g), c = 0;
    for (uint32_t j = 0; j + 1 < nn && c < LOOM_COUNT_MAX; j++) {
        loom_node *p = loom_graph_node_mut(g, j), *r = loom_graph_node_mut(g, j + 1);
        if (p->type != LOOM_NODE_DISPATCH || r->type != LOOM_NODE_DISPATCH || p->count_out || r->count_in ||
            !recorded(g, j + 1) || r->barrier == LOOM_NONE || !level_alone(g, j) || !level_alone(g, j + 1))
            continue;
        const char *pk = counted_kernel(loom_graph_kernel_name(g, p->kernel));
        const char *rk = counted_kernel(loom_graph_kernel_name(g, r->kernel));
        loom_dtype w, wv;
        if (!pk || !rk || !loom_form_has(pk, "MV_ADD MV_STAGE MV_TQ") || !loom_form_has(rk, "MV_PRE MV_XQ") ||
            !loom_form_weights(pk, &w, &wv) || !loom_dtype_is_block(w) ||
            !(enable & (loom_form_has(rk, "MV_SILU") ? LOOM_ENABLE_COUNTS_FFN : LOOM_ENABLE_COUNTS_QKV)))
            continue;
        uint32_t also, kp, kr;
        if (!count_ok(g, j, &also) || loom_graph_kernel(g, pk, &kp) || loom_graph_kernel(g, rk, &kr))
            continue;
        uint32_t ka = kp;
        if (also != LOOM_NONE &&
            loom_graph_kernel(g, counted_kernel(loom_graph_kernel_name(g, loom_graph_node(g, also)->kernel)), &ka))
            continue;
        p = loom_graph_node_mut(g, j);   /* the kernel list may have grown */
        r = loom_graph_node_mut(g, j + 1);
        p->kernel = kp;
        r->kernel = kr;
        p->count_out = (uint8_t)++c;
        r->count_in = (uint8_t)c;
        if (also != LOOM_NONE) {
            loom_graph_node_mut(g, also)->kernel = ka;
            loom_graph_node_mut(g, also)->count_in = (uint8_t)c;
        }
    }
    return c;
}

/* Group numbers again, a reader of an awaited edge in its producer's. */
static void regroup(loom_graph *g)
{
    uint32_t gid = 0, prev = LOOM_NONE;
    for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
        loom_node *n = loom_graph_node_mut(g, i);
        uint32_t old = n->group;
        if (i > 0 && old != prev && !loom_node_awaited(n))
            gid++;
        n->group = gid;
        prev = old;
    }
}

loom_result loom_pass_awaits(loom_graph *g, loom_pass_ctx *ctx)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_pass_awaits: graph is NULL");
    uint32_t nn = loom_graph_node_count(g), v = 0;
    for (uint32_t i = 0; i < nn; i++)
        if (loom_node_on_edge(loom_graph_node(g, i)))
            return LOOM_OK;   /* already decided: a second run changes nothing */
    if (!ctx || !ctx->awaits || !loom_graph_scheduled(g) || nn < 2 || !has_params(g))
        return LOOM_OK;
    /* q/k/v's edges (with LOOM_ENABLE_QKV_AWAIT) last: its attention's
     * output is then a tagged vector, out of the arena, where it may have
     * shared q/k/v's input's bytes. */
    uint32_t rounds = ctx->enable & LOOM_ENABLE_QKV_AWAIT ? 2 : 1;
    for (uint32_t round = 0; round < rounds; round++)
    for (uint32_t j = 0; j + 1 < nn && v < LOOM_AWAIT_MAX; j++) {
        const loom_node *n = loom_graph_node(g, j);
        tag_kernel t, u;
        if (!tag_kernel_of(g, n, &t) || t.y < 0 || t.qkv != (round == 1) ||
            !tag_kernel_of(g, loom_graph_node(g, j + 1), &u) || u.x < 0)
            continue;
        if (t.qkv != loom_form_has(u.read_name, "ATT_QKVT"))   /* q/k/v's y is for that reader alone */
            continue;
        loom_dtype w, wv;
        const char *rk = loom_graph_kernel_name(g, loom_graph_node(g, j + 1)->kernel);
        bool block = loom_form_weights(rk, &w, &wv) && loom_dtype_is_block(w);
        if (t.block_reader && !block)
            continue;
        /* behind a gate producer: an f16 reader on its gate form, a
         * block-typed one polling as it loads */
        bool gate = t.gate && !block;
        if (gate && !u.gate_name)
            continue;
        /* A reader may be a producer in turn (the attention between q/k/v
         * and the o-projection): whatever reads its y reads all of it. */
        const loom_binding *y = loom_node_slot(g, n, (uint32_t)t.y);
        if (!y || !level_alone(g, j) || !level_alone(g, j + 1) || !sole_reader(g, j, y))
            continue;
        uint64_t grow = t.qkv ? qkv_tagged_bytes(g, j, y) : 0;
        if (t.qkv ? !grow || !qkv_pair_ok(g, j, y) : !writes_only(g, j, y))
            continue;
        loom_result rc = mark(g, j, &t, &u, gate, grow, ++v);
        if (rc)
            return rc;
    }
    uint32_t counted = ctx->enable & LOOM_ENABLE_COUNTS ? mark_counts(g, ctx->enable) : 0;
    if (v || counted)
        regroup(g);
    ctx->awaited = v + counted;
    return LOOM_OK;
}
