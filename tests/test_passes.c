/* Unit tests of the passes on small hand-made graphs: the manager, reorder
 * groups, barrier placement and reasons, buffer classes and packing, the
 * legality of every fusion rule, and the row blocks of the split pass. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "loom_ir_edit.h"
#include "loom_ops.h"
#include "loom_passes.h"
#include "runner.h"

static loom_graph *G;

static void setup(void) { ck_assert_int_eq(loom_graph_create(NULL, &G), LOOM_OK); }
static void teardown(void) { loom_graph_destroy(G); }

static uint32_t buf(uint64_t size, loom_usage u)
{
    uint32_t id;
    ck_assert_int_eq(loom_graph_add_buffer(G, &(loom_buffer_desc){ .size = size, .usage = u }, &id), LOOM_OK);
    return id;
}

/* A dispatch reading r (buffer, lo, hi) and writing w, as plain ranges. */
static uint32_t node(loom_op op, int nr, const uint32_t *r, int nw, const uint32_t *w)
{
    loom_range rr[4], ww[4];
    for (int i = 0; i < nr; i++)
        rr[i] = (loom_range){ r[3 * i], 0, r[3 * i + 1], r[3 * i + 2] - r[3 * i + 1] };
    for (int i = 0; i < nw; i++)
        ww[i] = (loom_range){ w[3 * i], 0, w[3 * i + 1], w[3 * i + 2] - w[3 * i + 1] };
    loom_dispatch_desc d = { .kernel = "k", .op = op, .groups = { 1, 1, 1 }, .reads = rr, .n_reads = (uint32_t)nr,
                             .writes = ww, .n_writes = (uint32_t)nw };
    uint32_t id;
    ck_assert_int_eq(loom_graph_add_dispatch(G, &d, &id), LOOM_OK);
    return id;
}

static uint32_t cap(uint32_t pos) { return loom_graph_node(G, pos)->capture_index; }

/* ---- manager ------------------------------------------------------------ */

START_TEST(test_pipeline_parse)
{
    ck_assert_int_eq(loom_pipeline_check(NULL), LOOM_OK);
    ck_assert_int_eq(loom_pipeline_check("verify, reorder ,barriers"), LOOM_OK);
    ck_assert_int_eq(loom_pipeline_check("verify,frobnicate"), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_pipeline_check("verify,,fuse"), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_pipeline_check(""), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_pipeline_check("lifetimes,reorder"), LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_pipeline_check("lifetimes,verify"), LOOM_OK);
    ck_assert_int_ge(loom_pass_index("fuse"), 0);
    ck_assert_int_eq(loom_pass_index("nope"), -1);
    loom_pass_ctx ctx = { 0 };
    ck_assert_int_eq(loom_pipeline_run(G, &(loom_pipeline_desc){ .pipeline = "nope", .dump_dir = "" }, &ctx, NULL),
                     LOOM_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_pipeline_report_skip)
{
    uint32_t b = buf(64, LOOM_USAGE_NONE);
    node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ b, 0, 64 });
    loom_pass_ctx ctx = { 0 };
    loom_pipeline_report rep;
    loom_pipeline_desc d = { .skip = 1u << loom_pass_index("fuse"), .time_each = true, .verify_each = true,
                             .dump_dir = "" };
    ck_assert_int_eq(loom_pipeline_run(G, &d, &ctx, &rep), LOOM_OK);
    ck_assert_uint_eq(rep.n_passes, 9);
    ck_assert_str_eq(rep.names[7], "awaits");
    ck_assert_str_eq(rep.names[8], "waves");
    ck_assert_str_eq(rep.names[1], "split");
    ck_assert_str_eq(rep.names[2], "stage");
    ck_assert_str_eq(rep.names[3], "gather");
    ck_assert_str_eq(rep.names[4], "reorder");
    ck_assert(loom_graph_scheduled(G));
}
END_TEST

START_TEST(test_pipeline_verify_fails)
{
    uint32_t b = buf(64, LOOM_USAGE_NONE);
    node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ b, 0, 128 });   /* past the end */
    loom_pass_ctx ctx = { 0 };
    ck_assert_int_eq(loom_pipeline_run(G, &(loom_pipeline_desc){ .dump_dir = "" }, &ctx, NULL), LOOM_VERIFY);
}
END_TEST

/* Dumping writes NN-<pass>.{txt,dot,json} for the input and every pass. */
START_TEST(test_pipeline_dump)
{
    uint32_t b = buf(64, LOOM_USAGE_NONE);
    node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ b, 0, 64 });
    char dir[] = "/tmp/loom-dump-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    loom_pass_ctx ctx = { 0 };
    ck_assert_int_eq(loom_pipeline_run(G, &(loom_pipeline_desc){ .pipeline = "verify,reorder", .dump_dir = dir },
                                       &ctx, NULL), LOOM_OK);
    static const char *files[] = { "00-input.txt", "01-verify.dot", "02-reorder.json", "02-reorder.txt" };
    for (size_t i = 0; i < 4; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        FILE *f = fopen(path, "r");
        ck_assert_msg(f != NULL, "missing %s", path);
        fclose(f);
        remove(path);
    }
    for (const char *rest[] = { "00-input.dot", "00-input.json", "01-verify.txt", "01-verify.json", "02-reorder.dot" },
         **r = rest; r < rest + 5; r++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", dir, *r);
        remove(path);
    }
    rmdir(dir);
}
END_TEST

/* The pass table is the one list: the default pipeline names every pass in
 * table order, and each switch skips exactly its pass. */
START_TEST(test_pass_table_drives_all)
{
    char want[256] = "";
    uint32_t all = 0;
    for (uint32_t i = 0; i < loom_pass_count(); i++) {
        const loom_pass *p = loom_pass_at(i);
        strcat(strcat(want, i ? "," : ""), p->name);
        ck_assert_uint_eq(loom_pass_skip_mask(p->disable), p->disable ? 1u << i : 0);
        all |= p->disable;
    }
    ck_assert_str_eq(want, LOOM_PASS_PIPELINE_DEFAULT);
    ck_assert_uint_eq(all, LOOM_DISABLE_PASS_MASK);
    ck_assert_ptr_null(loom_pass_at(loom_pass_count()));
}
END_TEST

/* ---- reorder + barriers ------------------------------------------------- */

/* a→b chain plus an independent node: 2 groups, the independent one joins
 * the first, one RAW barrier. */
START_TEST(test_reorder_groups)
{
    uint32_t x = buf(256, LOOM_USAGE_NONE), y = buf(256, LOOM_USAGE_NONE), z = buf(256, LOOM_USAGE_NONE);
    node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ x, 0, 256 });                    /* 0: w x */
    node(LOOM_OP_OTHER, 1, (uint32_t[]){ x, 0, 256 }, 1, (uint32_t[]){ y, 0, 256 }); /* 1: x → y */
    node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ z, 0, 256 });                    /* 2: w z */
    loom_pass_ctx ctx = { .window = 64 };
    ck_assert_int_eq(loom_pass_reorder(G, &ctx), LOOM_OK);
    ck_assert_uint_eq(ctx.groups, 2);
    ck_assert_uint_eq(ctx.barrier_lower_bound, 1);
    ck_assert_uint_eq(cap(0), 0);
    ck_assert_uint_eq(cap(1), 2);
    ck_assert_uint_eq(cap(2), 1);
    ck_assert_uint_eq(loom_graph_node(G, 1)->group, loom_graph_node(G, 0)->group);
    ck_assert(!loom_graph_scheduled(G));
    ck_assert_int_eq(loom_pass_barriers(G, &ctx), LOOM_OK);
    ck_assert_uint_eq(ctx.barriers, 1);
    ck_assert_uint_eq(loom_graph_node(G, 0)->barrier, LOOM_NONE);
    ck_assert_uint_eq(loom_graph_node(G, 1)->barrier, LOOM_NONE);
    const loom_barrier_info *bi = loom_graph_barrier_info(G, loom_graph_node(G, 2)->barrier);
    ck_assert_ptr_nonnull(bi);
    ck_assert_uint_eq(bi->hazard, LOOM_HAZARD_RAW);
    ck_assert_uint_eq(bi->buffer, x);
    ck_assert_uint_eq(bi->before, 0);
    ck_assert_uint_eq(bi->after, 1);
    ck_assert(loom_graph_scheduled(G));
}
END_TEST

/* Disjoint ranges of one buffer never conflict; reads never conflict. */
START_TEST(test_no_hazards_no_barriers)
{
    uint32_t x = buf(1024, LOOM_USAGE_NONE), w = buf(64, LOOM_USAGE_WEIGHT);
    for (uint32_t i = 0; i < 4; i++)
        node(LOOM_OP_OTHER, 1, (uint32_t[]){ w, 0, 64 }, 1, (uint32_t[]){ x, i * 256, i * 256 + 256 });
    loom_pass_ctx ctx = { 0 };
    ck_assert_int_eq(loom_pass_reorder(G, &ctx), LOOM_OK);
    ck_assert_int_eq(loom_pass_barriers(G, &ctx), LOOM_OK);
    ck_assert_uint_eq(ctx.groups, 1);
    ck_assert_uint_eq(ctx.barriers, 0);
}
END_TEST

/* WAR and WAW reasons; and a write of [0,8) then a read of [8,16) is no hazard
 * (half-open ranges). */
START_TEST(test_barrier_reasons)
{
    uint32_t x = buf(64, LOOM_USAGE_NONE), y = buf(64, LOOM_USAGE_NONE);
    node(LOOM_OP_OTHER, 1, (uint32_t[]){ x, 0, 8 }, 1, (uint32_t[]){ y, 0, 8 });  /* 0 reads x */
    node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ x, 0, 4 });                    /* 1 writes x: WAR */
    node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ x, 2, 6 });                    /* 2 writes x: WAW */
    node(LOOM_OP_OTHER, 1, (uint32_t[]){ x, 8, 16 }, 1, (uint32_t[]){ y, 32, 40 }); /* 3: no hazard */
    loom_pass_ctx ctx = { 0 };
    ck_assert_int_eq(loom_pass_barriers(G, &ctx), LOOM_OK);   /* capture order, no reorder */
    ck_assert_uint_eq(ctx.barriers, 2);
    ck_assert_uint_eq(loom_graph_barrier_info(G, loom_graph_node(G, 1)->barrier)->hazard, LOOM_HAZARD_WAR);
    ck_assert_uint_eq(loom_graph_barrier_info(G, loom_graph_node(G, 2)->barrier)->hazard, LOOM_HAZARD_WAW);
    ck_assert_uint_eq(loom_graph_node(G, 3)->barrier, LOOM_NONE);
}
END_TEST

/* Nothing moves across a sentinel or a non-reorderable node; a sentinel gets
 * a barrier (SENTINEL), but not at the very start. */
START_TEST(test_sentinel_and_nonreorderable)
{
    uint32_t x = buf(64, LOOM_USAGE_NONE), y = buf(64, LOOM_USAGE_NONE);
    ck_assert_int_eq(loom_graph_add_barrier(G, NULL), LOOM_OK);                  /* 0 */
    node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ x, 0, 8 });                    /* 1 */
    ck_assert_int_eq(loom_graph_add_barrier(G, NULL), LOOM_OK);                  /* 2 */
    node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ y, 0, 8 });                    /* 3 */
    node(LOOM_OP_SOFTMAX, 0, NULL, 1, (uint32_t[]){ y, 16, 24 });                /* 4 */
    node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ y, 32, 40 });                  /* 5 */
    loom_pass_ctx ctx = { 0 };
    ck_assert_int_eq(loom_pass_reorder(G, &ctx), LOOM_OK);
    for (uint32_t i = 0; i < 6; i++)
        ck_assert_uint_eq(cap(i), i);
    ck_assert_uint_eq(ctx.barrier_lower_bound, 1);
    ck_assert_int_eq(loom_pass_barriers(G, &ctx), LOOM_OK);
    ck_assert_uint_eq(ctx.barriers, 1);
    ck_assert_uint_eq(loom_graph_node(G, 0)->barrier, LOOM_NONE);
    ck_assert_uint_eq(loom_graph_barrier_info(G, loom_graph_node(G, 2)->barrier)->hazard, LOOM_HAZARD_SENTINEL);
    ck_assert_uint_ne(loom_graph_node(G, 4)->group, loom_graph_node(G, 3)->group);
}
END_TEST

/* Window 2 splits a run of 4 independent nodes into two windows. */
START_TEST(test_window_limit)
{
    uint32_t x = buf(1024, LOOM_USAGE_NONE);
    for (uint32_t i = 0; i < 4; i++)
        node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ x, i * 8, i * 8 + 8 });
    loom_pass_ctx ctx = { .window = 2 };
    ck_assert_int_eq(loom_pass_reorder(G, &ctx), LOOM_OK);
    ck_assert_uint_eq(ctx.groups, 2);
    ck_assert_int_eq(loom_pass_barriers(G, &ctx), LOOM_OK);
    ck_assert_uint_eq(ctx.barriers, 0);   /* the barrier pass merges nothing but needs none */
}
END_TEST

/* Bug: each window was levelled from scratch, so a node that could join the
 * epoch left open by the previous window waited for a barrier, and the bound
 * ignored the barrier between windows. Window 2 here: P (free) could run
 * beside B, Q after P, R after B: 2 barriers in all, not 3. A pure chain
 * across windows needs a barrier at every edge; a non-reorderable node in
 * a chain forces barriers on both sides. Barriers meet the bound each time. */
START_TEST(test_window_edges)
{
    loom_pass_ctx ctx = { .window = 2 };
    uint32_t x = buf(64, 0), y = buf(64, 0), p = buf(64, 0), q = buf(64, 0), u = buf(64, 0);
    node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ x, 0, 8 });                                 /* A */
    node(LOOM_OP_OTHER, 1, (uint32_t[]){ x, 0, 8 }, 1, (uint32_t[]){ y, 0, 8 });              /* B */
    node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ p, 0, 8 });                                 /* P */
    node(LOOM_OP_OTHER, 1, (uint32_t[]){ p, 0, 8 }, 1, (uint32_t[]){ q, 0, 8 });              /* Q */
    node(LOOM_OP_OTHER, 1, (uint32_t[]){ y, 0, 8 }, 1, (uint32_t[]){ u, 0, 8 });              /* R */
    ck_assert_int_eq(loom_pass_reorder(G, &ctx), LOOM_OK);
    ck_assert_uint_eq(ctx.barrier_lower_bound, 2);
    ck_assert_int_eq(loom_pass_barriers(G, &ctx), LOOM_OK);
    ck_assert_uint_eq(ctx.barriers, 2);

    for (int fence = 0; fence < 2; fence++) {
        loom_graph_reset(G);
        uint32_t b[5];
        for (int i = 0; i < 5; i++)
            b[i] = buf(64, 0);
        for (uint32_t i = 0; i < 4; i++)   /* chain b0 -> b1 -> b2 -> b3 -> b4 */
            node(fence && i == 2 ? LOOM_OP_SOFTMAX : LOOM_OP_OTHER, 1, (uint32_t[]){ b[i], 0, 8 }, 1,
                 (uint32_t[]){ b[i + 1], 0, 8 });
        node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ b[0], 32, 40 });   /* free: needs no barrier */
        ck_assert_int_eq(loom_pass_reorder(G, &ctx), LOOM_OK);
        ck_assert_uint_eq(ctx.barrier_lower_bound, 3);
        ck_assert_int_eq(loom_pass_barriers(G, &ctx), LOOM_OK);
        ck_assert_uint_eq(ctx.barriers, 3);
    }
}
END_TEST

START_TEST(test_serial_schedule)
{
    uint32_t x = buf(64, LOOM_USAGE_NONE);
    for (uint32_t i = 0; i < 3; i++)
        node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ x, i * 8, i * 8 + 8 });
    loom_pass_ctx ctx = { 0 };
    ck_assert_int_eq(loom_schedule_serial(G, &ctx), LOOM_OK);
    ck_assert_uint_eq(loom_graph_node(G, 0)->barrier, LOOM_NONE);
    ck_assert_uint_ne(loom_graph_node(G, 1)->barrier, LOOM_NONE);
    ck_assert_uint_ne(loom_graph_node(G, 2)->barrier, LOOM_NONE);
    ck_assert_uint_eq(loom_graph_barrier_info(G, loom_graph_node(G, 1)->barrier)->hazard, LOOM_HAZARD_NONE);
}
END_TEST

/* ---- lifetimes ---------------------------------------------------------- */

START_TEST(test_classes)
{
    uint32_t w = buf(64, LOOM_USAGE_NONE), in = buf(64, LOOM_USAGE_INPUT), s = buf(64, LOOM_USAGE_NONE);
    uint32_t st = buf(64, LOOM_USAGE_NONE), out = buf(64, LOOM_USAGE_OUTPUT), kv = buf(64, LOOM_USAGE_NONE);
    uint32_t ext = buf(64, LOOM_USAGE_NONE), kept = buf(64, LOOM_USAGE_NONE), kept_hint = buf(64, LOOM_USAGE_SCRATCH);
    loom_graph_buffer_mut(G, ext)->external = 7;
    ck_assert_int_eq(loom_graph_keep_buffer(G, kept), LOOM_OK);
    ck_assert_int_eq(loom_graph_keep_buffer(G, kept_hint), LOOM_OK);
    ck_assert_int_eq(loom_graph_keep_buffer(G, 99), LOOM_INVALID_ARGUMENT);
    node(LOOM_OP_OTHER, 3, (uint32_t[]){ w, 0, 64, in, 0, 64, st, 0, 64 }, 4,
         (uint32_t[]){ s, 0, 64, st, 0, 64, kept, 0, 64, kept_hint, 0, 64 });
    node(LOOM_OP_KV_APPEND, 1, (uint32_t[]){ s, 0, 64 }, 1, (uint32_t[]){ kv, 0, 64 });
    node(LOOM_OP_OTHER, 3, (uint32_t[]){ s, 0, 64, kept, 0, 64, kept_hint, 0, 64 }, 2,
         (uint32_t[]){ out, 0, 64, ext, 0, 64 });
    loom_pass_ctx ctx = { 0 };
    ck_assert_int_eq(loom_pass_lifetimes(G, &ctx), LOOM_OK);
    ck_assert_uint_eq(loom_graph_buffer(G, w)->cls, LOOM_CLASS_WEIGHT);
    ck_assert_uint_eq(loom_graph_buffer(G, in)->cls, LOOM_CLASS_INPUT);
    ck_assert_uint_eq(loom_graph_buffer(G, s)->cls, LOOM_CLASS_SCRATCH);
    ck_assert_uint_eq(loom_graph_buffer(G, st)->cls, LOOM_CLASS_STATE);
    ck_assert_uint_eq(loom_graph_buffer(G, out)->cls, LOOM_CLASS_OUTPUT);
    ck_assert_uint_eq(loom_graph_buffer(G, kv)->cls, LOOM_CLASS_KV_APPEND);
    ck_assert_uint_eq(loom_graph_buffer(G, ext)->cls, LOOM_CLASS_OUTPUT);
    /* Kept for the host: out of the arena, whatever the hint. */
    ck_assert_uint_eq(loom_graph_buffer(G, kept)->cls, LOOM_CLASS_OUTPUT);
    ck_assert_uint_eq(loom_graph_buffer(G, kept_hint)->cls, LOOM_CLASS_OUTPUT);
    ck_assert_uint_eq(ctx.scratch_bytes, 64);
    ck_assert_uint_eq(ctx.arena_bytes, 256);
    ck_assert_uint_eq(ctx.arena_lower_bound, 64);
}
END_TEST

START_TEST(test_contradicting_hints)
{
    static const loom_usage bad[] = { LOOM_USAGE_WEIGHT, LOOM_USAGE_INPUT, LOOM_USAGE_PARAMS };
    for (size_t i = 0; i < 3; i++) {
        loom_graph_reset(G);
        uint32_t b = buf(64, bad[i]);
        node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ b, 0, 64 });
        loom_pass_ctx ctx = { 0 };
        ck_assert_int_eq(loom_pass_lifetimes(G, &ctx), LOOM_VERIFY);
    }
    loom_graph_reset(G);
    uint32_t s = buf(64, LOOM_USAGE_SCRATCH), o = buf(64, LOOM_USAGE_NONE);
    node(LOOM_OP_OTHER, 1, (uint32_t[]){ s, 0, 64 }, 1, (uint32_t[]){ o, 0, 64 });   /* read before write */
    loom_pass_ctx ctx = { 0 };
    ck_assert_int_eq(loom_pass_lifetimes(G, &ctx), LOOM_VERIFY);
}
END_TEST

