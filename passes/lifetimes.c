/* lifetimes: classifies every buffer and packs the SCRATCH ones into one
 * arena.
 *
 * Classes come from the usage hint where there is one and from the accesses
 * otherwise: never written → WEIGHT; written by a KV_APPEND node or hinted
 * KV_CACHE → KV_APPEND; read (in plan order) before the graph wrote those
 * bytes → STATE; written first, plan-owned (external == 0) and not kept
 * for the host → SCRATCH, else OUTPUT. A hint the graph contradicts (a
 * WEIGHT, INPUT or PARAMS buffer that a node writes, a SCRATCH buffer read
 * before it is written) is LOOM_VERIFY naming the buffer and the node.
 *
 * Liveness is measured in barrier epochs — the stretches between recorded
 * barriers — not in positions: nodes of one epoch may run concurrently, so
 * two scratch buffers may share bytes only when a barrier separates the last
 * access of one from the first access of the other. An unscheduled graph
 * has a barrier before every node. Packing is greedy best-fit in order of
 * first use, offsets aligned to LOOM_ARENA_ALIGN; an arena that would pass
 * 2^64 bytes is LOOM_LIMIT, never a wrapped layout. Write coverage is an
 * exact set of byte intervals per buffer, so the verdict on a read is the
 * same in any order that keeps the graph's hazards.
 */
#include <inttypes.h>
#include <stdlib.h>
#include "internal.h"

typedef struct buf_info {
    uint32_t first, last;     /* epochs; LOOM_NONE when never accessed */
    uint32_t writer;          /* first writing node (capture index) or LOOM_NONE */
    uint32_t early_reader;    /* first node reading bytes not yet written, or LOOM_NONE */
    uint64_t *cov;            /* bytes written so far: sorted, disjoint, non-adjacent [lo, hi) pairs */
    uint32_t ncov;            /* pairs */
    uint32_t capcov : 31;     /* pairs cov holds */
    uint32_t kv_written : 1;
    uint64_t one[2];          /* cov's storage until a second disjoint piece (the common case: one) */
} buf_info;                   /* 48 bytes: this pass's memory is mostly these and live_buf */

/* Is [lo, hi) inside one interval of the coverage set? (Intervals are kept
 * merged, so inside the union means inside one of them.) */
static bool covered(const buf_info *b, uint64_t lo, uint64_t hi)
{
    uint32_t l = 0, h = b->ncov;   /* last interval starting at or before lo */
    while (l < h) {
        uint32_t mid = l + (h - l) / 2;
        if (b->cov[2 * mid] <= lo)
            l = mid + 1;
        else
            h = mid;
    }
    return l > 0 && hi <= b->cov[2 * (l - 1) + 1];
}

/* Adds [lo, hi) to the coverage set, merging what it overlaps or touches. */
static bool note_write(const loom_allocator *a, buf_info *b, uint64_t lo, uint64_t hi)
{
    uint32_t first = 0, last;
    while (first < b->ncov && b->cov[2 * first + 1] < lo)
        first++;   /* intervals wholly below; few per buffer in practice */
    last = first;
    while (last < b->ncov && b->cov[2 * last] <= hi)
        last++;
    if (last > first) {   /* [first, last) merge into one */
        lo = lo < b->cov[2 * first] ? lo : b->cov[2 * first];
        hi = hi > b->cov[2 * (last - 1) + 1] ? hi : b->cov[2 * (last - 1) + 1];
    } else if (b->ncov == b->capcov) {
        uint32_t ncap = b->capcov * 2;
        uint64_t *q = a->realloc(a->user, b->cov == b->one ? NULL : b->cov, (size_t)b->capcov * 16,
                                 (size_t)ncap * 16);
        if (!q)
            return false;
        if (b->cov == b->one)
            memcpy(q, b->one, sizeof b->one);
        b->cov = q;
        b->capcov = ncap;
    }
    memmove(&b->cov[2 * (first + 1)], &b->cov[2 * last], (size_t)(b->ncov - last) * 16);
    b->ncov = b->ncov - (last - first) + 1;
    b->cov[2 * first] = lo;
    b->cov[2 * first + 1] = hi;
    return true;
}

