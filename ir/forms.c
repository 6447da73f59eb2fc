/* Kernel forms: shaders/forms.def's rows, expanded by weight type into the
 * names the build compiled, so that builders and passes find a kernel by
 * what it does (its form, flags and weight type) instead of spelling or
 * splicing its name. The names live in static storage built once; every
 * lookup returns one of them or NULL. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "loom_ops.h"

enum { W_NONE, W_ALL, W_VW8, W_QKV, W_QKV8, W_Q, W_QKVQ, W_K, W_KV6, W_F16 };

static const struct form_row {
    const char *name, *source, *flags;
    int types;
} rows[] = {
#define FORM(name, source, flags, types) { #name, #source, flags, types },
#include "forms.def"
#undef FORM
};
#define N_ROWS (sizeof rows / sizeof rows[0])

/* Weight types of a kernel: w (all matrices) and v (the third matrix of the
 * q/k/v forms, else w). Index into TYPES. */
static const struct wtype {
    const char *suffix;
    loom_dtype w, v;
} TYPES[] = {
    { "f32", LOOM_F32, LOOM_F32 },   { "f16", LOOM_F16, LOOM_F16 },   { "q8_0", LOOM_Q8_0, LOOM_Q8_0 },
    { "q4_0", LOOM_Q4_0, LOOM_Q4_0 }, { "q4_k", LOOM_Q4_K, LOOM_Q4_K }, { "q6_k", LOOM_Q6_K, LOOM_Q6_K },
    { "q4_k_vq6_k", LOOM_Q4_K, LOOM_Q6_K },
};
#define N_TYPES (sizeof TYPES / sizeof TYPES[0])

static bool has_type(int set, size_t t)
{
    switch (set) {
    case W_ALL: return t <= 5;
    case W_VW8: return t >= 1 && t <= 5;
    case W_QKV: return true;
    case W_QKV8: return t >= 1;
    case W_Q: return t >= 2 && t <= 5;
    case W_QKVQ: return t >= 2;
    case W_K: return t == 4 || t == 5;
    case W_KV6: return t == 6;
    case W_F16: return t == 1;
    default: return false;
    }
}

#define NAME_BYTES 64
#define FLAG_WORDS 2
#define MAX_FLAGS (64 * FLAG_WORDS)   /* distinct flags over all rows */

/* A set of flags: bit i is flag_names[i]. */
typedef struct flagset {
    uint64_t w[FLAG_WORDS];
} flagset;

static bool fs_empty(flagset a)
{
    for (int i = 0; i < FLAG_WORDS; i++)
        if (a.w[i])
            return false;
    return true;
}

static bool fs_eq(flagset a, flagset b)
{
    return !memcmp(a.w, b.w, sizeof a.w);
}

/* a with b's flags added and d's dropped. */
static flagset fs_edit(flagset a, flagset b, flagset d)
{
    for (int i = 0; i < FLAG_WORDS; i++)
        a.w[i] = (a.w[i] | b.w[i]) & ~d.w[i];
    return a;
}

static bool fs_has(flagset a, flagset f)
{
    for (int i = 0; i < FLAG_WORDS; i++)
        if ((a.w[i] & f.w[i]) != f.w[i])
            return false;
    return true;
}

/* One compiled kernel: its name, row and type (N_TYPES for W_NONE), and
 * its flags. */
typedef struct form_kernel {
    char name[NAME_BYTES];
    uint16_t row, type;
    flagset flags;
} form_kernel;

static form_kernel kernels[N_ROWS * N_TYPES];
static size_t n_kernels;
static char flag_names[MAX_FLAGS][24];
static size_t n_flags;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Flag w (len bytes) as a set of one; adds it when new. Empty when the
 * table is full, which test_ir's forms test catches (a kernel would not
 * read back as its own variant). */
static flagset flag_bit(const char *w, size_t len, bool add)
{
    flagset f = { { 0 } };
    size_t i = 0;
    while (i < n_flags && !(strlen(flag_names[i]) == len && !memcmp(flag_names[i], w, len)))
        i++;
    if (i == n_flags) {
        if (!add || n_flags == MAX_FLAGS || len >= sizeof flag_names[0])
            return f;
        memcpy(flag_names[n_flags++], w, len);
    }
    f.w[i / 64] = 1ull << (i % 64);
    return f;
}

