/* The pass registry and the pass manager: a static table of passes, a
 * pipeline string parsed against it, and the run loop with its options —
 * verify after each pass, time each pass, dump after each pass. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include "internal.h"

/* The registry: LOOM_PASS_LIST (loom_pass_switches.h), which also spells
 * the default pipeline. The "known passes" message and the skip mask read
 * this table. */
static const loom_pass pass_table[] = {
#define PASS_ENTRY(name, bit, summary) { #name, summary, loom_pass_##name, bit },
    LOOM_PASS_LIST(PASS_ENTRY, PASS_ENTRY)
#undef PASS_ENTRY
};
#define N_PASSES (sizeof pass_table / sizeof pass_table[0])

uint32_t loom_pass_count(void) { return (uint32_t)N_PASSES; }
const loom_pass *loom_pass_at(uint32_t i) { return i < N_PASSES ? &pass_table[i] : NULL; }

static int find_n(const char *name, size_t len)
{
    for (uint32_t i = 0; i < N_PASSES; i++)
        if (strlen(pass_table[i].name) == len && memcmp(pass_table[i].name, name, len) == 0)
            return (int)i;
    return -1;
}

int loom_pass_index(const char *name) { return name ? find_n(name, strlen(name)) : -1; }

uint32_t loom_pass_skip_mask(uint32_t disable)
{
    uint32_t skip = 0;
    for (uint32_t i = 0; i < N_PASSES; i++)
        if (disable & pass_table[i].disable)
            skip |= 1u << i;
    return skip;
}

/* "verify, fuse, ..." from the table. */
static const char *known_passes(void)
{
    static char buf[256];
    size_t len = 0;
    for (uint32_t i = 0; i < N_PASSES && len < sizeof buf; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? ", " : "", pass_table[i].name);
    return buf;
}

/* Splits the pipeline into pass indices. */
static loom_result parse(const char *pipeline, int *idx, uint32_t *n)
{
    const char *p = pipeline ? pipeline : LOOM_PASS_PIPELINE_DEFAULT;
    *n = 0;
    bool after_lifetimes = false;
    for (;;) {
        while (*p == ' ')
            p++;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        size_t len = (size_t)(e - p);
        while (len && p[len - 1] == ' ')
            len--;
        if (len == 0)
            return loom_fail(LOOM_INVALID_ARGUMENT, "pipeline '%s': entry %u is empty", pipeline ? pipeline : "",
                             *n + 1);
        int i = find_n(p, len);
        if (i < 0)
            return loom_fail(LOOM_INVALID_ARGUMENT, "pipeline: unknown pass '%.*s' (known: %s)", (int)len, p,
                             known_passes());
        if (*n >= LOOM_PASS_MAX)
            return loom_fail(LOOM_INVALID_ARGUMENT, "pipeline: more than %u passes", LOOM_PASS_MAX);
        if (after_lifetimes && pass_table[i].run != loom_pass_verify && pass_table[i].run != loom_pass_lifetimes &&
            pass_table[i].run != loom_pass_awaits && pass_table[i].run != loom_pass_waves)
            return loom_fail(LOOM_INVALID_ARGUMENT,
                             "pipeline: pass '%s' after 'lifetimes' would invalidate the arena layout",
                             pass_table[i].name);
        after_lifetimes |= pass_table[i].run == loom_pass_lifetimes;
        idx[(*n)++] = i;
        if (*e == 0)
            return LOOM_OK;
        p = e + 1;
    }
}

loom_result loom_pipeline_check(const char *pipeline)
{
    int idx[LOOM_PASS_MAX];
    uint32_t n;
    return parse(pipeline, idx, &n);
}

static loom_result dump(const loom_graph *g, const char *dir, uint32_t step, const char *name)
{
    static const loom_format formats[] = { LOOM_FORMAT_TEXT, LOOM_FORMAT_DOT, LOOM_FORMAT_JSON };
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return loom_fail(LOOM_IO, "dump: cannot create directory '%s'", dir);
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
        char path[4096];
        int len = snprintf(path, sizeof path, "%s/%02u-%s.%s", dir, step, name, loom_format_ext(formats[f]));
        if (len < 0 || (size_t)len >= sizeof path)
            return loom_fail(LOOM_INVALID_ARGUMENT, "dump: path under '%s' is too long", dir);
        loom_result rc = loom_graph_save(g, formats[f], path);
        if (rc)
            return rc;
    }
    return LOOM_OK;
}

static loom_result wrap(loom_result rc, const char *what, const char *pass)
{
    return loom_fail_wrap(rc, "%s '%s'", what, pass);
}

loom_result loom_pipeline_run(loom_graph *g, const loom_pipeline_desc *desc, loom_pass_ctx *ctx,
                              loom_pipeline_report *rep)
{
    if (!g || !ctx)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_pipeline_run: NULL argument");
    loom_pipeline_desc d = desc ? *desc : (loom_pipeline_desc){ 0 };
    int idx[LOOM_PASS_MAX];
    uint32_t n;
    loom_result rc = parse(d.pipeline, idx, &n);
    if (rc)
        return rc;
    const char *dir = d.dump_dir ? d.dump_dir : getenv("LOOM_DUMP");
    if (dir && !dir[0])
        dir = NULL;
    if (rep)
        memset(rep, 0, sizeof *rep);
    if (dir && (rc = dump(g, dir, 0, "input")))
        return rc;
    for (uint32_t k = 0; k < n; k++) {
        const loom_pass *p = &pass_table[idx[k]];
        if (d.skip & (1u << idx[k]))
            continue;
        uint64_t t0 = d.time_each ? pass_now_ns() : 0;
        rc = p->run(g, ctx);
        uint64_t t1 = d.time_each ? pass_now_ns() : 0;
        if (rc)
            return wrap(rc, "pass", p->name);
        if (rep) {
            rep->names[rep->n_passes] = p->name;
            rep->ns[rep->n_passes++] = t1 - t0;
        }
        if (d.verify_each && p->run != loom_pass_verify && (rc = loom_pass_verify(g, ctx)))
            return wrap(rc, "verify after pass", p->name);
        if (dir && (rc = dump(g, dir, k + 1, p->name)))
            return rc;
    }
    return LOOM_OK;
}
