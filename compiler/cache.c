/* The plan cache: key → plan, bounded, least recently used out first.
 *
 * A key is the XXH3-128 of the canonical bytes of (graph, options); a hit
 * is only a hit once the stored bytes compare equal, so two graphs whose
 * keys collide (loom_cache_force_key makes every key collide) still get
 * their own plans. Entries sit in a fixed array with a doubly linked LRU
 * list and hash chains threaded through it by index. The encode buffer is
 * kept between lookups, so a hit allocates nothing. Plans whose attachment
 * reports busy are skipped by eviction. */
#include <string.h>
#include "internal.h"

typedef struct entry {
    loom_hash key;
    uint8_t *bytes;
    size_t len;
    loom_plan *plan;
    uint32_t prev, next;   /* LRU, most recent at head */
    uint32_t chain;        /* next entry in the same bucket, or free list */
} entry;

struct loom_cache {
    const loom_allocator *a;
    uint32_t capacity, count, mask;
    entry *e;
    uint32_t *bucket;
    uint32_t head, tail, free;
    loom_cache_stats st;
    bool forced;
    loom_hash forced_key;
    uint8_t *enc;          /* reused encode buffer */
    size_t enc_cap;
    const loom_allocator *enc_a;
};

static void *cmem(const loom_allocator *a, size_t n) { return a->realloc(a->user, NULL, 0, n); }
static void cfree(const loom_allocator *a, void *p, size_t n)
{
    if (p)
        a->realloc(a->user, p, n, 0);
}

loom_result loom_cache_create(const loom_cache_desc *desc, loom_cache **out)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_cache_create: out is NULL");
    *out = NULL;
    const loom_allocator *a = desc && desc->allocator ? desc->allocator : loom_default_allocator();
    uint32_t cap = desc && desc->capacity ? desc->capacity : 64;
    if (cap > (1u << 24))
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_cache_create: capacity %u exceeds %u", cap, 1u << 24);
    uint32_t nb = 16;
    while (nb < cap * 2)
        nb *= 2;
    loom_cache *c = cmem(a, sizeof *c);
    if (!c)
        return loom_fail(LOOM_OUT_OF_MEMORY, "loom_cache_create: out of memory");
    memset(c, 0, sizeof *c);
    c->a = a;
    c->capacity = cap;
    c->mask = nb - 1;
    c->e = cmem(a, (size_t)cap * sizeof(entry));
    c->bucket = cmem(a, (size_t)nb * sizeof(uint32_t));
    if (!c->e || !c->bucket) {
        cfree(a, c->e, (size_t)cap * sizeof(entry));
        cfree(a, c->bucket, (size_t)nb * sizeof(uint32_t));
        cfree(a, c, sizeof *c);
        return loom_fail(LOOM_OUT_OF_MEMORY, "loom_cache_create: out of memory");
    }
    memset(c->bucket, 0xff, (size_t)nb * sizeof(uint32_t));
    for (uint32_t i = 0; i < cap; i++) {
        memset(&c->e[i], 0, sizeof(entry));
        c->e[i].chain = i + 1 < cap ? i + 1 : LOOM_NONE;
    }
    c->free = 0;
    c->head = c->tail = LOOM_NONE;
    *out = c;
    return LOOM_OK;
}

static void lru_unlink(loom_cache *c, uint32_t i)
{
    entry *e = &c->e[i];
    if (e->prev != LOOM_NONE)
        c->e[e->prev].next = e->next;
    else
        c->head = e->next;
    if (e->next != LOOM_NONE)
        c->e[e->next].prev = e->prev;
    else
        c->tail = e->prev;
}

static void lru_push_front(loom_cache *c, uint32_t i)
{
    c->e[i].prev = LOOM_NONE;
    c->e[i].next = c->head;
    if (c->head != LOOM_NONE)
        c->e[c->head].prev = i;
    c->head = i;
    if (c->tail == LOOM_NONE)
        c->tail = i;
}

static void drop(loom_cache *c, uint32_t i)
{
    entry *e = &c->e[i];
    uint32_t *p = &c->bucket[e->key.lo & c->mask];
    while (*p != i)
        p = &c->e[*p].chain;
    *p = e->chain;
    lru_unlink(c, i);
    loom_plan_release(e->plan);
    cfree(c->a, e->bytes, e->len);
    memset(e, 0, sizeof *e);
    e->chain = c->free;
    c->free = i;
    c->count--;
}

void loom_cache_destroy(loom_cache *c)
{
    if (!c)
        return;
    while (c->head != LOOM_NONE)
        drop(c, c->head);
    if (c->enc)
        c->enc_a->realloc(c->enc_a->user, c->enc, c->enc_cap, 0);
    uint32_t nb = c->mask + 1;
    cfree(c->a, c->e, (size_t)c->capacity * sizeof(entry));
    cfree(c->a, c->bucket, (size_t)nb * sizeof(uint32_t));
    cfree(c->a, c, sizeof *c);
}

static bool busy(const loom_plan *p) { return plan_busy(p); }

/* Frees a slot: the least recently used entry whose plan is not busy. */
static bool make_room(loom_cache *c)
{
    if (c->count < c->capacity)
        return true;
    for (uint32_t i = c->tail; i != LOOM_NONE; i = c->e[i].prev)
        if (!busy(c->e[i].plan)) {
            drop(c, i);
            c->st.evictions++;
            return true;
        }
    return false;
}

