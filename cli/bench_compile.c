/* `loom bench compile`: compile-time scaling of the pass pipeline on
 * synthetic decoder-like graphs of about 1k, 10k and 100k nodes. Each layer
 * is norm → q/k/v matvecs → rope → KV append → attention → output matvec →
 * residual → norm → gate/up → SiLU·mul → down → residual, with its own
 * scratch buffers, so every pass has real work at every size. Options:
 * --sizes N[,N...] (node counts), --passes P and --window N (as in
 * `loom compile`; 0 is the default window). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "loom_compiler.h"
#include "loom_ops.h"

#define DIM 256u
#define FF 512u
#define SEQ 64u

static loom_result buf(loom_graph *g, const char *name, uint64_t size, loom_usage u, uint32_t *id)
{
    return loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = name, .size = size, .usage = u }, id);
}

static loom_result layer(loom_graph *g, uint32_t h, uint32_t wq, uint32_t wff, uint32_t kc, uint32_t vc)
{
    uint32_t t[10];
    static const char *names[10] = { "xn", "q", "k", "v", "qr", "att", "xn2", "gate", "up", "ff" };
    for (int i = 0; i < 10; i++) {
        uint64_t n = (i == 7 || i == 8) ? FF : DIM;
        loom_result rc = buf(g, names[i], n * 4, LOOM_USAGE_NONE, &t[i]);
        if (rc)
            return rc;
    }
    loom_tensor H = loom_vec(h, DIM), W = loom_mat(wq, LOOM_F16, DIM, DIM);
    loom_tensor Wg = loom_mat(wff, LOOM_F16, FF, DIM), Wd = loom_mat(wff, LOOM_F16, DIM, FF);
    Wd.offset = (uint64_t)FF * DIM * 2;
    loom_tensor Wu = Wg;
    Wu.offset = (uint64_t)FF * DIM * 4;
    loom_result rc = LOOM_OK;
#define DO(x) if (rc == LOOM_OK) rc = (x)
    DO(loom_op_rms_norm(g, H, loom_vec(t[0], DIM), 1e-5f, NULL));
    DO(loom_op_matvec(g, W, loom_vec(t[0], DIM), loom_vec(t[1], DIM), NULL));
    DO(loom_op_matvec(g, W, loom_vec(t[0], DIM), loom_vec(t[2], DIM), NULL));
    DO(loom_op_matvec(g, W, loom_vec(t[0], DIM), loom_vec(t[3], DIM), NULL));
    DO(loom_op_rope(g, loom_vec(t[1], DIM), loom_vec(t[4], DIM), 4, 64, 10000.0f, NULL));
    DO(loom_op_kv_append(g, loom_vec(t[2], DIM), loom_vec(t[3], DIM), loom_mat(kc, LOOM_F32, SEQ, DIM),
                         loom_mat(vc, LOOM_F32, SEQ, DIM), NULL));
    DO(loom_op_attention(g, loom_vec(t[4], DIM), loom_mat(kc, LOOM_F32, SEQ, DIM), loom_mat(vc, LOOM_F32, SEQ, DIM),
                         loom_vec(t[5], DIM), 4, 4, 64, NULL));
    DO(loom_op_matvec(g, W, loom_vec(t[5], DIM), loom_vec(t[0], DIM), NULL));
    DO(loom_op_add(g, H, loom_vec(t[0], DIM), H, NULL));
    DO(loom_op_rms_norm(g, H, loom_vec(t[6], DIM), 1e-5f, NULL));
    DO(loom_op_matvec(g, Wg, loom_vec(t[6], DIM), loom_vec(t[7], FF), NULL));
    DO(loom_op_matvec(g, Wu, loom_vec(t[6], DIM), loom_vec(t[8], FF), NULL));
    DO(loom_op_silu_mul(g, loom_vec(t[7], FF), loom_vec(t[8], FF), loom_vec(t[7], FF), NULL));
    DO(loom_op_matvec(g, Wd, loom_vec(t[7], FF), loom_vec(t[9], DIM), NULL));
    DO(loom_op_add(g, H, loom_vec(t[9], DIM), H, NULL));
#undef DO
    return rc;
}

/* With keep_hidden, each layer also copies the residual into a scratch
 * buffer of its own that a chain of adds after the last layer reads back
 * (a probe of every hidden state): scratch that stays live across the graph,
 * so the arena packer holds thousands of live buffers at once. */
static loom_result keep_hidden(loom_graph *g, uint32_t h, uint32_t *hs, uint32_t n)
{
    loom_result rc = LOOM_OK;
    for (uint32_t i = 0; rc == LOOM_OK && i < n; i++)
        rc = loom_op_add(g, loom_vec(hs[i], DIM), loom_vec(h, DIM), loom_vec(h, DIM), NULL);
    return rc;
}

