/* Shared by the cli/ subcommands: exit codes and error printing. */
#ifndef LOOM_CLI_H
#define LOOM_CLI_H
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "loom_ir.h"
#include "loom_runtime.h"

/* Prints "loom WHAT: LOOM_X: detail" to stderr; returns exit code 1. */
static inline int loom_cli_fail(const char *what, loom_result rc)
{
    fprintf(stderr, "loom %s: %s: %s\n", what, loom_result_str(rc), loom_last_error());
    return 1;
}

/* After the work on rt is done: 1 with "loom WHAT: N validation messages"
 * on stderr if the validation layer reported any (LOOM_VALIDATE=1), else 0.
 * A benchmark run under the layer fails on them as the tests do. */
static inline int loom_cli_validation(loom_rt *rt, const char *what)
{
    loom_rt_wait_idle(rt);
    uint64_t n = loom_rt_validation_messages(rt);
    if (!n)
        return 0;
    fprintf(stderr, "loom %s: %llu validation messages\n", what, (unsigned long long)n);
    return 1;
}

/* Rounds a benchmark takes turns over, at most (its per-round arrays). */
#define LOOM_CLI_MAX_ROUNDS 64u

static inline int loom_cli_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of n (1..LOOM_CLI_MAX_ROUNDS) values, the mean of the middle two
 * for even n; *lo and *hi the least and the greatest. v is left as it is. */
static inline double loom_cli_median(const double *v, uint32_t n, double *lo, double *hi)
{
    double s[LOOM_CLI_MAX_ROUNDS];
    memcpy(s, v, n * sizeof *s);
    qsort(s, n, sizeof *s, loom_cli_cmp_double);
    *lo = s[0];
    *hi = s[n - 1];
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* The next name of a comma-separated list at *p, looked up in a table of
 * count entries stride bytes apart whose name is the const char * at
 * key_offset (offsetof); *p moves past the name and its comma. Returns the
 * entry's index, count when no entry has that name. */
static inline size_t loom_cli_list_next(const char **p, const void *table, size_t count, size_t stride,
                                        size_t key_offset)
{
    size_t n = strcspn(*p, ",");
    size_t i = 0;
    for (; i < count; i++) {
        const char *key = *(const char *const *)((const char *)table + i * stride + key_offset);
        if (strlen(key) == n && !strncmp(*p, key, n))
            break;
    }
    *p += n + ((*p)[n] == ',');
    return i;
}

/* Monotonic host time in microseconds, for the benchmarks' tables. */
static inline double loom_cli_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}
#endif
