/* Plans: reference counting, attachments and accessors. A plan is
 * immutable once loom_compile returns it, so readers on several threads
 * need no lock; the shared state is the count (atomic) and the attachment
 * list, which runtimes on several threads may grow at once (a spin lock:
 * attaching happens once per runtime and plan, finding once per replay). */
#include "internal.h"

void loom_plan_retain(loom_plan *p)
{
    if (p)
        __atomic_fetch_add(&p->refs, 1, __ATOMIC_RELAXED);
}

static void lock(const loom_plan *p)
{
    uint32_t *l = (uint32_t *)&p->att_lock;   /* the lock is not part of the plan's value */
    while (__atomic_exchange_n(l, 1u, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(l, __ATOMIC_RELAXED))
            ;
}

static void unlock(const loom_plan *p) { __atomic_store_n((uint32_t *)&p->att_lock, 0u, __ATOMIC_RELEASE); }

static int find(const loom_plan *p, const void *owner)
{
    for (uint32_t i = 0; i < p->n_atts; i++)
        if (p->atts[i].owner == owner)
            return (int)i;
    return -1;
}

void loom_plan_release(loom_plan *p)
{
    if (!p || __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    for (uint32_t i = 0; i < p->n_atts; i++)
        if (p->atts[i].destroy)
            p->atts[i].destroy(p->atts[i].obj);
    if (p->atts)
        p->a->realloc(p->a->user, p->atts, (size_t)p->cap_atts * sizeof *p->atts, 0);
    loom_graph_destroy(p->graph);
    p->a->realloc(p->a->user, p, sizeof *p, 0);
}

const loom_graph *loom_plan_graph(const loom_plan *p) { return p ? p->graph : NULL; }
const loom_plan_stats *loom_plan_get_stats(const loom_plan *p) { return p ? &p->stats : NULL; }
loom_hash loom_plan_key(const loom_plan *p) { return p ? p->key : (loom_hash){ 0, 0 }; }

void *loom_plan_attach(loom_plan *p, const loom_plan_attachment *a)
{
    if (!p || !a)
        return NULL;
    lock(p);
    int i = find(p, a->owner);
    void *obj = NULL;
    if (i >= 0) {
        obj = p->atts[i].obj;
    } else {
        if (p->n_atts == p->cap_atts) {
            uint32_t ncap = p->cap_atts ? p->cap_atts * 2 : 2;
            loom_plan_attachment *q = p->a->realloc(p->a->user, p->atts, (size_t)p->cap_atts * sizeof *q,
                                                    (size_t)ncap * sizeof *q);
            if (q) {
                p->atts = q;
                p->cap_atts = ncap;
            }
        }
        if (p->n_atts < p->cap_atts) {
            p->atts[p->n_atts++] = *a;
            obj = a->obj;
        }
    }
    unlock(p);
    return obj;
}

void *loom_plan_find_attachment(const loom_plan *p, const void *owner)
{
    if (!p)
        return NULL;
    lock(p);
    int i = find(p, owner);
    void *obj = i >= 0 ? p->atts[i].obj : NULL;
    unlock(p);
    return obj;
}

bool plan_busy(const loom_plan *p)
{
    bool busy = false;
    lock(p);
    for (uint32_t i = 0; i < p->n_atts && !busy; i++)
        busy = p->atts[i].busy && p->atts[i].busy(p->atts[i].obj);
    unlock(p);
    return busy;
}

/* Replacing an attachment destroys the previous one: the plan owns it. */
void loom_plan_set_attachment(loom_plan *p, const loom_plan_attachment *a)
{
    if (!p)
        return;
    lock(p);
    int i = find(p, NULL);
    loom_plan_attachment old = i >= 0 ? p->atts[i] : (loom_plan_attachment){ 0 };
    if (i >= 0)
        p->atts[i] = p->atts[--p->n_atts];
    unlock(p);
    if (a) {
        loom_plan_attachment d = *a;
        d.owner = NULL;
        loom_plan_attach(p, &d);
    }
    if (old.destroy && (!a || a->obj != old.obj))
        old.destroy(old.obj);
}

void *loom_plan_get_attachment(const loom_plan *p) { return loom_plan_find_attachment(p, NULL); }
