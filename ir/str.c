/* The growable string every dumper writes into, and the names of the dump
 * formats. An allocation failure does not stop the caller mid-way: it sets
 * .failed, later appends become no-ops, and the dumper reports
 * LOOM_OUT_OF_MEMORY once at the end. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "internal.h"

void loom_str_init(loom_str *s, const loom_allocator *a)
{
    if (!s)
        return;
    s->data = NULL;
    s->len = s->cap = 0;
    s->allocator = a ? a : loom_default_allocator();
    s->failed = false;
}

void loom_str_free(loom_str *s)
{
    if (!s)
        return;
    if (s->data)
        loom_free(s->allocator, s->data, s->cap);
    s->data = NULL;
    s->len = s->cap = 0;
    s->failed = false;
}

/* Room for `more` bytes plus the terminating NUL. */
static bool str_reserve(loom_str *s, size_t more)
{
    if (s->failed)
        return false;
    if (more > SIZE_MAX / 2 - s->len) {
        s->failed = true;
        return false;
    }
    size_t need = s->len + more + 1;
    if (need <= s->cap)
        return true;
    size_t ncap = s->cap ? s->cap : 256;
    while (ncap < need)
        ncap *= 2;
    char *q = s->allocator->realloc(s->allocator->user, s->data, s->cap, ncap);
    if (!q) {
        s->failed = true;
        return false;
    }
    s->data = q;
    s->cap = ncap;
    return true;
}

void loom_str_append(loom_str *s, const char *p, size_t n)
{
    if (!s || n == 0)
        return;
    if (!p) {
        s->failed = true;   /* the caller's string is incomplete */
        return;
    }
    if (!str_reserve(s, n))
        return;
    memcpy(s->data + s->len, p, n);
    s->len += n;
    s->data[s->len] = 0;
}

void loom_str_printf(loom_str *s, const char *fmt, ...)
{
    if (!s || s->failed)
        return;
    if (!fmt) {
        s->failed = true;
        return;
    }
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        s->failed = true;
        return;
    }
    if ((size_t)n < sizeof small) {
        loom_str_append(s, small, (size_t)n);
        return;
    }
    /* Too long for the stack buffer: format straight into the string. */
    if (!str_reserve(s, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(s->data + s->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    s->len += (size_t)n;
}

static const char *const format_names[] = { "text", "dot", "json" };
static const char *const format_exts[] = { "txt", "dot", "json" };

bool loom_format_from_name(const char *name, loom_format *out)
{
    if (!name || !out)
        return false;
    for (unsigned i = 0; i < 3; i++)
        if (strcmp(name, format_names[i]) == 0 || strcmp(name, format_exts[i]) == 0) {
            *out = (loom_format)i;
            return true;
        }
    return false;
}

const char *loom_format_ext(loom_format f) { return (unsigned)f < 3 ? format_exts[f] : "?"; }
