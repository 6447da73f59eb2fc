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
 * Last, what C and the GLSL both spell out (the kernel interface of
 * shaders/loom_shaders.h): every kernel binding the tag step word binds it
 * at LOOM_TAG_BINDING, writable (the fault word after the step word), and
 * ends its push constants with the two
 * tag words at LOOM_TAG_PUSH_OFFSET (no other binding lies beyond the op
 * slots but the counters at LOOM_COUNT_BINDING, whose kernels load them in
 * a poll loop the optimizer kept); tag.glsl's TAG_GATE, CNT_BINDING and
 * CNT_STRIDE are loom_shaders.h's; and the step-parameter
 * block of params.glsl lists the fields of loom_step_params (ir/loom_ir.h)
 * in order, with the same types and array lengths, as many bytes as C has.
 *
 * usage: spirv_layouts OUT.c LOOM_IR_H PARAMS_GLSL TAG_GLSL NAME.spv...
 * (the kernel name is NAME) */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "loom_shaders.h"

typedef struct entry {
    char name[128];
    loom_spirv_info info;
    uint32_t count_loads;   /* OpLoads through a binding LOOM_COUNT_BINDING pointer */
} entry;

/* The OpLoads whose pointer leads (through access chains) to a variable
 * at binding `binding`: a counted edge's poll (tag.glsl's cnt_wait) loads
 * the counter once before its loop and again in it. A loop the optimizer
 * removed (it did, when the loop only counted its trips) leaves one load,
 * and every wait on a GPU gives up at once, while lavapipe, running a
 * dispatch at a time, never notices. */
static uint32_t loads_through(const uint32_t *code, size_t words, uint32_t binding)
{
    if (words < 5)
        return 0;
    uint32_t bound = code[3], n = 0;
    bool *mark = calloc(bound ? bound : 1, 1);
    if (!mark)
        return 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 5; i < words;) {
            uint32_t len = code[i] >> 16, op = code[i] & 0xffffu;
            if (len == 0 || i + len > words)
                break;
            const uint32_t *a = code + i + 1;
            if (pass == 0 && op == 71 && len >= 4 && a[1] == 33 && a[2] == binding && a[0] < bound)
                mark[a[0]] = true;   /* OpDecorate id Binding binding */
            if (pass == 1 && (op == 65 || op == 66 || op == 67) && len >= 4 && a[2] < bound && a[1] < bound &&
                mark[a[2]])
                mark[a[1]] = true;   /* an access chain from such a pointer */
            if (pass == 1 && op == 61 && len >= 4 && a[2] < bound && mark[a[2]])
                n++;                 /* OpLoad through one */
            i += len;
        }
    free(mark);
    return n;
}

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
    e->count_loads = bad ? 0 : loads_through(code, (size_t)n / 4, LOOM_COUNT_BINDING);
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

/* ---- what C and the GLSL both spell out ----------------------------------- */

/* Binding LOOM_TAG_BINDING and the tag words ending the push constants, in
 * every kernel that binds anything beyond the op slots. */
