/* `loom bench WHICH`: dispatches to the benchmark of that name. Each prints
 * a table; the ones needing a device are absent from builds without the
 * runtime (weak symbols left undefined). Every benchmark's options are
 * listed here, so `loom bench WHICH --help` and docs/cli.md agree. */
#include <string.h>
#include "cli.h"

#define WEAK __attribute__((weak))
int loom_bench_micro(int argc, char **argv) WEAK;    /* runtime: dispatch, barrier, record, submit, wait */
int loom_bench_ops(int argc, char **argv) WEAK;      /* op library: MATVEC GB/s vs copy */
int loom_bench_matmul(int argc, char **argv) WEAK;   /* op library: MATMUL TFLOP/s per kernel form */
int loom_bench_cache(int argc, char **argv) WEAK;    /* capture + hash + lookup + submit per step */
int loom_bench_compile(int argc, char **argv) WEAK;  /* pass pipeline scaling, 1k..100k nodes */
int loom_bench_decode(int argc, char **argv) WEAK;   /* the example decoder's step under each plan variant */
int loom_bench_profile(int argc, char **argv) WEAK;  /* the same step untimed, profiled and traced */
int loom_bench_occupancy(int argc, char **argv) WEAK;  /* resident workgroups by size, shared memory, registers */

static const struct {
    const char *name, *options, *summary;
    int (*run)(int, char **);
} benches[] = {
    { "micro", "[--quick] [--dispatches N] [--reps R] [--device INDEX|NAME]",
      "dispatch, barrier, record, submit and wait costs", loom_bench_micro },
    { "ops", "[--quick] [--isolated [--hot]] [--dtype NAME ...] [--all | --device NAME ...]", "MATVEC bandwidth against a copy", loom_bench_ops },
    { "matmul", "[--quick] [--no-check] [--smi] [--types LIST] [--device NAME]", "MATMUL TFLOP/s per kernel form",
      loom_bench_matmul },
    { "cache", "[--device NAME] [--reps N]", "host cost of a cached decode step", loom_bench_cache },
    { "compile", "[--sizes N[,N...]] [--passes P] [--window N] [--keep-hidden]",
      "pass pipeline time on synthetic decoder graphs (default sizes 1000,10000,100000)", loom_bench_compile },
    { "decode", "[--config tiny|1b|7b] [shape flags] [--steps N] [--rounds R] [--variants LIST] [--in-flight K] "
      "[--device NAME] [--quick]",
      "the example decoder's step under each plan variant, against the weight-read floor; with R rounds the variants "
      "take turns (median, spread, ratio to the first)", loom_bench_decode },
    { "profile", "[--config tiny|1b|7b] [shape flags] [--steps N] [--rounds R] [--variants LIST] [--trace-file F] "
      "[--in-flight K] [--device NAME] [--quick]",
      "what profiling costs: the decoder's step untimed, with step, group and node timestamps, and traced",
      loom_bench_profile },
    { "occupancy", "[--quick] [--device INDEX|NAME]",
      "how many workgroups stay resident at once, by invocations, shared memory and live registers",
      loom_bench_occupancy },
};
#define N_BENCHES (sizeof benches / sizeof benches[0])

void loom_bench_usage(FILE *f)
{
    fprintf(f, "benchmarks:\n");
    for (size_t i = 0; i < N_BENCHES; i++)
        fprintf(f, "  loom bench %s %s\n      %s%s\n", benches[i].name, benches[i].options, benches[i].summary,
                benches[i].run ? "" : " (not in this build)");
}

int loom_cmd_bench(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: loom bench micro|ops|matmul|cache|compile|decode|profile|occupancy [options]\n");
        loom_bench_usage(stderr);
        return 2;
    }
    for (size_t i = 0; i < N_BENCHES; i++)
        if (!strcmp(argv[1], benches[i].name)) {
            for (int j = 2; j < argc; j++)
                if (!strcmp(argv[j], "--help") || !strcmp(argv[j], "-h")) {
                    printf("usage: loom bench %s %s\n  %s\n", benches[i].name, benches[i].options,
                           benches[i].summary);
                    return 0;
                }
            if (!benches[i].run) {
                fprintf(stderr, "loom bench: '%s' is not part of this build\n", argv[1]);
                return 2;
            }
            return benches[i].run(argc - 1, argv + 1);
        }
    fprintf(stderr, "loom bench: unknown benchmark '%s'\n", argv[1]);
    loom_bench_usage(stderr);
    return 2;
}
