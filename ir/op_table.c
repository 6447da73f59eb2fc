/* The op table: ops.def's rows as loom_op_info, and the op-kind names.
 * The slot column is written as text ("x y(w)") so that a row reads like
 * the kernel's signature; it is split into slots once, on first use. This
 * file needs libc and pthreads only: the build's layout check links it
 * alone (tools/spirv_layouts.c), with loom_ops.h for the push layouts'
 * sizes. */
#include <pthread.h>
#include <string.h>
#include "loom_ops.h"

#define K0 { NULL, NULL, NULL, NULL }
#define K1(k) { #k, #k, NULL, NULL }
#define KF(k) { #k "_f32", #k "_f16", NULL, NULL }
#define K2(a, b) { #a, #b, NULL, NULL }
/* The same, with the forms for f16 KV caches ("_kh" before the dtype). */
#define K1C(k) { #k, #k, #k "_kh", #k "_kh" }
#define KFC(k) { #k "_f32", #k "_f16", #k "_kh_f32", #k "_kh_f16" }
#define K2C(a, b) { #a, #b, #a "_kh", #b "_kh" }
/* The matmul kinds: the multi-column matvec form, then the tiled one. */
#define KT(k) { #k "_f32", #k "_f16", #k "_tiled_f32", #k "_tiled_f16" }
/* The push column: the size of the op's loom_pc_* layout. */
#define PC(l) (uint32_t)sizeof(loom_pc_##l)
#define PC0 0u

typedef struct op_row {
    const char *name, *meaning;
    bool reorderable;
    const char *kernel[4];
    const char *slots;
    uint32_t push, local, per_group;
    const char *colour;
    float tol_abs, tol_rel;
} op_row;

static const op_row rows[LOOM_OP_COUNT] = {
#define X(name, meaning, reorderable, kernel, slots, push, local, per_group, colour, tol_abs, tol_rel) \
    { #name, meaning, reorderable, kernel, slots, push, local, per_group, colour, tol_abs, tol_rel },
#include "ops.def"
#undef X
};

#define NAME_BYTES 24   /* a slot name and its NUL */

static struct {
    loom_op_info info;
    char names[LOOM_MAX_BINDINGS][NAME_BYTES];
} table[LOOM_OP_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* "name", "name(w)", "name(rw)" or "name(i)": one word of the slot column. */
static void add_slot(loom_op_info *in, char (*names)[NAME_BYTES], const char *w, size_t len)
{
    uint32_t access = LOOM_ACCESS_READ;
    bool inplace = false;
    if (len > 3 && memcmp(w + len - 3, "(i)", 3) == 0) {
        inplace = true;
        len -= 3;
    } else if (len > 4 && memcmp(w + len - 4, "(rw)", 4) == 0) {
        access = LOOM_ACCESS_RW;
        len -= 4;
    } else if (len > 3 && memcmp(w + len - 3, "(w)", 3) == 0) {
        access = LOOM_ACCESS_WRITE;
        len -= 3;
    }
    /* More slots than a dispatch binds, or a name too long, is a typo in
     * ops.def: the slot is dropped, and the build's layout check says so. */
    if (in->n_slots == LOOM_MAX_BINDINGS || len >= NAME_BYTES)
        return;
    uint32_t s = in->n_slots++;
    memcpy(names[s], w, len);
    names[s][len] = 0;
    in->slot[s] = (loom_op_slot){ names[s], access, inplace };
    if (access & LOOM_ACCESS_WRITE)
        in->writable |= 1u << s;
}

static void fill(void)
{
    for (uint32_t op = 0; op < LOOM_OP_COUNT; op++) {
        const op_row *r = &rows[op];
        loom_op_info *in = &table[op].info;
        *in = (loom_op_info){ .op = (loom_op)op, .name = r->name, .meaning = r->meaning,
                              .reorderable = r->reorderable, .kernel = { r->kernel[0], r->kernel[1], r->kernel[2], r->kernel[3] },
                              .push_size = r->push, .local_size = r->local, .per_group = r->per_group,
                              .colour = r->colour, .tol_abs = r->tol_abs, .tol_rel = r->tol_rel };
        for (const char *p = r->slots; *p;) {
            size_t len = strcspn(p, " ");
            if (len)
                add_slot(in, table[op].names, p, len);
            p += len + (p[len] == ' ');
        }
        in->params = in->n_slots && strcmp(in->slot[0].name, "params") == 0;
    }
}

const loom_op_info *loom_op_info_get(loom_op op)
{
    if ((unsigned)op >= LOOM_OP_COUNT)
        return NULL;
    pthread_once(&once, fill);
    return &table[op].info;
}

const char *loom_op_name(loom_op op) { return (unsigned)op < LOOM_OP_COUNT ? rows[op].name : "?"; }
const char *loom_op_meaning(loom_op op) { return (unsigned)op < LOOM_OP_COUNT ? rows[op].meaning : "?"; }
bool loom_op_reorderable(loom_op op) { return (unsigned)op < LOOM_OP_COUNT && rows[op].reorderable; }

bool loom_op_from_name(const char *name, loom_op *out)
{
    if (!name || !out)
        return false;
    for (unsigned i = 0; i < LOOM_OP_COUNT; i++)
        if (strcmp(name, rows[i].name) == 0) {
            *out = (loom_op)i;
            return true;
        }
    return false;
}