/* A chain s1 → s2 → s3 → out with barriers between: s1 and s3 may share
 * bytes (a barrier separates s1's last read from s3's first write); with no
 * barriers (unscheduled → per node epochs) the same holds; but two scratch
 * buffers written in the same epoch never share. */
START_TEST(test_packing_epochs)
{
    uint32_t s1 = buf(1000, LOOM_USAGE_NONE), s2 = buf(1000, LOOM_USAGE_NONE), s3 = buf(1000, LOOM_USAGE_NONE);
    uint32_t out = buf(1000, LOOM_USAGE_OUTPUT);
    node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ s1, 0, 1000 });
    node(LOOM_OP_OTHER, 1, (uint32_t[]){ s1, 0, 1000 }, 1, (uint32_t[]){ s2, 0, 1000 });
    node(LOOM_OP_OTHER, 1, (uint32_t[]){ s2, 0, 1000 }, 1, (uint32_t[]){ s3, 0, 1000 });
    node(LOOM_OP_OTHER, 1, (uint32_t[]){ s3, 0, 1000 }, 1, (uint32_t[]){ out, 0, 1000 });
    loom_pass_ctx ctx = { 0 };
    ck_assert_int_eq(loom_pass_barriers(G, &ctx), LOOM_OK);
    ck_assert_int_eq(loom_pass_lifetimes(G, &ctx), LOOM_OK);
    ck_assert_uint_eq(ctx.scratch_bytes, 3000);
    ck_assert_uint_eq(ctx.arena_lower_bound, 2000);
    ck_assert_uint_eq(ctx.arena_bytes, 2048);
    ck_assert_uint_eq(loom_graph_buffer(G, s1)->arena_offset, loom_graph_buffer(G, s3)->arena_offset);

    /* Independent writers land in one epoch: all three live together. */
    loom_graph_reset(G);
    s1 = buf(1000, LOOM_USAGE_NONE), s2 = buf(1000, LOOM_USAGE_NONE), s3 = buf(1000, LOOM_USAGE_NONE);
    out = buf(3000, LOOM_USAGE_OUTPUT);
    for (uint32_t i = 0; i < 3; i++)
        node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ s1 + i, 0, 1000 });
    for (uint32_t i = 0; i < 3; i++)
        node(LOOM_OP_OTHER, 1, (uint32_t[]){ s1 + i, 0, 1000 }, 1, (uint32_t[]){ out, i * 1000, i * 1000 + 1000 });
    ck_assert_int_eq(loom_pass_reorder(G, &ctx), LOOM_OK);
    ck_assert_int_eq(loom_pass_barriers(G, &ctx), LOOM_OK);
    ck_assert_int_eq(loom_pass_lifetimes(G, &ctx), LOOM_OK);
    ck_assert_uint_eq(ctx.arena_lower_bound, 3000);
    ck_assert_uint_ge(ctx.arena_bytes, 3000);
    ck_assert_uint_ne(loom_graph_buffer(G, s1)->arena_offset, loom_graph_buffer(G, s2)->arena_offset);
    ck_assert_uint_ne(loom_graph_buffer(G, s1)->arena_offset, loom_graph_buffer(G, s3)->arena_offset);
}
END_TEST

/* A scratch buffer no node touches (fusion leaves the intermediates of a
 * chain so) takes no bytes of its own: it lies at offset 0, and the arena
 * is only as large as the largest of them where that is more than the
 * packing needs (the runtime holds every scratch range inside the arena). */
START_TEST(test_untouched_scratch)
{
    uint32_t s1 = buf(1000, LOOM_USAGE_NONE), s2 = buf(1000, LOOM_USAGE_NONE);
    uint32_t idle_small = buf(100, LOOM_USAGE_SCRATCH);
    uint32_t out = buf(1000, LOOM_USAGE_OUTPUT);
    node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ s1, 0, 1000 });
    node(LOOM_OP_OTHER, 1, (uint32_t[]){ s1, 0, 1000 }, 1, (uint32_t[]){ s2, 0, 1000 });
    node(LOOM_OP_OTHER, 1, (uint32_t[]){ s2, 0, 1000 }, 1, (uint32_t[]){ out, 0, 1000 });
    loom_pass_ctx ctx = { 0 };
    ck_assert_int_eq(loom_pass_barriers(G, &ctx), LOOM_OK);
    ck_assert_int_eq(loom_pass_lifetimes(G, &ctx), LOOM_OK);
    ck_assert_int_eq(loom_graph_buffer(G, idle_small)->cls, LOOM_CLASS_SCRATCH);
    ck_assert_uint_eq(loom_graph_buffer(G, idle_small)->arena_offset, 0);
    ck_assert_uint_eq(ctx.arena_bytes, 2048);   /* s1 and s2 live together; the idle one adds nothing */
    ck_assert_uint_eq(loom_graph_arena_size(G), 2048);
    ck_assert_uint_eq(ctx.scratch_bytes, 2100);

    /* Larger than what the packing needs: the arena grows to hold it. */
    uint32_t idle_big = buf(5000, LOOM_USAGE_SCRATCH);
    ck_assert_int_eq(loom_pass_lifetimes(G, &ctx), LOOM_OK);
    ck_assert_uint_eq(loom_graph_buffer(G, idle_big)->arena_offset, 0);
    ck_assert_uint_eq(ctx.arena_bytes, 5120);
    ck_assert_uint_eq(ctx.arena_lower_bound, 2000);
}
END_TEST

/* Bug: write coverage of a scratch buffer was one interval, so a read of
 * bytes that an earlier, disjoint write covered was called uninitialised.
 * A read that straddles a gap is still rejected. */
START_TEST(test_scratch_coverage_is_a_set)
{
    for (int gap = 0; gap < 2; gap++) {
        loom_graph_reset(G);
        uint32_t s = buf(2048, LOOM_USAGE_SCRATCH), o = buf(2048, LOOM_USAGE_OUTPUT);
        node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ s, 0, 256 });
        node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ s, 1024, 1536 });
        node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ s, 1536, 1600 });   /* adjacent: joins */
        if (gap)
            node(LOOM_OP_OTHER, 1, (uint32_t[]){ s, 200, 1100 }, 1, (uint32_t[]){ o, 0, 4 });
        else
            node(LOOM_OP_OTHER, 2, (uint32_t[]){ s, 0, 4, s, 1100, 1600 }, 1, (uint32_t[]){ o, 0, 4 });
        loom_pass_ctx ctx = { 0 };
        ck_assert_int_eq(loom_pass_lifetimes(G, &ctx), gap ? LOOM_VERIFY : LOOM_OK);
        if (!gap)
            ck_assert_uint_eq(loom_graph_buffer(G, s)->cls, LOOM_CLASS_SCRATCH);
    }
    /* Unhinted, the same pattern is SCRATCH (not STATE). */
    loom_graph_reset(G);
    uint32_t s = buf(2048, LOOM_USAGE_NONE), o = buf(2048, LOOM_USAGE_OUTPUT);
    node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ s, 1024, 1536 });
    node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ s, 0, 256 });
    node(LOOM_OP_OTHER, 2, (uint32_t[]){ s, 0, 4, s, 1024, 1100 }, 1, (uint32_t[]){ o, 0, 4 });
    loom_pass_ctx ctx = { 0 };
    ck_assert_int_eq(loom_pass_lifetimes(G, &ctx), LOOM_OK);
    ck_assert_uint_eq(loom_graph_buffer(G, s)->cls, LOOM_CLASS_SCRATCH);
}
END_TEST

/* Bug: arena arithmetic wrapped. Two live 2^63-byte scratch buffers, or one
 * of 2^64 - 1 bytes, cannot be placed: LOOM_LIMIT, never a wrapped layout.
 * Two of 2^62 fit exactly. */
START_TEST(test_arena_overflow_rejected)
{
    static const uint64_t sizes[][2] = { { 1ull << 63, 1ull << 63 }, { UINT64_MAX, 64 }, { 1ull << 62, 1ull << 62 },
                                         { UINT64_MAX - 200, 0 } };
    for (size_t c = 0; c < 4; c++) {
        loom_graph_reset(G);
        uint32_t a = buf(sizes[c][0], LOOM_USAGE_NONE), o = buf(64, LOOM_USAGE_OUTPUT);
        uint32_t b = sizes[c][1] ? buf(sizes[c][1], LOOM_USAGE_NONE) : LOOM_NONE;
        node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ a, 0, 8 });
        if (b != LOOM_NONE) {
            node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ b, 0, 8 });
            node(LOOM_OP_OTHER, 2, (uint32_t[]){ a, 0, 8, b, 0, 8 }, 1, (uint32_t[]){ o, 0, 8 });
        } else {
            node(LOOM_OP_OTHER, 1, (uint32_t[]){ a, 0, 8 }, 1, (uint32_t[]){ o, 0, 8 });
        }
        loom_pass_ctx ctx = { 0 };
        loom_result rc = loom_pass_lifetimes(G, &ctx);
        if (c == 2) {
            ck_assert_int_eq(rc, LOOM_OK);
            ck_assert_uint_eq(ctx.arena_bytes, 1ull << 63);
            ck_assert_uint_ne(loom_graph_buffer(G, a)->arena_offset, loom_graph_buffer(G, b)->arena_offset);
            ck_assert_int_eq(loom_pass_verify(G, &ctx), LOOM_OK);
        } else {
            ck_assert_int_eq(rc, LOOM_LIMIT);
        }
    }
}
END_TEST

/* Bug: two graph buffers over the same external memory were treated as
 * distinct, so a write through one and a read through the other got no
 * barrier. Such a graph is rejected, naming both buffers. */
START_TEST(test_shared_external_rejected)
{
    uint32_t a, b;
    ck_assert_int_eq(loom_graph_add_buffer(G, &(loom_buffer_desc){ .name = "kv_one", .size = 64, .external = 42 }, &a),
                     LOOM_OK);
    uint32_t other = buf(64, LOOM_USAGE_NONE);
    loom_graph_buffer_mut(G, other)->external = 7;
    ck_assert_int_eq(loom_graph_add_buffer(G, &(loom_buffer_desc){ .name = "kv_two", .size = 64, .external = 42 }, &b),
                     LOOM_OK);
    node(LOOM_OP_OTHER, 0, NULL, 1, (uint32_t[]){ a, 0, 64 });
    node(LOOM_OP_OTHER, 1, (uint32_t[]){ b, 0, 64 }, 1, (uint32_t[]){ other, 0, 64 });
    loom_pass_ctx ctx = { 0 };
    ck_assert_int_eq(loom_pass_verify(G, &ctx), LOOM_VERIFY);
    ck_assert_ptr_nonnull(strstr(loom_last_error(), "kv_one"));
    ck_assert_ptr_nonnull(strstr(loom_last_error(), "kv_two"));
    loom_graph_buffer_mut(G, b)->external = 43;
    ck_assert_int_eq(loom_pass_verify(G, &ctx), LOOM_OK);
}
END_TEST

/* ---- fuse --------------------------------------------------------------- */

#define N 256u
static uint32_t vbuf(loom_usage u) { return buf(N * 4, u); }

static uint32_t run_fuse(void)
{
    loom_pass_ctx ctx = { 0 };
    ck_assert_int_eq(loom_pass_fuse(G, &ctx), LOOM_OK);
    ck_assert_int_eq(loom_pass_verify(G, &ctx), LOOM_OK);
    return ctx.fused_chains;
}