/* Fills info and lists the touched buffers in order of first use. */
static loom_result scan_accesses(const loom_graph *g, buf_info *info, uint32_t *order, uint32_t *n_order)
{
    const loom_allocator *a = loom_graph_allocator(g);
    uint32_t n = loom_graph_node_count(g), epoch = 0;
    bool scheduled = loom_graph_scheduled(g);
    for (uint32_t i = 0; i < n; i++) {
        const loom_node *nd = loom_graph_node(g, i);
        if (!scheduled ? i > 0 : nd->barrier != LOOM_NONE)
            epoch++;
        const loom_range *r = loom_node_reads(g, nd);
        for (uint32_t k = 0; k < (uint32_t)nd->n_reads + nd->n_writes; k++) {
            buf_info *b = &info[r[k].buffer];
            if (b->first == LOOM_NONE) {
                b->first = epoch;
                order[(*n_order)++] = r[k].buffer;
            }
            b->last = epoch;
            if (k < nd->n_reads && b->early_reader == LOOM_NONE && !covered(b, r[k].offset, r[k].offset + r[k].size))
                b->early_reader = nd->capture_index;
        }
        for (uint32_t k = nd->n_reads; k < (uint32_t)nd->n_reads + nd->n_writes; k++) {
            buf_info *b = &info[r[k].buffer];
            /* Once a read came too early the verdict is made: stop tracking. */
            if (b->early_reader == LOOM_NONE && !note_write(a, b, r[k].offset, r[k].offset + r[k].size))
                return loom_fail(LOOM_OUT_OF_MEMORY, "lifetimes: out of memory for write coverage");
            if (b->writer == LOOM_NONE)
                b->writer = nd->capture_index;
            if (nd->op == LOOM_OP_KV_APPEND || nd->op == LOOM_OP_KV_APPEND_ROWS)
                b->kv_written = 1;
        }
    }
    return LOOM_OK;
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
        *out = buf->external || buf->keep ? LOOM_CLASS_OUTPUT : LOOM_CLASS_SCRATCH;
        return LOOM_OK;
    default: break;
    }
    if (!written)
        *out = LOOM_CLASS_WEIGHT;
    else if (b->kv_written)
        *out = LOOM_CLASS_KV_APPEND;
    else if (b->early_reader != LOOM_NONE)
        *out = LOOM_CLASS_STATE;
    else if (buf->external || buf->keep)
        *out = LOOM_CLASS_OUTPUT;   /* memory someone else holds, or the frontend keeps, may be read by the host */
    else
        *out = LOOM_CLASS_SCRATCH;
    return LOOM_OK;
}

typedef struct live_buf {
    uint32_t first, last, id;
    uint32_t blk;             /* its block while placed */
    uint64_t size;
} live_buf;

static uint64_t aligned(uint64_t size) { return (size + LOOM_ARENA_ALIGN - 1) / LOOM_ARENA_ALIGN * LOOM_ARENA_ALIGN; }

