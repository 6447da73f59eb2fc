/* The access set behind reorder and barriers: per-buffer linked lists of
 * read and write ranges, cleared in O(1) by bumping an epoch, so finding
 * the hazards of a node costs the accesses to the buffers it touches and
 * not a scan of every earlier node. */
#include <time.h>
#include "internal.h"

loom_result pass_accset_init(pass_accset *s, const loom_allocator *a, uint32_t nbuf)
{
    memset(s, 0, sizeof *s);
    s->a = a;
    s->nbuf = nbuf;
    s->rhead = pass_alloc(a, (size_t)nbuf * sizeof(uint32_t));
    s->whead = pass_alloc(a, (size_t)nbuf * sizeof(uint32_t));
    s->stamp = pass_calloc(a, (size_t)nbuf * sizeof(uint32_t));
    if (!s->rhead || !s->whead || !s->stamp) {
        pass_accset_free(s);
        return loom_fail(LOOM_OUT_OF_MEMORY, "access set for %u buffers: out of memory", nbuf);
    }
    s->epoch = 1;
    return LOOM_OK;
}

void pass_accset_free(pass_accset *s)
{
    pass_free(s->a, s->rhead, (size_t)s->nbuf * sizeof(uint32_t));
    pass_free(s->a, s->whead, (size_t)s->nbuf * sizeof(uint32_t));
    pass_free(s->a, s->stamp, (size_t)s->nbuf * sizeof(uint32_t));
    pass_free(s->a, s->v, (size_t)s->cap * sizeof(pass_acc));
    memset(s, 0, sizeof *s);
}

void pass_accset_clear(pass_accset *s)
{
    s->n = 0;
    if (++s->epoch == 0) {   /* wrapped: stale stamps could look current */
        memset(s->stamp, 0, (size_t)s->nbuf * sizeof(uint32_t));
        s->epoch = 1;
    }
}

static bool push(pass_accset *s, uint32_t *head, const loom_range *r, uint32_t tag)
{
    if (s->n == s->cap) {
        uint32_t ncap = s->cap ? s->cap * 2 : 256;
        pass_acc *q = s->a->realloc(s->a->user, s->v, (size_t)s->cap * sizeof(pass_acc), (size_t)ncap * sizeof(pass_acc));
        if (!q)
            return false;
        s->v = q;
        s->cap = ncap;
    }
    pass_acc *e = &s->v[s->n];
    e->lo = r->offset;
    e->hi = r->offset + r->size;
    e->tag = tag;
    e->next = *head;
    *head = s->n++;
    return true;
}

loom_result pass_accset_add(pass_accset *s, const loom_graph *g, const loom_node *n, uint32_t tag)
{
    const loom_range *r = loom_node_reads(g, n);
    for (uint32_t i = 0; i < (uint32_t)n->n_reads + n->n_writes; i++) {
        uint32_t b = r[i].buffer;
        if (b >= s->nbuf)
            return loom_fail(LOOM_VERIFY, "node %u (%s): range names buffer %u of %u", n->capture_index,
                             loom_op_name((loom_op)n->op), b, s->nbuf);
        if (s->stamp[b] != s->epoch) {
            s->stamp[b] = s->epoch;
            s->rhead[b] = s->whead[b] = LOOM_NONE;
        }
        if (!push(s, i < n->n_reads ? &s->rhead[b] : &s->whead[b], &r[i], tag))
            return loom_fail(LOOM_OUT_OF_MEMORY, "access set: out of memory");
    }
    return LOOM_OK;
}

/* Walks list `head` for ranges overlapping r; returns the first hit's index
 * (first_only) or folds the largest tag into *max. */
static uint32_t scan(const pass_accset *s, uint32_t head, const loom_range *r, bool first_only, uint32_t *max)
{
    uint64_t lo = r->offset, hi = r->offset + r->size;
    for (uint32_t i = head; i != LOOM_NONE; i = s->v[i].next) {
        const pass_acc *e = &s->v[i];
        if (e->lo < hi && lo < e->hi) {
            if (first_only)
                return i;
            if (e->tag > *max)
                *max = e->tag;
        }
    }
    return LOOM_NONE;
}

static bool live(const pass_accset *s, uint32_t b) { return b < s->nbuf && s->stamp[b] == s->epoch; }

loom_hazard pass_accset_first(const pass_accset *s, const loom_graph *g, const loom_node *n, uint32_t *buffer,
                              uint32_t *tag)
{
    const loom_range *rd = loom_node_reads(g, n), *wr = loom_node_writes(g, n);
    static const loom_hazard kinds[3] = { LOOM_HAZARD_RAW, LOOM_HAZARD_WAW, LOOM_HAZARD_WAR };
    for (int k = 0; k < 3; k++) {
        const loom_range *r = k == 0 ? rd : wr;
        uint32_t cnt = k == 0 ? n->n_reads : n->n_writes;
        for (uint32_t i = 0; i < cnt; i++) {
            if (!live(s, r[i].buffer))
                continue;
            uint32_t head = k == 2 ? s->rhead[r[i].buffer] : s->whead[r[i].buffer];
            uint32_t hit = scan(s, head, &r[i], true, NULL);
            if (hit != LOOM_NONE) {
                *buffer = r[i].buffer;
                *tag = s->v[hit].tag;
                return kinds[k];
            }
        }
    }
    *buffer = LOOM_NONE;
    *tag = LOOM_NONE;
    return LOOM_HAZARD_NONE;
}

uint32_t pass_accset_max_tag(const pass_accset *s, const loom_graph *g, const loom_node *n)
{
    uint32_t max = 0;
    const loom_range *rd = loom_node_reads(g, n), *wr = loom_node_writes(g, n);
    for (uint32_t i = 0; i < n->n_reads; i++)
        if (live(s, rd[i].buffer))
            scan(s, s->whead[rd[i].buffer], &rd[i], false, &max);
    for (uint32_t i = 0; i < n->n_writes; i++)
        if (live(s, wr[i].buffer)) {
            scan(s, s->whead[wr[i].buffer], &wr[i], false, &max);
            scan(s, s->rhead[wr[i].buffer], &wr[i], false, &max);
        }
    return max;
}

uint64_t pass_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
