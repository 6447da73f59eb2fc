/* `loom compile FILE`: loads a graph, compiles it and prints the plan graph
 * (text, DOT or JSON) on stdout and, with --stats, what the passes achieved
 * on stderr — so stdout is exactly one document a checker can parse. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "loom_compiler.h"

static int usage(void)
{
    fprintf(stderr, "usage: loom compile FILE [--passes P] [--window N] [--max-binding-range BYTES] [--stats]\n"
                    "                    [--format text|dot|json]\n"
                    "  --window 0 is the default window (%u), as in the API\n"
                    "  --max-binding-range: bytes one binding may cover; larger ones are cut into row blocks\n",
            LOOM_DEFAULT_WINDOW);
    return 2;
}

static void print_stats(const loom_plan_stats *s)
{
    fprintf(stderr, "nodes               %u (captured %u)\n", s->nodes, s->captured_nodes);
    fprintf(stderr, "dispatches          %u\n", s->dispatches);
    fprintf(stderr, "groups              %u\n", s->groups);
    fprintf(stderr, "barriers            %u (lower bound %u)\n", s->barriers, s->barrier_lower_bound);
    fprintf(stderr, "awaited             %u\n", s->awaited);
    fprintf(stderr, "fused chains        %u\n", s->fused_chains);
    fprintf(stderr, "split nodes         %u\n", s->split_nodes);
    fprintf(stderr, "scratch bytes       %" PRIu64 " unpacked, %" PRIu64 " packed, %" PRIu64 " lower bound\n",
           s->scratch_bytes, s->arena_bytes, s->arena_lower_bound);
    for (uint32_t i = 0; i < s->n_passes; i++)
        fprintf(stderr, "pass %-14s %10.3f ms\n", s->pass_names[i], s->pass_ns[i] / 1e6);
}

int loom_cmd_compile(int argc, char **argv)
{
    const char *file = NULL;
    loom_compile_options o = { 0 };
    loom_format fmt = LOOM_FORMAT_TEXT;
    bool stats = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--passes") && i + 1 < argc) {
            o.pipeline = argv[++i];
        } else if (!strcmp(argv[i], "--window") && i + 1 < argc) {
            char *end;
            unsigned long w = strtoul(argv[++i], &end, 10);
            if (!*argv[i] || *end || w > UINT32_MAX)
                return usage();
            o.window = (uint32_t)w;   /* 0: the default window, as loom_compile_options says */
        } else if (!strcmp(argv[i], "--max-binding-range") && i + 1 < argc) {
            char *end;
            const char *v = argv[++i];
            unsigned long long r = strtoull(v, &end, 10);
            if (*v < '0' || *v > '9' || *end || r == 0)
                return usage();
            o.max_binding_range = r;
        } else if (!strcmp(argv[i], "--stats")) {
            stats = true;
        } else if (!strcmp(argv[i], "--format") && i + 1 < argc) {
            if (!loom_format_from_name(argv[++i], &fmt))
                return usage();
        } else if (argv[i][0] == '-' || file) {
            return usage();
        } else {
            file = argv[i];
        }
    }
    if (!file)
        return usage();
    loom_graph *g;
    loom_result rc = loom_graph_load(file, NULL, &g);
    if (rc)
        return loom_cli_fail("compile", rc);
    loom_plan *p;
    rc = loom_compile(g, &o, &p);
    loom_graph_destroy(g);
    if (rc)
        return loom_cli_fail("compile", rc);
    loom_str s;
    loom_str_init(&s, NULL);
    rc = loom_graph_dump(loom_plan_graph(p), fmt, &s);
    if (rc == LOOM_OK && s.len)
        fwrite(s.data, 1, s.len, stdout);
    loom_str_free(&s);
    if (rc == LOOM_OK && stats)
        print_stats(loom_plan_get_stats(p));
    loom_plan_release(p);
    return rc ? loom_cli_fail("compile", rc) : 0;
}
