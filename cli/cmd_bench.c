/* `loom bench WHICH`: dispatches to the benchmark of that name. Each prints
 * a table; the ones needing a device are absent from builds without the
 * runtime (weak symbols left undefined). */
#include <string.h>
#include "cli.h"

#define WEAK __attribute__((weak))
int loom_bench_micro(int argc, char **argv) WEAK;    /* runtime: dispatch, barrier, record, submit, wait */
int loom_bench_ops(int argc, char **argv) WEAK;      /* op library: MATVEC GB/s vs copy */
int loom_bench_cache(int argc, char **argv) WEAK;    /* capture + hash + lookup + submit per step */
int loom_bench_compile(int argc, char **argv) WEAK;  /* pass pipeline scaling, 1k..100k nodes */
int loom_bench_decode(int argc, char **argv) WEAK;   /* the example decoder's step under each plan variant */

static const struct {
    const char *name;
    int (*run)(int, char **);
} benches[] = {
    { "micro", loom_bench_micro },
    { "ops", loom_bench_ops },
    { "cache", loom_bench_cache },
    { "compile", loom_bench_compile },
    { "decode", loom_bench_decode },
};

int loom_cmd_bench(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: loom bench micro|ops|cache|compile|decode [options]\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        if (!strcmp(argv[1], benches[i].name)) {
            if (!benches[i].run) {
                fprintf(stderr, "loom bench: '%s' is not part of this build\n", argv[1]);
                return 2;
            }
            return benches[i].run(argc - 1, argv + 1);
        }
    fprintf(stderr, "loom bench: unknown benchmark '%s'\n", argv[1]);
    return 2;
}
