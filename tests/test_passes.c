/* Unit tests of the passes on small hand-made graphs: the manager, reorder
 * groups, barrier placement and reasons, buffer classes and packing, and the
 * legality of every fusion rule. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
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
    ck_assert_uint_eq(rep.n_passes, 4);
    ck_assert_str_eq(rep.names[1], "reorder");
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

static Suite *passes_suite(void)
{
    Suite *s = suite_create("passes");
    struct { const char *name; const TTest *t[8]; } cases[] = {
        { "manager", { test_pipeline_parse, test_pipeline_report_skip, test_pipeline_verify_fails, test_pipeline_dump,
                       test_pass_table_drives_all } },
        { "reorder_barriers", { test_reorder_groups, test_no_hazards_no_barriers, test_barrier_reasons,
                                test_sentinel_and_nonreorderable, test_window_limit, test_serial_schedule, test_window_edges } },
        { "lifetimes", { test_classes, test_contradicting_hints, test_packing_epochs, test_scratch_coverage_is_a_set,
                         test_arena_overflow_rejected, test_shared_external_rejected } },
        { "fuse", { test_fuse_rms_norm_mul, test_fuse_rms_norm_mul_illegal, test_fuse_shape_mismatch,
                    test_fuse_add_rms_norm_mul, test_fuse_add_rms_norm, test_fuse_matvec_silu_mul,
                    test_fuse_matvec_add } },
        { "fuse_legality", { test_fuse_consumer_reads_intermediate_twice, test_fuse_rw_binding_is_a_reader,
                             test_fuse_never_crosses_fence, test_fuse_input_written_by_chain } },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_checked_fixture(tc, setup, teardown);
        for (int k = 0; k < 8 && cases[i].t[k]; k++)
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