static int by_first(const void *pa, const void *pb)
{
    const live_buf *a = pa, *b = pb;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    if (a->size != b->size)
        return a->size > b->size ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* ---- packing ------------------------------------------------------------ *
 * The arena below its top is a list of blocks in address order, each a
 * placed buffer or a hole; the space above the last block is free. Holes
 * also sit in a treap ordered by (size, offset), so best fit — the smallest
 * hole that fits, the lowest such — is one descent, and buffers expire
 * through a heap ordered by last epoch. Each buffer costs O(log n). */

typedef struct blk {
    uint64_t lo, hi;
    uint32_t prev, next;      /* address order */
    uint32_t left, right;     /* treap, holes only */
    uint32_t prio;
    bool hole;
} blk;

typedef struct packer {
    blk *b;
    uint32_t nb, root, tail;
    uint32_t free;            /* unlinked blocks, chained through next: the pool stays as small as the live set */
    uint32_t seed;
} packer;

static bool key_before(const blk *x, uint64_t size, uint64_t lo)
{
    uint64_t xs = x->hi - x->lo;
    return xs < size || (xs == size && x->lo < lo);
}

/* Splits treap t into keys before (size, lo) and the rest. */
static void t_split(blk *b, uint32_t t, uint64_t size, uint64_t lo, uint32_t *l, uint32_t *r)
{
    if (t == LOOM_NONE) {
        *l = *r = LOOM_NONE;
    } else if (key_before(&b[t], size, lo)) {
        t_split(b, b[t].right, size, lo, &b[t].right, r);
        *l = t;
    } else {
        t_split(b, b[t].left, size, lo, l, &b[t].left);
        *r = t;
    }
}

static uint32_t t_merge(blk *b, uint32_t l, uint32_t r)
{
    if (l == LOOM_NONE || r == LOOM_NONE)
        return l == LOOM_NONE ? r : l;
    if (b[l].prio > b[r].prio) {
        b[l].right = t_merge(b, b[l].right, r);
        return l;
    }
    b[r].left = t_merge(b, l, b[r].left);
    return r;
}

static void hole_insert(packer *p, uint32_t x)
{
    uint32_t l, r;
    p->b[x].left = p->b[x].right = LOOM_NONE;
    p->seed ^= p->seed << 13, p->seed ^= p->seed >> 17, p->seed ^= p->seed << 5;
    p->b[x].prio = p->seed;
    t_split(p->b, p->root, p->b[x].hi - p->b[x].lo, p->b[x].lo, &l, &r);
    p->root = t_merge(p->b, t_merge(p->b, l, x), r);
}

static void hole_erase(packer *p, uint32_t x)
{
    uint32_t l, m, r;
    uint64_t size = p->b[x].hi - p->b[x].lo;
    t_split(p->b, p->root, size, p->b[x].lo, &l, &r);
    t_split(p->b, r, size, p->b[x].lo + 1, &m, &r);
    p->root = t_merge(p->b, l, r);
}

static uint32_t new_blk(packer *p, uint64_t lo, uint64_t hi, uint32_t prev, uint32_t next)
{
    uint32_t x = p->free;
    if (x != LOOM_NONE)
        p->free = p->b[x].next;
    else
        x = p->nb++;
    p->b[x] = (blk){ lo, hi, prev, next, LOOM_NONE, LOOM_NONE, 0, false };
    if (prev != LOOM_NONE)
        p->b[prev].next = x;
    else if (next == LOOM_NONE)
        p->tail = x;
    if (next != LOOM_NONE)
        p->b[next].prev = x;
    else
        p->tail = x;
    return x;
}

static void unlink_blk(packer *p, uint32_t x)
{
    uint32_t pv = p->b[x].prev, nx = p->b[x].next;
    if (pv != LOOM_NONE)
        p->b[pv].next = nx;
    if (nx != LOOM_NONE)
        p->b[nx].prev = pv;
    else
        p->tail = pv;
    p->b[x].next = p->free;
    p->free = x;
}

/* A buffer's block becomes a hole, merged with free neighbours; a hole at
 * the top is just free space above the last block. */
static void release(packer *p, uint32_t x)
{
    blk *b = p->b;
    uint32_t pv = b[x].prev, nx = b[x].next;
    if (pv != LOOM_NONE && b[pv].hole) {
        hole_erase(p, pv);
        b[x].lo = b[pv].lo;
        unlink_blk(p, pv);
    }
    if (nx != LOOM_NONE && b[nx].hole) {
        hole_erase(p, nx);
        b[x].hi = b[nx].hi;
        unlink_blk(p, nx);
    }
    b[x].hole = true;
    if (b[x].next == LOOM_NONE)
        unlink_blk(p, x);
    else
        hole_insert(p, x);
}

/* Best fit for asize bytes; the offset goes to *off. */
static bool place(packer *p, uint64_t asize, uint32_t *blk_out, uint64_t *off)
{
    uint32_t best = LOOM_NONE;
    for (uint32_t t = p->root; t != LOOM_NONE;) {
        if (key_before(&p->b[t], asize, 0)) {
            t = p->b[t].right;
        } else {
            best = t;
            t = p->b[t].left;
        }
    }
    if (best == LOOM_NONE) {   /* no hole fits: above everything live */
        uint64_t lo = p->tail == LOOM_NONE ? 0 : p->b[p->tail].hi;
        if (asize > UINT64_MAX - lo)
            return false;
        *blk_out = new_blk(p, lo, lo + asize, p->tail, LOOM_NONE);
        *off = lo;
        return true;
    }
    hole_erase(p, best);
    blk *h = &p->b[best];
    *off = h->lo;
    if (h->hi - h->lo == asize) {
        h->hole = false;
        *blk_out = best;
        return true;
    }
    uint64_t lo = h->lo;
    h->lo += asize;
    hole_insert(p, best);
    *blk_out = new_blk(p, lo, lo + asize, p->b[best].prev, best);
    return true;
}

/* Min-heap of live buffers (indices into v) by last epoch. */
static void heap_push(uint32_t *h, uint32_t *n, const live_buf *v, uint32_t x)
{
    uint32_t i = (*n)++;
    for (; i > 0 && v[h[(i - 1) / 2]].last > v[x].last; i = (i - 1) / 2)
        h[i] = h[(i - 1) / 2];
    h[i] = x;
}

static uint32_t heap_pop(uint32_t *h, uint32_t *n, const live_buf *v)
{
    uint32_t top = h[0], x = h[--*n], i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && v[h[c + 1]].last < v[h[c]].last)
            c++;
        if (v[h[c]].last >= v[x].last)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = x;
    return top;
}

