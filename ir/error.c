/* Result names and the per-thread last-error message. */
#include <stdarg.h>
#include <stdio.h>
#include "loom_ir.h"

static const char *const result_names[] = {
#define X(name, msg) "LOOM_" #name,
#include "results.def"
#undef X
};

static _Thread_local char last_error[512];

const char *loom_result_str(loom_result rc)
{
    if ((unsigned)rc >= LOOM_RESULT_COUNT)
        return "LOOM_?";
    return result_names[rc];
}

const char *loom_last_error(void) { return last_error; }

void loom_clear_error(void) { last_error[0] = 0; }

loom_result loom_fail(loom_result rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return rc;
}