START_TEST(test_fuse_rms_norm_mul)
{
    uint32_t x = vbuf(LOOM_USAGE_INPUT), w = vbuf(LOOM_USAGE_WEIGHT), t = vbuf(0), y = vbuf(LOOM_USAGE_OUTPUT);
    ck_assert_int_eq(loom_op_rms_norm(G, loom_vec(x, N), loom_vec(t, N), 1e-5f, NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_mul(G, loom_vec(w, N), loom_vec(t, N), loom_vec(y, N), NULL), LOOM_OK);  /* t on b */
    ck_assert_uint_eq(run_fuse(), 1);
    ck_assert_uint_eq(loom_graph_node_count(G), 1);
    const loom_node *n = loom_graph_node(G, 0);
    ck_assert_uint_eq(n->op, LOOM_OP_RMS_NORM_MUL);
    ck_assert_uint_eq(n->fused, 2);
    ck_assert_uint_eq(n->capture_index, 1);
}
END_TEST

/* Illegal: another reader, a host-visible intermediate (an OUTPUT, or one
 * the frontend keeps), a shape mismatch, and a node in between that the
 * moved norm conflicts with. */
START_TEST(test_fuse_rms_norm_mul_illegal)
{
    for (int c = 0; c < 5; c++) {
        loom_graph_reset(G);
        uint32_t x = vbuf(LOOM_USAGE_INPUT), w = vbuf(LOOM_USAGE_WEIGHT);
        uint32_t t = vbuf(c == 1 ? LOOM_USAGE_OUTPUT : 0), y = vbuf(LOOM_USAGE_OUTPUT), o = vbuf(LOOM_USAGE_OUTPUT);
        uint32_t s = vbuf(0);
        if (c == 4)
            ck_assert_int_eq(loom_graph_keep_buffer(G, t), LOOM_OK);
        ck_assert_int_eq(loom_op_rms_norm(G, loom_vec(c == 3 ? s : x, c == 2 ? N / 2 : N),
                                          loom_vec(t, c == 2 ? N / 2 : N), 1e-5f, NULL), LOOM_OK);
        if (c == 3)   /* writes s, which the norm reads: the norm may not move below it */
            ck_assert_int_eq(loom_op_copy(G, loom_vec(x, N), loom_vec(s, N), NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_mul(G, loom_vec(t, c == 2 ? N / 2 : N), loom_vec(w, c == 2 ? N / 2 : N),
                                     loom_vec(y, c == 2 ? N / 2 : N), NULL), LOOM_OK);
        if (c == 0)
            ck_assert_int_eq(loom_op_copy(G, loom_vec(t, N), loom_vec(o, N), NULL), LOOM_OK);
        uint32_t before = loom_graph_node_count(G);
        if (c == 2) {   /* the mul reads only half of what the norm wrote: still fine */
            ck_assert_uint_eq(run_fuse(), 1);
            continue;
        }
        ck_assert_uint_eq(run_fuse(), 0);
        ck_assert_uint_eq(loom_graph_node_count(G), before);
    }
}
END_TEST

START_TEST(test_fuse_shape_mismatch)
{
    uint32_t x = vbuf(LOOM_USAGE_INPUT), w = vbuf(LOOM_USAGE_WEIGHT), t = vbuf(0), y = vbuf(LOOM_USAGE_OUTPUT);
    /* The norm writes all of t, the mul reads half: t's other half would be lost. */
    ck_assert_int_eq(loom_op_rms_norm(G, loom_vec(x, N), loom_vec(t, N), 1e-5f, NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_mul(G, loom_vec(t, N / 2), loom_vec(w, N / 2), loom_vec(y, N / 2), NULL), LOOM_OK);
    ck_assert_uint_eq(run_fuse(), 0);
}
END_TEST

START_TEST(test_fuse_add_rms_norm_mul)
{
    uint32_t a = vbuf(LOOM_USAGE_INPUT), b = vbuf(LOOM_USAGE_INPUT), w = vbuf(LOOM_USAGE_WEIGHT);
    uint32_t s = vbuf(LOOM_USAGE_OUTPUT), t = vbuf(0), y = vbuf(LOOM_USAGE_OUTPUT);
    ck_assert_int_eq(loom_op_add(G, loom_vec(a, N), loom_vec(b, N), loom_vec(s, N), NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_rms_norm(G, loom_vec(s, N), loom_vec(t, N), 1e-5f, NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_mul(G, loom_vec(t, N), loom_vec(w, N), loom_vec(y, N), NULL), LOOM_OK);
    ck_assert_uint_eq(run_fuse(), 1);
    ck_assert_uint_eq(loom_graph_node_count(G), 1);
    ck_assert_uint_eq(loom_graph_node(G, 0)->op, LOOM_OP_ADD_RMS_NORM_MUL);
    ck_assert_uint_eq(loom_graph_node(G, 0)->fused, 3);
}
END_TEST

/* ADD→RMS_NORM keeps the sum: it may have other readers. */
START_TEST(test_fuse_add_rms_norm)
{
    uint32_t a = vbuf(LOOM_USAGE_INPUT), b = vbuf(LOOM_USAGE_INPUT), s = vbuf(0), y = vbuf(LOOM_USAGE_OUTPUT);
    uint32_t o = vbuf(LOOM_USAGE_OUTPUT);
    ck_assert_int_eq(loom_op_add(G, loom_vec(a, N), loom_vec(b, N), loom_vec(s, N), NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_rms_norm(G, loom_vec(s, N), loom_vec(y, N), 1e-5f, NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_copy(G, loom_vec(s, N), loom_vec(o, N), NULL), LOOM_OK);
    ck_assert_uint_eq(run_fuse(), 1);
    ck_assert_uint_eq(loom_graph_node_count(G), 2);
    ck_assert_uint_eq(loom_graph_node(G, 0)->op, LOOM_OP_ADD_RMS_NORM);
    ck_assert_uint_eq(loom_graph_node(G, 1)->op, LOOM_OP_COPY);
}
END_TEST

START_TEST(test_fuse_matvec_silu_mul)
{
    for (int c = 0; c < 3; c++) {
        loom_graph_reset(G);
        uint32_t W = buf((uint64_t)N * N * 2 * 2, LOOM_USAGE_WEIGHT), x = vbuf(LOOM_USAGE_INPUT);
        uint32_t x2 = vbuf(LOOM_USAGE_INPUT), g = vbuf(0), u = vbuf(0), y = vbuf(LOOM_USAGE_OUTPUT);
        loom_tensor Wg = loom_mat(W, LOOM_F16, N, N), Wu = Wg;
        Wu.offset = (uint64_t)N * N * 2;
        if (c == 2)
            Wu = loom_mat(W, LOOM_F32, N, N);
        ck_assert_int_eq(loom_op_matvec(G, Wg, loom_vec(x, N), loom_vec(g, N), NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_matvec(G, Wu, loom_vec(c == 1 ? x2 : x, N), loom_vec(u, N), NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_silu_mul(G, loom_vec(g, N), loom_vec(u, N), loom_vec(y, N), NULL), LOOM_OK);
        /* c 1: different x; c 2: different dtype */
        ck_assert_uint_eq(run_fuse(), c == 0 ? 1 : 0);
        if (c == 0) {
            ck_assert_uint_eq(loom_graph_node_count(G), 1);
            ck_assert_uint_eq(loom_graph_node(G, 0)->op, LOOM_OP_MATVEC_SILU_MUL);
        }
    }
}
END_TEST

/* The matvec may feed either input of the ADD; the fused node reading x
 * while writing a y that partly overlaps x is illegal. */
START_TEST(test_fuse_matvec_add)
{
    for (int c = 0; c < 3; c++) {
        loom_graph_reset(G);
        uint32_t W = buf((uint64_t)N * N * 4, LOOM_USAGE_WEIGHT), t = vbuf(0), r = vbuf(LOOM_USAGE_INPUT);
        uint32_t xb = buf(N * 8, LOOM_USAGE_STATE);
        loom_tensor X = loom_vec(xb, N), Y = c == 2 ? loom_vec_at(xb, 512, N) : loom_vec_at(xb, 1024, N);
        ck_assert_int_eq(loom_op_matvec(G, loom_mat(W, LOOM_F32, N, N), X, loom_vec(t, N), NULL), LOOM_OK);
        loom_result rc = c == 1 ? loom_op_add(G, loom_vec(r, N), loom_vec(t, N), Y, NULL)
                                : loom_op_add(G, loom_vec(t, N), loom_vec(r, N), Y, NULL);
        ck_assert_int_eq(rc, LOOM_OK);
        ck_assert_uint_eq(run_fuse(), c == 2 ? 0 : 1);
        ck_assert_uint_eq(loom_graph_node(G, 0)->op, c == 2 ? LOOM_OP_MATVEC : LOOM_OP_MATVEC_ADD);
    }
}
END_TEST

/* The LM head's argmax and the log of its token at the step's end: one
 * RMS_NORM_MATVEC_ARGMAX_LOG writing the ring. Left apart: a log at the
 * next step's start (back 1), a log of more than the one word, a log of
 * another token. */
START_TEST(test_fuse_argmax_log)
{
    for (int c = 0; c < 4; c++) {
        loom_graph_reset(G);
        uint32_t W = buf((uint64_t)N * N * 4, LOOM_USAGE_WEIGHT), g = vbuf(LOOM_USAGE_WEIGHT);
        uint32_t x = vbuf(LOOM_USAGE_STATE), y = vbuf(LOOM_USAGE_OUTPUT), tok = buf(512, LOOM_USAGE_STATE);
        uint32_t ring = buf(3 * 8, LOOM_USAGE_OUTPUT);
        loom_tensor out = { tok, LOOM_U32, 0, 1, 1 }, other = { tok, LOOM_U32, 256, 1, 1 };
        ck_assert_int_eq(loom_op_rms_norm_matvec_argmax(G, loom_mat(W, LOOM_F32, N, N), loom_vec(x, N),
                                                        loom_vec(g, N), loom_vec(y, N), out, 1e-5f, NULL),
                         LOOM_OK);
        loom_tensor src = c == 2 ? (loom_tensor){ tok, LOOM_U32, 0, 1, 2 } : c == 3 ? other : out;
        loom_result rc = loom_op_step_log(G, src, (loom_tensor){ ring, LOOM_U32, 0, 3, src.cols }, c == 1, NULL);
        ck_assert_msg(rc == LOOM_OK, "%s", loom_last_error());
        ck_assert_uint_eq(run_fuse(), c == 0 ? 1 : 0);
        ck_assert_uint_eq(loom_graph_node_count(G), c == 0 ? 1 : 2);
        const loom_node *n = loom_graph_node(G, 0);
        ck_assert_uint_eq(n->op, c == 0 ? LOOM_OP_RMS_NORM_MATVEC_ARGMAX_LOG : LOOM_OP_RMS_NORM_MATVEC_ARGMAX);
        if (c == 0) {
            /* params W x g y out part count ring: the ring is the log's */
            ck_assert_uint_eq(n->n_bindings, 9);
            const loom_binding *b = loom_node_bindings(G, n);
            ck_assert_uint_eq(b[8].buffer, ring);
            ck_assert_uint_eq(b[8].size, 12);
            ck_assert_uint_eq(n->fused, 2);
        }
    }
}
END_TEST

/* Bug: a consumer reading the intermediate in several slots, MUL(t, t) after
 * RMS_NORM(x → t), was fused; the fused node then read t, no longer written.
 * Same for the three-node chain. */
START_TEST(test_fuse_consumer_reads_intermediate_twice)
{
    for (int three = 0; three < 2; three++) {
        loom_graph_reset(G);
        uint32_t a = vbuf(LOOM_USAGE_INPUT), b = vbuf(LOOM_USAGE_INPUT), s = vbuf(0), t = vbuf(0);
        uint32_t y = vbuf(LOOM_USAGE_OUTPUT);
        if (three)
            ck_assert_int_eq(loom_op_add(G, loom_vec(a, N), loom_vec(b, N), loom_vec(s, N), NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_rms_norm(G, loom_vec(three ? s : a, N), loom_vec(t, N), 1e-5f, NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_mul(G, loom_vec(t, N), loom_vec(t, N), loom_vec(y, N), NULL), LOOM_OK);
        run_fuse();
        for (uint32_t i = 0; i < loom_graph_node_count(G); i++) {
            uint8_t op = loom_graph_node(G, i)->op;
            ck_assert(op != LOOM_OP_RMS_NORM_MUL && op != LOOM_OP_ADD_RMS_NORM_MUL);
        }
    }
}
END_TEST

/* Bug: a later node that reads and writes the intermediate (a read-write
 * binding) was not counted as a reader, so t was eliminated under it. */
START_TEST(test_fuse_rw_binding_is_a_reader)
{
    uint32_t x = vbuf(LOOM_USAGE_INPUT), w = vbuf(LOOM_USAGE_WEIGHT), t = vbuf(0), y = vbuf(LOOM_USAGE_OUTPUT);
    ck_assert_int_eq(loom_op_rms_norm(G, loom_vec(x, N), loom_vec(t, N), 1e-5f, NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_mul(G, loom_vec(t, N), loom_vec(w, N), loom_vec(y, N), NULL), LOOM_OK);
    loom_binding rw = { .buffer = t, .slot = 0, .offset = 0, .size = N * 4, .access = LOOM_ACCESS_RW };
    loom_dispatch_desc d = { .kernel = "scale_in_place", .op = LOOM_OP_OTHER, .groups = { 1, 1, 1 },
                             .bindings = &rw, .n_bindings = 1 };
    ck_assert_int_eq(loom_graph_add_dispatch(G, &d, NULL), LOOM_OK);
    ck_assert_uint_eq(run_fuse(), 0);
    ck_assert_uint_eq(loom_graph_node_count(G), 3);
}
END_TEST

/* Bug: fusion moved ADD past a SOFTMAX (non-reorderable) to build an
 * ADD_RMS_NORM after it — with or without the reorder pass. Also with a
 * sentinel in between. */
START_TEST(test_fuse_never_crosses_fence)
{
    for (int sentinel = 0; sentinel < 2; sentinel++) {
        loom_graph_reset(G);
        uint32_t a = vbuf(LOOM_USAGE_INPUT), b = vbuf(LOOM_USAGE_INPUT), s = vbuf(0), y = vbuf(LOOM_USAGE_OUTPUT);
        uint32_t p = vbuf(LOOM_USAGE_INPUT), q = vbuf(LOOM_USAGE_OUTPUT);
        ck_assert_int_eq(loom_op_add(G, loom_vec(a, N), loom_vec(b, N), loom_vec(s, N), NULL), LOOM_OK);
        if (sentinel)
            ck_assert_int_eq(loom_graph_add_barrier(G, NULL), LOOM_OK);
        else
            ck_assert_int_eq(loom_op_softmax(G, loom_vec(p, N), loom_vec(q, N), NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_rms_norm(G, loom_vec(s, N), loom_vec(y, N), 1e-5f, NULL), LOOM_OK);
        ck_assert_uint_eq(run_fuse(), 0);
        ck_assert_uint_eq(loom_graph_node(G, 0)->op, LOOM_OP_ADD);
    }
}
END_TEST

/* Found by the oracle: MUL reads the ADD's sum as its weight. Fused, the
 * node would read s from memory before writing it (the sum from before the
 * chain). ADD→RMS_NORM may still fuse, the MUL staying apart. */
START_TEST(test_fuse_input_written_by_chain)
{
    uint32_t a = vbuf(LOOM_USAGE_INPUT), b = vbuf(LOOM_USAGE_INPUT), s = vbuf(LOOM_USAGE_SCRATCH), t = vbuf(0);
    uint32_t y = vbuf(LOOM_USAGE_OUTPUT);
    ck_assert_int_eq(loom_op_add(G, loom_vec(a, N), loom_vec(b, N), loom_vec(s, N), NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_rms_norm(G, loom_vec(s, N), loom_vec(t, N), 1e-5f, NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_mul(G, loom_vec(t, N), loom_vec(s, N), loom_vec(y, N), NULL), LOOM_OK);
    run_fuse();
    for (uint32_t i = 0; i < loom_graph_node_count(G); i++)
        ck_assert_uint_ne(loom_graph_node(G, i)->op, LOOM_OP_ADD_RMS_NORM_MUL);
    loom_pass_ctx ctx = { 0 };
    ck_assert_int_eq(loom_pass_lifetimes(G, &ctx), LOOM_OK);
}
END_TEST

/* ---- split ---------------------------------------------------------------- */

/* The matvec forms a frontend may capture, as their builders make them. */
static const loom_op split_forms[] = {
    LOOM_OP_MATVEC, LOOM_OP_MATVEC_ADD, LOOM_OP_MATVEC_SILU_MUL, LOOM_OP_RMS_NORM_MATVEC,
    LOOM_OP_RMS_NORM_MATVEC_SILU_MUL, LOOM_OP_MATVEC_ARGMAX, LOOM_OP_RMS_NORM_MATVEC_ARGMAX,
};

typedef struct mv_bufs { uint32_t w, u, x, g, r, y, out; } mv_bufs;

/* Captures op over rows x cols weights of dtype dt (in-place residual for
 * MATVEC_ADD, as a decoder layer does). W and U share one buffer, U after W
 * at an offset that is a multiple of the binding alignment. */
static mv_bufs capture_form(loom_op op, loom_dtype dt, uint32_t rows, uint32_t cols)
{
    uint64_t wb = (uint64_t)rows * cols * loom_dtype_size(dt), ub = (wb + 255) / 256 * 256;
    mv_bufs b = { .w = buf(ub + wb, LOOM_USAGE_WEIGHT), .x = buf(cols * 4ull, LOOM_USAGE_INPUT),
                  .g = buf(cols * 4ull, LOOM_USAGE_WEIGHT), .r = buf(rows * 4ull, LOOM_USAGE_STATE),
                  .y = buf(rows * 4ull, LOOM_USAGE_OUTPUT), .out = buf(4, LOOM_USAGE_OUTPUT) };
    b.u = b.w;
    loom_tensor W = loom_mat(b.w, dt, rows, cols), U = W, x = loom_vec(b.x, cols), g = loom_vec(b.g, cols);
    loom_tensor y = loom_vec(b.y, rows), r = loom_vec(b.r, rows), out = { b.out, LOOM_U32, 0, 1, 1 };
    U.offset = ub;
    loom_result rc;
    switch (op) {
    case LOOM_OP_MATVEC: rc = loom_op_matvec(G, W, x, y, NULL); break;
    case LOOM_OP_MATVEC_ADD: rc = loom_op_matvec_add(G, W, x, r, r, NULL); break;
    case LOOM_OP_MATVEC_SILU_MUL: rc = loom_op_matvec_silu_mul(G, W, U, x, y, NULL); break;
    case LOOM_OP_RMS_NORM_MATVEC: rc = loom_op_rms_norm_matvec(G, W, x, g, y, 1e-5f, NULL); break;
    case LOOM_OP_RMS_NORM_MATVEC_SILU_MUL: rc = loom_op_rms_norm_matvec_silu_mul(G, W, U, x, g, y, 1e-5f, NULL); break;
    case LOOM_OP_MATVEC_ARGMAX: rc = loom_op_matvec_argmax(G, W, x, y, out, NULL); break;
    default: rc = loom_op_rms_norm_matvec_argmax(G, W, x, g, y, out, 1e-5f, NULL); break;
    }
    ck_assert_int_eq(rc, LOOM_OK);
    return b;
}

static loom_result run_split(uint64_t limit, uint32_t *split_nodes)
{
    loom_pass_ctx ctx = { .max_binding_range = limit };
    loom_result rc = loom_pass_split(G, &ctx);
    if (split_nodes)
        *split_nodes = ctx.split_nodes;
    return rc;
}

/* Bytes [lo, hi) of buffer id that the nodes in [from, to) read (dir 0) or
 * write (dir 1) must tile it: no gap, no overlap, each range inside a
 * binding at most limit bytes long. Returns the number of ranges. */
static uint32_t expect_tiled(uint32_t from, uint32_t to, int dir, uint32_t id, uint64_t lo, uint64_t hi)
{
    uint64_t at = lo;
    uint32_t n = 0;
    for (bool found = true; found && at < hi;) {
        found = false;
        for (uint32_t i = from; i < to && !found; i++) {
            const loom_node *nd = loom_graph_node(G, i);
            const loom_range *r = dir ? loom_node_writes(G, nd) : loom_node_reads(G, nd);
            for (uint32_t k = 0; k < (dir ? nd->n_writes : nd->n_reads) && !found; k++)
                if (r[k].buffer == id && r[k].offset == at) {
                    at += r[k].size;
                    found = true;
                    n++;
                }
        }
    }
    ck_assert_uint_eq(at, hi);
    return n;
}

/* Every binding of every node fits the limit and starts on the alignment
 * every device accepts; every split node stands for captured node cap. */
static void expect_bindings_fit(uint64_t limit, uint32_t cap)
{
    for (uint32_t i = 0; i < loom_graph_node_count(G); i++) {
        const loom_node *nd = loom_graph_node(G, i);
        const loom_binding *b = loom_node_bindings(G, nd);
        for (uint32_t k = 0; k < nd->n_bindings; k++) {
            ck_assert_uint_le(b[k].size, limit);
            ck_assert_uint_eq(b[k].offset % LOOM_BIND_ALIGN, 0);
        }
        ck_assert(nd->flags & LOOM_NODE_SPLIT);
        ck_assert_uint_eq(nd->capture_index, cap);
        ck_assert_uint_eq(nd->fused, 1);
    }
}

/* No limit, or one no binding reaches: the graph is left exactly as it was. */
START_TEST(test_split_nothing_to_do)
{
    capture_form(LOOM_OP_RMS_NORM_MATVEC_ARGMAX, LOOM_F16, 300, 64);
    loom_hash before, after;
    ck_assert_int_eq(loom_graph_hash(G, &before), LOOM_OK);
    uint32_t cut = 9;
    ck_assert_int_eq(run_split(0, &cut), LOOM_OK);
    ck_assert_uint_eq(cut, 0);
    ck_assert_int_eq(run_split(300 * 64 * 2, &cut), LOOM_OK);   /* W exactly at the limit */
    ck_assert_uint_eq(cut, 0);
    ck_assert_int_eq(loom_graph_hash(G, &after), LOOM_OK);
    ck_assert(before.lo == after.lo && before.hi == after.hi);
    ck_assert_uint_eq(loom_graph_node(G, 0)->flags, 0);
}
END_TEST

/* The argmax forms left whole take at most ctx.wave_groups workgroups
 * (their workgroups loop over row blocks); a cap of 0 or at or above the
 * builder's count leaves it, and the other forms are never capped. */
START_TEST(test_split_wave_cap)
{
    static const loom_op ops[] = { LOOM_OP_MATVEC_ARGMAX, LOOM_OP_RMS_NORM_MATVEC_ARGMAX, LOOM_OP_RMS_NORM_MATVEC };
    static const uint32_t caps[] = { 0, 528, 1023, 1024, 5000 };
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++) {
            loom_graph_reset(G);
            capture_form(ops[o], LOOM_F16, 32000, 64);   /* 8000 blocks of 4 rows: the builder takes 1024 */
            uint32_t built = loom_graph_node(G, 0)->groups[0];
            ck_assert_uint_eq(built, ops[o] == LOOM_OP_RMS_NORM_MATVEC ? 8000 : 1024);
            loom_pass_ctx ctx = { .wave_groups = caps[k] };
            ck_assert_int_eq(loom_pass_split(G, &ctx), LOOM_OK);
            ck_assert_uint_eq(loom_graph_node_count(G), 1);
            uint32_t want = ops[o] != LOOM_OP_RMS_NORM_MATVEC && caps[k] && caps[k] < built ? caps[k] : built;
            ck_assert_uint_eq(loom_graph_node(G, 0)->groups[0], want);
            ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
        }
}
END_TEST

/* The waves pass: a node on a block-typed residual projection's form
 * whose workgroups exceed one an SM (ctx.wave_groups / 4) takes the form
 * at 256 invocations, and q/k/v with a Q6_K Wv beyond two an SM its form
 * in fewer registers; one wave or fewer, an SM count not known (0), a
 * type with no such form (Q8_0, q/k/v all Q4_K) or a node already on it
 * keeps its kernel, and the workgroups stay as built. (The q/k/v names
 * sit on a MATVEC_ADD node here: the pass reads kernels and workgroups.) */
START_TEST(test_waves_wg256)
{
    static const struct { loom_dtype t; uint32_t rows, wave; const char *k, *want; } cases[] = {
        { LOOM_Q4_K, 4096, 528, "matvec_add_stage_tag_tq_q4_k", "matvec_add_stage_tag_tq_wg256_q4_k" },   /* 256 > 132 */
        { LOOM_Q6_K, 4096, 528, "matvec_add_stage_tag_tq_xqt_cnt_q6_k", "matvec_add_stage_tag_tq_xqt_cnt_wg256_q6_k" },
        { LOOM_Q4_K, 4096, 528, "matvec_add_stage_tag_tq_xqt_q4_k", "matvec_add_stage_tag_tq_xqt_wg256_q4_k" },
        { LOOM_Q4_K, 4096, 528, "matvec_add_stage_tag_tq_cnt_q4_k", "matvec_add_stage_tag_tq_cnt_wg256_q4_k" },
        { LOOM_Q4_K, 2128, 528, "matvec_add_stage_tag_tq_q4_k", "matvec_add_stage_tag_tq_wg256_q4_k" },   /* 133 */
        { LOOM_Q4_K, 2112, 528, "matvec_add_stage_tag_tq_q4_k", "matvec_add_stage_tag_tq_q4_k" },         /* 132 */
        { LOOM_Q4_K, 2048, 528, "matvec_add_stage_tag_tq_xqt_q4_k", "matvec_add_stage_tag_tq_xqt_q4_k" }, /* 128 */
        { LOOM_Q4_K, 4096, 0, "matvec_add_stage_tag_tq_q4_k", "matvec_add_stage_tag_tq_q4_k" },
        { LOOM_Q8_0, 4096, 528, "matvec_add_stage_tag_tq_q8_0", "matvec_add_stage_tag_tq_q8_0" },
        { LOOM_Q4_K, 4096, 528, "matvec_add_stage_tq_q4_k", "matvec_add_stage_tq_q4_k" },   /* no such form untagged */
        { LOOM_Q4_K, 4096, 528, "matvec_add_stage_tag_tq_wg256_q4_k", "matvec_add_stage_tag_tq_wg256_q4_k" },
        /* q/k/v with a Q6_K Wv: two workgroups an SM, 264 on 132 SMs */
        { LOOM_Q4_K, 6144, 528, "rms_norm_qkv_rope_kh_pre_xq_q4_k_vq6_k", "rms_norm_qkv_rope_kh_pre_xq_q6w_q4_k_vq6_k" },
        { LOOM_Q4_K, 6144, 528, "rms_norm_qkv_rope_kh_pre_xq_tag_cnt_q4_k_vq6_k",
          "rms_norm_qkv_rope_kh_pre_xq_tag_cnt_q6w_q4_k_vq6_k" },
        { LOOM_Q4_K, 4240, 528, "rms_norm_qkv_rope_kh_pre_xq_q4_k_vq6_k", "rms_norm_qkv_rope_kh_pre_xq_q6w_q4_k_vq6_k" },
        { LOOM_Q4_K, 4224, 528, "rms_norm_qkv_rope_kh_pre_xq_q4_k_vq6_k", "rms_norm_qkv_rope_kh_pre_xq_q4_k_vq6_k" },
        { LOOM_Q4_K, 2560, 528, "rms_norm_qkv_rope_kh_pre_xq_q4_k_vq6_k", "rms_norm_qkv_rope_kh_pre_xq_q4_k_vq6_k" },
        { LOOM_Q4_K, 6144, 528, "rms_norm_qkv_rope_kh_pre_xq_q4_k", "rms_norm_qkv_rope_kh_pre_xq_q4_k" },   /* no Q6_K Wv */
        { LOOM_Q4_K, 6144, 0, "rms_norm_qkv_rope_kh_pre_xq_q4_k_vq6_k", "rms_norm_qkv_rope_kh_pre_xq_q4_k_vq6_k" },
    };
    const uint32_t cols = 256;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        loom_graph_reset(G);
        uint32_t rows = cases[k].rows, node, id;
        uint32_t w = buf(loom_view_bytes(cases[k].t, rows, cols), LOOM_USAGE_WEIGHT);
        uint32_t x = buf(cols * 4, LOOM_USAGE_NONE), y = buf(rows * 4, LOOM_USAGE_NONE);
        ck_assert_int_eq(loom_op_matvec_add(G, loom_mat(w, cases[k].t, rows, cols), loom_vec(x, cols), loom_vec(y, rows),
                                            loom_vec(y, rows), &node),
                         LOOM_OK);
        ck_assert_int_eq(loom_graph_kernel(G, cases[k].k, &id), LOOM_OK);
        loom_graph_node_mut(G, node)->kernel = id;
        uint32_t groups = loom_graph_node(G, node)->groups[0];
        ck_assert_uint_eq(groups, rows / 16);
        loom_pass_ctx ctx = { .wave_groups = cases[k].wave };
        for (int run = 0; run < 2; run++) {   /* a second run changes nothing */
            ck_assert_int_eq(loom_pass_waves(G, &ctx), LOOM_OK);
            ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, node)->kernel), cases[k].want);
            ck_assert_uint_eq(loom_graph_node(G, node)->groups[0], groups);
        }
    }
    ck_assert_int_eq(loom_pass_waves(NULL, NULL), LOOM_INVALID_ARGUMENT);
    /* the thresholds as loom info prints them */
    ck_assert_uint_eq(loom_pass_waves_fit("MV_WG=256", 528), 132);
    ck_assert_uint_eq(loom_pass_waves_fit("MV_Q6W", 528), 264);
    ck_assert_uint_eq(loom_pass_waves_fit("MV_Q6W", 0), 0);
    ck_assert_uint_eq(loom_pass_waves_fit("MV_TAG", 528), 0);
    ck_assert_uint_eq(loom_pass_waves_fit(NULL, 528), 0);
}
END_TEST

/* The device's matmul forms: with ctx.coopmat the tiled forms over f16
 * and block-typed weights take their cooperative-matrix forms and tiles,
 * with the K split (_ks) below LOOM_MATMUL_COOP_KS_BELOW tiles; f32
 * weights stay tiled, small T stays on the multi-column form, and without
 * coopmat nothing changes. */
START_TEST(test_split_coopmat)
{
    static const struct { loom_dtype t; uint32_t rows, T; const char *built, *coop; } cases[] = {
        { LOOM_F16, 300, 100, "matmul_add_tiled_f16", "matmul_add_coop_ks_f16" },
        { LOOM_Q4_K, 300, 17, "matmul_add_tiled_q4_k", "matmul_add_coop_ks_q4_k" },
        { LOOM_Q8_0, 300, 64, "matmul_add_tiled_q8_0", "matmul_add_coop_ks_q8_0" },
        { LOOM_F16, 2048, 448, "matmul_add_tiled_f16", "matmul_add_coop_ks_f16" },   /* 32 x 7 = 224 tiles */
        { LOOM_F16, 2048, 449, "matmul_add_tiled_f16", "matmul_add_coop_f16" },      /* 32 x 8 = 256 */
        { LOOM_Q4_K, 2048, 512, "matmul_add_tiled_q4_k", "matmul_add_coop_q4_k" },
        { LOOM_F32, 300, 100, "matmul_add_tiled_f32", NULL },
        { LOOM_F16, 300, 16, "matmul_add_f16", NULL },
    };
    const uint32_t cols = 256;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int on = 0; on < 2; on++) {
            loom_graph_reset(G);
            uint32_t T = cases[k].T, rows = cases[k].rows;
            uint32_t w = buf(loom_view_bytes(cases[k].t, rows, cols), LOOM_USAGE_WEIGHT);
            uint32_t x = buf((uint64_t)T * cols * 4, LOOM_USAGE_NONE), y = buf((uint64_t)T * rows * 4, LOOM_USAGE_NONE);
            ck_assert_int_eq(loom_op_matmul_add(G, loom_mat(w, cases[k].t, rows, cols), loom_mat(x, LOOM_F32, T, cols),
                                                loom_mat(y, LOOM_F32, T, rows), loom_mat(y, LOOM_F32, T, rows), NULL),
                             LOOM_OK);
            ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, 0)->kernel), cases[k].built);
            uint32_t groups = loom_graph_node(G, 0)->groups[0];
            loom_pass_ctx ctx = { .coopmat = on };
            ck_assert_int_eq(loom_pass_split(G, &ctx), LOOM_OK);
            ck_assert_uint_eq(loom_graph_node_count(G), 1);
            const loom_node *n = loom_graph_node(G, 0);
            bool swapped = on && cases[k].coop;
            ck_assert_str_eq(loom_graph_kernel_name(G, n->kernel), swapped ? cases[k].coop : cases[k].built);
            uint32_t tiles = swapped ? ((rows + LOOM_MATMUL_COOP_ROWS - 1) / LOOM_MATMUL_COOP_ROWS) *
                                           ((T + LOOM_MATMUL_COOP_T - 1) / LOOM_MATMUL_COOP_T)
                                     : groups;
            ck_assert_uint_eq(n->groups[0], tiles);
            ck_assert_uint_eq(n->n_bindings, 4);
            ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
        }
    /* The gated form's tiles too, with no K split at any count: its two
     * weight tiles fill the shared memory. */
    loom_graph_reset(G);
    uint32_t rows = 300, T = 100, wg = buf(loom_view_bytes(LOOM_F16, rows, cols), LOOM_USAGE_WEIGHT);
    uint32_t wu = buf(loom_view_bytes(LOOM_F16, rows, cols), LOOM_USAGE_WEIGHT);
    uint32_t x = buf((uint64_t)T * cols * 4, LOOM_USAGE_NONE), y = buf((uint64_t)T * rows * 4, LOOM_USAGE_NONE);
    ck_assert_int_eq(loom_op_matmul_silu_mul(G, loom_mat(wg, LOOM_F16, rows, cols), loom_mat(wu, LOOM_F16, rows, cols),
                                             loom_mat(x, LOOM_F32, T, cols), loom_mat(y, LOOM_F32, T, rows), NULL),
                     LOOM_OK);
    ck_assert_int_eq(loom_pass_split(G, &(loom_pass_ctx){ .coopmat = true }), LOOM_OK);
    const loom_node *n = loom_graph_node(G, 0);
    ck_assert_str_eq(loom_graph_kernel_name(G, n->kernel), "matmul_silu_mul_coop_f16");
    ck_assert_uint_eq(n->groups[0], ((rows + LOOM_MATMUL_COOP_ROWS - 1) / LOOM_MATMUL_COOP_ROWS) *
                                        ((T + LOOM_MATMUL_COOP_T - 1) / LOOM_MATMUL_COOP_T));
    ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
}
END_TEST

/* One node of a matmul kind over fresh buffers: W (and Wu) rows x cols of
 * type t, x T x cols, y T x rows; MATMUL_ADD's r is y itself where
 * in_place, else a buffer of its own. */
static void one_matmul(loom_op op, loom_dtype t, uint32_t rows, uint32_t cols, uint32_t T, bool in_place)
{
    uint32_t w = buf(loom_view_bytes(t, rows, cols), LOOM_USAGE_WEIGHT);
    uint32_t u = buf(loom_view_bytes(t, rows, cols), LOOM_USAGE_WEIGHT);
    uint32_t x = buf((uint64_t)T * cols * 4, LOOM_USAGE_NONE), y = buf((uint64_t)T * rows * 4, LOOM_USAGE_NONE);
    loom_tensor tw = loom_mat(w, t, rows, cols), tx = loom_mat(x, LOOM_F32, T, cols);
    loom_tensor ty = loom_mat(y, LOOM_F32, T, rows);
    loom_tensor tr = in_place ? ty : loom_mat(buf((uint64_t)T * rows * 4, LOOM_USAGE_NONE), LOOM_F32, T, rows);
    loom_result rc = op == LOOM_OP_MATMUL       ? loom_op_matmul(G, tw, tx, ty, NULL)
                     : op == LOOM_OP_MATMUL_ADD ? loom_op_matmul_add(G, tw, tx, tr, ty, NULL)
                                                : loom_op_matmul_silu_mul(G, tw, loom_mat(u, t, rows, cols), tx, ty, NULL);
    ck_assert_msg(rc == LOOM_OK, "%s", loom_last_error());
}

/* The large tiles (MM_L) of a matrix of one weight where K reaches
 * LOOM_MATMUL_COOP_L_COLS (or ctx.coop_large_cols): 128 token rows where
 * those tiles are at least LOOM_MATMUL_COOP_L_FROM, else 64 where those
 * are; the gated FFN's (64 rows of each matrix by 128 token rows) where
 * those are. Fewer, or a shorter K, keep the small tiles. The shapes of
 * `1b` and `7b` at T = 512. */
START_TEST(test_split_coopmat_large)
{
    static const struct {
        loom_op op;
        loom_dtype t;
        uint32_t rows, cols, T, large_cols;
        const char *coop;
        uint32_t groups;
    } cases[] = {
        { LOOM_OP_MATMUL_ADD, LOOM_F16, 4096, 4096, 512, 0, "matmul_add_coop_l_f16", 32 * 4 },       /* 7b o */
        { LOOM_OP_MATMUL_ADD, LOOM_F16, 2048, 8192, 512, 0, "matmul_add_coop_l64_f16", 16 * 8 },     /* 1b down */
        { LOOM_OP_MATMUL_ADD, LOOM_F16, 2048, 8192, 449, 0, "matmul_add_coop_l64_f16", 16 * 8 },
        { LOOM_OP_MATMUL_ADD, LOOM_F16, 2048, 8192, 448, 0, "matmul_add_coop_ks_f16", 32 * 7 },      /* 112 large */
        { LOOM_OP_MATMUL_ADD, LOOM_F16, 2048, 2048, 512, 0, "matmul_add_coop_l64_f16", 16 * 8 },     /* 1b o */
        { LOOM_OP_MATMUL_ADD, LOOM_F16, 2048, 1024, 512, 0, "matmul_add_coop_f16", 32 * 8 },         /* K short */
        { LOOM_OP_MATMUL_ADD, LOOM_F16, 2048, 2048, 512, 4096, "matmul_add_coop_f16", 32 * 8 },
        { LOOM_OP_MATMUL, LOOM_Q4_K, 4096, 1792, 512, 0, "matmul_coop_q4_k", 64 * 8 },              /* K 7 blocks */
        { LOOM_OP_MATMUL, LOOM_Q4_K, 4096, 3840, 512, 0, "matmul_coop_l_q4_k", 32 * 4 },
        { LOOM_OP_MATMUL, LOOM_Q8_0, 8192, 2048, 100, 64, "matmul_coop_l64_q8_0", 64 * 2 },
        /* The gated FFN (7b, 1b) in its large tiles, of 64 rows; few tiles or a short K keep the small ones. */
        { LOOM_OP_MATMUL_SILU_MUL, LOOM_F16, 14336, 4096, 512, 0, "matmul_silu_mul_coop_l_f16", 224 * 4 },
        { LOOM_OP_MATMUL_SILU_MUL, LOOM_F16, 5632, 2048, 512, 0, "matmul_silu_mul_coop_l_f16", 88 * 4 },
        { LOOM_OP_MATMUL_SILU_MUL, LOOM_Q4_K, 5632, 2048, 512, 0, "matmul_silu_mul_coop_l_q4_k", 88 * 4 },
        { LOOM_OP_MATMUL_SILU_MUL, LOOM_F16, 5632, 2048, 128, 0, "matmul_silu_mul_coop_f16", 88 * 2 },  /* 88 large */
        { LOOM_OP_MATMUL_SILU_MUL, LOOM_F16, 8192, 1024, 512, 0, "matmul_silu_mul_coop_f16", 128 * 8 },
        { LOOM_OP_MATMUL_SILU_MUL, LOOM_F16, 8192, 2048, 512, 64, "matmul_silu_mul_coop_l_f16", 128 * 4 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        loom_graph_reset(G);
        one_matmul(cases[k].op, cases[k].t, cases[k].rows, cases[k].cols, cases[k].T, true);
        loom_pass_ctx ctx = { .coopmat = true, .coop_large_cols = cases[k].large_cols };
        ck_assert_int_eq(loom_pass_split(G, &ctx), LOOM_OK);
        const loom_node *n = loom_graph_node(G, 0);
        ck_assert_msg(!strcmp(loom_graph_kernel_name(G, n->kernel), cases[k].coop), "case %zu: %s, want %s", k,
                      loom_graph_kernel_name(G, n->kernel), cases[k].coop);
        ck_assert_uint_eq(n->groups[0], cases[k].groups);
        ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
    }
}
END_TEST

/* Siblings: MATMUL nodes reading one x with one T and K (q, k and v) whose
 * large tiles together number LOOM_MATMUL_COOP_L_FROM / 2 up to
 * LOOM_MATMUL_COOP_L_FROM all take them, whole K walks: `1b`'s q/k/v at T
 * = 512 (alone q would split its K walk, k and v take the small tiles).
 * More together (`7b`'s: 128 + 32 + 32) or a node reading another x keep
 * the forms each would take alone. Built as a frontend captures them: the
 * three products, then another reading a second x. */
START_TEST(test_split_coopmat_siblings)
{
    static const struct {
        uint32_t cols, rows[3];
        bool v_alone;             /* v reads a second x */
        const char *k[3];
        uint32_t groups[3];
    } cases[] = {
        { 2048, { 2048, 512, 512 }, false, { "matmul_coop_l_f16", "matmul_coop_l_f16", "matmul_coop_l_f16" }, { 64, 16, 16 } },
        { 4096, { 4096, 1024, 1024 }, false, { "matmul_coop_l_f16", "matmul_coop_ks_f16", "matmul_coop_ks_f16" },
          { 128, 128, 128 } },
        { 2048, { 2048, 512, 512 }, true, { "matmul_coop_l_f16", "matmul_coop_l_f16", "matmul_coop_ks_f16" }, { 64, 16, 64 } },
    };
    const uint32_t T = 512;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        loom_graph_reset(G);
        uint32_t cols = cases[k].cols;
        loom_tensor x = loom_mat(buf((uint64_t)T * cols * 4, LOOM_USAGE_NONE), LOOM_F32, T, cols);
        loom_tensor x2 = loom_mat(buf((uint64_t)T * cols * 4, LOOM_USAGE_NONE), LOOM_F32, T, cols);
        for (int m = 0; m < 3; m++) {
            uint32_t rows = cases[k].rows[m];
            loom_tensor w = loom_mat(buf(loom_view_bytes(LOOM_F16, rows, cols), LOOM_USAGE_WEIGHT), LOOM_F16, rows, cols);
            loom_tensor y = loom_mat(buf((uint64_t)T * rows * 4, LOOM_USAGE_NONE), LOOM_F32, T, rows);
            ck_assert_int_eq(loom_op_matmul(G, w, m == 2 && cases[k].v_alone ? x2 : x, y, NULL), LOOM_OK);
        }
        loom_pass_ctx ctx = { .coopmat = true, .split_k = true };
        ck_assert_int_eq(loom_pass_split(G, &ctx), LOOM_OK);
        for (uint32_t m = 0; m < 3; m++) {
            const loom_node *n = loom_graph_node(G, m);
            ck_assert_msg(!strcmp(loom_graph_kernel_name(G, n->kernel), cases[k].k[m]), "case %zu, node %u: %s, want %s",
                          k, m, loom_graph_kernel_name(G, n->kernel), cases[k].k[m]);
            ck_assert_uint_eq(n->groups[0], cases[k].groups[m]);
        }
        ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
    }
}
END_TEST

/* The narrow form (MM_NARROW) of a few token rows over f16 weights: T from
 * LOOM_MATMUL_NARROW_FROM_T to LOOM_MATMUL_SMALL_T with cooperative
 * matrices, rows and cols whole 16 x 16 tiles: 16 rows a workgroup (the
 * gated FFN 8 of each matrix), capped at 65535 (the kernel loops). Fewer
 * token rows, a block type, a row or column past the tiles, or no
 * cooperative matrices keep the multi-column form and its workgroups; an
 * f16 MATMUL so kept of LOOM_MATMUL_SMALL_R2_ROWS rows or more takes its
 * MM_R2 layout (16 rows a workgroup), with or without cooperative
 * matrices. The shapes of `1b` and `7b` at the verification buckets. */
START_TEST(test_split_coopmat_narrow)
{
    static const struct {
        loom_op op;
        loom_dtype t;
        uint32_t rows, cols, T;
        bool coop;
        const char *k;
        uint32_t groups;
    } cases[] = {
        { LOOM_OP_MATMUL, LOOM_F16, 2048, 2048, 16, true, "matmul_coop_narrow_f16", 128 },
        { LOOM_OP_MATMUL_ADD, LOOM_F16, 2048, 5632, 8, true, "matmul_add_coop_narrow_f16", 128 },
        { LOOM_OP_MATMUL_SILU_MUL, LOOM_F16, 11008, 4096, 16, true, "matmul_silu_mul_coop_narrow_f16", 1376 },
        { LOOM_OP_MATMUL, LOOM_F16, 32000, 2048, 9, true, "matmul_coop_narrow_f16", 2000 },
        { LOOM_OP_MATMUL, LOOM_F16, 16 * 70000, 16, 8, true, "matmul_coop_narrow_f16", 65535 },
        { LOOM_OP_MATMUL, LOOM_F16, 2048, 2048, 4, true, "matmul_f16", 1024 },
        { LOOM_OP_MATMUL_SILU_MUL, LOOM_F16, 5632, 2048, 7, true, "matmul_silu_mul_f16", 352 },
        { LOOM_OP_MATMUL, LOOM_Q8_0, 2048, 2048, 16, true, "matmul_q8_0", 128 },
        { LOOM_OP_MATMUL, LOOM_F16, 2040, 2048, 16, true, "matmul_f16", 1020 },
        { LOOM_OP_MATMUL_ADD, LOOM_F16, 2048, 2056, 16, true, "matmul_add_f16", 1024 },
        { LOOM_OP_MATMUL, LOOM_F16, 2048, 2048, 16, false, "matmul_f16", 1024 },
        /* below the narrow form, a MATMUL of LOOM_MATMUL_SMALL_R2_ROWS rows
         * or more (the LM head) at 2 rows a subgroup, on any device */
        { LOOM_OP_MATMUL, LOOM_F16, 32000, 2048, 4, true, "matmul_r2_f16", 2000 },
        { LOOM_OP_MATMUL, LOOM_F16, 32000 + 5, 2048, 16, false, "matmul_r2_f16", 2001 },
        { LOOM_OP_MATMUL_ADD, LOOM_F16, 32000, 2048, 4, true, "matmul_add_f16", 16000 },
        { LOOM_OP_MATMUL, LOOM_F16, LOOM_MATMUL_SMALL_R2_ROWS - 1, 64, 3, false, "matmul_f16", 8192 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        loom_graph_reset(G);
        one_matmul(cases[k].op, cases[k].t, cases[k].rows, cases[k].cols, cases[k].T, false);
        loom_pass_ctx ctx = { .coopmat = cases[k].coop, .split_k = true };
        ck_assert_int_eq(loom_pass_split(G, &ctx), LOOM_OK);
        const loom_node *n = loom_graph_node(G, 0);
        ck_assert_msg(!strcmp(loom_graph_kernel_name(G, n->kernel), cases[k].k), "case %zu: %s, want %s", k,
                      loom_graph_kernel_name(G, n->kernel), cases[k].k);
        ck_assert_msg(n->groups[0] == cases[k].groups, "case %zu: %u workgroups, want %u", k, n->groups[0],
                      cases[k].groups);
        ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
    }
}
END_TEST

/* loom_pass_ctx.split_k (on unless LOOM_DISABLE_SPLIT_K): a matrix of one
 * weight whose large tiles number LOOM_MATMUL_COOP_L_FROM / 2 up to
 * LOOM_MATMUL_COOP_L_FROM takes them with
 * its K walk split (twice the workgroups), and two more bindings after y:
 * a SCRATCH partial tile a half of each tile, written (the dispatch reads
 * back only its own), and a STATE counter a tile, read and written; more
 * tiles, fewer, the gated FFN, or the option
 * off keep their forms. Without cooperative matrices the portable tiles of
 * fewer than LOOM_MATMUL_COOP_L_FROM tiles split the same way. */
START_TEST(test_split_coopmat_split_k)
{
    static const struct {
        loom_op op;
        loom_dtype t;
        uint32_t rows, cols, T;
        bool coop, on;
        const char *k;
        uint32_t groups, tiles;
    } cases[] = {
        { LOOM_OP_MATMUL_ADD, LOOM_F16, 2048, 2048, 512, true, true, "matmul_add_coop_l_sk_f16", 2 * 64, 64 },   /* 1b o */
        { LOOM_OP_MATMUL, LOOM_Q4_K, 2048, 5632, 512, true, true, "matmul_coop_l_sk_q4_k", 2 * 64, 64 },
        { LOOM_OP_MATMUL_ADD, LOOM_F16, 2048, 2048, 512, true, false, "matmul_add_coop_l64_f16", 128, 0 },
        { LOOM_OP_MATMUL_ADD, LOOM_F16, 4096, 4096, 512, true, true, "matmul_add_coop_l_f16", 128, 0 },      /* 7b o */
        { LOOM_OP_MATMUL_ADD, LOOM_F16, 2048 - 128, 2048, 512, true, true, "matmul_add_coop_ks_f16", 30 * 8, 0 },
        { LOOM_OP_MATMUL_SILU_MUL, LOOM_F16, 4096, 2048, 512, true, true, "matmul_silu_mul_coop_l_f16", 64 * 4, 0 },
        { LOOM_OP_MATMUL_ADD, LOOM_F32, 130, 160, 100, false, true, "matmul_add_tiled_sk_f32", 2 * 3 * 2, 3 * 2 },
        { LOOM_OP_MATMUL, LOOM_Q8_0, 130, 96, 100, false, true, "matmul_tiled_sk_q8_0", 2 * 3 * 2, 3 * 2 },
        { LOOM_OP_MATMUL, LOOM_F16, 130, 32, 100, false, true, "matmul_tiled_f16", 3 * 2, 0 },              /* one slice */
        { LOOM_OP_MATMUL, LOOM_F16, 130, 160, 100, false, false, "matmul_tiled_f16", 3 * 2, 0 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        loom_graph_reset(G);
        one_matmul(cases[k].op, cases[k].t, cases[k].rows, cases[k].cols, cases[k].T, false);
        uint32_t nb0 = loom_graph_node(G, 0)->n_bindings, bufs = loom_graph_buffer_count(G);
        loom_pass_ctx ctx = { .coopmat = cases[k].coop, .split_k = cases[k].on };
        ck_assert_int_eq(loom_pass_split(G, &ctx), LOOM_OK);
        const loom_node *n = loom_graph_node(G, 0);
        ck_assert_msg(!strcmp(loom_graph_kernel_name(G, n->kernel), cases[k].k), "case %zu: %s, want %s", k,
                      loom_graph_kernel_name(G, n->kernel), cases[k].k);
        ck_assert_uint_eq(n->groups[0], cases[k].groups);
        uint32_t tiles = cases[k].tiles;
        ck_assert_uint_eq(n->n_bindings, nb0 + (tiles ? 2 : 0));
        ck_assert_uint_eq(loom_graph_buffer_count(G), bufs + (tiles ? 2 : 0));
        if (tiles) {
            const loom_binding *b = loom_node_bindings(G, n);
            uint64_t tile = cases[k].coop ? (uint64_t)LOOM_MATMUL_COOP_L_ROWS * LOOM_MATMUL_COOP_L_T
                                          : (uint64_t)LOOM_MATMUL_TILE_ROWS * LOOM_MATMUL_TILE_T;
            const loom_binding *part = &b[nb0], *cnt = &b[nb0 + 1];
            ck_assert_uint_eq(part->slot, nb0);
            ck_assert_uint_eq(cnt->slot, nb0 + 1);
            ck_assert_uint_eq(part->size, 2 * tiles * tile * 4);
            ck_assert_uint_eq(cnt->size, tiles * 4);
            ck_assert_int_eq(loom_graph_buffer(G, part->buffer)->usage, LOOM_USAGE_SCRATCH);
            ck_assert_int_eq(loom_graph_buffer(G, cnt->buffer)->usage, LOOM_USAGE_STATE);
            ck_assert(part->access == LOOM_ACCESS_WRITE);   /* read back within the dispatch only */
            ck_assert(cnt->access == (LOOM_ACCESS_READ | LOOM_ACCESS_WRITE));
            for (int d = 0; d < 2; d++) {   /* the counters read and written whole, the partials written */
                const loom_range *rg = d ? loom_node_writes(G, n) : loom_node_reads(G, n);
                uint32_t nr = d ? n->n_writes : n->n_reads, parts = 0, counts = 0;
                for (uint32_t q = 0; q < nr; q++) {
                    parts += rg[q].buffer == part->buffer && rg[q].size == part->size;
                    counts += rg[q].buffer == cnt->buffer && rg[q].size == cnt->size;
                }
                ck_assert_uint_eq(parts, (uint32_t)d);
                ck_assert_uint_eq(counts, 1);
            }
        }
        ck_assert_msg(loom_graph_verify(G) == LOOM_OK, "case %zu: %s", k, loom_last_error());
        if (!tiles)
            continue;
        /* The two bindings past the op's slots survive the JSON dump. */
        loom_str js;
        loom_str_init(&js, NULL);
        ck_assert_int_eq(loom_graph_dump(G, LOOM_FORMAT_JSON, &js), LOOM_OK);
        loom_graph *back = NULL;
        ck_assert_msg(loom_graph_parse_json(js.data, js.len, NULL, &back) == LOOM_OK, "%s", loom_last_error());
        loom_hash ha, hb;
        ck_assert_int_eq(loom_graph_hash(G, &ha), LOOM_OK);
        ck_assert_int_eq(loom_graph_hash(back, &hb), LOOM_OK);
        ck_assert(ha.lo == hb.lo && ha.hi == hb.hi);
        loom_graph_destroy(back);
        loom_str_free(&js);
    }
}
END_TEST

/* The vectors that pass only between coopmat forms of one matrix go as
 * f16: the gated FFN's output to the down projection
 * (matmul_silu_mul_coop_y16, matmul_add_coop_*x16), the norm's to the q/k/v
 * products (rms_norm_mul_rows_y16). Bindings and ranges stay. Not where the
 * gated FFN reads the vector (its form read f16 x slower on an H100), where
 * another reader takes part of it, where the readers' rows of x are not
 * whole chunks of 8, or without coopmat. */
START_TEST(test_split_coopmat_half_pair)
{
    enum { PAIR, TWO_READERS, PART_READER, NORM, NORM_FFN };
    static const struct { int mode; uint32_t ffn; bool coop; uint32_t large; const char *k[5]; } cases[] = {
        { PAIR, 96, true, 0, { "matmul_silu_mul_coop_y16_f16", "matmul_add_coop_ks_x16_f16" } },
        { TWO_READERS, 96, true, 0,
          { "matmul_silu_mul_coop_y16_f16", "matmul_add_coop_ks_x16_f16", "matmul_add_coop_ks_x16_f16" } },
        { PART_READER, 96, true, 0, { "matmul_silu_mul_coop_f16", "matmul_add_coop_ks_f16", "matmul_coop_ks_f16" } },
        { PAIR, 98, true, 0, { "matmul_silu_mul_coop_f16", "matmul_add_coop_ks_f16" } },
        { PAIR, 96, false, 0, { "matmul_silu_mul_tiled_f16", "matmul_add_tiled_f16" } },
        { NORM, 96, true, 0,
          { "rms_norm_mul_rows_y16", "matmul_coop_ks_x16_f16", "matmul_coop_ks_x16_f16", "matmul_silu_mul_coop_y16_f16",
            "matmul_add_coop_ks_x16_f16" } },
        { NORM_FFN, 96, true, 0,
          { "rms_norm_mul_rows", "matmul_coop_ks_f16", "matmul_coop_ks_f16", "matmul_silu_mul_coop_y16_f16",
            "matmul_add_coop_ks_x16_f16" } },
        { NORM, 96, false, 0,
          { "rms_norm_mul_rows", "matmul_tiled_f16", "matmul_tiled_f16", "matmul_silu_mul_tiled_f16",
            "matmul_add_tiled_f16" } },
        /* The gated FFN in its large tiles (128 of them: K from 64 here)
         * reads the norm's f16 output and writes f16 for the down projection. */
        { NORM_FFN, 8192, true, 64,
          { "rms_norm_mul_rows_y16", "matmul_coop_ks_x16_f16", "matmul_coop_ks_x16_f16",
            "matmul_silu_mul_coop_l_x16_y16_f16", "matmul_add_coop_ks_x16_f16" } },
        { NORM_FFN, 8128, true, 64,
          { "rms_norm_mul_rows", "matmul_coop_ks_f16", "matmul_coop_ks_f16", "matmul_silu_mul_coop_y16_f16",
            "matmul_add_coop_ks_x16_f16" } },
    };
    const uint32_t T = 100, dim = 64;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        loom_graph_reset(G);
        uint32_t ffn = cases[k].ffn;
        uint32_t wg = buf(loom_view_bytes(LOOM_F16, ffn, dim), LOOM_USAGE_WEIGHT);
        uint32_t wu = buf(loom_view_bytes(LOOM_F16, ffn, dim), LOOM_USAGE_WEIGHT);
        uint32_t wd = buf(loom_view_bytes(LOOM_F16, dim, ffn), LOOM_USAGE_WEIGHT);
        uint32_t x = buf((uint64_t)T * dim * 4, LOOM_USAGE_NONE), a = buf((uint64_t)T * ffn * 4, LOOM_USAGE_NONE);
        uint32_t h = buf((uint64_t)T * dim * 4, LOOM_USAGE_NONE), o = buf((uint64_t)T * ffn * 4, LOOM_USAGE_NONE);
        if (cases[k].mode == NORM || cases[k].mode == NORM_FFN) {
            uint32_t gn = buf(dim * 4, LOOM_USAGE_WEIGHT), wq = buf(loom_view_bytes(LOOM_F16, dim, dim), LOOM_USAGE_WEIGHT);
            uint32_t xn = buf((uint64_t)T * dim * 4, LOOM_USAGE_NONE), q = buf((uint64_t)T * dim * 4, LOOM_USAGE_NONE);
            ck_assert_int_eq(loom_op_rms_norm_mul_rows(G, loom_mat(h, LOOM_F32, T, dim), loom_vec(gn, dim),
                                                       loom_mat(xn, LOOM_F32, T, dim), 1e-5f, NULL),
                             LOOM_OK);
            for (int r = 0; r < 2; r++)
                ck_assert_int_eq(loom_op_matmul(G, loom_mat(wq, LOOM_F16, dim, dim), loom_mat(xn, LOOM_F32, T, dim),
                                                loom_mat(r ? o : q, LOOM_F32, T, dim), NULL),
                                 LOOM_OK);
            if (cases[k].mode == NORM_FFN)   /* the gated FFN reads the norm's output too */
                x = xn;
        }
        ck_assert_int_eq(loom_op_matmul_silu_mul(G, loom_mat(wg, LOOM_F16, ffn, dim), loom_mat(wu, LOOM_F16, ffn, dim),
                                                 loom_mat(x, LOOM_F32, T, dim), loom_mat(a, LOOM_F32, T, ffn), NULL),
                         LOOM_OK);
        ck_assert_msg(loom_op_matmul_add(G, loom_mat(wd, LOOM_F16, dim, ffn), loom_mat(a, LOOM_F32, T, ffn),
                                         loom_mat(h, LOOM_F32, T, dim), loom_mat(h, LOOM_F32, T, dim), NULL) == LOOM_OK,
                      "%s", loom_last_error());
        if (cases[k].mode == TWO_READERS)
            ck_assert_int_eq(loom_op_matmul_add(G, loom_mat(wd, LOOM_F16, dim, ffn), loom_mat(a, LOOM_F32, T, ffn),
                                                loom_mat(o, LOOM_F32, T, dim), loom_mat(o, LOOM_F32, T, dim), NULL),
                             LOOM_OK);
        if (cases[k].mode == PART_READER)   /* the first 80 token rows of a */
            ck_assert_int_eq(loom_op_matmul(G, loom_mat(wd, LOOM_F16, dim, ffn), loom_mat(a, LOOM_F32, 80, ffn),
                                            loom_mat(o, LOOM_F32, 80, dim), NULL),
                             LOOM_OK);
        uint32_t before = loom_graph_node_count(G);
        ck_assert_int_eq(
            loom_pass_split(G, &(loom_pass_ctx){ .coopmat = cases[k].coop, .coop_large_cols = cases[k].large }),
            LOOM_OK);
        ck_assert_uint_eq(loom_graph_node_count(G), before);
        for (uint32_t i = 0; i < before; i++) {
            const loom_node *n = loom_graph_node(G, i);
            ck_assert_msg(!strcmp(loom_graph_kernel_name(G, n->kernel), cases[k].k[i]), "case %zu node %u: %s, want %s",
                          k, i, loom_graph_kernel_name(G, n->kernel), cases[k].k[i]);
        }
        ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
    }
}
END_TEST

/* The prefill attention's output, read only by the o-projection, goes as
 * f16 where the attention takes its cooperative-matrix form
 * (attention_rows_coop_kh_h64_o16, the reader's _x16 form); on its portable
 * form (f32 caches) it stays f32. */
START_TEST(test_split_coopmat_half_attention)
{
    static const struct { bool kh; const char *att, *o; } cases[] = {
        { true, "attention_rows_coop_kh_h64_o16", "matmul_add_coop_ks_x16_f16" },
        { false, "attention_rows", "matmul_add_coop_ks_f16" },
    };
    const uint32_t T = 64, nh = 8, nkv = 2, hd = 64, nq = nh * hd, kvd = nkv * hd, max_seq = 256;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        loom_graph_reset(G);
        loom_dtype ct = cases[k].kh ? LOOM_F16 : LOOM_F32;
        uint32_t q = buf((uint64_t)T * nq * 4, LOOM_USAGE_NONE), o = buf((uint64_t)T * nq * 4, LOOM_USAGE_NONE);
        uint32_t h = buf((uint64_t)T * nq * 4, LOOM_USAGE_NONE);
        uint32_t kc = buf(loom_view_bytes(ct, max_seq, kvd), LOOM_USAGE_KV_CACHE);
        uint32_t vc = buf(loom_view_bytes(ct, max_seq, kvd), LOOM_USAGE_KV_CACHE);
        uint32_t wo = buf(loom_view_bytes(LOOM_F16, nq, nq), LOOM_USAGE_WEIGHT);
        ck_assert_int_eq(loom_op_attention_rows(G, loom_mat(q, LOOM_F32, T, nq), loom_mat(kc, ct, max_seq, kvd),
                                                loom_mat(vc, ct, max_seq, kvd), loom_mat(o, LOOM_F32, T, nq), nh, nkv,
                                                hd, NULL),
                         LOOM_OK);
        ck_assert_int_eq(loom_op_matmul_add(G, loom_mat(wo, LOOM_F16, nq, nq), loom_mat(o, LOOM_F32, T, nq),
                                            loom_mat(h, LOOM_F32, T, nq), loom_mat(h, LOOM_F32, T, nq), NULL),
                         LOOM_OK);
        ck_assert_int_eq(loom_pass_split(G, &(loom_pass_ctx){ .coopmat = true }), LOOM_OK);
        ck_assert_uint_eq(loom_graph_node_count(G), 2);
        ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, 0)->kernel), cases[k].att);
        ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, 1)->kernel), cases[k].o);
        ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
    }
}
END_TEST

