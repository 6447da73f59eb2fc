/* The `loom` command-line tool: one subcommand per file (cmd_*.c). A
 * subcommand whose module was not built (e.g. the runtime's, in a build
 * without Vulkan) is a weak symbol left undefined, reported as unavailable.
 *
 * Conventions every subcommand follows: `loom help [CMD]`, `loom --help` and
 * `loom CMD --help` print usage to stdout and exit 0; exit 1 is bad input or
 * a failure (the message names what and why), exit 2 a usage error. The
 * list here and docs/cli.md are the reference (the cli test holds them
 * together). */
#include <stdio.h>
#include <string.h>
#include "cli.h"

#define WEAK __attribute__((weak))
int loom_cmd_dump(int argc, char **argv) WEAK;
int loom_cmd_compile(int argc, char **argv) WEAK;
int loom_cmd_info(int argc, char **argv) WEAK;
int loom_cmd_bench(int argc, char **argv) WEAK;
void loom_bench_usage(FILE *f) WEAK;

static const struct {
    const char *name, *usage, *summary;
    int (*run)(int argc, char **argv);
} commands[] = {
    { "dump", "dump FILE [--format text|dot|json]",
      "print a graph file (docs/json-format.md) as text, DOT or JSON; not verified", loom_cmd_dump },
    { "compile", "compile FILE [--passes P] [--window N] [--max-binding-range BYTES] [--stats]\n"
                 "                    [--format text|dot|json]",
      "verify and optimize a graph, print the plan; --window 0 is the default window (64); bindings above\n"
      "      --max-binding-range are cut into row blocks (default: no limit)", loom_cmd_compile },
    { "info", "info [--device INDEX|NAME] [--validate]",
      "list Vulkan devices, then the one loom would choose and its limits", loom_cmd_info },
    { "bench", "bench micro|ops|cache|compile|decode|profile|occupancy [OPTIONS]",
      "print a benchmark table; `loom bench WHICH --help` lists its options", loom_cmd_bench },
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const char ENVIRONMENT[] =
    "environment:\n"
    "  LOOM_DEVICE=INDEX|NAME    the Vulkan device (default: discrete, integrated, then CPU)\n"
    "  LOOM_VALIDATE=1           Khronos validation layer with synchronization validation\n"
    "  LOOM_DUMP=DIR             dump the graph after every pass as NN-<pass>.{txt,dot,json}\n"
    "  LOOM_PROFILE=1|2          GPU timestamps per concurrency group (1) or per node too (2)\n"
    "  LOOM_TRACE=FILE.json      Chrome trace of the steps run (open in Perfetto)\n"
    "  LOOM_PIPELINE_CACHE=FILE  load and save the Vulkan pipeline cache\n"
    "  LOOM_KERNEL_STATS=1       print each pipeline's driver statistics (registers, ...) to stderr\n"
#ifdef LOOM_PROBES
    "  LOOM_PROBE_SKIP_BARRIER=NAME\n"
    "                            no barrier before the kernels whose name contains NAME: wrong results,\n"
    "                            for timing what one dependency costs (test and benchmark builds)\n"
    "  LOOM_PROBE_DROP_TAG=N     the first copy of a tagged program drops its N-th producer's tags: its reader's\n"
    "                            polls give up, the step's wait fails, the program falls back to barriers (tests)\n"
    "  LOOM_KERNEL_DIR=DIR       a built-in kernel from DIR/<name>.spv where that file exists, in place of the\n"
    "                            embedded one: variants of a kernel timed against one binary (benchmark builds)\n"
#endif
    "  LOOM_DISABLE=LIST         switch off passes or the plan cache: fuse,stage,gather,reorder,barriers,lifetimes,cache\n"
    "  LOOM_ENABLE=LIST          forms that are not the default: half_shares,half_stage,half_act (f16 intermediates),\n"
    "                            long_rows (two chunks a trip in long-row projections)\n"
    "  LOOM_ATOMIC_FLOAT=0       no float atomic adds on the device, as if it lacked them (tests)\n"
    "  LOOM_COOPMAT=0            no cooperative matrices on the device: MATMUL keeps its tiled form,\n"
    "                            ATTENTION_ROWS its portable one\n"
    "  LOOM_INT_DOT=0            no integer dot products: block-typed matvecs in float, not int8 x (tests)\n"
    "  LOOM_STORAGE16=0          no 16-bit storage on the device (f16 KV caches refused), as if it lacked it (tests)\n"
    "  LOOM_QUEUE=compute        prefer a compute-only queue family (default: one with graphics as well)\n"
    "  LOOM_TAGS=0|1|keep        tagged vectors off (0), on whatever the device (1), or tagged with their\n"
    "                            barriers kept (keep); default, where the device rule allows (loom info):\n"
    "                            the down projection polls the gated FFN's output, the o-projection the\n"
    "                            attention's, with no barrier between\n"
    "  LOOM_PASSES=LIST          the passes to run (replaces the pipeline), e.g. verify,fuse,barriers\n"
    "  LOOM_MAX_BINDING_RANGE=N  bytes one binding may cover, below the device's maxStorageBufferRange:\n"
    "                            larger weights are split into more row blocks (tests)\n"
    "  LOOM_WAVE_GROUPS=N        the argmax forms' workgroup cap where the caller leaves it 0\n"
    "                            (default 4 an SM); for measuring the cap\n";

static const char EXIT_CODES[] = "exit codes: 0 ok, 1 bad input or failure, 2 usage error\n";

static void usage(FILE *f)
{
    fprintf(f, "usage: loom COMMAND [ARGS]\n       loom help [COMMAND]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  loom %s%s\n      %s\n", commands[i].usage, commands[i].run ? "" : "  (not in this build)",
                commands[i].summary);
    fprintf(f, "\n%s\n%s", ENVIRONMENT, EXIT_CODES);
}

static int find(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, commands[i].name))
            return (int)i;
    return -1;
}

static int command_help(int c)
{
    printf("usage: loom %s\n  %s\n", commands[c].usage, commands[c].summary);
    if (!strcmp(commands[c].name, "bench") && loom_bench_usage)
        loom_bench_usage(stdout);
    printf("%s", EXIT_CODES);
    return 0;
}

static bool wants_help(const char *arg) { return !strcmp(arg, "--help") || !strcmp(arg, "-h"); }

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (wants_help(argv[1]) || (!strcmp(argv[1], "help") && argc == 2)) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "help")) {
        int c = find(argv[2]);
        if (c < 0 || argc > 3) {
            fprintf(stderr, "loom help: unknown command '%s'\n", argv[2]);
            usage(stderr);
            return 2;
        }
        return command_help(c);
    }
    int c = find(argv[1]);
    if (c < 0) {
        fprintf(stderr, "loom: unknown command '%s'\n", argv[1]);
        usage(stderr);
        return 2;
    }
    /* `loom CMD --help`; bench passes it on, each benchmark has its own. */
    if (strcmp(argv[1], "bench") || argc == 3)
        for (int i = 2; i < argc; i++)
            if (wants_help(argv[i]))
                return command_help(c);
    if (!commands[c].run) {
        fprintf(stderr, "loom: '%s' is not part of this build\n", argv[1]);
        return 2;
    }
    return commands[c].run(argc - 1, argv + 1);
}