/* About `nodes` nodes: 15 per layer (16 and one add at the end with hidden). */
static loom_result make_graph(uint32_t nodes, bool hidden, loom_graph **out)
{
    loom_graph *g;
    loom_result rc = loom_graph_create(&(loom_graph_desc){ .name = "bench" }, &g);
    if (rc)
        return rc;
    uint32_t h, wq, wff;
    if (!(rc = buf(g, "h", DIM * 4, LOOM_USAGE_STATE, &h)) && !(rc = buf(g, "wq", DIM * DIM * 2, LOOM_USAGE_WEIGHT, &wq)))
        rc = buf(g, "wff", (uint64_t)FF * DIM * 6, LOOM_USAGE_WEIGHT, &wff);
    uint32_t *hs = hidden ? malloc((nodes / 15 + 1) * sizeof *hs) : NULL, nh = 0;
    if (hidden && !hs)
        rc = loom_fail(LOOM_OUT_OF_MEMORY, "bench compile: out of memory");
    for (uint32_t l = 0; rc == LOOM_OK && loom_graph_node_count(g) + (hidden ? nh : 0) < nodes; l++) {
        uint32_t kc, vc;
        if (!(rc = buf(g, "kc", SEQ * DIM * 4, LOOM_USAGE_KV_CACHE, &kc)) &&
            !(rc = buf(g, "vc", SEQ * DIM * 4, LOOM_USAGE_KV_CACHE, &vc)))
            rc = layer(g, h, wq, wff, kc, vc);
        if (rc == LOOM_OK && hidden && !(rc = buf(g, "hs", DIM * 4, LOOM_USAGE_NONE, &hs[nh])))
            rc = loom_op_copy(g, loom_vec(h, DIM), loom_vec(hs[nh++], DIM), NULL);
    }
    if (rc == LOOM_OK && hidden)
        rc = keep_hidden(g, h, hs, nh);
    free(hs);
    if (rc) {
        loom_graph_destroy(g);
        return rc;
    }
    *out = g;
    return LOOM_OK;
}

/* "1000,10000" into sizes; false on anything else. */
static bool parse_sizes(const char *arg, uint32_t *sizes, size_t *n, size_t max)
{
    *n = 0;
    while (*arg && *n < max) {
        char *end;
        unsigned long v = strtoul(arg, &end, 10);
        if (end == arg || v == 0 || v > 10000000 || (*end && *end != ','))
            return false;
        sizes[(*n)++] = (uint32_t)v;
        arg = *end ? end + 1 : end;
    }
    return *n > 0 && !*arg;
}

int loom_bench_compile(int argc, char **argv)
{
    uint32_t sizes[16] = { 1000, 10000, 100000 };
    size_t n_sizes = 3;
    bool hidden = false;
    loom_compile_options opts = { .time_each = true };
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--keep-hidden")) {
            hidden = true;
        } else if (!strcmp(argv[i], "--sizes") && i + 1 < argc && parse_sizes(argv[i + 1], sizes, &n_sizes, 16)) {
            i++;
        } else if (!strcmp(argv[i], "--passes") && i + 1 < argc) {
            opts.pipeline = argv[++i];
        } else if (!strcmp(argv[i], "--window") && i + 1 < argc &&
                   (strtoul(argv[i + 1], &end, 10), *argv[i + 1] && !*end)) {
            opts.window = (uint32_t)strtoul(argv[++i], NULL, 10);   /* 0: the default, as in the API */
        } else {
            fprintf(stderr, "usage: loom bench compile [--sizes N[,N...]] [--passes P] [--window N] [--keep-hidden]\n");
            return 2;
        }
    }
    printf("%-8s %-10s %12s %12s\n", "nodes", "pass", "total ms", "ns/node");
    for (size_t s = 0; s < n_sizes; s++) {
        loom_graph *g;
        loom_result rc = make_graph(sizes[s], hidden, &g);
        if (rc)
            return loom_cli_fail("bench compile", rc);
        uint32_t n = loom_graph_node_count(g);
        loom_plan *p;
        uint64_t total = 0;
        rc = loom_compile(g, &opts, &p);
        loom_graph_destroy(g);
        if (rc)
            return loom_cli_fail("bench compile", rc);
        const loom_plan_stats *st = loom_plan_get_stats(p);
        for (uint32_t i = 0; i < st->n_passes; i++) {
            printf("%-8u %-10s %12.3f %12.1f\n", n, st->pass_names[i], st->pass_ns[i] / 1e6,
                   (double)st->pass_ns[i] / n);
            total += st->pass_ns[i];
        }
        printf("%-8u %-10s %12.3f %12.1f   (plan: %u nodes, %u barriers, lower bound %u, %u fused)\n", n, "all",
               total / 1e6, (double)total / n, st->nodes, st->barriers, st->barrier_lower_bound, st->fused_chains);
        loom_plan_release(p);
    }
    return 0;
}
