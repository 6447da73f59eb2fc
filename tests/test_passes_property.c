/* Property test: thousands of seeded random graphs (overlapping and disjoint
 * ranges, every op kind including non-reorderable ones, sentinels, random
 * windows) compiled under every switch combination. The checks are written
 * independently of the passes, with their own overlap test:
 * - the plan is a permutation of the captured nodes;
 * - every conflicting pair keeps its order with a barrier between them;
 * - conflicting nodes never share a group; barriers are never fewer than
 *   the longest dependency path under the window and fence rules (brute
 *   force), and with reorder and barriers on exactly that many, which is
 *   also the lower bound loom reports;
 * - scratch buffers that share arena bytes are never live in one epoch, and
 *   the arena is at least the lower bound.
 *
 * A second generator ("checker") builds the graph shapes an independent
 * random-graph checker found bugs in — a MATVEC_ADD feeding an
 * RMS_NORM_MATVEC (staged), an LM head RMS_NORM -> MUL -> MATVEC -> ARGMAX
 * (fused in two rounds), a MATVEC -> ARGMAX whose x the fused builder
 * refuses, a captured MATVEC_ADD with y = x or y = r — and checks that every
 * pipeline gives the same verdict (and refuses y = x in the verifier), that
 * a plan's JSON reads back, and that no buffer a pass declared is left
 * unused. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "loom_compiler.h"
#include "loom_ops.h"
#include "loom_passes.h"
#include "runner.h"

typedef struct rng { uint64_t s; } rng;
static uint32_t rnd(rng *r, uint32_t n)
{
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)((r->s >> 33) % n);
}

#define MAXN 48

typedef struct acc { uint32_t buf; uint64_t lo, hi; bool write; } acc;
typedef struct cap_node { bool sentinel, movable; acc a[6]; int na; } cap_node;

static bool touch(const cap_node *x, const cap_node *y)
{
    if (x->sentinel || y->sentinel)
        return true;
    for (int i = 0; i < x->na; i++)
        for (int j = 0; j < y->na; j++) {
            const acc *p = &x->a[i], *q = &y->a[j];
            if (p->buf == q->buf && (p->write || q->write) && p->lo < q->hi && q->lo < p->hi)
                return true;
        }
    return false;
}

static loom_graph *random_graph(rng *r, cap_node *cn, uint32_t *n_out)
{
    loom_graph *g;
    ck_assert_int_eq(loom_graph_create(NULL, &g), LOOM_OK);
    uint32_t nb = 1 + rnd(r, 5), n = 1 + rnd(r, MAXN);
    for (uint32_t b = 0; b < nb; b++)
        ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = 64 + 64 * rnd(r, 4) }, NULL), LOOM_OK);
    for (uint32_t i = 0; i < n; i++) {
        cap_node *c = &cn[i];
        memset(c, 0, sizeof *c);
        if (rnd(r, 12) == 0) {
            c->sentinel = true;
            ck_assert_int_eq(loom_graph_add_barrier(g, NULL), LOOM_OK);
            continue;
        }
        loom_range rd[3], wr[3];
        uint32_t nr = rnd(r, 4), nw = 1 + rnd(r, 2);
        for (uint32_t k = 0; k < nr + nw; k++) {
            uint32_t b = rnd(r, nb);
            uint64_t size = loom_graph_buffer(g, b)->size;
            uint64_t lo = 8 * rnd(r, (uint32_t)(size / 8)), len = 8 + 8 * rnd(r, (uint32_t)((size - lo) / 8));
            loom_range x = { b, 0, lo, len };
            if (k < nr)
                rd[k] = x;
            else
                wr[k - nr] = x;
            c->a[c->na++] = (acc){ b, lo, lo + len, k >= nr };
        }
        loom_op op = (loom_op)rnd(r, LOOM_OP_COUNT);
        c->movable = loom_op_reorderable(op);
        loom_dispatch_desc d = { .kernel = "k", .op = op, .groups = { 1, 1, 1 }, .reads = rd, .n_reads = nr,
                                 .writes = wr, .n_writes = nw };
        ck_assert_int_eq(loom_graph_add_dispatch(g, &d, NULL), LOOM_OK);
    }
    *n_out = n;
    return g;
}

/* The fewest barriers any plan can have that keeps the window and fence
 * rules, by brute force: epochs in capture order, each node in the lowest
 * epoch that is no earlier than every node of the earlier windows (plan
 * order runs window by window) and later than every node it touches; a
 * sentinel after a dispatch closes the epoch; a non-reorderable node is a
 * window of its own. The answer is the last epoch's number. */
