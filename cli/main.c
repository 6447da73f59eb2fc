/* The `loom` command-line tool: one subcommand per file (cmd_*.c). A
 * subcommand whose module was not built (e.g. the runtime's, in a build
 * without Vulkan) is a weak symbol left undefined, reported as unavailable. */
#include <stdio.h>
#include <string.h>
#include "cli.h"

#define WEAK __attribute__((weak))
int loom_cmd_dump(int argc, char **argv) WEAK;
int loom_cmd_compile(int argc, char **argv) WEAK;
int loom_cmd_info(int argc, char **argv) WEAK;
int loom_cmd_bench(int argc, char **argv) WEAK;

static const struct {
    const char *name, *usage;
    int (*run)(int argc, char **argv);
} commands[] = {
    { "dump", "dump FILE [--format text|dot|json]            print a graph file", loom_cmd_dump },
    { "compile", "compile FILE [--passes P] [--window N] [--stats] [--format F]  optimize a graph",
      loom_cmd_compile },
    { "info", "info                                           list Vulkan devices and the chosen one",
      loom_cmd_info },
    { "bench", "bench micro|ops|cache|compile [options]        print a benchmark table", loom_cmd_bench },
};

static void usage(FILE *f)
{
    fprintf(f, "usage: loom COMMAND [ARGS]\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  loom %s%s\n", commands[i].usage, commands[i].run ? "" : "  (not built)");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) {
            if (!commands[i].run) {
                fprintf(stderr, "loom: '%s' is not part of this build\n", argv[1]);
                return 2;
            }
            return commands[i].run(argc - 1, argv + 1);
        }
    fprintf(stderr, "loom: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
