/* Result names and the per-thread last-error message. The slot is
 * thread-local so that distinct graphs and runtimes can fail on distinct
 * threads without a lock and without one thread's message replacing
 * another's. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
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

loom_result loom_fail_wrap(loom_result rc, const char *fmt, ...)
{
    /* The earlier message is copied out first: formatting straight into the
     * slot it is read from is what garbled messages before this helper. */
    char earlier[sizeof last_error];
    memcpy(earlier, last_error, sizeof earlier);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    /* ": earlier", cut to fit (copied by hand: snprintf's "%s" of a buffer
     * as large as the destination is a -Wformat-truncation error at -O0). */
    size_t at = n >= 0 ? (size_t)n : sizeof last_error;
    if (earlier[0] && at + 2 < sizeof last_error) {
        size_t len = strnlen(earlier, sizeof earlier), room = sizeof last_error - 1 - (at + 2);
        memcpy(last_error + at, ": ", 2);
        memcpy(last_error + at + 2, earlier, len < room ? len : room);
        last_error[at + 2 + (len < room ? len : room)] = 0;
    }
    return rc;
}