static uint32_t barrier_bound(const cap_node *cn, uint32_t n, uint32_t window)
{
    uint32_t e[MAXN], maxe = 0;
    bool ran = false;
    for (uint32_t i = 0; i < n;) {
        if (cn[i].sentinel) {
            maxe += ran;
            ran = false;
            e[i++] = maxe;
            continue;
        }
        uint32_t hi = i + 1, floor = maxe;
        if (cn[i].movable)
            while (hi < n && hi - i < window && !cn[hi].sentinel && cn[hi].movable)
                hi++;
        for (uint32_t v = i; v < hi; v++) {
            e[v] = floor;
            for (uint32_t u = 0; u < v; u++)
                if (!cn[u].sentinel && touch(&cn[u], &cn[v]) && e[u] + 1 > e[v])
                    e[v] = e[u] + 1;
            maxe = e[v] > maxe ? e[v] : maxe;
        }
        ran = true;
        i = hi;
    }
    return maxe;
}

static void check_plan(const loom_plan *p, const cap_node *cn, uint32_t n, uint32_t window, bool reorder)
{
    const loom_graph *pg = loom_plan_graph(p);
    ck_assert_uint_eq(loom_graph_node_count(pg), n);
    uint32_t pos[MAXN], epoch[MAXN], e = 0;
    bool seen[MAXN] = { false };
    for (uint32_t i = 0; i < n; i++) {
        const loom_node *nd = loom_graph_node(pg, i);
        ck_assert_uint_lt(nd->capture_index, n);
        ck_assert(!seen[nd->capture_index]);
        seen[nd->capture_index] = true;
        pos[nd->capture_index] = i;
        e += nd->barrier != LOOM_NONE;
        epoch[i] = e;
    }
    ck_assert(loom_graph_scheduled(pg));
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = i + 1; j < n; j++)
            if (touch(&cn[i], &cn[j])) {
                ck_assert_uint_lt(pos[i], pos[j]);
                /* A sentinel orders what runs before it against what runs
                 * after; it needs no barrier of its own at either end. */
                if (!cn[i].sentinel && !cn[j].sentinel)
                    ck_assert_uint_lt(epoch[pos[i]], epoch[pos[j]]);
                ck_assert_uint_ne(loom_graph_node(pg, pos[i])->group, loom_graph_node(pg, pos[j])->group);
            }
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t i = 0; cn[s].sentinel && i < s; i++)
            for (uint32_t j = s + 1; j < n; j++)
                if (!cn[i].sentinel && !cn[j].sentinel)
                    ck_assert_uint_lt(epoch[pos[i]], epoch[pos[j]]);
    /* Barriers: never below the bound; with reorder and barriers on, exactly
     * the bound, and loom reports the same figure. */
    const loom_plan_stats *st = loom_plan_get_stats(p);
    uint32_t bound = barrier_bound(cn, n, window);
    ck_assert_uint_ge(st->barriers, bound);
    if (reorder) {
        ck_assert_uint_eq(st->barriers, bound);
        ck_assert_uint_eq(st->barrier_lower_bound, bound);
    }
    /* Scratch packing: overlapping arena bytes imply disjoint epoch spans. */
    ck_assert_uint_ge(st->barriers, st->barrier_lower_bound);
    ck_assert_uint_ge(st->arena_bytes, st->arena_lower_bound);
    uint32_t nb = loom_graph_buffer_count(pg);
    uint32_t first[8], last[8];
    for (uint32_t b = 0; b < nb; b++)
        first[b] = UINT32_MAX, last[b] = 0;
    for (uint32_t i = 0; i < n; i++) {
        const loom_node *nd = loom_graph_node(pg, i);
        const loom_range *r = loom_node_reads(pg, nd);
        for (uint32_t k = 0; k < (uint32_t)nd->n_reads + nd->n_writes; k++) {
            uint32_t b = r[k].buffer;
            first[b] = epoch[i] < first[b] ? epoch[i] : first[b];
            last[b] = epoch[i] > last[b] ? epoch[i] : last[b];
        }
    }
    for (uint32_t a = 0; a < nb; a++)
        for (uint32_t b = a + 1; b < nb; b++) {
            const loom_buffer *x = loom_graph_buffer(pg, a), *y = loom_graph_buffer(pg, b);
            if (x->cls != LOOM_CLASS_SCRATCH || y->cls != LOOM_CLASS_SCRATCH)
                continue;
            ck_assert_uint_le(x->arena_offset + x->size, st->arena_bytes);
            ck_assert_uint_eq(x->arena_offset % 256, 0);
            bool share = x->arena_offset < y->arena_offset + y->size && y->arena_offset < x->arena_offset + x->size;
            if (share)
                ck_assert(last[a] < first[b] || last[b] < first[a]);
        }
}

