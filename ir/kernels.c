/* Kernel binding layouts by name: the built-in table generated at build time
 * from the SPIR-V of shaders/ (tools/spirv_layouts.c), and the layouts of
 * custom kernels declared at run time. Kernel names are process-wide (the
 * runtime resolves a graph's kernel by name), so the declared table is too;
 * a mutex guards it, the built-in table is constant. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

#ifdef LOOM_NO_BUILTIN_LAYOUTS
/* A build without the shaders (no glslc): no kernel is built in. */
const loom_builtin_layout *loom_builtin_layout_table(size_t *count)
{
    *count = 0;
    return NULL;
}
#endif

typedef struct declared {
    char *name;
    loom_kernel_layout layout;
} declared;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static declared *table;
static size_t n_table, cap_table;

static bool builtin_find(const char *name, loom_kernel_layout *out)
{
    size_t n;
    const loom_builtin_layout *t = loom_builtin_layout_table(&n);
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(name, t[mid].name);
        if (c == 0) {
            *out = t[mid].layout;
            return true;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return false;
}

loom_result loom_kernel_declare(const char *name, const loom_kernel_layout *layout)
{
    if (!name || !name[0] || !layout)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_kernel_declare: NULL layout or empty name");
    if (layout->writable & ~layout->slots)
        return loom_fail(LOOM_INVALID_ARGUMENT, "kernel '%s': writable slots 0x%x are not all among slots 0x%x",
                         name, layout->writable, layout->slots);
    loom_result rc = LOOM_OK;
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < n_table && strcmp(table[i].name, name))
        i++;
    if (i == n_table) {
        size_t len = strlen(name) + 1;
        char *dup = malloc(len);
        if (dup && n_table == cap_table) {
            size_t ncap = cap_table ? cap_table * 2 : 16;
            declared *t = realloc(table, ncap * sizeof *t);
            if (t) {
                table = t;
                cap_table = ncap;
            }
        }
        if (!dup || n_table == cap_table) {
            free(dup);
            rc = loom_fail(LOOM_OUT_OF_MEMORY, "kernel '%s': out of memory", name);
        } else {
            memcpy(dup, name, len);
            table[n_table].name = dup;
            table[n_table].layout = *layout;
            __atomic_store_n(&n_table, n_table + 1, __ATOMIC_RELEASE);
        }
    }
    if (!rc)
        table[i].layout = *layout;
    pthread_mutex_unlock(&lock);
    return rc;
}

bool loom_kernel_lookup(const char *name, loom_kernel_layout *out, bool *builtin)
{
    if (builtin)
        *builtin = false;
    bool found = false;
    /* Most processes declare nothing: skip the lock then. */
    if (__atomic_load_n(&n_table, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < n_table && !found; i++)
            if (!strcmp(table[i].name, name)) {
                *out = table[i].layout;
                found = true;
            }
        pthread_mutex_unlock(&lock);
    }
    if (found)
        return true;
    if (builtin_find(name, out)) {
        if (builtin)
            *builtin = true;
        return true;
    }
    return false;
}

loom_result loom_kernel_find(const char *name, loom_kernel_layout *out, bool *builtin)
{
    if (builtin)
        *builtin = false;
    if (!name || !out)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_kernel_find: NULL argument");
    if (loom_kernel_lookup(name, out, builtin))
        return LOOM_OK;
    return loom_fail(LOOM_NOT_FOUND, "kernel '%s' is neither built in nor declared", name);
}
