/* libFuzzer target for the JSON graph parser. Besides "never crash, never
 * leak" it checks the format's promise: whatever parses must dump to JSON
 * that parses again into the same graph (byte-identical dump, equal hash),
 * and the text and DOT dumpers must accept whatever the parser accepts. */
#include <stdint.h>
#include <string.h>
#include "loom_ir.h"

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    loom_graph *g = NULL, *g2 = NULL;
    loom_result rc = loom_graph_parse_json((const char *)data, size, NULL, &g);
    check(rc == LOOM_OK || rc == LOOM_PARSE);
    check((rc == LOOM_OK) == (g != NULL));
    if (rc)
        return 0;
    (void)loom_graph_verify(g);

    loom_str text, dot, j1, j2;
    loom_str_init(&text, NULL);
    loom_str_init(&dot, NULL);
    loom_str_init(&j1, NULL);
    loom_str_init(&j2, NULL);
    check(loom_graph_dump(g, LOOM_FORMAT_TEXT, &text) == LOOM_OK);
    check(loom_graph_dump(g, LOOM_FORMAT_DOT, &dot) == LOOM_OK);
    check(loom_graph_dump(g, LOOM_FORMAT_JSON, &j1) == LOOM_OK);
    check(loom_graph_parse_json(j1.data, j1.len, NULL, &g2) == LOOM_OK);
    check(loom_graph_dump(g2, LOOM_FORMAT_JSON, &j2) == LOOM_OK);
    check(j1.len == j2.len && memcmp(j1.data, j2.data, j1.len) == 0);
    loom_hash h1, h2;
    check(loom_graph_hash(g, &h1) == LOOM_OK && loom_graph_hash(g2, &h2) == LOOM_OK);
    check(h1.lo == h2.lo && h1.hi == h2.hi);

    loom_str_free(&text);
    loom_str_free(&dot);
    loom_str_free(&j1);
    loom_str_free(&j2);
    loom_graph_destroy(g2);
    loom_graph_destroy(g);
    return 0;
}