static int check_tags(const entry *e, size_t n)
{
    int bad = 0, tagged = 0;
    const uint32_t tag_bit = 1u << LOOM_TAG_BINDING, op_slots = (1u << LOOM_MAX_BINDINGS) - 1;
    const uint32_t count_bit = 1u << LOOM_COUNT_BINDING;
    int counted = 0;
    for (size_t i = 0; i < n; i++) {
        const loom_spirv_info *f = &e[i].info;
        uint32_t extra = f->layout.slots & ~op_slots;
        if (!extra)
            continue;
        tagged++;
        bool counts = extra == (tag_bit | count_bit);
        counted += counts;
        if (counts && e[i].count_loads < 2) {
            fprintf(stderr, "spirv_layouts: kernel '%s': the counter is loaded %u time(s); the poll of tag.glsl's "
                    "cnt_wait loads it before its loop and in it (a loop the optimizer removed leaves one)\n",
                    e[i].name, e[i].count_loads);
            bad = 1;
        }
        if (counts && (!(f->layout.writable & count_bit) || f->push_size != LOOM_TAG_PUSH_OFFSET + 8)) {
            fprintf(stderr, "spirv_layouts: kernel '%s': the counters (binding %u) must be writable, and the count "
                    "words at %u..%u followed by the tag words (LOOM_COUNT_PUSH_OFFSET, shaders/loom_shaders.h; "
                    "TAG_PC in matvec.glsl)\n", e[i].name, LOOM_COUNT_BINDING, LOOM_COUNT_PUSH_OFFSET,
                    LOOM_COUNT_PUSH_OFFSET + 8);
            bad = 1;
        } else if (extra != tag_bit && !counts) {
            fprintf(stderr, "spirv_layouts: kernel '%s': bindings 0x%x beyond the op slots; the tag step word is "
                    "binding %u (LOOM_TAG_BINDING, shaders/loom_shaders.h; TAG_BINDING in tag.glsl)\n", e[i].name,
                    extra, LOOM_TAG_BINDING);
            bad = 1;
        } else if (!(f->layout.writable & tag_bit)) {
            fprintf(stderr, "spirv_layouts: kernel '%s': the tag words (binding %u) are read-only; the fault word "
                    "after the step word is written (tag.glsl)\n", e[i].name, LOOM_TAG_BINDING);
            bad = 1;
        } else if (f->push_size != LOOM_TAG_PUSH_OFFSET + 8) {
            fprintf(stderr, "spirv_layouts: kernel '%s': push constants end at byte %u; the tag words are at %u..%u "
                    "(LOOM_TAG_PUSH_OFFSET, shaders/loom_shaders.h; TAG_PC in matvec.glsl and attention.glsl)\n",
                    e[i].name, f->push_size, LOOM_TAG_PUSH_OFFSET, LOOM_TAG_PUSH_OFFSET + 8);
            bad = 1;
        }
    }
    if (n && !counted) {
        fprintf(stderr, "spirv_layouts: no kernel binds the counters at binding %u (LOOM_COUNT_BINDING)\n",
                LOOM_COUNT_BINDING);
        bad = 1;
    }
    if (n && !tagged) {
        fprintf(stderr, "spirv_layouts: no kernel binds the tag step word at binding %u (LOOM_TAG_BINDING)\n",
                LOOM_TAG_BINDING);
        bad = 1;
    }
    return bad;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    long n = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    char *s = n >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = 0;
    if (f)
        fclose(f);
    if (!s)
        fprintf(stderr, "spirv_layouts: %s: cannot read\n", path);
    return s;
}

/* tag.glsl's "#define NAME value" is want. */
static int check_define(const char *path, const char *s, const char *name, unsigned long want, const char *c_name)
{
    char key[64];
    snprintf(key, sizeof key, "#define %s ", name);
    const char *d = strstr(s, key);
    unsigned long v = d ? strtoul(d + strlen(key), NULL, 0) : 0;
    int bad = !d || v != want;
    if (bad)
        fprintf(stderr, "spirv_layouts: %s: %s is %s0x%lx, %s (shaders/loom_shaders.h) gives 0x%lx\n", path, name,
                d ? "" : "missing, not ", v, c_name, want);
    return bad;
}

/* tag.glsl's TAG_GATE is LOOM_TAG_GATE, its counters' binding and stride
 * (in words) LOOM_COUNT_BINDING and LOOM_COUNT_STRIDE. */
static int check_gate(const char *path)
{
    char *s = read_text(path);
    if (!s)
        return 1;
    int bad = check_define(path, s, "TAG_GATE", LOOM_TAG_GATE, "LOOM_TAG_GATE");
    bad |= check_define(path, s, "CNT_BINDING", LOOM_COUNT_BINDING, "LOOM_COUNT_BINDING");
    bad |= check_define(path, s, "CNT_STRIDE", LOOM_COUNT_STRIDE / 4, "LOOM_COUNT_STRIDE / 4");
    free(s);
    return bad;
}

typedef struct field { char type[16], name[32]; unsigned count; } field;

/* The fields of the first block after `open` up to the line starting with
 * '}': one "TYPE NAME;" or "TYPE NAME[N];" a line, comments dropped. */