/* Greedy best fit in order of first use; a buffer's bytes are free again
 * from the first epoch after its last. Fails with LOOM_LIMIT where an
 * offset would pass 2^64. */
static loom_result pack(loom_graph *g, live_buf *v, uint32_t n, packer *p, uint32_t *heap, uint64_t *arena,
                        uint64_t *bound)
{
    uint32_t nh = 0;
    uint64_t live = 0, top = 0, peak = 0;
    for (uint32_t i = 0; i < n; i++) {
        live_buf *b = &v[i];
        while (nh && v[heap[0]].last < b->first) {
            uint32_t x = heap_pop(heap, &nh, v);
            live -= v[x].size;
            release(p, v[x].blk);
        }
        uint64_t asize = aligned(b->size), off;
        if (!place(p, asize, &b->blk, &off))
            return loom_fail(LOOM_LIMIT,
                             "lifetimes: scratch buffer %u '%s' of %" PRIu64 " bytes does not fit below 2^64 bytes "
                             "of arena beside the live ones",
                             b->id, loom_graph_buffer_name(g, b->id), b->size);
        heap_push(heap, &nh, v, i);
        live += b->size;   /* placed buffers fit in 2^64 bytes: no wrap */
        if (live > peak)
            peak = live;
        loom_graph_buffer_mut(g, b->id)->arena_offset = off;
        if (off + asize > top)
            top = off + asize;
    }
    *arena = top;
    *bound = peak;
    return LOOM_OK;
}

