/* lifetimes: classifies every buffer and packs the SCRATCH ones into one
 * arena.
 *
 * Classes come from the usage hint where there is one and from the accesses
 * otherwise: never written → WEIGHT; written by a KV_APPEND node or hinted
 * KV_CACHE → KV_APPEND; read (in plan order) before the graph wrote those
 * bytes → STATE; written first, plan-owned (external == 0) and not host
 * visible → SCRATCH. A hint the graph contradicts (a WEIGHT, INPUT or PARAMS
 * buffer that a node writes, a SCRATCH buffer read before it is written) is
 * LOOM_VERIFY naming the buffer and the node.
 *
 * Liveness is measured in barrier epochs — the stretches between recorded
 * barriers — not in positions: nodes of one epoch may run concurrently, so
 * two scratch buffers may share bytes only when a barrier separates the last
 * access of one from the first access of the other. An unscheduled graph
 * has a barrier before every node. Packing is greedy best-fit in order of
 * first use, offsets aligned to LOOM_ARENA_ALIGN. Write coverage is tracked
 * as one interval per buffer, so unusual write patterns err toward STATE
 * (kept, never shared), which is always safe. */
#include <inttypes.h>
#include <stdlib.h>
#include "internal.h"

typedef struct buf_info {
    uint32_t first, last;     /* epochs; LOOM_NONE when never accessed */
    uint32_t writer;          /* first writing node (capture index) or LOOM_NONE */
    uint32_t early_reader;    /* first node reading bytes not yet written, or LOOM_NONE */
    uint64_t clo, chi;        /* bytes written so far (one interval) */
    bool kv_written, has;
} buf_info;

typedef struct live_buf {
    uint32_t first, last, id;
    uint64_t size, asize;
    uint64_t offset;
} live_buf;

static void note_write(buf_info *b, const loom_range *r)
{
    uint64_t lo = r->offset, hi = r->offset + r->size;
    if (!b->has) {
        b->clo = lo;
        b->chi = hi;
        b->has = true;
    } else if (lo <= b->chi && b->clo <= hi) {   /* overlapping or adjacent: extend */
        b->clo = lo < b->clo ? lo : b->clo;
        b->chi = hi > b->chi ? hi : b->chi;
    } else if (hi - lo > b->chi - b->clo) {      /* keep the larger piece */
        b->clo = lo;
        b->chi = hi;
    }
}

static void scan_accesses(const loom_graph *g, buf_info *info)
{
    uint32_t n = loom_graph_node_count(g), epoch = 0;
    bool scheduled = loom_graph_scheduled(g);
    for (uint32_t i = 0; i < n; i++) {
        const loom_node *nd = loom_graph_node(g, i);
        if (!scheduled ? i > 0 : nd->barrier != LOOM_NONE)
            epoch++;
        const loom_range *r = loom_node_reads(g, nd);
        for (uint32_t k = 0; k < (uint32_t)nd->n_reads + nd->n_writes; k++) {
            buf_info *b = &info[r[k].buffer];
            if (b->first == LOOM_NONE)
                b->first = epoch;
            b->last = epoch;
            if (k < nd->n_reads) {
                bool covered = b->clo <= r[k].offset && r[k].offset + r[k].size <= b->chi;
                if (!covered && b->early_reader == LOOM_NONE)
                    b->early_reader = nd->capture_index;
            }
        }
        for (uint32_t k = nd->n_reads; k < (uint32_t)nd->n_reads + nd->n_writes; k++) {
            buf_info *b = &info[r[k].buffer];
            note_write(b, &r[k]);
            if (b->writer == LOOM_NONE)
                b->writer = nd->capture_index;
            if (nd->op == LOOM_OP_KV_APPEND)
                b->kv_written = true;
        }
    }
}

static loom_result contradiction(const loom_graph *g, uint32_t id, const char *what, uint32_t node)
{
    return loom_fail(LOOM_VERIFY, "buffer %u '%s' is declared %s but node %u %s it", id,
                     loom_graph_buffer_name(g, id), loom_usage_name((loom_usage)loom_graph_buffer(g, id)->usage),
                     node, what);
}

static loom_result classify(const loom_graph *g, uint32_t id, const buf_info *b, loom_class *out)
{
    const loom_buffer *buf = loom_graph_buffer(g, id);
    bool written = b->writer != LOOM_NONE;
    switch ((loom_usage)buf->usage) {
    case LOOM_USAGE_WEIGHT:
    case LOOM_USAGE_INPUT:
    case LOOM_USAGE_PARAMS:
        if (written)
            return contradiction(g, id, "writes", b->writer);
        *out = buf->usage == LOOM_USAGE_WEIGHT ? LOOM_CLASS_WEIGHT : LOOM_CLASS_INPUT;
        return LOOM_OK;
    case LOOM_USAGE_OUTPUT: *out = LOOM_CLASS_OUTPUT; return LOOM_OK;
    case LOOM_USAGE_STATE: *out = LOOM_CLASS_STATE; return LOOM_OK;
    case LOOM_USAGE_KV_CACHE: *out = LOOM_CLASS_KV_APPEND; return LOOM_OK;
    case LOOM_USAGE_SCRATCH:
        if (b->early_reader != LOOM_NONE)
            return contradiction(g, id, "reads bytes no node wrote before", b->early_reader);
        *out = buf->external ? LOOM_CLASS_OUTPUT : LOOM_CLASS_SCRATCH;
        return LOOM_OK;
    default: break;
    }
    if (!written)
        *out = LOOM_CLASS_WEIGHT;
    else if (b->kv_written)
        *out = LOOM_CLASS_KV_APPEND;
    else if (b->early_reader != LOOM_NONE)
        *out = LOOM_CLASS_STATE;
    else if (buf->external)
        *out = LOOM_CLASS_OUTPUT;   /* memory someone else holds may be read by the host */
    else
        *out = LOOM_CLASS_SCRATCH;
    return LOOM_OK;
}