START_TEST(test_random_graphs)
{
    static const uint32_t modes[] = { 0, LOOM_DISABLE_FUSE, LOOM_DISABLE_REORDER, LOOM_DISABLE_BARRIERS,
                                      LOOM_DISABLE_REORDER | LOOM_DISABLE_BARRIERS, LOOM_DISABLE_LIFETIMES };
    rng r = { 12345 + (uint64_t)_i };
    cap_node cn[MAXN];
    for (int it = 0; it < 250; it++) {
        uint32_t n;
        loom_graph *g = random_graph(&r, cn, &n);
        uint32_t window = 1 + rnd(&r, 16);
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            loom_plan *p;
            loom_compile_options o = { .window = window, .disable = modes[m], .verify_each = true, .dump_dir = "" };
            ck_assert_int_eq(loom_compile(g, &o, &p), LOOM_OK);
            check_plan(p, cn, n, window, !(modes[m] & (LOOM_DISABLE_REORDER | LOOM_DISABLE_BARRIERS)));
            loom_plan_release(p);
        }
        loom_graph_destroy(g);
    }
}
END_TEST

/* ---- the checker's shapes ------------------------------------------------ */

#define CN 64u   /* floats a vector: one 256-byte binding unit */

typedef struct shapes {
    rng r;
    loom_graph *g;
    uint32_t last;       /* a vector buffer the previous shape wrote, or LOOM_NONE */
    bool bad;            /* a MATVEC_ADD with y = x: every pipeline must refuse */
} shapes;

static uint32_t sbuf(shapes *S, uint64_t size, loom_usage u)
{
    uint32_t id;
    ck_assert_int_eq(loom_graph_add_buffer(S->g, &(loom_buffer_desc){ .size = size, .usage = u }, &id), LOOM_OK);
    return id;
}

static uint32_t svec(shapes *S, loom_usage u) { return sbuf(S, CN * 4 + 256, u); }

/* An input vector: the previous shape's output half the time. */
static uint32_t sin_vec(shapes *S)
{
    return S->last != LOOM_NONE && rnd(&S->r, 2) ? S->last : svec(S, LOOM_USAGE_INPUT);
}

static loom_tensor sweight(shapes *S)
{
    loom_dtype dt = rnd(&S->r, 2) ? LOOM_F16 : LOOM_F32;
    return loom_mat(sbuf(S, (uint64_t)CN * CN * loom_dtype_size(dt), LOOM_USAGE_WEIGHT), dt, CN, CN);
}

static const loom_usage mid_usage[] = { LOOM_USAGE_NONE, LOOM_USAGE_NONE, LOOM_USAGE_SCRATCH, LOOM_USAGE_OUTPUT };

/* A raw dispatch of op's built-in f32 or f16 kernel, bound slot by slot. */
static void raw(shapes *S, loom_op op, const loom_tensor *W, const loom_binding *v, uint32_t nv)
{
    loom_binding b[LOOM_MAX_BINDINGS];
    b[0] = (loom_binding){ .buffer = W->buffer, .slot = 0, .offset = 0,
                           .size = loom_view_bytes((loom_dtype)W->dtype, W->rows, W->cols), .access = LOOM_ACCESS_READ };
    for (uint32_t i = 0; i < nv; i++) {
        b[i + 1] = v[i];
        b[i + 1].slot = i + 1;
    }
    loom_pc_matvec pc = { W->rows, W->cols };
    loom_dispatch_desc d = { .kernel = loom_op_info_get(op)->kernel[W->dtype == LOOM_F16], .op = op,
                             .groups = { W->rows / 2, 1, 1 }, .bindings = b, .n_bindings = nv + 1, .push = &pc,
                             .push_size = sizeof pc };
    ck_assert_int_eq(loom_graph_add_dispatch(S->g, &d, NULL), LOOM_OK);
}

static loom_binding bview(uint32_t buffer, uint64_t offset, uint32_t access)
{
    return (loom_binding){ .buffer = buffer, .offset = offset, .size = CN * 4, .access = access };
}

