/* Build tool: reads the SPIR-V of every built-in kernel and writes the C
 * table of their binding layouts (ir/kernels.c looks kernels up in it), so
 * a kernel added to shaders/ is known to the verifier with no table kept by
 * hand. A shader loom cannot bind (a set other than 0, a descriptor that is
 * not a storage buffer) fails the build here rather than at run time.
 *
 * It then holds every op kind's row of ir/ops.def against the kernels the
 * row names: each kernel must exist and declare exactly the row's slots,
 * write exactly its written slots, take its push-constant bytes and have
 * its local size. Any difference fails the build, naming the op, the kernel
 * and the slot, and no table is written.
 *
 * usage: spirv_layouts OUT.c NAME.spv... (the kernel name is NAME) */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

typedef struct entry {
    char name[128];
    loom_spirv_info info;
} entry;

static int by_name(const void *a, const void *b) { return strcmp(((const entry *)a)->name, ((const entry *)b)->name); }

static int read_layout(const char *path, entry *e)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strcspn(base, ".");
    if (len == 0 || len >= sizeof e->name) {
        fprintf(stderr, "spirv_layouts: %s: bad kernel name\n", path);
        return 1;
    }
    memcpy(e->name, base, len);
    e->name[len] = 0;
    FILE *f = fopen(path, "rb");
    long n = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    uint32_t *code = n > 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)n) : NULL;
    int bad = !code || fread(code, 1, (size_t)n, f) != (size_t)n;
    if (f)
        fclose(f);
    loom_result rc = bad ? LOOM_IO : loom_spirv_reflect(code, (size_t)n, &e->info);
    free(code);
    if (rc) {
        fprintf(stderr, "spirv_layouts: %s: %s\n", path, bad ? "cannot read" : loom_last_error());
        return 1;
    }
    return 0;
}

/* One difference between a row and its kernel; returns 1 (failed). */
static int differs(const loom_op_info *in, const char *kernel, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int differs(const loom_op_info *in, const char *kernel, const char *fmt, ...)
{
    fprintf(stderr, "spirv_layouts: ops.def: %s, kernel '%s': ", in->name, kernel);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

static const char *access_word(bool written) { return written ? "written" : "read-only"; }

/* The row's slots and written slots against the kernel's bindings. */
static int check_slots(const loom_op_info *in, const char *kernel, const loom_kernel_layout *l)
{
    int bad = 0;
    for (uint32_t s = 0; s < LOOM_MAX_SLOTS; s++) {
        uint32_t bit = 1u << s;
        bool listed = s < in->n_slots, bound = (l->slots & bit) != 0;
        if (listed && !bound)
            bad |= differs(in, kernel, "slot %u '%s' is in the table, the shader declares no binding %u", s,
                           in->slot[s].name, s);
        else if (bound && !listed)
            bad |= differs(in, kernel, "the shader declares binding %u, the table lists %u slots", s, in->n_slots);
        else if (listed && (in->writable & bit) != (l->writable & bit))
            bad |= differs(in, kernel, "slot %u '%s' is %s in the table, %s in the shader", s, in->slot[s].name,
                           access_word(in->writable & bit), access_word(l->writable & bit));
    }
    return bad;
}

static int check_kernel(const loom_op_info *in, const char *kernel, const entry *e, size_t n)
{
    const entry *k = NULL;
    for (size_t i = 0; i < n && !k; i++)
        if (!strcmp(e[i].name, kernel))
            k = &e[i];
    if (!k)
        return differs(in, kernel, "shaders/ builds no such kernel");
    const loom_spirv_info *f = &k->info;
    int bad = check_slots(in, kernel, &f->layout);
    if (f->push_size != in->push_size)
        bad |= differs(in, kernel, "push constants are %u bytes in the table, %u in the shader", in->push_size,
                       f->push_size);
    if (f->local_size[0] != in->local_size || f->local_size[1] != 1 || f->local_size[2] != 1)
        bad |= differs(in, kernel, "local size is %u in the table, %u x %u x %u in the shader", in->local_size,
                       f->local_size[0], f->local_size[1], f->local_size[2]);
    return bad;
}

/* Every kernel every op names, every variant. */
static int check_ops(const entry *e, size_t n)
{
    int bad = 0;
    for (uint32_t op = 0; op < LOOM_OP_COUNT; op++) {
        const loom_op_info *in = loom_op_info_get((loom_op)op);
        for (int v = 0; v < 4; v++)
            if (in->kernel[v] && (v % 2 == 0 || strcmp(in->kernel[v], in->kernel[v - 1])))
                bad |= check_kernel(in, in->kernel[v], e, n);
    }
    return bad;
}

static int write_table(const char *path, const entry *e, int n)
{
    FILE *out = fopen(path, "w");
    if (!out)
        return 1;
    fprintf(out, "/* Generated by tools/spirv_layouts.c from the SPIR-V of shaders/; do not edit. */\n"
                 "#include \"internal.h\"\n\nstatic const loom_builtin_layout table[] = {\n");
    for (int i = 0; i < n; i++)
        fprintf(out, "    { \"%s\", { 0x%xu, 0x%xu, 0x%xu } },\n", e[i].name, e[i].info.layout.slots,
                e[i].info.layout.writable, e[i].info.layout.needs);
    if (n == 0)
        fprintf(out, "    { \"\", { 0, 0, 0 } },\n");
    fprintf(out, "};\n\nconst loom_builtin_layout *loom_builtin_layout_table(size_t *count)\n{\n"
                 "    *count = %d;\n    return table;\n}\n", n);
    return fclose(out) ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: spirv_layouts OUT.c NAME.spv...\n");
        return 2;
    }
    int n = argc - 2;
    entry *e = calloc(n ? (size_t)n : 1, sizeof *e);
    if (!e)
        return 1;
    for (int i = 0; i < n; i++)
        if (read_layout(argv[i + 2], &e[i]))
            return 1;
    qsort(e, (size_t)n, sizeof *e, by_name);
    int rc = check_ops(e, (size_t)n) || write_table(argv[1], e, n);
    if (rc)
        remove(argv[1]);
    free(e);
    return rc;
}
