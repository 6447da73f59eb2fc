/* Shared by the cli/ subcommands: exit codes and error printing. */
#ifndef LOOM_CLI_H
#define LOOM_CLI_H
#include <stdio.h>
#include <time.h>
#include "loom_ir.h"

/* Prints "loom WHAT: LOOM_X: detail" to stderr; returns exit code 1. */
static inline int loom_cli_fail(const char *what, loom_result rc)
{
    fprintf(stderr, "loom %s: %s: %s\n", what, loom_result_str(rc), loom_last_error());
    return 1;
}

/* Monotonic host time in microseconds, for the benchmarks' tables. */
static inline double loom_cli_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}
#endif