static int fields_of(const char *path, const char *text, const char *open, field *f, int max)
{
    const char *p = strstr(text, open);
    if (!p) {
        fprintf(stderr, "spirv_layouts: %s: no '%s'\n", path, open);
        return -1;
    }
    int n = 0;
    for (p = strchr(p, '\n'); p && *++p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)(len < 255 ? len : 255), p);
        char *c = strstr(line, "/*");
        if (c || (c = strstr(line, "//")))
            *c = 0;
        char *t = line + strspn(line, " \t");
        if (*t == '}')
            return n;
        if (*t && *t != '*') {   /* a comment's continuation lines start with '*' */
            field x = { .count = 1 };
            char rest[64] = "";
            if (n == max || sscanf(t, "%15s %31[A-Za-z0-9_]%63s", x.type, x.name, rest) < 2 ||
                (rest[0] == '[' && sscanf(rest, "[%u];", &x.count) != 1) || (rest[0] != '[' && strcmp(rest, ";"))) {
                fprintf(stderr, "spirv_layouts: %s: cannot read the field '%s' of '%s'\n", path, t, open);
                return -1;
            }
            f[n++] = x;
        }
        p = end;
    }
    fprintf(stderr, "spirv_layouts: %s: '%s' does not end\n", path, open);
    return -1;
}

/* The GLSL spelling of a C field type (32-bit scalars only). */
static const char *glsl_type(const char *c)
{
    return !strcmp(c, "uint32_t") ? "uint" : !strcmp(c, "int32_t") ? "int" : !strcmp(c, "float") ? "float" : NULL;
}

/* params.glsl's StepParams block against loom_step_params in loom_ir.h. */
static int check_params(const char *c_path, const char *glsl_path)
{
    char *c = read_text(c_path), *glsl = read_text(glsl_path);
    field cf[32], gf[32];
    int nc = c ? fields_of(c_path, c, "typedef struct loom_step_params {", cf, 32) : -1;
    int ng = glsl ? fields_of(glsl_path, glsl, "buffer StepParams {", gf, 32) : -1;
    int bad = nc < 0 || ng < 0;
    uint64_t words = 0;
    for (int i = 0; !bad && i < nc && i < ng; i++) {
        const char *want = glsl_type(cf[i].type);
        words += cf[i].count;
        if (!want || strcmp(want, gf[i].type) || strcmp(cf[i].name, gf[i].name) || cf[i].count != gf[i].count) {
            fprintf(stderr, "spirv_layouts: step parameters: field %d is %s %s[%u] in %s, %s %s[%u] in %s\n", i,
                    cf[i].type, cf[i].name, cf[i].count, c_path, gf[i].type, gf[i].name, gf[i].count, glsl_path);
            bad = 1;
        }
    }
    if (!bad && nc != ng) {
        fprintf(stderr, "spirv_layouts: step parameters: %d fields in %s, %d in %s\n", nc, c_path, ng, glsl_path);
        bad = 1;
    }
    if (!bad && words * 4 != sizeof(loom_step_params)) {
        fprintf(stderr, "spirv_layouts: step parameters: %s reads as %llu bytes, sizeof(loom_step_params) is %zu\n",
                c_path, (unsigned long long)words * 4, sizeof(loom_step_params));
        bad = 1;
    }
    free(c);
    free(glsl);
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
    if (argc < 5) {
        fprintf(stderr, "usage: spirv_layouts OUT.c LOOM_IR_H PARAMS_GLSL TAG_GLSL NAME.spv...\n");
        return 2;
    }
    int n = argc - 5;
    entry *e = calloc(n ? (size_t)n : 1, sizeof *e);
    if (!e)
        return 1;
    for (int i = 0; i < n; i++)
        if (read_layout(argv[i + 5], &e[i]))
            return 1;
    qsort(e, (size_t)n, sizeof *e, by_name);
    int bad = check_ops(e, (size_t)n);
    bad |= check_tags(e, (size_t)n);
    bad |= check_gate(argv[4]);
    bad |= check_params(argv[2], argv[3]);
    int rc = bad || write_table(argv[1], e, n);
    if (rc)
        remove(argv[1]);
    free(e);
    return rc;
}