static void insert(loom_cache *c, const loom_hash *key, const uint8_t *bytes, size_t len, loom_plan *p)
{
    if (!make_room(c))
        return;   /* every plan is busy: serve this one uncached */
    uint8_t *copy = cmem(c->a, len ? len : 1);
    if (!copy)
        return;   /* a cache that cannot grow still compiles correctly */
    memcpy(copy, bytes, len);
    uint32_t i = c->free;
    entry *e = &c->e[i];
    c->free = e->chain;
    e->key = *key;
    e->bytes = copy;
    e->len = len;
    e->plan = p;
    loom_plan_retain(p);
    uint32_t *b = &c->bucket[key->lo & c->mask];
    e->chain = *b;
    *b = i;
    lru_push_front(c, i);
    c->count++;
}

/* The encoder grows the buffer with the graph's allocator: a buffer from
 * another allocator is given back to it first. */
static void adopt_allocator(loom_cache *c, const loom_allocator *ga)
{
    if (c->enc && c->enc_a != ga) {
        c->enc_a->realloc(c->enc_a->user, c->enc, c->enc_cap, 0);
        c->enc = NULL;
        c->enc_cap = 0;
    }
    c->enc_a = ga;
}

/* The key bytes are three pieces, hashed and compared where they lie: the
 * graph's prefix (pre bytes) and the options (olen) in c->enc, and the
 * node records the graph kept from capture (nodes, nlen). */
typedef struct key_parts {
    size_t pre, nlen, olen;
    const uint8_t *nodes;
    loom_hash hash;
} key_parts;

static loom_result key_parts_of(loom_cache *c, const loom_graph *g, const plan_opts *po, key_parts *k)
{
    loom_result rc = loom_graph_encode_parts(g, &c->enc, &c->enc_cap, &k->pre, &k->nodes, &k->nlen);
    if (rc)
        return rc;
    size_t need = k->pre + PLAN_OPTS_FIXED + strlen(po->pipeline);
    if (need > c->enc_cap) {
        uint8_t *q = c->enc_a->realloc(c->enc_a->user, c->enc, c->enc_cap, need);
        if (!q)
            return loom_fail(LOOM_OUT_OF_MEMORY, "plan key: out of memory");
        c->enc = q;
        c->enc_cap = need;
    }
    k->olen = plan_opts_bytes(po, c->enc + k->pre);
    k->hash = loom_hash_concat(3, (const void *const[]){ c->enc, k->nodes, c->enc + k->pre },
                               (const size_t[]){ k->pre, k->nlen, k->olen });
    return LOOM_OK;
}

static bool same_bytes(const loom_cache *c, const entry *e, const key_parts *k)
{
    return e->len == k->pre + k->nlen + k->olen && memcmp(e->bytes, c->enc, k->pre) == 0 &&
           (k->nlen == 0 || memcmp(e->bytes + k->pre, k->nodes, k->nlen) == 0) &&
           memcmp(e->bytes + k->pre + k->nlen, c->enc + k->pre, k->olen) == 0;
}

/* The entry under key whose bytes are the key's, or LOOM_NONE; *collided
 * when some entry had the key but other bytes. */
static uint32_t lookup(const loom_cache *c, const loom_hash *key, const key_parts *k, bool *collided)
{
    *collided = false;
    for (uint32_t i = c->bucket[key->lo & c->mask]; i != LOOM_NONE; i = c->e[i].chain) {
        const entry *e = &c->e[i];
        if (e->key.lo != key->lo || e->key.hi != key->hi)
            continue;
        if (same_bytes(c, e, k))
            return i;
        *collided = true;
    }
    return LOOM_NONE;
}

/* A miss compiles anyway; the stored bytes and the plan's key come from the
 * compiler's own key encoding. */
static loom_result compile_miss(loom_cache *c, const loom_graph *g, const loom_compile_options *opts,
                                const plan_opts *po, loom_plan **out)
{
    size_t len;
    loom_result rc = plan_key_bytes(g, po, &c->enc, &c->enc_cap, &len);
    if (rc)
        return rc;
    loom_hash real = loom_hash_bytes(c->enc, len);
    loom_hash key = c->forced ? c->forced_key : real;
    loom_plan *p;
    if ((rc = plan_compile(g, opts, po, &real, &p)))
        return rc;
    insert(c, &key, c->enc, len, p);
    *out = p;
    return LOOM_OK;
}

loom_result loom_cache_compile(loom_cache *c, const loom_graph *g, const loom_compile_options *opts,
                               loom_plan **out, bool *hit)
{
    if (!out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_cache_compile: out is NULL");
    *out = NULL;
    if (hit)
        *hit = false;
    if (!c || !g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_cache_compile: NULL argument");
    plan_opts po;
    loom_result rc = plan_opts_resolve(opts, &po);
    if (rc)
        return rc;
    if (!po.cache) {
        c->st.misses++;
        return loom_compile(g, opts, out);
    }
    adopt_allocator(c, loom_graph_allocator(g));
    key_parts k;
    if ((rc = key_parts_of(c, g, &po, &k)))
        return rc;
    bool collided;
    uint32_t i = lookup(c, c->forced ? &c->forced_key : &k.hash, &k, &collided);
    if (i == LOOM_NONE) {
        c->st.collisions += collided;
        c->st.misses++;
        return compile_miss(c, g, opts, &po, out);
    }
    /* A hit copies and allocates nothing. */
    c->st.hits++;
    lru_unlink(c, i);
    lru_push_front(c, i);
    loom_plan_retain(c->e[i].plan);
    *out = c->e[i].plan;
    if (hit)
        *hit = true;
    return LOOM_OK;
}

void loom_cache_get_stats(const loom_cache *c, loom_cache_stats *out)
{
    if (!c || !out)
        return;
    *out = c->st;
    out->entries = c->count;
}

void loom_cache_force_key(loom_cache *c, const loom_hash *key)
{
    if (!c)
        return;
    c->forced = key != NULL;
    if (key)
        c->forced_key = *key;
}