loom_result loom_pass_lifetimes(loom_graph *g, loom_pass_ctx *ctx)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_pass_lifetimes: graph is NULL");
    const loom_allocator *a = loom_graph_allocator(g);
    uint32_t nb = loom_graph_buffer_count(g);
    buf_info *info = pass_alloc(a, (size_t)nb * sizeof(buf_info));
    live_buf *lv = pass_alloc(a, (size_t)nb * sizeof(live_buf));
    uint32_t *order = pass_alloc(a, (size_t)nb * sizeof(uint32_t));   /* then pack's heap */
    packer pk = { .root = LOOM_NONE, .tail = LOOM_NONE, .free = LOOM_NONE, .seed = 0x9e3779b9u };
    loom_result rc = LOOM_OK;
    uint32_t ns = 0;
    if (!info || !lv || !order) {
        rc = loom_fail(LOOM_OUT_OF_MEMORY, "lifetimes: out of memory for %u buffers", nb);
        goto done;
    }
    for (uint32_t i = 0; i < nb; i++) {
        info[i] = (buf_info){ .first = LOOM_NONE, .last = LOOM_NONE, .writer = LOOM_NONE, .early_reader = LOOM_NONE,
                              .capcov = 1 };
        info[i].cov = info[i].one;
    }
    uint32_t n_order = 0;
    if ((rc = scan_accesses(g, info, order, &n_order)))
        goto done;

    uint64_t scratch = 0;
    for (uint32_t i = 0; i < nb; i++) {
        loom_class c = LOOM_CLASS_UNKNOWN;
        if ((rc = classify(g, i, &info[i], &c)))
            goto done;
        loom_buffer *b = loom_graph_buffer_mut(g, i);
        b->cls = c;
        b->arena_offset = 0;
    }
    /* Scratch in order of first use (the scan's order); ties sorted below.
     * A SCRATCH-hinted buffer no node touches (fusion left it unused, say)
     * is live in no epoch: it lies at offset 0 over whatever is there, and
     * only makes the arena at least its size (the runtime holds every
     * scratch range inside the arena). */
    for (uint32_t i = 0; i < nb; i++)
        if (info[i].first == LOOM_NONE)
            order[n_order++] = i;
    uint64_t idle = 0;   /* the largest untouched scratch buffer, aligned */
    for (uint32_t k = 0; k < n_order; k++) {
        uint32_t i = order[k];
        const loom_buffer *b = loom_graph_buffer(g, i);
        if (b->cls != LOOM_CLASS_SCRATCH)
            continue;
        if (b->size > UINT64_MAX - (LOOM_ARENA_ALIGN - 1)) {
            rc = loom_fail(LOOM_LIMIT, "lifetimes: scratch buffer %u '%s' of %" PRIu64 " bytes cannot be aligned to %u",
                           i, loom_graph_buffer_name(g, i), b->size, LOOM_ARENA_ALIGN);
            goto done;
        }
        scratch = b->size > UINT64_MAX - scratch ? UINT64_MAX : scratch + b->size;   /* a statistic: saturate */
        if (info[i].first == LOOM_NONE) {
            idle = aligned(b->size) > idle ? aligned(b->size) : idle;
            continue;
        }
        lv[ns++] = (live_buf){ info[i].first, info[i].last, i, LOOM_NONE, b->size };
    }
    for (uint32_t lo = 0, hi; lo < ns; lo = hi) {   /* runs of one first epoch: largest first */
        for (hi = lo + 1; hi < ns && lv[hi].first == lv[lo].first; hi++)
            ;
        if (hi - lo > 1)
            qsort(lv + lo, hi - lo, sizeof *lv, by_first);
    }
    if (!(pk.b = pass_alloc(a, ((size_t)ns + 1) * sizeof(blk)))) {   /* a block per placement at most */
        rc = loom_fail(LOOM_OUT_OF_MEMORY, "lifetimes: out of memory for %u scratch buffers", ns);
        goto done;
    }
    uint64_t arena = 0, bound = 0;
    if ((rc = pack(g, lv, ns, &pk, order, &arena, &bound)))
        goto done;
    arena = idle > arena ? idle : arena;
    loom_graph_set_arena_size(g, arena);
    if (ctx) {
        ctx->scratch_bytes = scratch;
        ctx->arena_bytes = arena;
        ctx->arena_lower_bound = bound;
    }
done:
    for (uint32_t i = 0; info && lv && order && i < nb; i++)   /* initialised when all three were allocated */
        if (info[i].cov != info[i].one)
            pass_free(a, info[i].cov, (size_t)info[i].capcov * 16);
    pass_free(a, info, (size_t)nb * sizeof(buf_info));
    pass_free(a, lv, (size_t)nb * sizeof(live_buf));
    pass_free(a, order, (size_t)nb * sizeof(uint32_t));
    pass_free(a, pk.b, ((size_t)ns + 1) * sizeof(blk));
    return rc;
}