/* The set of a space-separated flag list; *ok false if one is unknown. */
static flagset flag_set(const char *s, bool add, bool *ok)
{
    flagset bits = { { 0 } };
    while (s && *s) {
        while (*s == ' ')
            s++;
        size_t len = strcspn(s, " ");
        if (len) {
            flagset b = flag_bit(s, len, add);
            *ok &= !fs_empty(b);
            bits = fs_edit(bits, b, (flagset){ { 0 } });
        }
        s += len;
    }
    return bits;
}

static void build(void)
{
    for (size_t r = 0; r < N_ROWS; r++) {
        bool ok = true;
        flagset flags = flag_set(rows[r].flags, true, &ok);
        for (size_t t = 0; t <= N_TYPES; t++) {
            if (t == N_TYPES ? rows[r].types != W_NONE : !has_type(rows[r].types, t))
                continue;
            form_kernel *k = &kernels[n_kernels++];
            if (t == N_TYPES)
                snprintf(k->name, sizeof k->name, "%s", rows[r].name);
            else
                snprintf(k->name, sizeof k->name, "%s_%s", rows[r].name, TYPES[t].suffix);
            k->row = (uint16_t)r;
            k->type = (uint16_t)t;
            k->flags = flags;
        }
    }
}

static const form_kernel *find_name(const char *kernel)
{
    pthread_once(&once, build);
    for (size_t i = 0; kernel && i < n_kernels; i++)
        if (!strcmp(kernels[i].name, kernel))
            return &kernels[i];
    return NULL;
}

static size_t type_index(loom_dtype w, loom_dtype v)
{
    for (size_t t = 0; t < N_TYPES; t++)
        if (TYPES[t].w == w && TYPES[t].v == v)
            return t;
    return N_TYPES;
}

const char *loom_form_kernel(const char *form, loom_dtype w, loom_dtype v)
{
    pthread_once(&once, build);
    size_t t = type_index(w, v);
    for (size_t i = 0; form && i < n_kernels; i++)
        if (kernels[i].type == t && !strcmp(rows[kernels[i].row].name, form))
            return kernels[i].name;
    return NULL;
}

const char *loom_form_variant(const char *kernel, const char *add, const char *drop)
{
    const form_kernel *k = find_name(kernel);
    bool ok = true;
    flagset a = flag_set(add, false, &ok), d = flag_set(drop, false, &ok);
    if (!k || !ok)
        return NULL;
    flagset want = fs_edit(k->flags, a, d);
    for (size_t i = 0; i < n_kernels; i++)
        if (kernels[i].type == k->type && fs_eq(kernels[i].flags, want) &&
            !strcmp(rows[kernels[i].row].source, rows[k->row].source))
            return kernels[i].name;
    return NULL;
}

const char *loom_form_row(const char *kernel)
{
    const form_kernel *k = find_name(kernel);
    return k ? rows[k->row].name : NULL;
}

bool loom_form_has(const char *kernel, const char *flags)
{
    const form_kernel *k = find_name(kernel);
    bool ok = true;
    flagset f = flag_set(flags, false, &ok);
    return k && ok && fs_has(k->flags, f);
}

bool loom_form_weights(const char *kernel, loom_dtype *w, loom_dtype *v)
{
    const form_kernel *k = find_name(kernel);
    if (!k || k->type == N_TYPES)
        return false;
    *w = TYPES[k->type].w;
    *v = TYPES[k->type].v;
    return true;
}

/* The matvec source's block-typed forms sum each row's products over a row
 * group of at least 32 invocations (shaders/matvec.glsl, block_sums_q: 256
 * invocations, 16 rows, 2 an invocation; 512 in the residual projections'
 * integer forms) with one subgroupAdd a subgroup: a subgroup wider than
 * the group would add two rows together. */
#define MATVEC_Q_ROW_GROUP 32u

bool loom_form_subgroup_ok(const char *kernel, uint32_t subgroup_size)
{
    const form_kernel *k = find_name(kernel);
    if (!k || k->type == N_TYPES || strcmp(rows[k->row].source, "matvec"))
        return true;
    if (!loom_dtype_is_block(TYPES[k->type].w))
        return true;
    /* At least 8 lanes: Q4_K's integer form shares a block's header among
     * its 8 units' invocations by subgroup shuffles (quant.glsl:
     * q4_k_load), and every block-typed form keeps a slot a subgroup for
     * up to 512 invocations / 8 (matvec.glsl: red). */
    return subgroup_size <= MATVEC_Q_ROW_GROUP && subgroup_size >= 8u;
}

size_t loom_form_count(void)
{
    pthread_once(&once, build);
    return n_kernels;
}

const char *loom_form_name(size_t i)
{
    pthread_once(&once, build);
    return i < n_kernels ? kernels[i].name : NULL;
}