/* MATVEC_ADD(W, x, r -> h), then one or two RMS_NORM_MATVECs of h (the
 * stage pass's producer and norms); h = r in place at times. */
static void shape_stage(shapes *S)
{
    bool inplace = rnd(&S->r, 3) == 0;
    uint32_t x = sin_vec(S), r = svec(S, inplace ? LOOM_USAGE_STATE : LOOM_USAGE_INPUT), g = svec(S, LOOM_USAGE_WEIGHT);
    uint32_t h = inplace ? r : svec(S, mid_usage[rnd(&S->r, 4)]);
    ck_assert_int_eq(loom_op_matvec_add(S->g, sweight(S), loom_vec(x, CN), loom_vec(r, CN), loom_vec(h, CN), NULL),
                     LOOM_OK);
    for (uint32_t k = 1 + rnd(&S->r, 2); k-- > 0;) {
        uint32_t y = svec(S, LOOM_USAGE_OUTPUT);
        if (rnd(&S->r, 3) == 0)
            g = svec(S, LOOM_USAGE_WEIGHT);
        ck_assert_int_eq(loom_op_rms_norm_matvec(S->g, sweight(S), loom_vec(h, CN), loom_vec(g, CN), loom_vec(y, CN),
                                                 1e-5f, NULL), LOOM_OK);
        S->last = y;
    }
}

/* RMS_NORM -> MUL -> MATVEC -> ARGMAX (an LM head), now and then with
 * another reader of an intermediate, which stops a fusion. */
