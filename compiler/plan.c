/* Plans: reference counting, the attachment slot and accessors. A plan is
 * immutable once loom_compile returns it, so readers on several threads
 * need no lock; only the count is shared state and it is atomic. */
#include "internal.h"

void loom_plan_retain(loom_plan *p)
{
    if (p)
        __atomic_fetch_add(&p->refs, 1, __ATOMIC_RELAXED);
}

void loom_plan_release(loom_plan *p)
{
    if (!p || __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    if (p->has_att && p->att.destroy)
        p->att.destroy(p->att.obj);
    loom_graph_destroy(p->graph);
    p->a->realloc(p->a->user, p, sizeof *p, 0);
}

const loom_graph *loom_plan_graph(const loom_plan *p) { return p ? p->graph : NULL; }
const loom_plan_stats *loom_plan_get_stats(const loom_plan *p) { return p ? &p->stats : NULL; }
loom_hash loom_plan_key(const loom_plan *p) { return p ? p->key : (loom_hash){ 0, 0 }; }

/* Replacing an attachment destroys the previous one: the plan owns it. */
void loom_plan_set_attachment(loom_plan *p, const loom_plan_attachment *a)
{
    if (!p)
        return;
    if (p->has_att && p->att.destroy && (!a || a->obj != p->att.obj))
        p->att.destroy(p->att.obj);
    p->has_att = a != NULL;
    p->att = a ? *a : (loom_plan_attachment){ 0 };
}

void *loom_plan_get_attachment(const loom_plan *p) { return p && p->has_att ? p->att.obj : NULL; }