/* The prefill's attention with ctx.coopmat: f16 caches of head_dim 64 and
 * 128 whose kv heads serve at least LOOM_ATTN_ROWS_COOP_Q query vectors
 * take the cooperative-matrix form of their head_dim, a workgroup per 64 of
 * them (kv head slowest); fewer queries, f32 caches and other head dims
 * keep the portable form and its workgroups: query tiles (32 query vectors
 * of head_dim 64, 16 of 80) times the shares each tile's walk is split
 * into, about 128 workgroups in all where the tiles are few; a step of up
 * to LOOM_ATTN_ROWS_FEW_T rows the few-query form, its T x heads query
 * vectors times the decode attention's shares. */
START_TEST(test_split_coopmat_attention)
{
    static const struct { uint32_t T, nh, nkv, hd; bool kh; const char *coop; uint32_t portable; } cases[] = {
        { 512, 32, 8, 64, true, "attention_rows_coop_kh_h64", 8 * 64 },   /* 64 tiles a kv head: no split */
        { 17, 32, 8, 128, true, "attention_rows_coop_kh_h128", 8 * 5 * 4 },   /* 68 queries a kv head: two coop workgroups */
        { 16, 8, 2, 64, true, "attention_rows_coop_kh_h64", 2 * 2 * 16 },     /* exactly 64 */
        { 9, 32, 8, 64, true, NULL, 16 * 8 },                     /* 36 queries a kv head: 2 tiles, 8 shares */
        { 4, 32, 8, 64, true, NULL, 4 * 32 * 2 },                 /* a verification step: the few-query form */
        { 64, 8, 2, 80, true, NULL, 2 * 16 * 4 },
        { 64, 8, 2, 64, false, NULL, 2 * 8 * 8 },
        { 16, 4, 4, 64, true, NULL, 4 * 16 },
        { 2, 4, 4, 128, true, NULL, 2 * 4 * 16 },                 /* few-query, the wide kernel's shares */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        loom_graph_reset(G);
        uint32_t T = cases[k].T, nq = cases[k].nh * cases[k].hd, kvd = cases[k].nkv * cases[k].hd, max_seq = 1024;
        loom_dtype ct = cases[k].kh ? LOOM_F16 : LOOM_F32;
        uint32_t q = buf((uint64_t)T * nq * 4, LOOM_USAGE_NONE), o = buf((uint64_t)T * nq * 4, LOOM_USAGE_NONE);
        uint32_t kc = buf(loom_view_bytes(ct, max_seq, kvd), LOOM_USAGE_KV_CACHE);
        uint32_t vc = buf(loom_view_bytes(ct, max_seq, kvd), LOOM_USAGE_KV_CACHE);
        ck_assert_int_eq(loom_op_attention_rows(G, loom_mat(q, LOOM_F32, T, nq), loom_mat(kc, ct, max_seq, kvd),
                                                loom_mat(vc, ct, max_seq, kvd), loom_mat(o, LOOM_F32, T, nq),
                                                cases[k].nh, cases[k].nkv, cases[k].hd, NULL),
                         LOOM_OK);
        const char *built = loom_graph_kernel_name(G, loom_graph_node(G, 0)->kernel);
        char built_name[64];
        snprintf(built_name, sizeof built_name, "%s", built);
        uint32_t groups = loom_graph_node(G, 0)->groups[0];
        ck_assert_uint_eq(groups, cases[k].portable);
        ck_assert_int_eq(loom_pass_split(G, &(loom_pass_ctx){ .coopmat = true }), LOOM_OK);
        ck_assert_uint_eq(loom_graph_node_count(G), 1);
        const loom_node *n = loom_graph_node(G, 0);
        uint32_t per_kv = T * (cases[k].nh / cases[k].nkv);
        if (cases[k].coop) {
            ck_assert_str_eq(loom_graph_kernel_name(G, n->kernel), cases[k].coop);
            ck_assert_uint_eq(n->groups[0], cases[k].nkv * ((per_kv + LOOM_ATTN_ROWS_COOP_Q - 1) / LOOM_ATTN_ROWS_COOP_Q));
        } else {
            ck_assert_str_eq(loom_graph_kernel_name(G, n->kernel), built_name);
            ck_assert_uint_eq(n->groups[0], groups);
        }
        ck_assert_uint_eq(n->n_bindings, 7);   /* params, q, K, V, out, the shares' part and counters */
        ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
    }
}
END_TEST