static void shape_head(shapes *S)
{
    uint32_t x = sin_vec(S), t = svec(S, mid_usage[rnd(&S->r, 3)]), w = svec(S, LOOM_USAGE_WEIGHT);
    uint32_t u = svec(S, mid_usage[rnd(&S->r, 3)]), y = svec(S, LOOM_USAGE_OUTPUT), tok = sbuf(S, 1024, LOOM_USAGE_OUTPUT);
    ck_assert_int_eq(loom_op_rms_norm(S->g, loom_vec(x, CN), loom_vec(t, CN), 1e-5f, NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_mul(S->g, loom_vec(t, CN), loom_vec(w, CN), loom_vec(u, CN), NULL), LOOM_OK);
    if (rnd(&S->r, 4) == 0)
        ck_assert_int_eq(loom_op_copy(S->g, loom_vec(rnd(&S->r, 2) ? t : u, CN), loom_vec(svec(S, LOOM_USAGE_OUTPUT), CN),
                                      NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_matvec(S->g, sweight(S), loom_vec(u, CN), loom_vec(y, CN), NULL), LOOM_OK);
    ck_assert_int_eq(loom_op_argmax(S->g, loom_vec(y, CN), (loom_tensor){ tok, LOOM_U32, 256u * rnd(&S->r, 4), 1, 1 },
                                    NULL), LOOM_OK);
    S->last = y;
}

/* A raw MATVEC whose x sits at a byte offset of 0, 64, 128 or 192, then an
 * ARGMAX of y: MATVEC_ARGMAX's builder refuses all but 0. */
static void shape_offset_x(shapes *S)
{
    loom_tensor W = sweight(S);
    uint32_t x = svec(S, LOOM_USAGE_INPUT), y = svec(S, LOOM_USAGE_OUTPUT), tok = sbuf(S, 4, LOOM_USAGE_OUTPUT);
    loom_binding v[2] = { bview(x, 64u * rnd(&S->r, 4), LOOM_ACCESS_READ), bview(y, 0, LOOM_ACCESS_WRITE) };
    raw(S, LOOM_OP_MATVEC, &W, v, 2);
    ck_assert_int_eq(loom_op_argmax(S->g, loom_vec(y, CN), (loom_tensor){ tok, LOOM_U32, 0, 1, 1 }, NULL), LOOM_OK);
    S->last = y;
}

/* A captured MATVEC_ADD with y = x (refused everywhere), y = r (in place,
 * as the builders allow) or its own y, read by an RMS_NORM_MATVEC. */
static void shape_alias(shapes *S)
{
    loom_tensor W = sweight(S);
    uint32_t x = svec(S, LOOM_USAGE_STATE), r = svec(S, LOOM_USAGE_STATE), which = rnd(&S->r, 3);
    uint32_t h = which == 0 ? x : which == 1 ? r : svec(S, LOOM_USAGE_NONE);
    S->bad |= which == 0;
    loom_binding v[3] = { bview(x, 0, LOOM_ACCESS_READ), bview(r, 0, LOOM_ACCESS_READ), bview(h, 0, LOOM_ACCESS_WRITE) };
    raw(S, LOOM_OP_MATVEC_ADD, &W, v, 3);
    uint32_t y = svec(S, LOOM_USAGE_OUTPUT);
    ck_assert_int_eq(loom_op_rms_norm_matvec(S->g, sweight(S), loom_vec(h, CN), loom_vec(svec(S, LOOM_USAGE_WEIGHT), CN),
                                             loom_vec(y, CN), 1e-5f, NULL), LOOM_OK);
    S->last = y;
}

/* Every buffer from id `first` on is bound by some node. */
static bool all_used_from(const loom_graph *g, uint32_t first)
{
    for (uint32_t b = first; b < loom_graph_buffer_count(g); b++) {
        bool used = false;
        for (uint32_t i = 0; i < loom_graph_node_count(g) && !used; i++) {
            const loom_node *nd = loom_graph_node(g, i);
            const loom_binding *bb = loom_node_bindings(g, nd);
            for (uint32_t k = 0; k < nd->n_bindings && !used; k++)
                used = bb[k].buffer == b;
        }
        if (!used)
            return false;
    }
    return true;
}

static loom_result reads_back(const loom_graph *g)
{
    loom_str s;
    loom_str_init(&s, NULL);
    loom_result rc = loom_graph_dump(g, LOOM_FORMAT_JSON, &s);
    loom_graph *back = NULL;
    if (!rc)
        rc = loom_graph_parse_json(s.data, s.len, NULL, &back);
    loom_graph_destroy(back);
    loom_str_free(&s);
    return rc;
}

START_TEST(test_checker_shapes)
{
    static const char *const pipelines[] = { NULL, "verify,fuse,reorder,barriers,lifetimes",
                                             "verify,fuse,split,stage,reorder,barriers,lifetimes", "verify" };
    static const uint32_t disables[] = { 0, LOOM_DISABLE_FUSE, LOOM_DISABLE_STAGE };
    for (int it = 0; it < 100; it++) {
        shapes S = { .r = { 777 + 1000 * (uint64_t)_i + (uint64_t)it }, .last = LOOM_NONE };
        ck_assert_int_eq(loom_graph_create(NULL, &S.g), LOOM_OK);
        for (uint32_t k = 1 + rnd(&S.r, 4); k-- > 0;) {
            switch (rnd(&S.r, 4)) {
            case 0: shape_stage(&S); break;
            case 1: shape_head(&S); break;
            case 2: shape_offset_x(&S); break;
            default: shape_alias(&S); break;
            }
        }
        uint32_t declared = loom_graph_buffer_count(S.g);
        loom_result want = S.bad ? LOOM_VERIFY : LOOM_OK;
        ck_assert_int_eq(loom_graph_verify(S.g), want);
        for (size_t pi = 0; pi < sizeof pipelines / sizeof pipelines[0]; pi++)
            for (size_t di = 0; di < sizeof disables / sizeof disables[0]; di++) {
                loom_plan *p = NULL;
                loom_compile_options o = { .pipeline = pipelines[pi], .disable = disables[di], .verify_each = true,
                                           .dump_dir = "" };
                ck_assert_msg(loom_compile(S.g, &o, &p) == want, "graph %d, pipeline %s, disable %u: %s", it,
                              pipelines[pi] ? pipelines[pi] : "default", disables[di], loom_last_error());
                if (!p)
                    continue;
                const loom_graph *pg = loom_plan_graph(p);
                ck_assert_msg(reads_back(pg) == LOOM_OK, "graph %d: plan does not read back: %s", it,
                              loom_last_error());
                ck_assert_msg(all_used_from(pg, declared), "graph %d: a buffer a pass declared is unused", it);
                loom_plan_release(p);
            }
        loom_graph_destroy(S.g);
    }
}
END_TEST

static Suite *property_suite(void)
{
    Suite *s = suite_create("passes");
    TCase *tc = tcase_create("property");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_random_graphs, 0, 4);   /* 1000 graphs x 6 switch sets */
    suite_add_tcase(s, tc);
    tc = tcase_create("checker");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_checker_shapes, 0, 4);   /* 400 graphs x 12 pipelines */
    suite_add_tcase(s, tc);
    return s;
}

void loom_test_register(loom_test_runner *r, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    loom_test_add_suite(r, property_suite());
}
