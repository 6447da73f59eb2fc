/* The one main() of the Check test programs (tests/runner.c). Each test
 * file defines loom_test_register, which adds its suites and says how they
 * run; the runner runs them in one SRunner, so Check's own filters
 * (CK_RUN_SUITE, CK_RUN_CASE, CK_EXCLUDE_SUITE, CK_EXCLUDE_CASE) and
 * CK_FORK work the same in every program, and the exit status is non-zero
 * when a test failed. */
#ifndef LOOM_TEST_RUNNER_H
#define LOOM_TEST_RUNNER_H

#include <check.h>

typedef struct loom_test_runner loom_test_runner;

/* Defined by each test program: adds its suites. argc and argv are the
 * program's, for the few that take arguments. */
void loom_test_register(loom_test_runner *r, int argc, char **argv);

/* Adds a suite to the run, after those added before it. */
void loom_test_add_suite(loom_test_runner *r, Suite *s);
/* Runs every test in this process instead of one fork each, for programs
 * whose tests share one device. */
void loom_test_no_fork(loom_test_runner *r);
/* Calls fn once after the run, before the program exits (e.g. to release
 * what the tests shared). */
void loom_test_at_end(loom_test_runner *r, void (*fn)(void));

#endif