/* Every matvec form, both dtypes, a vector and a scalar row length: blocks
 * of whole 64-row multiples tile W (and Wu), y (and r) exactly, read x and g
 * whole, fit the limit, and an argmax form ends with one ARGMAX over all
 * of y. */
START_TEST(test_split_matvec_forms)
{
    static const uint32_t cols_of[] = { 64, 40 };
    for (size_t f = 0; f < sizeof split_forms / sizeof split_forms[0]; f++)
        for (int dt = 0; dt < 2; dt++)
            for (int c = 0; c < 2; c++) {
                loom_graph_reset(G);
                loom_op op = split_forms[f];
                loom_dtype t = dt ? LOOM_F16 : LOOM_F32;
                uint32_t rows = 300, cols = cols_of[c];
                uint64_t row_bytes = (uint64_t)cols * loom_dtype_size(t), limit = 20000;
                mv_bufs b = capture_form(op, t, rows, cols);
                uint32_t cut = 0;
                loom_result rc = run_split(limit, &cut);
                ck_assert_msg(rc == LOOM_OK, "%s: %s", loom_op_name(op), loom_last_error());
                ck_assert_uint_eq(cut, 1);
                ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
                expect_bindings_fit(limit, 0);
                bool argmax = op == LOOM_OP_MATVEC_ARGMAX || op == LOOM_OP_RMS_NORM_MATVEC_ARGMAX;
                uint32_t n = loom_graph_node_count(G), blocks = n - argmax;
                /* The most whole 64-row multiples the limit holds, balanced. */
                uint64_t most = limit / row_bytes / 64 * 64, k = (rows + most - 1) / most;
                ck_assert_uint_eq(blocks, k);
                ck_assert_uint_eq(expect_tiled(0, blocks, 0, b.w, 0, rows * row_bytes), k);
                if (op == LOOM_OP_MATVEC_SILU_MUL || op == LOOM_OP_RMS_NORM_MATVEC_SILU_MUL) {
                    uint64_t ub = (rows * row_bytes + 255) / 256 * 256;
                    ck_assert_uint_eq(expect_tiled(0, blocks, 0, b.w, ub, ub + rows * row_bytes), k);
                }
                uint32_t yb = op == LOOM_OP_MATVEC_ADD ? b.r : b.y;
                ck_assert_uint_eq(expect_tiled(0, blocks, 1, yb, 0, rows * 4ull), k);
                if (op == LOOM_OP_MATVEC_ADD)
                    ck_assert_uint_eq(expect_tiled(0, blocks, 0, b.r, 0, rows * 4ull), k);
                for (uint32_t i = 0; i < blocks; i++) {
                    const loom_node *nd = loom_graph_node(G, i);
                    ck_assert_uint_eq(nd->op, argmax ? (op == LOOM_OP_MATVEC_ARGMAX ? LOOM_OP_MATVEC
                                                                                   : LOOM_OP_RMS_NORM_MATVEC)
                                                     : op);
                    ck_assert_uint_eq(expect_tiled(i, i + 1, 0, b.x, 0, cols * 4ull), 1);
                }
                if (argmax) {
                    const loom_node *am = loom_graph_node(G, n - 1);
                    ck_assert_uint_eq(am->op, LOOM_OP_ARGMAX);
                    ck_assert_uint_eq(expect_tiled(n - 1, n, 0, b.y, 0, rows * 4ull), 1);
                    ck_assert_uint_eq(expect_tiled(n - 1, n, 1, b.out, 0, 4), 1);
                }
            }
}
END_TEST