static int by_first(const void *pa, const void *pb)
{
    const live_buf *a = pa, *b = pb;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    if (a->size != b->size)
        return a->size > b->size ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Greedy best-fit in order of first use. active[] holds the placed buffers
 * still live, sorted by offset. */
static void pack(live_buf *v, uint32_t n, uint32_t *active, uint64_t *arena, uint64_t *bound)
{
    uint32_t na = 0;
    uint64_t live = 0, top = 0, peak = 0;
    for (uint32_t i = 0; i < n; i++) {
        live_buf *b = &v[i];
        uint32_t k = 0;
        for (uint32_t j = 0; j < na; j++) {
            if (v[active[j]].last < b->first)
                live -= v[active[j]].size;
            else
                active[k++] = active[j];
        }
        na = k;
        uint64_t best = UINT64_MAX, best_gap = UINT64_MAX, prev_end = 0;
        uint32_t best_pos = na;
        for (uint32_t j = 0; j < na; j++) {
            const live_buf *o = &v[active[j]];
            if (o->offset >= prev_end && o->offset - prev_end >= b->asize && o->offset - prev_end < best_gap) {
                best_gap = o->offset - prev_end;
                best = prev_end;
                best_pos = j;
            }
            if (o->offset + o->asize > prev_end)
                prev_end = o->offset + o->asize;
        }
        if (best == UINT64_MAX) {   /* no hole fits: above everything live */
            best = prev_end;
            best_pos = na;
        }
        b->offset = best;
        memmove(&active[best_pos + 1], &active[best_pos], (size_t)(na - best_pos) * sizeof(uint32_t));
        active[best_pos] = i;
        na++;
        live += b->size;
        if (live > peak)
            peak = live;
        if (b->offset + b->asize > top)
            top = b->offset + b->asize;
    }
    *arena = top;
    *bound = peak;
}

loom_result loom_pass_lifetimes(loom_graph *g, loom_pass_ctx *ctx)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_pass_lifetimes: graph is NULL");
    const loom_allocator *a = loom_graph_allocator(g);
    uint32_t nb = loom_graph_buffer_count(g);
    buf_info *info = pass_alloc(a, (size_t)nb * sizeof(buf_info));
    live_buf *lv = pass_alloc(a, (size_t)nb * sizeof(live_buf));
    uint32_t *active = pass_alloc(a, (size_t)nb * sizeof(uint32_t));
    loom_result rc = LOOM_OK;
    if (!info || !lv || !active) {
        rc = loom_fail(LOOM_OUT_OF_MEMORY, "lifetimes: out of memory for %u buffers", nb);
        goto done;
    }
    for (uint32_t i = 0; i < nb; i++)
        info[i] = (buf_info){ LOOM_NONE, LOOM_NONE, LOOM_NONE, LOOM_NONE, 0, 0, false, false };
    scan_accesses(g, info);

    uint32_t ns = 0;
    uint64_t scratch = 0;
    for (uint32_t i = 0; i < nb; i++) {
        loom_class c = LOOM_CLASS_UNKNOWN;
        if ((rc = classify(g, i, &info[i], &c)))
            goto done;
        loom_buffer *b = loom_graph_buffer_mut(g, i);
        b->cls = c;
        b->arena_offset = 0;
        if (c != LOOM_CLASS_SCRATCH)
            continue;
        uint64_t asize = (b->size + LOOM_ARENA_ALIGN - 1) / LOOM_ARENA_ALIGN * LOOM_ARENA_ALIGN;
        lv[ns++] = (live_buf){ info[i].first, info[i].last, i, b->size, asize, 0 };
        scratch += b->size;
    }
    qsort(lv, ns, sizeof *lv, by_first);
    uint64_t arena = 0, bound = 0;
    pack(lv, ns, active, &arena, &bound);
    for (uint32_t i = 0; i < ns; i++)
        loom_graph_buffer_mut(g, lv[i].id)->arena_offset = lv[i].offset;
    loom_graph_set_arena_size(g, arena);
    if (ctx) {
        ctx->scratch_bytes = scratch;
        ctx->arena_bytes = arena;
        ctx->arena_lower_bound = bound;
    }
done:
    pass_free(a, info, (size_t)nb * sizeof(buf_info));
    pass_free(a, lv, (size_t)nb * sizeof(live_buf));
    pass_free(a, active, (size_t)nb * sizeof(uint32_t));
    return rc;
}
