/* The shared main() of the Check test programs: see runner.h. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include "runner.h"

struct loom_test_runner {
    SRunner *sr;
    bool no_fork;
    void (*at_end)(void);
};

void loom_test_add_suite(loom_test_runner *r, Suite *s)
{
    if (r->sr)
        srunner_add_suite(r->sr, s);
    else
        r->sr = srunner_create(s);
}

void loom_test_no_fork(loom_test_runner *r) { r->no_fork = true; }

void loom_test_at_end(loom_test_runner *r, void (*fn)(void)) { r->at_end = fn; }

int main(int argc, char **argv)
{
    loom_test_runner r = { 0 };
    loom_test_register(&r, argc, argv);
    if (!r.sr) {
        fprintf(stderr, "%s: no suite registered\n", argv[0]);
        return EXIT_FAILURE;
    }
    if (r.no_fork)
        srunner_set_fork_status(r.sr, CK_NOFORK);
    srunner_run_all(r.sr, CK_NORMAL);
    int failed = srunner_ntests_failed(r.sr);
    srunner_free(r.sr);
    if (r.at_end)
        r.at_end();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