/* EMBED: EMBED_BLOCKS nodes whose row blocks tile the table, seven at most
 * to a node; nodes cover consecutive token ranges [first, first + vocab) of
 * the whole table; each node reads every distinct block once. A row length
 * that is not a divisor of 256 bytes puts block starts on multiples of
 * several rows. */
START_TEST(test_split_embed)
{
    static const struct { loom_dtype t; uint32_t vocab, dim; uint64_t limit; uint32_t nodes; } cases[] = {
        { LOOM_F32, 1000, 64, 16384, 3 },   /* 256-byte rows: 63-row blocks, 16 of them */
        { LOOM_F16, 300, 128, 16384, 1 },   /* 5 blocks of 64 rows */
        { LOOM_F16, 1000, 66, 16384, 3 },   /* 132-byte rows: blocks of 64-row multiples */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        loom_graph_reset(G);
        uint32_t vocab = cases[c].vocab, dim = cases[c].dim;
        uint64_t bytes = (uint64_t)vocab * dim * loom_dtype_size(cases[c].t);
        uint32_t table = buf(bytes, LOOM_USAGE_WEIGHT), tok = buf(16, LOOM_USAGE_INPUT), out = buf(dim * 4, 0);
        ck_assert_int_eq(loom_op_embed(G, loom_mat(table, cases[c].t, vocab, dim), tok, 2, loom_vec(out, dim), NULL),
                         LOOM_OK);
        uint32_t cut = 0;
        ck_assert_int_eq(run_split(cases[c].limit, &cut), LOOM_OK);
        ck_assert_uint_eq(cut, 1);
        ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
        expect_bindings_fit(cases[c].limit, 0);
        uint32_t n = loom_graph_node_count(G);
        ck_assert_uint_eq(n, cases[c].nodes);
        expect_tiled(0, n, 0, table, 0, bytes);
        uint32_t next = 0;
        for (uint32_t i = 0; i < n; i++) {
            const loom_node *nd = loom_graph_node(G, i);
            ck_assert_uint_eq(nd->op, LOOM_OP_EMBED_BLOCKS);
            ck_assert_uint_eq(nd->push_size, sizeof(loom_pc_embed_blocks));
            loom_pc_embed_blocks pc;
            memcpy(&pc, loom_node_push(G, nd), sizeof pc);
            ck_assert_uint_eq(pc.first, next);
            ck_assert_uint_eq(pc.total, vocab);
            ck_assert_uint_eq(pc.dim, dim);
            ck_assert_uint_eq(pc.token_index, 2);
            ck_assert_uint_le(nd->n_reads, LOOM_MAX_RANGES);
            next += pc.vocab;
            expect_tiled(i, i + 1, 1, out, 0, dim * 4ull);
            expect_tiled(i, i + 1, 0, tok, 0, 16);
        }
        ck_assert_uint_eq(next, vocab);
    }
}
END_TEST

/* What cannot be cut is LOOM_LIMIT, never a plan with an oversized binding:
 * a limit below one aligned row block, x or the logits above the limit, an
 * op the pass does not cut, an EMBED output above the limit. */
START_TEST(test_split_refused)
{
    /* 64 rows of 256 bytes is the smallest block: 16 KiB. */
    capture_form(LOOM_OP_MATVEC, LOOM_F32, 300, 64);
    ck_assert_int_eq(run_split(16383, NULL), LOOM_LIMIT);
    loom_graph_reset(G);
    capture_form(LOOM_OP_MATVEC, LOOM_F32, 300, 64);
    ck_assert_int_eq(run_split(16384, NULL), LOOM_OK);

    loom_graph_reset(G);   /* x is 4 KiB, W's row block 2 KiB */
    capture_form(LOOM_OP_MATVEC, LOOM_F16, 64, 1024);
    ck_assert_int_eq(run_split(4095, NULL), LOOM_LIMIT);

    loom_graph_reset(G);   /* the logits the ARGMAX reads whole */
    capture_form(LOOM_OP_MATVEC_ARGMAX, LOOM_F16, 8192, 2);
    ck_assert_int_eq(run_split(32767, NULL), LOOM_LIMIT);

    loom_graph_reset(G);
    uint32_t a = buf(65536, LOOM_USAGE_INPUT), y = buf(65536, LOOM_USAGE_OUTPUT);
    ck_assert_int_eq(loom_op_add(G, loom_vec(a, 16384), loom_vec(a, 16384), loom_vec(y, 16384), NULL), LOOM_OK);
    ck_assert_int_eq(run_split(32768, NULL), LOOM_LIMIT);

    loom_graph_reset(G);
    uint32_t t = buf(1000 * 2048 * 4ull, LOOM_USAGE_WEIGHT), k = buf(4, LOOM_USAGE_INPUT), o = buf(8192, 0);
    ck_assert_int_eq(loom_op_embed(G, loom_mat(t, LOOM_F32, 1000, 2048), k, 0, loom_vec(o, 2048), NULL), LOOM_OK);
    ck_assert_int_eq(run_split(8191, NULL), LOOM_LIMIT);   /* out is 8 KiB */
    ck_assert_int_eq(run_split(8192, NULL), LOOM_OK);      /* one 8 KiB row a block, 143 nodes of 7 */
    ck_assert_uint_eq(loom_graph_node_count(G), 143);
}
END_TEST

/* A decoder layer's q/k/v chain as a frontend captures it, over x (dim
 * wide): RMS_NORM, MUL by the norm weight, three f16 MATVECs, ROPE of q and
 * k, KV_APPEND into caches of seq rows. Returns the rotated q's buffer. */
static uint32_t capture_qkv_chain_kv(uint32_t x, uint32_t dim, uint32_t nh, uint32_t nkv, uint32_t hd, uint32_t seq,
                                     loom_dtype kv)
{
    uint32_t es = loom_dtype_size(kv);
    const uint32_t qd = nh * hd, kvd = nkv * hd;
    uint32_t gw = buf(dim * 4, LOOM_USAGE_WEIGHT), t = buf(dim * 4, 0), xn = buf(dim * 4, 0);
    uint32_t wq = buf(qd * dim * 2, LOOM_USAGE_WEIGHT), wk = buf(kvd * dim * 2, LOOM_USAGE_WEIGHT);
    uint32_t wv = buf(kvd * dim * 2, LOOM_USAGE_WEIGHT), q = buf(qd * 4, 0), k = buf(kvd * 4, 0);
    uint32_t v = buf(kvd * 4, 0), qr = buf(qd * 4, LOOM_USAGE_OUTPUT), kr = buf(kvd * 4, 0);
    uint32_t kc = buf(seq * kvd * es, LOOM_USAGE_KV_CACHE), vc = buf(seq * kvd * es, LOOM_USAGE_KV_CACHE);
    ck_assert_int_eq(loom_op_rms_norm(G, loom_vec(x, dim), loom_vec(t, dim), 1e-5f, NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_mul(G, loom_vec(t, dim), loom_vec(gw, dim), loom_vec(xn, dim), NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_matvec(G, loom_mat(wq, LOOM_F16, qd, dim), loom_vec(xn, dim), loom_vec(q, qd), NULL),
                     LOOM_OK);
    ck_assert_int_eq(loom_op_matvec(G, loom_mat(wk, LOOM_F16, kvd, dim), loom_vec(xn, dim), loom_vec(k, kvd), NULL),
                     LOOM_OK);
    ck_assert_int_eq(loom_op_matvec(G, loom_mat(wv, LOOM_F16, kvd, dim), loom_vec(xn, dim), loom_vec(v, kvd), NULL),
                     LOOM_OK);
    ck_assert_int_eq(loom_op_rope(G, loom_vec(q, qd), loom_vec(qr, qd), nh, hd, 10000.0f, NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_rope(G, loom_vec(k, kvd), loom_vec(kr, kvd), nkv, hd, 10000.0f, NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_kv_append(G, loom_vec(kr, kvd), loom_vec(v, kvd), loom_mat(kc, kv, seq, kvd),
                                       loom_mat(vc, kv, seq, kvd), NULL), LOOM_OK);
    return qr;
}

static uint32_t capture_qkv_chain(uint32_t x, uint32_t dim, uint32_t nh, uint32_t nkv, uint32_t hd, uint32_t seq)
{
    return capture_qkv_chain_kv(x, dim, nh, nkv, hd, seq, LOOM_F32);
}

/* The chain over f16 caches fuses the same way, into the q/k/v kernel's
 * f16-cache form; the unfused nodes run their own f16-cache forms. */
START_TEST(test_fuse_qkv_f16_caches)
{
    capture_qkv_chain_kv(buf(64 * 4, LOOM_USAGE_INPUT), 64, 4, 2, 32, 4, LOOM_F16);
    for (uint32_t i = 0; i < loom_graph_node_count(G); i++) {
        const loom_node *n = loom_graph_node(G, i);
        if (n->op == LOOM_OP_KV_APPEND)
            ck_assert_str_eq(loom_graph_kernel_name(G, n->kernel), "kv_append_kh");
    }
    loom_pass_ctx ctx = { 0 };
    ck_assert_int_eq(loom_pass_fuse(G, &ctx), LOOM_OK);
    ck_assert_int_eq(loom_pass_verify(G, &ctx), LOOM_OK);
    uint32_t fused = 0;
    for (uint32_t i = 0; i < loom_graph_node_count(G); i++) {
        const loom_node *n = loom_graph_node(G, i);
        ck_assert(n->op != LOOM_OP_KV_APPEND);
        if (n->op == LOOM_OP_RMS_NORM_QKV_ROPE_KV) {
            fused++;
            ck_assert_str_eq(loom_graph_kernel_name(G, n->kernel), "rms_norm_qkv_rope_kh_f16");
        }
    }
    ck_assert_uint_eq(fused, 1);
}
END_TEST

/* The T-row chain as a frontend captures it (llama's layer_rows: RoPE in
 * place, the attention reading q after it): at T 2 and 4 it fuses into the
 * T-row q/k/v node on its f16-cache form, and the attention still reads the
 * q that node writes; at T 8 (past LOOM_QKV_ROWS_FUSE_T) and 32 (past
 * LOOM_MATMUL_SMALL_T) nothing fuses. */
START_TEST(test_fuse_qkv_rows)
{
    static const uint32_t Ts[] = { 2, 4, 8, 32 };
    for (size_t c = 0; c < 4; c++) {
        loom_graph_reset(G);
        const uint32_t T = Ts[c], dim = 64, nh = 4, nkv = 2, hd = 16, seq = 64, qd = nh * hd, kvd = nkv * hd;
        uint32_t x = buf(T * dim * 4, LOOM_USAGE_INPUT), gw = buf(dim * 4, LOOM_USAGE_WEIGHT), xn = buf(T * dim * 4, 0);
        uint32_t wq = buf(qd * dim * 2, LOOM_USAGE_WEIGHT), wk = buf(kvd * dim * 2, LOOM_USAGE_WEIGHT);
        uint32_t wv = buf(kvd * dim * 2, LOOM_USAGE_WEIGHT), q = buf(T * qd * 4, 0), k = buf(T * kvd * 4, 0);
        uint32_t v = buf(T * kvd * 4, 0), att = buf(T * qd * 4, LOOM_USAGE_OUTPUT);
        uint32_t kc = buf(seq * kvd * 2, LOOM_USAGE_KV_CACHE), vc = buf(seq * kvd * 2, LOOM_USAGE_KV_CACHE);
        loom_tensor tkc = loom_mat(kc, LOOM_F16, seq, kvd), tvc = loom_mat(vc, LOOM_F16, seq, kvd);
        loom_tensor tq = loom_mat(q, LOOM_F32, T, qd), tk = loom_mat(k, LOOM_F32, T, kvd);
        loom_tensor txn = loom_mat(xn, LOOM_F32, T, dim);
        ck_assert_int_eq(loom_op_rms_norm_mul_rows(G, loom_mat(x, LOOM_F32, T, dim), loom_vec(gw, dim), txn, 1e-5f,
                                                   NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_matmul(G, loom_mat(wq, LOOM_F16, qd, dim), txn, tq, NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_matmul(G, loom_mat(wk, LOOM_F16, kvd, dim), txn, tk, NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_matmul(G, loom_mat(wv, LOOM_F16, kvd, dim), txn, loom_mat(v, LOOM_F32, T, kvd), NULL),
                         LOOM_OK);
        ck_assert_int_eq(loom_op_rope_rows(G, tq, tq, nh, hd, 10000.0f, NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_rope_rows(G, tk, tk, nkv, hd, 10000.0f, NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_kv_append_rows(G, tk, loom_mat(v, LOOM_F32, T, kvd), tkc, tvc, NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_attention_rows(G, tq, tkc, tvc, loom_mat(att, LOOM_F32, T, qd), nh, nkv, hd, NULL),
                         LOOM_OK);
        loom_pass_ctx ctx = { 0 };
        ck_assert_int_eq(loom_pass_fuse(G, &ctx), LOOM_OK);
        ck_assert_int_eq(loom_pass_verify(G, &ctx), LOOM_OK);
        uint32_t fused = 0, n = loom_graph_node_count(G);
        for (uint32_t i = 0; i < n; i++) {
            const loom_node *nd = loom_graph_node(G, i);
            if (nd->op != LOOM_OP_RMS_NORM_QKV_ROPE_KV_ROWS)
                continue;
            fused++;
            ck_assert_str_eq(loom_graph_kernel_name(G, nd->kernel), "rms_norm_qkv_rope_rows_kh_f16");
            ck_assert_uint_eq(loom_node_writes(G, nd)[0].buffer, q);
        }
        ck_assert_uint_eq(fused, T <= LOOM_QKV_ROWS_FUSE_T ? 1 : 0);
        ck_assert_uint_eq(n, T <= LOOM_QKV_ROWS_FUSE_T ? 2 : 8);
        ck_assert_uint_eq(loom_graph_node(G, n - 1)->op, LOOM_OP_ATTENTION_ROWS);
    }
}
END_TEST

/* With a weight above the limit, the q/k/v chain is not fused into the one
 * node split could not cut; its matvecs are split instead. */
START_TEST(test_split_fuse_guard)
{
    for (int limited = 0; limited < 2; limited++) {
        loom_graph_reset(G);
        capture_qkv_chain(buf(64 * 4, LOOM_USAGE_INPUT), 64, 4, 2, 32, 4);
        /* Wq is 16 KiB, Wk and Wv 8 KiB: an 8 KiB limit cuts Wq in two. */
        loom_pass_ctx ctx = { .max_binding_range = limited ? 8192 : 0 };
        ck_assert_int_eq(loom_pass_fuse(G, &ctx), LOOM_OK);
        ck_assert_int_eq(loom_pass_split(G, &ctx), LOOM_OK);
        ck_assert_int_eq(loom_pass_verify(G, &ctx), LOOM_OK);
        bool qkv = false;
        for (uint32_t i = 0; i < loom_graph_node_count(G); i++)
            qkv |= loom_graph_node(G, i)->op == LOOM_OP_RMS_NORM_QKV_ROPE_KV;
        ck_assert(qkv == !limited);
        ck_assert_uint_eq(ctx.split_nodes, limited ? 1 : 0);
    }
}
END_TEST

/* EMBED -> the q/k/v chain, the embedding row also read by a residual ADD
 * afterwards (as in a decoder's first layer): without a limit the lookup
 * folds into the q/k/v node, which still writes the row, and the ADD stays
 * a reader of it; with the table above the limit (every other binding
 * under it) the EMBED is split into blocks and stays out. */
START_TEST(test_split_embed_qkv_guard)
{
    for (int limited = 0; limited < 2; limited++) {
        loom_graph_reset(G);
        const uint32_t dim = 64, vocab = 100;
        uint32_t table = buf(vocab * dim * 2, LOOM_USAGE_WEIGHT), tok = buf(4, LOOM_USAGE_INPUT);
        uint32_t x = buf(dim * 4, 0), h = buf(dim * 4, LOOM_USAGE_OUTPUT);
        ck_assert_int_eq(loom_op_embed(G, loom_mat(table, LOOM_F16, vocab, dim), tok, 0, loom_vec(x, dim), NULL),
                         LOOM_OK);
        uint32_t qr = capture_qkv_chain(x, dim, 2, 1, 32, 4);
        ck_assert_int_eq(loom_op_add(G, loom_vec(x, dim), loom_vec(qr, dim), loom_vec(h, dim), NULL), LOOM_OK);
        /* The table is 12.5 KiB, every other binding at most 4 KiB. */
        loom_pass_ctx ctx = { .max_binding_range = limited ? 8192 : 0 };
        ck_assert_int_eq(loom_pass_fuse(G, &ctx), LOOM_OK);
        ck_assert_int_eq(loom_pass_split(G, &ctx), LOOM_OK);
        ck_assert_int_eq(loom_pass_verify(G, &ctx), LOOM_OK);
        uint32_t fused = 0, qkv = 0, embeds = 0, x_writers = 0, x_readers = 0;
        for (uint32_t i = 0; i < loom_graph_node_count(G); i++) {
            const loom_node *n = loom_graph_node(G, i);
            fused += n->op == LOOM_OP_EMBED_RMS_NORM_QKV_ROPE_KV;
            qkv += n->op == LOOM_OP_RMS_NORM_QKV_ROPE_KV;
            embeds += n->op == LOOM_OP_EMBED || n->op == LOOM_OP_EMBED_BLOCKS;
            const loom_range *r = loom_node_reads(G, n);
            for (uint32_t j = 0; j < (uint32_t)n->n_reads + n->n_writes; j++)
                if (r[j].buffer == x)
                    *(j < n->n_reads ? &x_readers : &x_writers) += 1;
        }
        ck_assert_uint_eq(fused, limited ? 0 : 1);
        ck_assert_uint_eq(qkv, limited ? 1 : 0);
        ck_assert_uint_eq(embeds, limited ? 1 : 0);
        ck_assert_uint_eq(x_writers, 1);   /* the row is still written, once */
        ck_assert_uint_ge(x_readers, 1);   /* and the ADD still reads it */
        ck_assert_uint_eq(ctx.split_nodes, limited ? 1 : 0);
    }
}
END_TEST

/* A split plan's JSON reads back: several nodes standing for one captured
 * node are allowed only when they carry LOOM_NODE_SPLIT. */
START_TEST(test_split_json_round_trip)
{
    capture_form(LOOM_OP_RMS_NORM_MATVEC_ARGMAX, LOOM_F16, 300, 64);
    ck_assert_int_eq(run_split(16384, NULL), LOOM_OK);
    loom_str s;
    loom_str_init(&s, NULL);
    ck_assert_int_eq(loom_graph_dump(G, LOOM_FORMAT_JSON, &s), LOOM_OK);
    loom_graph *back = NULL;
    loom_result rc = loom_graph_parse_json(s.data, s.len, NULL, &back);
    ck_assert_msg(rc == LOOM_OK, "%s", loom_last_error());
    ck_assert_uint_eq(loom_graph_node_count(back), loom_graph_node_count(G));
    loom_hash a, b;
    ck_assert_int_eq(loom_graph_hash(G, &a), LOOM_OK);
    ck_assert_int_eq(loom_graph_hash(back, &b), LOOM_OK);
    ck_assert(a.lo == b.lo && a.hi == b.hi);
    loom_graph_destroy(back);
    /* The same text without the flags claims captured node 0 six times. */
    uint32_t flags = 0;
    for (char *f = strstr(s.data, "\"flags\": 1"); f; f = strstr(f + 1, "\"flags\": 1"), flags++)
        f[9] = '0';
    ck_assert_uint_eq(flags, loom_graph_node_count(G));
    ck_assert_int_eq(loom_graph_parse_json(s.data, s.len, NULL, &back), LOOM_PARSE);
    loom_str_free(&s);
}
END_TEST

/* ---- stage ---------------------------------------------------------------- */

/* A decoder block's tail as a frontend captures it after fusion: the
 * residual add in place on x (MATVEC_ADD), then the next RMS norm folded
 * into gate/up. Returns the buffers; b.r is x. */
typedef struct stage_bufs { uint32_t w, a, x, g, wg, h; } stage_bufs;

static stage_bufs stage_block(uint32_t dim, uint32_t ffn)
{
    stage_bufs b = { .w = buf((uint64_t)dim * dim * 2, LOOM_USAGE_WEIGHT), .a = buf(dim * 4ull, LOOM_USAGE_INPUT),
                     .x = buf(dim * 4ull, LOOM_USAGE_STATE), .g = buf(dim * 4ull, LOOM_USAGE_WEIGHT),
                     .wg = buf((uint64_t)ffn * dim * 2 * 2, LOOM_USAGE_WEIGHT),
                     .h = buf(ffn * 4ull, LOOM_USAGE_OUTPUT) };
    loom_tensor W = loom_mat(b.w, LOOM_F16, dim, dim), x = loom_vec(b.x, dim);
    loom_tensor Wg = loom_mat(b.wg, LOOM_F16, ffn, dim), Wu = Wg;
    Wu.offset = (uint64_t)ffn * dim * 2;
    ck_assert_int_eq(loom_op_matvec_add(G, W, loom_vec(b.a, dim), x, x, NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_rms_norm_matvec_silu_mul(G, Wg, Wu, x, loom_vec(b.g, dim), loom_vec(b.h, ffn), 1e-5f,
                                                      NULL),
                     LOOM_OK);
    return b;
}

static const loom_binding *slot_of(uint32_t node, uint32_t slot)
{
    const loom_node *n = loom_graph_node(G, node);
    const loom_binding *b = loom_node_bindings(G, n);
    for (uint32_t i = 0; i < n->n_bindings; i++)
        if (b[i].slot == slot)
            return &b[i];
    ck_abort_msg("node %u has no slot %u", node, slot);
    return NULL;
}

static uint32_t run_stage(void)
{
    loom_pass_ctx ctx = { 0 };
    ck_assert_int_eq(loom_pass_stage(G, &ctx), LOOM_OK);
    ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
    return ctx.staged_gains;
}

START_TEST(test_stage_block)
{
    stage_bufs b = stage_block(256, 512);
    ck_assert_uint_eq(run_stage(), 1);
    ck_assert_uint_eq(loom_graph_node_count(G), 3);
    const loom_node *z = loom_graph_node(G, 0), *p = loom_graph_node(G, 1), *c = loom_graph_node(G, 2);
    ck_assert_uint_eq(z->op, LOOM_OP_ZERO);
    ck_assert_uint_eq(p->op, LOOM_OP_MATVEC_ADD_STAGE);
    ck_assert_str_eq(loom_graph_kernel_name(G, p->kernel), "matvec_add_stage_f16");
    ck_assert_uint_eq(c->op, LOOM_OP_RMS_NORM_MATVEC_SILU_MUL);
    ck_assert_str_eq(loom_graph_kernel_name(G, c->kernel), "rms_norm_matvec_silu_mul_pre_f16");
    /* producer: W x r s y t acc; s is the norm's gain, y and r are x */
    ck_assert_uint_eq(slot_of(1, 2)->buffer, b.x);
    ck_assert_uint_eq(slot_of(1, 3)->buffer, b.g);
    ck_assert_uint_eq(slot_of(1, 4)->buffer, b.x);
    uint32_t t = slot_of(1, 5)->buffer, acc = slot_of(1, 6)->buffer;
    ck_assert_uint_eq(loom_graph_buffer(G, t)->size, 256 * 4);
    ck_assert_uint_eq(slot_of(1, 6)->size, LOOM_STAGE_SUM_WORDS * 4);
    ck_assert(slot_of(1, 6)->access == LOOM_ACCESS_RW);
    /* the ZERO clears the accumulator the producer adds into */
    ck_assert_uint_eq(slot_of(0, 0)->buffer, acc);
    ck_assert_uint_eq(slot_of(0, 0)->offset, 0);
    ck_assert_uint_ge(slot_of(0, 0)->size, LOOM_STAGE_SUM_WORDS * 4);
    /* consumer: Wg Wu x g y, x now t and g the accumulator; reads follow */
    ck_assert_uint_eq(slot_of(2, 2)->buffer, t);
    ck_assert_uint_eq(slot_of(2, 3)->buffer, acc);
    ck_assert_uint_eq(slot_of(2, 3)->offset, slot_of(1, 6)->offset);
    const loom_range *r = loom_node_reads(G, c);
    for (uint32_t i = 0; i < c->n_reads; i++)
        ck_assert(r[i].buffer != b.x && r[i].buffer != b.g);
    /* the rewritten nodes stand for what they replaced */
    ck_assert_uint_eq(p->fused, 1);
    ck_assert_uint_eq(cap(1), 0);
    ck_assert_uint_eq(cap(2), 1);
}
END_TEST

/* Where the gain changes between producer and norm, or the producer is no
 * residual add of exactly x, nothing is staged. */
START_TEST(test_stage_illegal)
{
    for (int c = 0; c < 3; c++) {
        loom_graph_destroy(G);
        ck_assert_int_eq(loom_graph_create(NULL, &G), LOOM_OK);
        uint32_t dim = 256, w = buf((uint64_t)dim * dim * 2, LOOM_USAGE_WEIGHT), a = buf(dim * 4, LOOM_USAGE_INPUT);
        uint32_t x = buf(dim * 8, LOOM_USAGE_STATE), g = buf(dim * 4, LOOM_USAGE_STATE);
        uint32_t y = buf(dim * 4, LOOM_USAGE_OUTPUT);
        loom_tensor W = loom_mat(w, LOOM_F16, dim, dim), xv = loom_vec(x, dim), gv = loom_vec(g, dim);
        if (c == 0) {   /* a plain MATVEC writes x */
            ck_assert_int_eq(loom_op_matvec(G, W, loom_vec(a, dim), xv, NULL), LOOM_OK);
        } else if (c == 1) {   /* the add writes x, then something writes g */
            ck_assert_int_eq(loom_op_matvec_add(G, W, loom_vec(a, dim), xv, xv, NULL), LOOM_OK);
            ck_assert_int_eq(loom_op_copy(G, loom_vec(a, dim), gv, NULL), LOOM_OK);
        } else {   /* the add writes part of the x the norm reads */
            loom_tensor W2 = loom_mat(w, LOOM_F16, dim / 2, dim);
            ck_assert_int_eq(loom_op_matvec_add(G, W2, loom_vec(a, dim), loom_vec(x, dim / 2), loom_vec(x, dim / 2),
                                                NULL),
                             LOOM_OK);
        }
        ck_assert_int_eq(loom_op_rms_norm_matvec(G, W, xv, gv, loom_vec(y, dim), 1e-5f, NULL), LOOM_OK);
        uint32_t n = loom_graph_node_count(G);
        ck_assert_uint_eq(run_stage(), 0);
        ck_assert_uint_eq(loom_graph_node_count(G), n);
        ck_assert_uint_eq(loom_graph_node(G, n - 1)->op, LOOM_OP_RMS_NORM_MATVEC);
        ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, n - 1)->kernel), "rms_norm_matvec_f16");
    }
}
END_TEST

/* Two norms of one x: with the same gain they share the staged vector and
 * the accumulator (the row blocks of a split LM head); with another gain
 * the second keeps reading x and g. */
START_TEST(test_stage_two_readers)
{
    for (int other = 0; other < 2; other++) {
        loom_graph_destroy(G);
        ck_assert_int_eq(loom_graph_create(NULL, &G), LOOM_OK);
        uint32_t dim = 256, w = buf((uint64_t)dim * dim * 2, LOOM_USAGE_WEIGHT), a = buf(dim * 4, LOOM_USAGE_INPUT);
        uint32_t x = buf(dim * 4, LOOM_USAGE_STATE), g = buf(dim * 4, LOOM_USAGE_WEIGHT);
        uint32_t g2 = buf(dim * 4, LOOM_USAGE_WEIGHT), y = buf(dim * 8, LOOM_USAGE_OUTPUT);
        loom_tensor W = loom_mat(w, LOOM_F16, dim, dim), xv = loom_vec(x, dim), y2 = loom_vec(y, dim);
        y2.offset = dim * 4;
        ck_assert_int_eq(loom_op_matvec_add(G, W, loom_vec(a, dim), xv, xv, NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_rms_norm_matvec(G, W, xv, loom_vec(g, dim), loom_vec(y, dim), 1e-5f, NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_rms_norm_matvec(G, W, xv, loom_vec(other ? g2 : g, dim), y2, 1e-5f, NULL),
                         LOOM_OK);
        ck_assert_uint_eq(run_stage(), other ? 1 : 2);
        ck_assert_uint_eq(loom_graph_node_count(G), 4);
        ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, 2)->kernel), "rms_norm_matvec_pre_f16");
        ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, 3)->kernel),
                         other ? "rms_norm_matvec_f16" : "rms_norm_matvec_pre_f16");
        if (!other) {
            ck_assert_uint_eq(slot_of(3, 1)->buffer, slot_of(2, 1)->buffer);
            ck_assert_uint_eq(slot_of(3, 2)->buffer, slot_of(2, 2)->buffer);
            ck_assert_uint_eq(slot_of(3, 2)->offset, slot_of(2, 2)->offset);
        } else {
            ck_assert_uint_eq(slot_of(3, 1)->buffer, x);
            ck_assert_uint_eq(slot_of(3, 2)->buffer, g2);
        }
    }
}
END_TEST

/* Half stage (LOOM_ENABLE_HALF_STAGE): an f16 producer whose norms are all
 * f16 stores t as f16 and they read it so; an f32 norm among them, an f32
 * producer, or not asked keeps t in f32 for all. The plan stays as
 * the f32 form's otherwise: three nodes, same bindings, t of f32 size. */
START_TEST(test_stage_half)
{
    for (int c = 0; c < 4; c++) {
        loom_graph_destroy(G);
        ck_assert_int_eq(loom_graph_create(NULL, &G), LOOM_OK);
        uint32_t dim = 256;
        uint32_t w = buf((uint64_t)dim * dim * 2, LOOM_USAGE_WEIGHT), w32 = buf((uint64_t)dim * dim * 4, LOOM_USAGE_WEIGHT);
        uint32_t a = buf(dim * 4, LOOM_USAGE_INPUT), x = buf(dim * 4, LOOM_USAGE_STATE);
        uint32_t g = buf(dim * 4, LOOM_USAGE_WEIGHT), y = buf(dim * 8, LOOM_USAGE_OUTPUT);
        loom_tensor W = loom_mat(w, LOOM_F16, dim, dim), xv = loom_vec(x, dim), y2 = loom_vec(y, dim);
        y2.offset = dim * 4;
        loom_tensor Wp = c == 2 ? loom_mat(w32, LOOM_F32, dim, dim) : W;   /* case 2: the producer is f32 */
        ck_assert_int_eq(loom_op_matvec_add(G, Wp, loom_vec(a, dim), xv, xv, NULL), LOOM_OK);
        ck_assert_int_eq(loom_op_rms_norm_matvec(G, W, xv, loom_vec(g, dim), loom_vec(y, dim), 1e-5f, NULL), LOOM_OK);
        loom_tensor W2 = c == 1 ? loom_mat(w32, LOOM_F32, dim, dim) : W;   /* case 1: the second norm is f32 */
        ck_assert_int_eq(loom_op_rms_norm_matvec(G, W2, xv, loom_vec(g, dim), y2, 1e-5f, NULL), LOOM_OK);
        loom_pass_ctx ctx = { .enable = c == 3 ? 0 : LOOM_ENABLE_HALF_STAGE };
        ck_assert_int_eq(loom_pass_stage(G, &ctx), LOOM_OK);
        ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
        ck_assert_uint_eq(ctx.staged_gains, 2);
        ck_assert_uint_eq(loom_graph_node_count(G), 4);
        bool half = c == 0;
        ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, 1)->kernel),
                         half ? "matvec_add_stage_t16_f16" : c == 2 ? "matvec_add_stage_f32" : "matvec_add_stage_f16");
        ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, 2)->kernel),
                         half ? "rms_norm_matvec_pre_x16_f16" : "rms_norm_matvec_pre_f16");
        ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, 3)->kernel),
                         half ? "rms_norm_matvec_pre_x16_f16" : c == 1 ? "rms_norm_matvec_pre_f32" : "rms_norm_matvec_pre_f16");
        /* one t, of f32 size, written by the producer and read by both */
        uint32_t t = slot_of(1, 5)->buffer;
        ck_assert_uint_eq(loom_graph_buffer(G, t)->size, dim * 4);
        ck_assert_uint_eq(slot_of(2, 1)->buffer, t);
        ck_assert_uint_eq(slot_of(3, 1)->buffer, t);
        ck_assert_uint_eq(loom_graph_node(G, 1)->fused, 1);
        ck_assert_uint_eq(cap(1), 0);
    }
}
END_TEST

