/* `loom dump FILE [--format text|dot|json]`: loads a graph file (the JSON
 * format of docs/json-format.md) and prints it in the chosen form, text by
 * default. The file is not verified, so a broken graph can still be looked
 * at; `loom compile` is what rejects it. */
#include <string.h>
#include "cli.h"

static int usage(void)
{
    fprintf(stderr, "usage: loom dump FILE [--format text|dot|json]\n");
    return 2;
}

int loom_cmd_dump(int argc, char **argv)
{
    const char *path = NULL;
    loom_format fmt = LOOM_FORMAT_TEXT;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value = NULL;
        if (!strcmp(arg, "--format") || !strcmp(arg, "-f")) {
            if (i + 1 >= argc)
                return usage();
            value = argv[++i];
        } else if (!strncmp(arg, "--format=", 9)) {
            value = arg + 9;
        } else if (arg[0] == '-' && arg[1]) {
            fprintf(stderr, "loom dump: unknown option '%s'\n", arg);
            return usage();
        } else if (path) {
            return usage();
        } else {
            path = arg;
        }
        if (value && !loom_format_from_name(value, &fmt)) {
            fprintf(stderr, "loom dump: unknown format '%s' (want text, dot or json)\n", value);
            return 2;
        }
    }
    if (!path)
        return usage();
    loom_graph *g;
    loom_result rc = loom_graph_load(path, NULL, &g);
    if (rc)
        return loom_cli_fail("dump", rc);
    loom_str s;
    loom_str_init(&s, NULL);
    rc = loom_graph_dump(g, fmt, &s);
    if (rc == LOOM_OK && s.len && fwrite(s.data, 1, s.len, stdout) != s.len)
        rc = loom_fail(LOOM_IO, "writing to stdout failed");
    loom_str_free(&s);
    loom_graph_destroy(g);
    if (rc == LOOM_OK && fflush(stdout) != 0)
        rc = loom_fail(LOOM_IO, "writing to stdout failed");
    return rc ? loom_cli_fail("dump", rc) : 0;
}