/* Quantized stage: a block-typed producer whose norms are all block-typed
 * stores t per 16 rows as int8 quads (MV_TQ) and they read it so (MV_PRE
 * MV_XQ), with their types mixed (Q4_K_M's q/k/v: Q4_K with a Q6_K Wv; a
 * Q6_K LM head). An f16 norm among them, an f16 producer, half stage asked
 * (the f16-t forms take the block types too) keeps the f32 t; t keeps its
 * f32 size. Case 4: Q8_0 throughout, 96 rows (6 quads; blocks of 34 bytes
 * on 2-byte boundaries). */
START_TEST(test_stage_quant)
{
    for (int c = 0; c < 5; c++) {
        loom_graph_destroy(G);
        ck_assert_int_eq(loom_graph_create(NULL, &G), LOOM_OK);
        uint32_t dim = c == 4 ? 96 : 256;   /* case 4: 6 quads, rows of 3 Q8_0 blocks */
        uint64_t qk = (uint64_t)dim * dim / 256 * 144, q6 = (uint64_t)dim * dim / 256 * 210, q8 = (uint64_t)dim * dim / 32 * 34;
        uint32_t wk = buf(qk, LOOM_USAGE_WEIGHT), w6 = buf(q6, LOOM_USAGE_WEIGHT), w16 = buf((uint64_t)dim * dim * 2, LOOM_USAGE_WEIGHT);
        uint32_t w8 = buf(q8, LOOM_USAGE_WEIGHT);
        uint32_t a = buf(dim * 4, LOOM_USAGE_INPUT), x = buf(dim * 4, LOOM_USAGE_STATE);
        uint32_t g = buf(dim * 4, LOOM_USAGE_WEIGHT), y = buf(dim * 4, LOOM_USAGE_OUTPUT), yb = buf(dim * 4, LOOM_USAGE_OUTPUT);
        loom_tensor xv = loom_vec(x, dim), y2 = loom_vec(yb, dim);
        loom_tensor Wp = c == 2 ? loom_mat(w16, LOOM_F16, dim, dim) : c == 4 ? loom_mat(w8, LOOM_Q8_0, dim, dim)
                                                                            : loom_mat(wk, LOOM_Q4_K, dim, dim);
        ck_assert_int_eq(loom_op_matvec_add(G, Wp, loom_vec(a, dim), xv, xv, NULL), LOOM_OK);
        loom_tensor W1 = c == 4 ? loom_mat(w8, LOOM_Q8_0, dim, dim) : loom_mat(wk, LOOM_Q4_K, dim, dim);
        ck_assert_int_eq(loom_op_rms_norm_matvec(G, W1, xv, loom_vec(g, dim), loom_vec(y, dim), 1e-5f, NULL), LOOM_OK);
        loom_tensor W2 = c == 1 ? loom_mat(w16, LOOM_F16, dim, dim) : c == 4 ? W1 : loom_mat(w6, LOOM_Q6_K, dim, dim);
        ck_assert_int_eq(loom_op_rms_norm_matvec(G, W2, xv, loom_vec(g, dim), y2, 1e-5f, NULL), LOOM_OK);
        loom_pass_ctx ctx = { .enable = c == 3 ? LOOM_ENABLE_HALF_STAGE : 0 };
        ck_assert_int_eq(loom_pass_stage(G, &ctx), LOOM_OK);
        ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
        ck_assert_uint_eq(ctx.staged_gains, 2);
        ck_assert_uint_eq(loom_graph_node_count(G), 4);
        static const char *const prod[] = { "matvec_add_stage_tq_q4_k", "matvec_add_stage_q4_k", "matvec_add_stage_f16",
                                            "matvec_add_stage_t16_q4_k", "matvec_add_stage_tq_q8_0" };
        static const char *const n1[] = { "rms_norm_matvec_pre_xq_q4_k", "rms_norm_matvec_pre_q4_k",
                                          "rms_norm_matvec_pre_q4_k", "rms_norm_matvec_pre_x16_q4_k",
                                          "rms_norm_matvec_pre_xq_q8_0" };
        static const char *const n2[] = { "rms_norm_matvec_pre_xq_q6_k", "rms_norm_matvec_pre_f16",
                                          "rms_norm_matvec_pre_q6_k", "rms_norm_matvec_pre_x16_q6_k",
                                          "rms_norm_matvec_pre_xq_q8_0" };
        ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, 1)->kernel), prod[c]);
        ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, 2)->kernel), n1[c]);
        ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, 3)->kernel), n2[c]);
        uint32_t t = slot_of(1, 5)->buffer;
        ck_assert_uint_eq(loom_graph_buffer(G, t)->size, dim * 4);
        ck_assert_uint_eq(slot_of(2, 1)->buffer, t);
        ck_assert_uint_eq(slot_of(3, 1)->buffer, t);
    }
}
END_TEST

/* Half activations (LOOM_ENABLE_HALF_ACT): the gated FFN's output, read by
 * the down projection alone, is written and read as f16 (both kernels
 * renamed, bindings and ranges kept). Not where a second node reads it, the
 * weights are f32, the host keeps it, or it was not asked for. */
START_TEST(test_stage_half_act)
{
    for (int c = 0; c < 5; c++) {
        loom_graph_destroy(G);
        ck_assert_int_eq(loom_graph_create(NULL, &G), LOOM_OK);
        uint32_t dim = 256, ffn = 512, ws = c == 2 ? 4 : 2;
        loom_dtype wt = c == 2 ? LOOM_F32 : LOOM_F16;
        uint32_t wg = buf((uint64_t)ffn * dim * ws * 2, LOOM_USAGE_WEIGHT), wd = buf((uint64_t)dim * ffn * ws, LOOM_USAGE_WEIGHT);
        uint32_t x = buf(dim * 4, LOOM_USAGE_STATE), g = buf(dim * 4, LOOM_USAGE_WEIGHT);
        uint32_t act = buf(ffn * 4, c == 3 ? LOOM_USAGE_OUTPUT : LOOM_USAGE_SCRATCH), y = buf(dim * 4, LOOM_USAGE_OUTPUT);
        loom_tensor Wg = loom_mat(wg, wt, ffn, dim), Wu = Wg;
        Wu.offset = (uint64_t)ffn * dim * ws;
        ck_assert_int_eq(loom_op_rms_norm_matvec_silu_mul(G, Wg, Wu, loom_vec(x, dim), loom_vec(g, dim),
                                                          loom_vec(act, ffn), 1e-5f, NULL),
                         LOOM_OK);
        ck_assert_int_eq(loom_op_matvec_add(G, loom_mat(wd, wt, dim, ffn), loom_vec(act, ffn), loom_vec(x, dim),
                                            loom_vec(y, dim), NULL),
                         LOOM_OK);
        if (c == 1) {   /* a second projection of the FFN's output, as one a pass could rename too */
            uint32_t o = buf(dim * 4, LOOM_USAGE_OUTPUT);
            ck_assert_int_eq(loom_op_matvec_add(G, loom_mat(wd, wt, dim, ffn), loom_vec(act, ffn), loom_vec(x, dim),
                                                loom_vec(o, dim), NULL),
                             LOOM_OK);
        }
        loom_pass_ctx ctx = { .enable = c == 4 ? LOOM_ENABLE_HALF_STAGE : LOOM_ENABLE_HALF_ACT };
        ck_assert_int_eq(loom_pass_stage(G, &ctx), LOOM_OK);
        ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
        bool half = c == 0;
        const char *fk = loom_graph_kernel_name(G, loom_graph_node(G, 0)->kernel);
        const char *dk = loom_graph_kernel_name(G, loom_graph_node(G, 1)->kernel);
        ck_assert_str_eq(fk, half ? "rms_norm_matvec_silu_mul_y16_f16"
                             : c == 2 ? "rms_norm_matvec_silu_mul_f32" : "rms_norm_matvec_silu_mul_f16");
        ck_assert_str_eq(dk, half ? "matvec_add_x16_f16" : c == 2 ? "matvec_add_f32" : "matvec_add_f16");
        ck_assert_uint_eq(slot_of(0, 4)->buffer, act);
        ck_assert_uint_eq(slot_of(1, 1)->buffer, act);
        ck_assert_uint_eq(cap(0), 0);
        ck_assert_uint_eq(cap(1), 1);
    }
}
END_TEST

/* Long rows (LOOM_ENABLE_LONG_ROWS): a staged producer with f16 weights
 * whose rows are 512 chunks or more (two per invocation) takes the
 * two-chunks-a-trip kernel, bindings and push constants kept. Not at 511
 * chunks, with f32 weights, with rows of a partial chunk (the scalar path),
 * or when not asked. */
START_TEST(test_stage_long_rows)
{
    static const struct { uint32_t cols; loom_dtype wt; uint32_t enable; const char *kernel; } cases[] = {
        { 4096, LOOM_F16, LOOM_ENABLE_LONG_ROWS, "matvec_add_stage_long_f16" },
        { 8192 + 256 * 8, LOOM_F16, LOOM_ENABLE_LONG_ROWS, "matvec_add_stage_long_f16" },
        { 4088, LOOM_F16, LOOM_ENABLE_LONG_ROWS, "matvec_add_stage_f16" },
        { 4096, LOOM_F32, LOOM_ENABLE_LONG_ROWS, "matvec_add_stage_f32" },
        { 4100, LOOM_F16, LOOM_ENABLE_LONG_ROWS, "matvec_add_stage_f16" },
        { 4096, LOOM_F16, 0, "matvec_add_stage_f16" },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        loom_graph_destroy(G);
        ck_assert_int_eq(loom_graph_create(NULL, &G), LOOM_OK);
        uint32_t dim = 256, cols = cases[c].cols;
        uint32_t wp = buf((uint64_t)dim * cols * 4, LOOM_USAGE_WEIGHT), w = buf((uint64_t)dim * dim * 2, LOOM_USAGE_WEIGHT);
        uint32_t a = buf(cols * 4, LOOM_USAGE_INPUT), x = buf(dim * 4, LOOM_USAGE_STATE);
        uint32_t g = buf(dim * 4, LOOM_USAGE_WEIGHT), y = buf(dim * 4, LOOM_USAGE_OUTPUT);
        loom_tensor xv = loom_vec(x, dim);
        ck_assert_int_eq(loom_op_matvec_add(G, loom_mat(wp, cases[c].wt, dim, cols), loom_vec(a, cols), xv, xv, NULL),
                         LOOM_OK);
        ck_assert_int_eq(loom_op_rms_norm_matvec(G, loom_mat(w, LOOM_F16, dim, dim), xv, loom_vec(g, dim),
                                                 loom_vec(y, dim), 1e-5f, NULL),
                         LOOM_OK);
        loom_pass_ctx ctx = { .enable = cases[c].enable };
        ck_assert_int_eq(loom_pass_stage(G, &ctx), LOOM_OK);
        ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
        ck_assert_uint_eq(ctx.staged_gains, 1);
        ck_assert_uint_eq(loom_graph_node_count(G), 3);
        const loom_node *p = loom_graph_node(G, 1);
        ck_assert_uint_eq(p->op, LOOM_OP_MATVEC_ADD_STAGE);
        ck_assert_msg(!strcmp(loom_graph_kernel_name(G, p->kernel), cases[c].kernel), "case %zu: %s, not %s", c,
                      loom_graph_kernel_name(G, p->kernel), cases[c].kernel);
        loom_pc_matvec pc;
        memcpy(&pc, loom_node_push(G, p), sizeof pc);
        ck_assert_uint_eq(pc.rows, dim);
        ck_assert_uint_eq(pc.cols, cols);
        ck_assert_uint_eq(slot_of(1, 0)->buffer, wp);
        ck_assert_uint_eq(slot_of(1, 1)->buffer, a);
        ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, 2)->kernel), "rms_norm_matvec_pre_f16");
    }
}
END_TEST

/* ---- gather --------------------------------------------------------------- */

/* An attention block as a frontend captures it: ATTENTION into a scratch
 * vector att, then the o-projection adding into the residual x (usage of
 * att and the projection's form per case). Returns att's buffer id. */
static loom_dtype gather_kv = LOOM_F32;   /* the caches' dtype gather_block declares */

static uint32_t gather_block(uint32_t head_dim, uint32_t max_seq, loom_usage att_usage, bool plain)
{
    uint32_t nh = 8, nkv = 2, qd = nh * head_dim, kvd = nkv * head_dim, dim = 256, es = loom_dtype_size(gather_kv);
    uint32_t q = buf(qd * 4ull, LOOM_USAGE_SCRATCH), kc = buf((uint64_t)max_seq * kvd * es, LOOM_USAGE_KV_CACHE);
    uint32_t vc = buf((uint64_t)max_seq * kvd * es, LOOM_USAGE_KV_CACHE), att = buf(qd * 4ull, att_usage);
    uint32_t w = buf((uint64_t)dim * qd * 2, LOOM_USAGE_WEIGHT), x = buf(dim * 4ull, LOOM_USAGE_STATE);
    ck_assert_int_eq(loom_op_attention(G, loom_vec(q, qd), loom_mat(kc, gather_kv, max_seq, kvd),
                                       loom_mat(vc, gather_kv, max_seq, kvd), loom_vec(att, qd), nh, nkv, head_dim,
                                       NULL),
                     LOOM_OK);
    loom_tensor W = loom_mat(w, LOOM_F16, dim, qd), xv = loom_vec(x, dim);
    if (plain)
        ck_assert_int_eq(loom_op_matvec(G, W, loom_vec(att, qd), xv, NULL), LOOM_OK);
    else
        ck_assert_int_eq(loom_op_matvec_add(G, W, loom_vec(att, qd), xv, xv, NULL), LOOM_OK);
    return att;
}

static uint32_t run_gather(void)
{
    loom_pass_ctx ctx = { 0 };
    ck_assert_int_eq(loom_pass_gather(G, &ctx), LOOM_OK);
    ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
    return ctx.gathered;
}

START_TEST(test_gather_block)
{
    /* 2048 rows: four shares of 512 */
    uint32_t att = gather_block(64, 2048, LOOM_USAGE_SCRATCH, false);
    ck_assert_uint_eq(run_gather(), 1);
    ck_assert_uint_eq(loom_graph_node_count(G), 2);
    const loom_node *a = loom_graph_node(G, 0), *c = loom_graph_node(G, 1);
    ck_assert_uint_eq(a->op, LOOM_OP_ATTENTION);
    ck_assert_str_eq(loom_graph_kernel_name(G, a->kernel), "attention_part");
    /* params q kcache vcache part: no output, no counter; writes only part */
    ck_assert_uint_eq(a->n_bindings, 5);
    const loom_binding *ab = loom_node_bindings(G, a);
    for (uint32_t i = 0; i < a->n_bindings; i++)
        ck_assert(ab[i].slot != 4 && ab[i].slot != 6);
    uint32_t part = slot_of(0, 5)->buffer;
    const loom_range *w = loom_node_writes(G, a);
    ck_assert_uint_eq(a->n_writes, 1);
    ck_assert_uint_eq(w[0].buffer, part);
    /* the projection: the combining kernel, x bound to the shares, read whole */
    ck_assert_uint_eq(c->op, LOOM_OP_MATVEC_ADD);
    ck_assert_str_eq(loom_graph_kernel_name(G, c->kernel), "matvec_add_comb_f16");
    ck_assert_uint_eq(slot_of(1, 1)->buffer, part);
    ck_assert_uint_eq(slot_of(1, 1)->size, slot_of(0, 5)->size);
    ck_assert(slot_of(1, 1)->access == LOOM_ACCESS_READ);
    const loom_range *r = loom_node_reads(G, c);
    bool reads_part = false;
    for (uint32_t i = 0; i < c->n_reads; i++) {
        ck_assert(r[i].buffer != att);
        reads_part |= r[i].buffer == part;
    }
    ck_assert(reads_part);
    /* push: rows, cols, head_dim, shares */
    ck_assert_uint_eq(c->push_size, 16);
    uint32_t pc[4];
    memcpy(pc, loom_node_push(G, c), sizeof pc);
    ck_assert_uint_eq(pc[0], 256);
    ck_assert_uint_eq(pc[1], 8 * 64);
    ck_assert_uint_eq(pc[2], 64);
    ck_assert_uint_eq(pc[3], 4);
    ck_assert_uint_eq(cap(0), 0);
    ck_assert_uint_eq(cap(1), 1);
}
END_TEST

/* Half shares (LOOM_ENABLE_HALF_SHARES): the f16 projection gets the f16
 * shares' kernels, bound as the f32 form is; an f32 projection keeps the
 * f32 shares whatever is asked; not asked, nothing changes. */
START_TEST(test_gather_half_shares)
{
    for (int c = 0; c < 3; c++) {
        loom_graph_destroy(G);
        ck_assert_int_eq(loom_graph_create(NULL, &G), LOOM_OK);
        uint32_t nh = 8, hd = 64, qd = nh * hd, dim = 256, rows = 1024;
        uint32_t q = buf(qd * 4ull, LOOM_USAGE_SCRATCH), kc = buf((uint64_t)rows * 2 * hd * 4, LOOM_USAGE_KV_CACHE);
        uint32_t vc = buf((uint64_t)rows * 2 * hd * 4, LOOM_USAGE_KV_CACHE), att = buf(qd * 4ull, LOOM_USAGE_SCRATCH);
        loom_dtype wt = c == 1 ? LOOM_F32 : LOOM_F16;
        uint32_t w = buf((uint64_t)dim * qd * (wt == LOOM_F16 ? 2 : 4), LOOM_USAGE_WEIGHT);
        uint32_t x = buf(dim * 4ull, LOOM_USAGE_STATE);
        ck_assert_int_eq(loom_op_attention(G, loom_vec(q, qd), loom_mat(kc, LOOM_F32, rows, 2 * hd),
                                           loom_mat(vc, LOOM_F32, rows, 2 * hd), loom_vec(att, qd), nh, 2, hd, NULL),
                         LOOM_OK);
        ck_assert_int_eq(loom_op_matvec_add(G, loom_mat(w, wt, dim, qd), loom_vec(att, qd), loom_vec(x, dim),
                                            loom_vec(x, dim), NULL),
                         LOOM_OK);
        loom_pass_ctx ctx = { .enable = c == 2 ? 0 : LOOM_ENABLE_HALF_SHARES };
        ck_assert_int_eq(loom_pass_gather(G, &ctx), LOOM_OK);
        ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
        ck_assert_uint_eq(ctx.gathered, 1);
        const loom_node *a = loom_graph_node(G, 0), *m = loom_graph_node(G, 1);
        static const char *const att_k[] = { "attention_part_h", "attention_part", "attention_part" };
        static const char *const mv_k[] = { "matvec_add_comb_h_f16", "matvec_add_comb_f32", "matvec_add_comb_f16" };
        ck_assert_str_eq(loom_graph_kernel_name(G, a->kernel), att_k[c]);
        ck_assert_str_eq(loom_graph_kernel_name(G, m->kernel), mv_k[c]);
        ck_assert_uint_eq(slot_of(1, 1)->buffer, slot_of(0, 5)->buffer);
        ck_assert_uint_eq(slot_of(1, 1)->size, slot_of(0, 5)->size);
    }
}
END_TEST

/* Over f16 caches the gathered attention runs the f16-cache forms of its
 * share-storing kernels (plain and half shares); the wide kernel's f16
 * output form under half activations likewise. The projection's kernels
 * are the f32-cache plan's: the shares are the same whatever the caches. */
START_TEST(test_gather_f16_caches)
{
    gather_kv = LOOM_F16;
    for (int c = 0; c < 3; c++) {
        loom_graph_destroy(G);
        ck_assert_int_eq(loom_graph_create(NULL, &G), LOOM_OK);
        gather_block(c == 2 ? 128 : 64, c == 2 ? 512 : 2048, LOOM_USAGE_SCRATCH, false);
        ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, 0)->kernel),
                         c == 2 ? "attention_wide_kh" : "attention_kh");
        loom_pass_ctx ctx = { .enable = c == 1 ? LOOM_ENABLE_HALF_SHARES : c == 2 ? LOOM_ENABLE_HALF_ACT : 0 };
        ck_assert_int_eq(c == 2 ? loom_pass_stage(G, &ctx) : loom_pass_gather(G, &ctx), LOOM_OK);
        ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
        static const char *const att_k[] = { "attention_part_kh", "attention_part_h_kh", "attention_wide_o16_kh" };
        static const char *const mv_k[] = { "matvec_add_comb_f16", "matvec_add_comb_h_f16", "matvec_add_x16_f16" };
        ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, 0)->kernel), att_k[c]);
        ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, 1)->kernel), mv_k[c]);
    }
    gather_kv = LOOM_F32;
}
END_TEST

/* Half activations on an attention block: the wide kernel's output goes to
 * f16 for its projection; the narrow kernel's is left for gather. */
START_TEST(test_half_act_attention)
{
    for (int wide = 0; wide < 2; wide++) {
        loom_graph_destroy(G);
        ck_assert_int_eq(loom_graph_create(NULL, &G), LOOM_OK);
        uint32_t att = gather_block(wide ? 128 : 64, 512, LOOM_USAGE_SCRATCH, false);
        loom_pass_ctx ctx = { .enable = LOOM_ENABLE_HALF_ACT };
        ck_assert_int_eq(loom_pass_stage(G, &ctx), LOOM_OK);
        ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
        ck_assert_uint_eq(loom_graph_node_count(G), 2);
        ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, 0)->kernel),
                         wide ? "attention_wide_o16" : "attention");
        ck_assert_str_eq(loom_graph_kernel_name(G, loom_graph_node(G, 1)->kernel),
                         wide ? "matvec_add_x16_f16" : "matvec_add_f16");
        ck_assert_uint_eq(slot_of(0, 4)->buffer, att);
        ck_assert_uint_eq(slot_of(1, 1)->buffer, att);
    }
}
END_TEST

/* After the half stage the projection is the f16-t form; gather keeps that
 * in the combining kernel it binds, with and without half shares. */
START_TEST(test_gather_after_half_stage)
{
    for (int half = 0; half < 2; half++) {
        loom_graph_destroy(G);
        ck_assert_int_eq(loom_graph_create(NULL, &G), LOOM_OK);
        uint32_t att = gather_block(64, 1024, LOOM_USAGE_SCRATCH, false);
        (void)att;
        uint32_t dim = 256, x = 5;   /* gather_block's residual: its sixth buffer */
        uint32_t w = buf((uint64_t)dim * dim * 2, LOOM_USAGE_WEIGHT), g = buf(dim * 4, LOOM_USAGE_WEIGHT);
        uint32_t y = buf(dim * 4, LOOM_USAGE_OUTPUT);
        ck_assert_uint_eq(loom_graph_buffer(G, x)->size, dim * 4);
        ck_assert_int_eq(loom_op_rms_norm_matvec(G, loom_mat(w, LOOM_F16, dim, dim), loom_vec(x, dim),
                                                 loom_vec(g, dim), loom_vec(y, dim), 1e-5f, NULL),
                         LOOM_OK);
        loom_pass_ctx ctx = { .enable = LOOM_ENABLE_HALF_STAGE | (half ? LOOM_ENABLE_HALF_SHARES : 0) };
        ck_assert_int_eq(loom_pass_stage(G, &ctx), LOOM_OK);
        ck_assert_int_eq(loom_pass_gather(G, &ctx), LOOM_OK);
        ck_assert_int_eq(loom_graph_verify(G), LOOM_OK);
        ck_assert_uint_eq(ctx.staged_gains, 1);
        ck_assert_uint_eq(ctx.gathered, 1);
        bool seen = false;
        for (uint32_t i = 0; i < loom_graph_node_count(G); i++) {
            const loom_node *nd = loom_graph_node(G, i);
            if (nd->op == LOOM_OP_MATVEC_ADD_STAGE) {
                ck_assert_str_eq(loom_graph_kernel_name(G, nd->kernel),
                                 half ? "matvec_add_stage_comb_h_t16_f16" : "matvec_add_stage_comb_t16_f16");
                seen = true;
            }
        }
        ck_assert(seen);
    }
}
END_TEST

/* What gather must leave alone: one share (512 rows), eight shares (4096),
 * the wide kernel (head_dim 128), head_dim 12 (a chunk across two heads),
 * an output the host reads, a plain MATVEC consumer, a second projection,
 * a reader before the ATTENTION. */
START_TEST(test_gather_illegal)
{
    for (int c = 0; c < 8; c++) {
        loom_graph_destroy(G);
        ck_assert_int_eq(loom_graph_create(NULL, &G), LOOM_OK);
        static const uint32_t hd[] = { 64, 64, 128, 12, 64, 64, 64, 64 };
        static const uint32_t rows[] = { 512, 4096, 32, 1024, 1024, 1024, 1024, 1024 };
        uint32_t att = gather_block(hd[c], rows[c], c == 4 ? LOOM_USAGE_OUTPUT : LOOM_USAGE_SCRATCH, c == 5);
        if (c == 7) {   /* a copy of att before the ATTENTION: it reads the step before's output */
            uint32_t y = buf(8 * 64 * 4, LOOM_USAGE_OUTPUT);
            ck_assert_int_eq(loom_op_copy(G, loom_vec(att, 8 * 64), loom_vec(y, 8 * 64), NULL), LOOM_OK);
            ck_assert_int_eq(loom_graph_permute(G, (uint32_t[]){ 2, 0, 1 }, 3), LOOM_OK);
        }
        if (c == 6) {   /* a second projection of att: each would need the shares */
            uint32_t w2 = buf(64ull * 8 * 64 * 2, LOOM_USAGE_WEIGHT), y = buf(64 * 4, LOOM_USAGE_STATE);
            ck_assert_int_eq(loom_op_matvec_add(G, loom_mat(w2, LOOM_F16, 64, 8 * 64), loom_vec(att, 8 * 64),
                                                loom_vec(y, 64), loom_vec(y, 64), NULL),
                             LOOM_OK);
        }
        uint32_t n = loom_graph_node_count(G);
        ck_assert_msg(run_gather() == 0, "case %d", c);
        ck_assert_uint_eq(loom_graph_node_count(G), n);
        const loom_node *a = loom_graph_node(G, c == 7 ? 1 : 0);
        ck_assert_uint_eq(a->op, LOOM_OP_ATTENTION);
        ck_assert_str_eq(loom_graph_kernel_name(G, a->kernel), hd[c] > 64 ? "attention_wide" : "attention");
    }
}
END_TEST

static Suite *passes_suite(void)
{
    Suite *s = suite_create("passes");
    struct { const char *name; const TTest *t[13]; } cases[] = {
        { "manager", { test_pipeline_parse, test_pipeline_report_skip, test_pipeline_verify_fails, test_pipeline_dump,
                       test_pass_table_drives_all } },
        { "reorder_barriers", { test_reorder_groups, test_no_hazards_no_barriers, test_barrier_reasons,
                                test_sentinel_and_nonreorderable, test_window_limit, test_serial_schedule, test_window_edges } },
        { "lifetimes", { test_classes, test_contradicting_hints, test_packing_epochs, test_untouched_scratch, test_scratch_coverage_is_a_set,
                         test_arena_overflow_rejected, test_shared_external_rejected } },
        { "fuse", { test_fuse_rms_norm_mul, test_fuse_rms_norm_mul_illegal, test_fuse_shape_mismatch,
                    test_fuse_add_rms_norm_mul, test_fuse_add_rms_norm, test_fuse_matvec_silu_mul,
                    test_fuse_matvec_add, test_fuse_argmax_log, test_fuse_qkv_f16_caches,
                    test_fuse_qkv_rows } },
        { "fuse_legality", { test_fuse_consumer_reads_intermediate_twice, test_fuse_rw_binding_is_a_reader,
                             test_fuse_never_crosses_fence, test_fuse_input_written_by_chain } },
        { "stage", { test_stage_block, test_stage_illegal, test_stage_two_readers, test_stage_half, test_stage_half_act, test_stage_long_rows,
                     test_stage_quant } },
        { "gather", { test_gather_block, test_gather_half_shares, test_gather_after_half_stage, test_half_act_attention, test_gather_illegal,
                      test_gather_f16_caches } },
        { "split", { test_split_nothing_to_do, test_split_wave_cap, test_split_matvec_forms, test_split_embed, test_split_refused,
                     test_split_fuse_guard, test_split_embed_qkv_guard, test_split_json_round_trip, test_split_coopmat, test_split_coopmat_large,
                     test_split_coopmat_attention, test_split_coopmat_half_pair, test_split_coopmat_half_attention } },
        { "split_k", { test_split_coopmat_split_k, test_split_coopmat_siblings, test_split_coopmat_narrow } },
        { "waves", { test_waves_wg256 } },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_checked_fixture(tc, setup, teardown);
        for (size_t k = 0; k < sizeof cases[i].t / sizeof cases[i].t[0] && cases[i].t[k]; k++)
            tcase_add_test(tc, cases[i].t[k]);
        suite_add_tcase(s, tc);
    }
    return s;
}

void loom_test_register(loom_test_runner *r, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    loom_test_add_suite(r, passes_suite());
}
