/* Check suite "ir": capture, verifier, canonical hash, dumps (against golden
 * files), the JSON format's round trip and its parser's error handling,
 * allocation-failure injection, and the rule that ir/ and passes/ headers
 * never reach Vulkan. Golden files live in tests/golden/; run with
 * LOOM_UPDATE_GOLDEN=1 to rewrite them after an intended format change. */
#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "loom_ir.h"
#include "loom_ops.h"
#include "loom_ir_edit.h"
#include "runner.h"

#define OK(expr)                                                                                   \
    do {                                                                                           \
        loom_result rc_ = (expr);                                                                  \
        ck_assert_msg(rc_ == LOOM_OK, "%s: %s: %s", #expr, loom_result_str(rc_), loom_last_error()); \
    } while (0)

/* ---- sample graphs ------------------------------------------------------ */

enum { B_X, B_W, B_Y, B_OUT, B_PARAMS };

static loom_binding bind(uint32_t slot, uint32_t buffer, uint64_t off, uint64_t size, uint32_t access)
{
    return (loom_binding){ .buffer = buffer, .slot = slot, .offset = off, .size = size, .access = access };
}

static loom_result add_buffers(loom_graph *g)
{
    static const loom_buffer_desc d[] = {
        { "x", 64, LOOM_USAGE_INPUT, 0 },
        { "w", 256, LOOM_USAGE_WEIGHT, 0x1234 },
        { "y", 64, LOOM_USAGE_NONE, 0 },
        { "out", 16, LOOM_USAGE_OUTPUT, 0 },
    };
    for (unsigned i = 0; i < 4; i++) {
        loom_result rc = loom_graph_add_buffer(g, &d[i], NULL);
        if (rc)
            return rc;
    }
    return loom_graph_params(g, NULL);
}

static loom_result add_junk(loom_graph *g)
{
    loom_binding b[] = { bind(0, B_X, 0, 64, LOOM_ACCESS_RW) };
    uint32_t push[5] = { 9, 9, 9, 9, 9 };
    return loom_graph_add_dispatch(g, &(loom_dispatch_desc){ .kernel = "matvec_f32", .op = LOOM_OP_MATVEC,
                                                             .groups = { 1, 1, 1 }, .bindings = b, .n_bindings = 1,
                                                             .push = push, .push_size = 20 },
                                   NULL);
}

/* Five nodes covering derived ranges, a sentinel, LOOM_WHOLE, explicit
 * ranges that differ from the bindings, and push constants. */
static loom_result add_nodes(loom_graph *g)
{
    loom_result rc;
    uint32_t p0[2] = { 16, 4 };
    loom_binding b0[] = { bind(0, B_W, 0, 256, LOOM_ACCESS_READ), bind(1, B_X, 0, 64, LOOM_ACCESS_READ),
                          bind(2, B_Y, 0, 64, LOOM_ACCESS_WRITE) };
    rc = loom_graph_add_dispatch(g, &(loom_dispatch_desc){ .kernel = "matvec_f32", .op = LOOM_OP_MATVEC,
                                                           .groups = { 4, 1, 1 }, .bindings = b0, .n_bindings = 3,
                                                           .push = p0, .push_size = 8 },
                                 NULL);
    if (rc || (rc = loom_graph_add_barrier(g, NULL)))
        return rc;
    uint32_t p2[3] = { 1, 16, 0x461c4000 };
    loom_binding b2[] = { bind(0, B_PARAMS, 0, LOOM_WHOLE, LOOM_ACCESS_READ), bind(1, B_Y, 0, 64, LOOM_ACCESS_RW) };
    rc = loom_graph_add_dispatch(g, &(loom_dispatch_desc){ .kernel = "rope_rw", .op = LOOM_OP_ROPE, .groups = { 1, 2, 3 },
                                                           .bindings = b2, .n_bindings = 2, .push = p2,
                                                           .push_size = 12 },
                                 NULL);
    if (rc)
        return rc;
    loom_binding b3[] = { bind(0, B_Y, 0, 64, LOOM_ACCESS_READ), bind(1, B_X, 0, 64, LOOM_ACCESS_READ),
                          bind(2, B_OUT, 0, 16, LOOM_ACCESS_WRITE) };
    loom_range r3[] = { { B_Y, 0, 0, 16 }, { B_X, 0, 0, 16 } }, w3[] = { { B_OUT, 0, 0, 16 } };
    rc = loom_graph_add_dispatch(g, &(loom_dispatch_desc){ .kernel = "add", .op = LOOM_OP_ADD, .groups = { 1, 1, 1 },
                                                           .bindings = b3, .n_bindings = 3, .reads = r3,
                                                           .n_reads = 2, .writes = w3, .n_writes = 1 },
                                 NULL);
    if (rc)
        return rc;
    uint32_t p4 = 12;
    loom_binding b4[] = { bind(0, B_Y, 16, LOOM_WHOLE, LOOM_ACCESS_READ), bind(1, B_X, 0, 48, LOOM_ACCESS_WRITE) };
    return loom_graph_add_dispatch(g, &(loom_dispatch_desc){ .kernel = "copy", .op = LOOM_OP_COPY,
                                                             .groups = { 1, 1, 1 }, .bindings = b4, .n_bindings = 2,
                                                             .push = &p4, .push_size = 4 },
                                   NULL);
}

static loom_result build_sample(loom_graph *g)
{
    loom_result rc = add_buffers(g);
    return rc ? rc : add_nodes(g);
}

/* What the scheduling and lifetimes passes would write on the sample. */
static loom_result annotate(loom_graph *g)
{
    static const loom_barrier_info infos[] = {
        { LOOM_HAZARD_SENTINEL, LOOM_NONE, 0, 1 },
        { LOOM_HAZARD_SENTINEL, LOOM_NONE, 1, 2 },
        { LOOM_HAZARD_RAW, B_Y, 2, 4 },
        { LOOM_HAZARD_WAR, B_X, 4, 5 },
    };
    for (uint32_t i = 0; i < loom_graph_node_count(g); i++) {
        loom_node *n = loom_graph_node_mut(g, i);
        n->group = i;
        if (i > 0) {
            loom_result rc = loom_graph_add_barrier_info(g, &infos[i - 1], &n->barrier);
            if (rc)
                return rc;
        }
    }
    /* Node 3 stands for captured nodes 3 and 4 (fused), so the copy after it was captured 5th. */
    loom_result rc = loom_graph_set_members(g, 3, (const uint32_t[]){ 3, 4 }, 2);
    if (rc)
        return rc;
    loom_graph_node_mut(g, 4)->capture_index = 5;
    static const uint32_t cls[] = { LOOM_CLASS_INPUT, LOOM_CLASS_WEIGHT, LOOM_CLASS_SCRATCH, LOOM_CLASS_OUTPUT,
                                    LOOM_CLASS_INPUT };
    for (uint32_t i = 0; i < 5; i++)
        loom_graph_buffer_mut(g, i)->cls = cls[i];
    loom_graph_buffer_mut(g, B_Y)->arena_offset = 256;
    loom_graph_set_arena_size(g, 512);
    loom_graph_set_scheduled(g, true);
    return LOOM_OK;
}

static loom_graph *new_graph(const char *name)
{
    loom_graph *g;
    OK(loom_graph_create(&(loom_graph_desc){ .name = name }, &g));
    return g;
}

static loom_graph *sample(bool scheduled)
{
    loom_graph *g = new_graph(scheduled ? "scheduled" : "basic");
    OK(build_sample(g));
    if (scheduled) {
        OK(annotate(g));
        loom_graph_node_mut(g, 2)->flags = 1;  /* captured, not an annotation: it changes the hash */
    }
    return g;
}

static loom_hash hash_of(const loom_graph *g)
{
    loom_hash h;
    OK(loom_graph_hash(g, &h));
    return h;
}

static bool hash_eq(loom_hash a, loom_hash b) { return a.lo == b.lo && a.hi == b.hi; }

static char *dump(const loom_graph *g, loom_format f)
{
    loom_str s;
    loom_str_init(&s, NULL);
    OK(loom_graph_dump(g, f, &s));
    char *copy = strdup(s.data ? s.data : "");
    loom_str_free(&s);
    return copy;
}

/* ---- builder ------------------------------------------------------------ */

START_TEST(test_buffers)
{
    loom_graph *g = new_graph(NULL);
    ck_assert_str_eq(loom_graph_name(g), "graph");
    uint32_t id;
    OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = "a", .size = 4 }, &id));
    ck_assert_uint_eq(id, 0);
    OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = 8, .usage = LOOM_USAGE_STATE, .external = 5 }, &id));
    ck_assert_uint_eq(id, 1);
    ck_assert_str_eq(loom_graph_buffer_name(g, 1), "b1");
    ck_assert_uint_eq(loom_graph_buffer(g, 1)->size, 8);
    ck_assert_uint_eq(loom_graph_buffer(g, 1)->usage, LOOM_USAGE_STATE);
    ck_assert_uint_eq(loom_graph_buffer(g, 1)->external, 5);
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = "z", .size = 0 }, &id),
                     LOOM_INVALID_ARGUMENT);
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ .size = 4, .usage = LOOM_USAGE_COUNT }, &id),
                     LOOM_INVALID_ARGUMENT);
    ck_assert_uint_eq(loom_graph_buffer_count(g), 2);
    uint32_t p1, p2;
    OK(loom_graph_params(g, &p1));
    OK(loom_graph_params(g, &p2));
    ck_assert_uint_eq(p1, p2);
    ck_assert_uint_eq(loom_graph_buffer(g, p1)->usage, LOOM_USAGE_PARAMS);
    loom_graph_destroy(g);
}
END_TEST

START_TEST(test_kernels_interned)
{
    loom_graph *g = new_graph(NULL);
    uint32_t a, b, c;
    OK(loom_graph_kernel(g, "add", &a));
    OK(loom_graph_kernel(g, "mul", &b));
    OK(loom_graph_kernel(g, "add", &c));
    ck_assert_uint_ne(a, b);
    ck_assert_uint_eq(a, c);
    ck_assert_uint_eq(loom_graph_kernel_count(g), 2);
    ck_assert_str_eq(loom_graph_kernel_name(g, b), "mul");
    ck_assert_int_eq(loom_graph_kernel(g, "", &c), LOOM_INVALID_ARGUMENT);
    OK(build_sample(g));
    ck_assert_uint_eq(loom_graph_kernel_count(g), 5);  /* add, mul, matvec_f32, rope_rw, copy; add reused */
    ck_assert_uint_eq(loom_graph_node(g, 3)->kernel, a);
    loom_graph_destroy(g);
}
END_TEST

START_TEST(test_dispatch_ranges)
{
    loom_graph *g = sample(false);
    /* Derived: reads are the READ bindings in order, writes the WRITE ones;
     * an RW binding gives both. */
    const loom_node *n = loom_graph_node(g, 2);
    ck_assert_uint_eq(n->n_reads, 2);
    ck_assert_uint_eq(n->n_writes, 1);
    const loom_range *r = loom_node_reads(g, n), *w = loom_node_writes(g, n);
    ck_assert_uint_eq(r[0].buffer, B_PARAMS);
    ck_assert_uint_eq(r[1].buffer, B_Y);
    ck_assert_uint_eq(w[0].buffer, B_Y);
    ck_assert_uint_eq(w[0].size, 64);
    /* LOOM_WHOLE resolves to the rest of the buffer. */
    ck_assert_uint_eq(loom_node_bindings(g, n)[0].size, sizeof(loom_step_params));
    const loom_node *c = loom_graph_node(g, 4);
    ck_assert_uint_eq(loom_node_bindings(g, c)[0].size, 48);
    ck_assert_uint_eq(loom_node_reads(g, c)[0].offset, 16);
    /* Explicit ranges are kept as given. */
    const loom_node *e = loom_graph_node(g, 3);
    ck_assert_uint_eq(e->n_reads, 2);
    ck_assert_uint_eq(e->n_writes, 1);
    ck_assert_uint_eq(loom_node_reads(g, e)[0].size, 16);
    ck_assert_uint_eq(loom_node_writes(g, e)[0].buffer, B_OUT);
    const loom_node *s = loom_graph_node(g, 1);
    ck_assert_uint_eq(s->type, LOOM_NODE_BARRIER);
    ck_assert_uint_eq(s->kernel, LOOM_NONE);
    uint32_t push[3];
    memcpy(push, loom_node_push(g, n), 12);
    ck_assert_uint_eq(push[2], 0x461c4000);
    loom_graph_destroy(g);
}
END_TEST

START_TEST(test_limits)
{
    loom_graph *g = sample(false);
    uint32_t before = loom_graph_node_count(g);
    loom_binding b[LOOM_MAX_BINDINGS + 1];
    loom_range r[LOOM_MAX_RANGES + 1];
    uint8_t push[LOOM_MAX_PUSH + 4] = { 0 };
    for (unsigned i = 0; i <= LOOM_MAX_BINDINGS; i++)
        b[i] = bind(i, B_X, 0, 4, LOOM_ACCESS_RW);
    for (unsigned i = 0; i <= LOOM_MAX_RANGES; i++)
        r[i] = (loom_range){ B_X, 0, 0, 4 };
    const loom_dispatch_desc ok = { .kernel = "k", .groups = { 1, 1, 1 }, .bindings = b,
                                    .n_bindings = LOOM_MAX_BINDINGS, .reads = r, .n_reads = LOOM_MAX_RANGES,
                                    .writes = r, .n_writes = LOOM_MAX_RANGES, .push = push,
                                    .push_size = LOOM_MAX_PUSH };
    for (int which = 0; which < 5; which++) {
        loom_dispatch_desc d = ok;
        switch (which) {
        case 0: d.n_bindings++; break;
        case 1: d.n_reads++; break;
        case 2: d.n_writes++; break;
        case 3: d.push_size += 4; break;
        case 4: d.push_size = 6; break;
        }
        ck_assert_int_eq(loom_graph_add_dispatch(g, &d, NULL), LOOM_LIMIT);
        ck_assert_uint_eq(loom_graph_node_count(g), before);
    }
    OK(loom_graph_add_dispatch(g, &ok, NULL));  /* the limits themselves are allowed */
    ck_assert_int_eq(loom_graph_add_dispatch(g, &(loom_dispatch_desc){ .kernel = "k", .op = LOOM_OP_COUNT }, NULL),
                     LOOM_INVALID_ARGUMENT);
    OK(loom_graph_verify(g));
    loom_graph_destroy(g);
}
END_TEST

START_TEST(test_reset_clone)
{
    loom_graph *g = sample(true), *c;
    loom_graph_node_mut(g, 2)->flags = 0;
    OK(loom_graph_clone(g, &c));
    ck_assert(hash_eq(hash_of(g), hash_of(c)));
    char *a = dump(g, LOOM_FORMAT_TEXT), *b = dump(c, LOOM_FORMAT_TEXT);
    ck_assert_str_eq(a, b);
    free(b);
    loom_hash h = hash_of(g);
    loom_graph_reset(g);
    ck_assert_uint_eq(loom_graph_node_count(g), 0);
    ck_assert_uint_eq(loom_graph_buffer_count(g), 0);
    ck_assert_uint_eq(loom_graph_kernel_count(g), 0);
    ck_assert(!loom_graph_scheduled(g));
    ck_assert_uint_eq(loom_graph_barrier_count(g), 0);
    OK(build_sample(g));
    ck_assert(hash_eq(hash_of(g), h));
    /* The clone kept its annotations and is independent of the original. */
    ck_assert(loom_graph_scheduled(c));
    b = dump(c, LOOM_FORMAT_TEXT);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    loom_graph_destroy(g);
    loom_graph_destroy(c);
}
END_TEST

/* ---- verifier ----------------------------------------------------------- */

START_TEST(test_verify_valid)
{
    loom_graph *g = sample(true);
    OK(loom_graph_verify(g));  /* node 4's read ends exactly at the end of y */
    loom_graph_destroy(g);
    g = new_graph(NULL);
    OK(loom_graph_verify(g));
    loom_graph_destroy(g);
}
END_TEST

/* Each entry breaks exactly one thing the verifier checks, in its order. */
static void break_field(loom_graph *g, int which)
{
    loom_node *n = loom_graph_node_mut(g, 0);       /* MATVEC w(r) x(r) y(w) */
    loom_node *e = loom_graph_node_mut(g, 3);       /* ADD with explicit ranges */
    loom_binding *b = (loom_binding *)loom_node_bindings(g, n);
    loom_range *er = (loom_range *)loom_node_reads(g, e), *ew = (loom_range *)loom_node_writes(g, e);
    switch (which) {
    case 0: loom_graph_buffer_mut(g, B_Y)->size = 0; break;
    case 1: loom_graph_buffer_mut(g, B_Y)->usage = LOOM_USAGE_COUNT; break;
    case 2: n->type = 7; break;
    case 3: n->op = LOOM_OP_COUNT; break;
    case 4: n->kernel = loom_graph_kernel_count(g); break;
    case 5: n->groups[0] = 0; break;
    case 6: n->groups[1] = 0; break;
    case 7: n->groups[2] = 0; break;
    case 8: n->n_bindings = LOOM_MAX_BINDINGS + 1; break;
    case 9: n->n_reads = LOOM_MAX_RANGES + 1; break;
    case 10: n->n_writes = LOOM_MAX_RANGES + 1; break;
    case 11: n->push_size = LOOM_MAX_PUSH + 4; break;
    case 12: n->push_size = 6; break;
    case 13: n->first_binding = 1000; break;
    case 14: n->first_range = 1000; break;
    case 15: n->push_offset = 1000; break;
    case 16: e->n_writes = 0; break;
    case 17: b[1].access = 0; break;
    case 18: b[1].access = 4; break;
    case 19: b[1].slot = b[0].slot; break;
    case 20: b[1].buffer = loom_graph_buffer_count(g); break;
    case 21: b[1].size = 0; break;
    case 22: b[1].offset = 4; break;                 /* [4, 68) in x of 64 */
    case 23: b[1].offset = UINT64_MAX; b[1].size = 2; break;  /* wraps if added carelessly */
    case 24: er[0].buffer = 99; break;
    case 25: er[0].size = 0; break;
    case 26: er[1].offset = 60; break;               /* [60, 76) in x of 64 */
    case 27: ew[0].buffer = 99; break;
    case 28: ew[0].size = 17; break;                 /* out is 16 bytes */
    case 29: ew[0].offset = 1; break;
    }
}
#define N_BREAKS 30

START_TEST(test_verify_each_check)
{
    loom_graph *g = sample(false);
    OK(loom_graph_verify(g));
    break_field(g, _i);
    ck_assert_msg(loom_graph_verify(g) == LOOM_VERIFY, "break %d passed verification", _i);
    /* Dumping is how a broken graph gets looked at: it must still work. */
    for (int f = LOOM_FORMAT_TEXT; f <= LOOM_FORMAT_JSON; f++)
        free(dump(g, (loom_format)f));
    loom_graph_destroy(g);
}
END_TEST

/* ---- hash --------------------------------------------------------------- */

START_TEST(test_hash_layout)
{
    loom_graph *a = sample(false), *b = new_graph("other name");
    OK(add_buffers(b));
    OK(add_junk(b));
    OK(add_nodes(b));
    uint32_t order[5] = { 1, 2, 3, 4, 5 };
    OK(loom_graph_permute(b, order, 5));
    /* Same graph, different side-array layout. */
    ck_assert_uint_ne(loom_graph_node(a, 0)->first_binding, loom_graph_node(b, 0)->first_binding);
    ck_assert_uint_ne(loom_graph_node(a, 0)->push_offset, loom_graph_node(b, 0)->push_offset);
    ck_assert(hash_eq(hash_of(a), hash_of(b)));
    /* Annotations are not part of the hash. */
    OK(annotate(b));
    ck_assert(hash_eq(hash_of(a), hash_of(b)));
    loom_graph *c;
    OK(loom_graph_clone(b, &c));
    ck_assert(hash_eq(hash_of(a), hash_of(c)));
    loom_graph_destroy(a);
    loom_graph_destroy(b);
    loom_graph_destroy(c);
}
END_TEST

/* Every captured field of a node or buffer must reach the hash. Returns
 * false when `which` is past the last field. */
static bool change_field(loom_graph *g, int which)
{
    loom_node *n = loom_graph_node_mut(g, 0);
    loom_node *e = loom_graph_node_mut(g, 3);
    loom_binding *b = (loom_binding *)loom_node_bindings(g, n);
    loom_range *r = (loom_range *)loom_node_reads(g, e), *w = (loom_range *)loom_node_writes(g, e);
    int k = 0;
    if (which == k++) n->type = LOOM_NODE_BARRIER;
    else if (which == k++) n->op = LOOM_OP_OTHER;
    else if (which == k++) n->kernel = loom_graph_node(g, 2)->kernel;
    else if (which == k++) n->groups[0]++;
    else if (which == k++) n->groups[1]++;
    else if (which == k++) n->groups[2]++;
    else if (which == k++) n->flags = 1;
    else if (which == k++) n->flags = 0x100;
    else if (which == k++) b[0].buffer = B_X;
    else if (which == k++) b[0].slot = 7;
    else if (which == k++) b[0].offset = 4;
    else if (which == k++) b[0].size = 4;
    else if (which == k++) b[0].access = LOOM_ACCESS_RW;
    else if (which == k++) r[0].buffer = B_W;
    else if (which == k++) r[0].offset = 4;
    else if (which == k++) r[0].size = 4;
    else if (which == k++) w[0].buffer = B_Y;
    else if (which == k++) w[0].offset = 4;
    else if (which == k++) w[0].size = 4;
    else if (which == k++) e->n_reads = 1;
    else if (which == k++) loom_graph_buffer_mut(g, B_W)->name = loom_graph_buffer(g, B_X)->name;
    else if (which == k++) loom_graph_buffer_mut(g, B_W)->size++;
    else if (which == k++) loom_graph_buffer_mut(g, B_W)->usage = LOOM_USAGE_STATE;
    else if (which == k++) loom_graph_buffer_mut(g, B_W)->external++;
    else if (which == k++) loom_graph_buffer_mut(g, B_X)->keep = 1;
    else if (which >= k && which < k + 8) ((uint8_t *)loom_node_push(g, n))[which - k] ^= 1;
    else
        return false;
    return true;
}

START_TEST(test_hash_fields)
{
    loom_graph *base = sample(false);
    loom_hash h = hash_of(base);
    int count = 0;
    for (int which = 0;; which++) {
        loom_graph *g;
        OK(loom_graph_clone(base, &g));
        bool more = change_field(g, which);
        if (more)
            ck_assert_msg(!hash_eq(hash_of(g), h), "field %d does not reach the hash", which);
        loom_graph_destroy(g);
        if (!more)
            break;
        count++;
    }
    ck_assert_int_eq(count, 33);
    loom_graph_destroy(base);
}
END_TEST

/* ---- JSON round trip ---------------------------------------------------- */

static void round_trip(const loom_graph *g)
{
    char *j1 = dump(g, LOOM_FORMAT_JSON);
    loom_graph *g2;
    loom_result rc = loom_graph_parse_json(j1, strlen(j1), NULL, &g2);
    ck_assert_msg(rc == LOOM_OK, "%s\n%s", loom_last_error(), j1);
    char *j2 = dump(g2, LOOM_FORMAT_JSON);
    ck_assert_str_eq(j1, j2);
    ck_assert(hash_eq(hash_of(g), hash_of(g2)));
    char *t1 = dump(g, LOOM_FORMAT_TEXT), *t2 = dump(g2, LOOM_FORMAT_TEXT);
    ck_assert_str_eq(t1, t2);
    ck_assert_str_eq(loom_graph_name(g), loom_graph_name(g2));
    ck_assert_uint_eq(loom_graph_arena_size(g), loom_graph_arena_size(g2));
    free(j1);
    free(j2);
    free(t1);
    free(t2);
    loom_graph_destroy(g2);
}

START_TEST(test_json_round_trip)
{
    loom_graph *g = new_graph("empty");
    round_trip(g);
    loom_graph_destroy(g);
    round_trip(g = sample(false));
    loom_graph_destroy(g);
    round_trip(g = sample(true));
    /* A scheduled graph in plan order differs from capture order. */
    uint32_t order[5] = { 0, 1, 2, 4, 3 };
    OK(loom_graph_permute(g, order, 5));
    round_trip(g);
    loom_graph_destroy(g);

    /* Awkward names, extreme numbers, an unused kernel, explicit empty
     * ranges, and every limit at its maximum. */
    g = new_graph("we\"ird\\ \n\t\x01 name \xc3\xa9");
    uint32_t id, k;
    OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = "q\"uote\\", .size = UINT64_MAX,
                                                    .external = UINT64_MAX }, &id));
    OK(loom_graph_keep_buffer(g, id));
    OK(loom_graph_kernel(g, "unused \x7f", &k));
    loom_binding b[LOOM_MAX_BINDINGS];
    loom_range r[LOOM_MAX_RANGES];
    uint32_t push[LOOM_MAX_PUSH / 4];
    for (uint32_t i = 0; i < LOOM_MAX_BINDINGS; i++)
        b[i] = bind(UINT32_MAX - i, id, i, UINT64_MAX - i, LOOM_ACCESS_RW);
    for (uint32_t i = 0; i < LOOM_MAX_RANGES; i++)
        r[i] = (loom_range){ id, 0, UINT64_MAX - 1, 1 };
    for (uint32_t i = 0; i < LOOM_MAX_PUSH / 4; i++)
        push[i] = UINT32_MAX - i;
    OK(loom_graph_add_dispatch(g, &(loom_dispatch_desc){ .kernel = "k", .op = LOOM_OP_MATVEC_SILU_MUL,
                                                         .groups = { UINT32_MAX, 1, 2 }, .bindings = b,
                                                         .n_bindings = LOOM_MAX_BINDINGS, .reads = r,
                                                         .n_reads = LOOM_MAX_RANGES, .writes = r,
                                                         .n_writes = LOOM_MAX_RANGES, .push = push,
                                                         .push_size = LOOM_MAX_PUSH }, NULL));
    OK(loom_graph_add_dispatch(g, &(loom_dispatch_desc){ .kernel = "k2", .groups = { 1, 1, 1 }, .bindings = b,
                                                         .n_bindings = 1 }, &id));
    loom_graph_node_mut(g, id)->n_reads = loom_graph_node_mut(g, id)->n_writes = 0;
    loom_graph_node_mut(g, id)->capture_index = UINT32_MAX - 1;
    loom_graph_node_mut(g, id)->flags = UINT16_MAX;
    round_trip(g);
    loom_graph_destroy(g);
}
END_TEST

START_TEST(test_json_file)
{
    loom_graph *g = sample(true), *g2;
    char path[] = "/tmp/loom-ir-test-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    OK(loom_graph_save(g, LOOM_FORMAT_JSON, path));
    OK(loom_graph_load(path, NULL, &g2));
    ck_assert(hash_eq(hash_of(g), hash_of(g2)));
    ck_assert(loom_graph_scheduled(g2));
    /* The step-parameter buffer keeps its role after a load. */
    uint32_t p;
    OK(loom_graph_params(g2, &p));
    ck_assert_uint_eq(p, B_PARAMS);
    ck_assert_uint_eq(loom_graph_buffer_count(g2), 5);
    loom_graph_destroy(g2);
    OK(loom_graph_save(g, LOOM_FORMAT_TEXT, path));
    ck_assert_int_eq(loom_graph_load(path, NULL, &g2), LOOM_PARSE);
    ck_assert_ptr_null(g2);
    unlink(path);
    ck_assert_int_eq(loom_graph_load(path, NULL, &g2), LOOM_IO);
    ck_assert_int_eq(loom_graph_save(g, LOOM_FORMAT_JSON, "/nonexistent-dir/x.json"), LOOM_IO);
    loom_graph_destroy(g);
}
END_TEST

#define HEAD "{\"format\": \"loom-graph\", \"version\": 1, "
#define BUF "\"buffers\": [{\"name\": \"a\", \"size\": 64}], "
#define NODE(body) HEAD BUF "\"nodes\": [{\"type\": \"dispatch\", \"op\": \"COPY\", \"kernel\": \"k\", " body "}]}"
#define GOOD_NODE "\"groups\": [1, 1, 1], \"bindings\": [{\"slot\": 0, \"buffer\": 0, \"offset\": 0, \"size\": 4, " \
                  "\"access\": \"w\"}]"

#define DNODE "\"type\": \"dispatch\", \"op\": \"COPY\", \"kernel\": \"k\", " GOOD_NODE
static const char *const bad_json[] = {
    "",
    "   \n ",
    "{",
    "[",
    "nul",
    "{\"format\": \"loom-graph\" \"version\": 1}",
    HEAD "\"buffers\": [], \"nodes\": [],}",
    HEAD "\"buffers\": [], \"nodes\": []} x",
    HEAD "\"buffers\": [], \"nodes\": [], \"name\": \"a\\qb\"}",
    HEAD "\"buffers\": [], \"nodes\": [], \"name\": \"a\\u12\"}",
    HEAD "\"buffers\": [], \"nodes\": [], \"name\": \"\\udc00\"}",
    HEAD "\"buffers\": [], \"nodes\": [], \"name\": \"\\ud800x\"}",
    HEAD "\"buffers\": [], \"nodes\": [], \"name\": \"a\\u0000b\"}",
    HEAD "\"buffers\": [], \"nodes\": [], \"name\": \"a\tb\"}",
    HEAD "\"buffers\": [], \"nodes\": [], \"name\": \"abc",
    HEAD "\"buffers\": [], \"nodes\": [], \"name\": 5}",
    HEAD "\"buffers\": [], \"nodes\": [], \"arena_size\": 18446744073709551616}",
    HEAD "\"buffers\": [], \"nodes\": [], \"arena_size\": 99999999999999999999999999999}",
    HEAD "\"buffers\": [], \"nodes\": [], \"arena_size\": -1}",
    HEAD "\"buffers\": [], \"nodes\": [], \"arena_size\": 1.5}",
    HEAD "\"buffers\": [], \"nodes\": [], \"arena_size\": 1e3}",
    HEAD "\"buffers\": [], \"nodes\": [], \"arena_size\": 01}",
    HEAD "\"buffers\": [], \"nodes\": [], \"scheduled\": 1}",
    HEAD "\"buffers\": [], \"nodes\": [], \"bogus\": 1}",
    HEAD "\"buffers\": [], \"nodes\": [], \"nodes\": []}",
    HEAD "\"buffers\": []}",
    HEAD "\"buffers\": {}, \"nodes\": []}",
    "{\"format\": \"loom-graph\", \"version\": 2, \"buffers\": [], \"nodes\": []}",
    "{\"format\": \"other\", \"version\": 1, \"buffers\": [], \"nodes\": []}",
    HEAD "\"buffers\": [{\"name\": \"a\", \"size\": 0}], \"nodes\": []}",
    HEAD "\"buffers\": [{\"name\": \"a\", \"size\": 4, \"usage\": \"bogus\"}], \"nodes\": []}",
    HEAD "\"buffers\": [{\"name\": \"a\", \"size\": 4, \"class\": \"bogus\"}], \"nodes\": []}",
    HEAD "\"buffers\": [{\"id\": 1, \"name\": \"a\", \"size\": 4}], \"nodes\": []}",
    HEAD "\"buffers\": [], \"kernels\": [\"a\", \"a\"], \"nodes\": []}",
    HEAD "\"buffers\": [], \"kernels\": [\"\"], \"nodes\": []}",
    HEAD "\"buffers\": [], \"kernels\": [3], \"nodes\": []}",
    NODE("\"groups\": [1, 1]"),
    NODE("\"groups\": [1, 1, 4294967296]"),
    NODE("\"groups\": [1, 1, \"1\"]"),
    NODE(GOOD_NODE ", \"push\": [4294967296]"),
    NODE(GOOD_NODE ", \"push\": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]"),
    NODE(GOOD_NODE ", \"reads\": [{\"buffer\": 1, \"offset\": 0, \"size\": 4}]"),
    NODE(GOOD_NODE ", \"reads\": [{\"buffer\": 0, \"offset\": 0}]"),
    NODE(GOOD_NODE ", \"flags\": 65536"),
    NODE(GOOD_NODE ", \"barrier\": {\"hazard\": \"BOGUS\", \"buffer\": null, \"before\": 0, \"after\": 0}"),
    NODE(GOOD_NODE ", \"barrier\": {\"hazard\": \"RAW\", \"buffer\": 3, \"before\": 0, \"after\": 0}"),
    NODE("\"groups\": [1, 1, 1], \"bindings\": [{\"slot\": 0, \"buffer\": 9, \"offset\": 0, \"size\": 4, "
         "\"access\": \"w\"}]"),
    NODE("\"groups\": [1, 1, 1], \"bindings\": [{\"slot\": 0, \"buffer\": 0, \"offset\": 0, \"size\": 4, "
         "\"access\": \"x\"}]"),
    NODE("\"groups\": [1, 1, 1], \"bindings\": [{\"slot\": 0, \"buffer\": 0, \"offset\": 0, \"size\": 4}]"),
    HEAD BUF "\"nodes\": [{\"type\": \"dispatch\", \"op\": \"NOPE\", \"kernel\": \"k\", \"groups\": [1, 1, 1]}]}",
    HEAD BUF "\"nodes\": [{\"type\": \"dispatch\", \"op\": \"ADD\", \"kernel\": \"\", \"groups\": [1, 1, 1]}]}",
    HEAD BUF "\"nodes\": [{\"type\": \"dispatch\", \"kernel\": \"k\", \"groups\": [1, 1, 1]}]}",
    HEAD BUF "\"nodes\": [{\"type\": \"other\"}]}",
    HEAD BUF "\"nodes\": [{\"type\": \"barrier\", \"op\": \"ADD\"}]}",
    HEAD BUF "\"nodes\": [{\"op\": \"ADD\"}]}",
    HEAD BUF "\"nodes\": [7]}",
    /* capture_index / fused / members are checked, not trusted */
    NODE(GOOD_NODE ", \"fused\": 2"),
    NODE(GOOD_NODE ", \"fused\": 0, \"members\": [0]"),   /* fused 0 (a pass's node) claims none */
    NODE(GOOD_NODE ", \"fused\": 2, \"capture_index\": 3, \"members\": [3, 1]"),
    NODE(GOOD_NODE ", \"fused\": 2, \"capture_index\": 3, \"members\": [1, 2]"),
    NODE(GOOD_NODE ", \"fused\": 3, \"capture_index\": 3, \"members\": [1, 3]"),
    NODE(GOOD_NODE ", \"capture_index\": 4294967295"),
    NODE(GOOD_NODE ", \"window\": \"a\""),
    HEAD BUF "\"nodes\": [{" DNODE ", \"capture_index\": 1}, {" DNODE ", \"capture_index\": 1}]}",
    HEAD BUF "\"nodes\": [{" DNODE ", \"fused\": 2, \"capture_index\": 1, \"members\": [0, 1]}, {" DNODE
        ", \"capture_index\": 0}]}",
};

START_TEST(test_json_errors)
{
    for (size_t i = 0; i < sizeof bad_json / sizeof bad_json[0]; i++) {
        loom_graph *g = (loom_graph *)&g;
        loom_result rc = loom_graph_parse_json(bad_json[i], strlen(bad_json[i]), NULL, &g);
        ck_assert_msg(rc == LOOM_PARSE, "input %zu gave %s: %s", i, loom_result_str(rc), bad_json[i]);
        ck_assert_ptr_null(g);
        ck_assert_msg(strncmp(loom_last_error(), "line ", 5) == 0, "input %zu: %s", i, loom_last_error());
    }
    /* The position points at the offending value. */
    const char *t = "{\"format\": \"loom-graph\",\n \"version\": 1,\n  \"buffers\": 3, \"nodes\": []}";
    loom_graph *g;
    ck_assert_int_eq(loom_graph_parse_json(t, strlen(t), NULL, &g), LOOM_PARSE);
    ck_assert_str_eq(loom_last_error(), "line 3, column 14: buffers must be an array, not a number");
    /* NUL bytes, deep nesting and wrong top-level values. */
    const char nul[] = HEAD "\"buffers\": [], \"nodes\": []\0}";
    ck_assert_int_eq(loom_graph_parse_json(nul, sizeof nul - 1, NULL, &g), LOOM_PARSE);
    char deep[4096];
    memset(deep, '[', sizeof deep);
    ck_assert_int_eq(loom_graph_parse_json(deep, sizeof deep, NULL, &g), LOOM_PARSE);
    ck_assert_int_eq(loom_graph_parse_json("[]", 2, NULL, &g), LOOM_PARSE);
    ck_assert_int_eq(loom_graph_parse_json(NULL, 0, NULL, &g), LOOM_PARSE);
}
END_TEST

START_TEST(test_json_truncated)
{
    loom_graph *g = sample(true);
    char *j = dump(g, LOOM_FORMAT_JSON);
    size_t end = strrchr(j, '}') - j;
    for (size_t n = 0; n <= end; n++) {
        loom_graph *p;
        ck_assert_msg(loom_graph_parse_json(j, n, NULL, &p) == LOOM_PARSE, "prefix of %zu bytes parsed", n);
    }
    free(j);
    loom_graph_destroy(g);
}
END_TEST

/* The kernel forms' table (shaders/forms.def): every kernel it names was
 * built (a built-in layout), reads back as its own variant (its flags all
 * recorded: a table of flags that overflowed would lose some), and a
 * variant adds and drops flags within its source and weight types. */
START_TEST(test_forms)
{
    size_t n = loom_form_count();
    ck_assert_uint_gt(n, 200);
    for (size_t i = 0; i < n; i++) {
        const char *k = loom_form_name(i);
        loom_kernel_layout l;
        bool builtin = false;
        ck_assert_msg(loom_kernel_find(k, &l, &builtin) == LOOM_OK && builtin, "%s is not built in", k);
        ck_assert_msg(loom_form_variant(k, NULL, NULL) == k, "%s does not read back", k);
    }
    ck_assert_str_eq(loom_form_variant("rms_norm_matvec_q4_k", "MV_PRE MV_X16", NULL), "rms_norm_matvec_pre_x16_q4_k");
    ck_assert_str_eq(loom_form_variant("matvec_add_stage_t16_f16", NULL, "MV_T16"), "matvec_add_stage_f16");
    ck_assert_ptr_null(loom_form_variant("matvec_add_f32", "MV_X16", NULL));   /* f16 x needs chunks of 8 */
    ck_assert_str_eq(loom_form_kernel("rms_norm_qkv_rope", LOOM_Q4_K, LOOM_Q6_K), "rms_norm_qkv_rope_q4_k_vq6_k");
    loom_dtype w, v;
    ck_assert(loom_form_weights("embed_q6_k", &w, &v) && w == LOOM_Q6_K && v == LOOM_Q6_K);
    ck_assert(!loom_form_weights("attention", &w, &v));
    /* The block-typed matvec forms sum a row over 32 invocations: a
     * subgroup of 64 would add two rows; the others take any width. */
    static const char *const by32[] = { "matvec_q4_k", "rms_norm_matvec_silu_mul_pre_q6_k",
                                        "rms_norm_qkv_rope_kh_q4_k_vq6_k", "rms_norm_matvec_argmax_log_q8_0" };
    for (size_t i = 0; i < sizeof by32 / sizeof by32[0]; i++) {
        ck_assert_msg(loom_form_row(by32[i]), "%s is not a form", by32[i]);
        ck_assert_msg(loom_form_subgroup_ok(by32[i], 8) && loom_form_subgroup_ok(by32[i], 32) &&
                      !loom_form_subgroup_ok(by32[i], 64), "%s", by32[i]);
    }
    /* Q4_K's integer form shares a block's header among 8 invocations by
     * shuffles, and every block-typed form keeps a slot a subgroup for
     * 512 invocations / 8: a subgroup of 4 is refused for them all. */
    ck_assert(!loom_form_subgroup_ok("matvec_q4_k", 4) && !loom_form_subgroup_ok("rms_norm_qkv_rope_kh_q4_k_vq6_k", 4));
    ck_assert(!loom_form_subgroup_ok("matvec_q8_0", 4) && !loom_form_subgroup_ok("rms_norm_matvec_silu_mul_pre_q6_k", 4));
    static const char *const any[] = { "matvec_f16", "rms_norm_matvec_argmax_log_f32", "matmul_q4_k",
                                       "matmul_add_coop_q6_k", "embed_q4_k", "attention", "no_such_kernel" };
    for (size_t i = 0; i < sizeof any / sizeof any[0]; i++)
        ck_assert_msg(loom_form_subgroup_ok(any[i], 64) && loom_form_subgroup_ok(any[i], 128), "%s", any[i]);
}
END_TEST

/* Block-typed weights: the builders refuse a row that is not whole blocks
 * (naming the field), and the verifier refuses a captured node whose push
 * constants or weight binding disagree with its kernel's block type. */
START_TEST(test_verify_blocks)
{
    loom_graph *g;
    ck_assert_int_eq(loom_graph_create(&(loom_graph_desc){ .name = "blocks" }, &g), LOOM_OK);
    uint32_t W, X, Y;
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ "W", 1 << 16, LOOM_USAGE_WEIGHT, 0 }, &W), LOOM_OK);
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ "x", 4096, LOOM_USAGE_NONE, 0 }, &X), LOOM_OK);
    ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ "y", 4096, LOOM_USAGE_NONE, 0 }, &Y), LOOM_OK);
    ck_assert_int_eq(loom_op_matvec(g, loom_mat(W, LOOM_Q4_K, 4, 500), loom_vec(X, 500), loom_vec(Y, 4), NULL),
                     LOOM_INVALID_ARGUMENT);
    /* 3 rows of 3 Q8_0 blocks: 306 bytes, bound as 308 */
    ck_assert_int_eq(loom_op_matvec(g, loom_mat(W, LOOM_Q8_0, 3, 96), loom_vec(X, 96), loom_vec(Y, 3), NULL), LOOM_OK);
    ck_assert_str_eq(loom_graph_kernel_name(g, loom_graph_node(g, 0)->kernel), "matvec_q8_0");
    ck_assert_uint_eq(loom_node_bindings(g, loom_graph_node(g, 0))[0].size, 308);
    ck_assert_int_eq(loom_op_matvec(g, loom_mat(W, LOOM_Q4_K, 4, 512), loom_vec(X, 512), loom_vec(Y, 4), NULL), LOOM_OK);
    ck_assert_int_eq(loom_graph_verify(g), LOOM_OK);
    /* captured: cols not whole blocks, then a binding short of its rows */
    static const struct { uint32_t cols; uint64_t wbytes; } bad[] = { { 500, 4 * 288 }, { 512, 4 * 288 - 4 } };
    for (size_t k = 0; k < 2; k++) {
        loom_graph_reset(g);
        ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ "W", 1 << 16, LOOM_USAGE_WEIGHT, 0 }, &W), LOOM_OK);
        ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ "x", 4096, LOOM_USAGE_NONE, 0 }, &X), LOOM_OK);
        ck_assert_int_eq(loom_graph_add_buffer(g, &(loom_buffer_desc){ "y", 4096, LOOM_USAGE_NONE, 0 }, &Y), LOOM_OK);
        uint32_t push[2] = { 4, bad[k].cols };
        loom_binding b[] = { { W, 0, 0, bad[k].wbytes, LOOM_ACCESS_READ, 0 }, { X, 1, 0, 2048, LOOM_ACCESS_READ, 0 },
                             { Y, 2, 0, 16, LOOM_ACCESS_WRITE, 0 } };
        ck_assert_int_eq(loom_graph_add_dispatch(g, &(loom_dispatch_desc){ .kernel = "matvec_q4_k", .op = LOOM_OP_MATVEC,
                                                                           .groups = { 2, 1, 1 }, .bindings = b,
                                                                           .n_bindings = 3, .push = push,
                                                                           .push_size = 8 },
                                                 NULL),
                         LOOM_OK);
        ck_assert_int_eq(loom_graph_verify(g), LOOM_VERIFY);
        ck_assert_ptr_nonnull(strstr(loom_last_error(), k ? "binds" : "whole number"));
    }
    loom_graph_destroy(g);
}
END_TEST

START_TEST(test_json_semantic_errors_parse)
{
    /* Wrong but well-formed: parses, then fails verification. */
    const char *t = NODE("\"groups\": [0, 1, 1], \"bindings\": [{\"slot\": 0, \"buffer\": 0, \"offset\": 60, "
                         "\"size\": 8, \"access\": \"w\"}]");
    loom_graph *g;
    OK(loom_graph_parse_json(t, strlen(t), NULL, &g));
    ck_assert_int_eq(loom_graph_verify(g), LOOM_VERIFY);
    loom_graph_destroy(g);
    /* Ranges omitted are derived from the bindings, as at capture. */
    t = NODE(GOOD_NODE);
    OK(loom_graph_parse_json(t, strlen(t), NULL, &g));
    ck_assert_uint_eq(loom_graph_node(g, 0)->n_writes, 1);
    OK(loom_graph_verify(g));
    loom_graph_destroy(g);
}
END_TEST

/* ---- dumps against golden files ---------------------------------------- */

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

static void golden(const loom_graph *g, const char *name, loom_format f)
{
    const char *dir = getenv("LOOM_TEST_DATA");
    ck_assert_msg(dir != NULL, "LOOM_TEST_DATA is not set");
    char path[1024];
    snprintf(path, sizeof path, "%s/golden/%s.%s", dir, name, loom_format_ext(f));
    char *got = dump(g, f);
    const char *update = getenv("LOOM_UPDATE_GOLDEN");
    if (update && !strcmp(update, "1")) {
        FILE *out = fopen(path, "wb");
        ck_assert_msg(out != NULL, "cannot write %s", path);
        fputs(got, out);
        fclose(out);
    }
    char *want = read_file(path);
    ck_assert_msg(want != NULL, "%s is missing (run with LOOM_UPDATE_GOLDEN=1)", path);
    ck_assert_msg(strcmp(got, want) == 0, "%s differs; got:\n%s", path, got);
    free(got);
    free(want);
}

START_TEST(test_golden)
{
    loom_graph *g = sample(false);
    golden(g, "basic", LOOM_FORMAT_TEXT);
    golden(g, "basic", LOOM_FORMAT_DOT);
    golden(g, "basic", LOOM_FORMAT_JSON);
    loom_graph_destroy(g);
    g = sample(true);
    golden(g, "scheduled", LOOM_FORMAT_TEXT);
    golden(g, "scheduled", LOOM_FORMAT_DOT);
    golden(g, "scheduled", LOOM_FORMAT_JSON);
    loom_graph_destroy(g);
}
END_TEST

START_TEST(test_text_shape)
{
    /* One line per buffer, kernel and node, plus the header and one line per
     * barrier, however odd the names. */
    loom_graph *g = sample(true);
    OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = "line\nbreak", .size = 4 }, NULL));
    char *t = dump(g, LOOM_FORMAT_TEXT);
    size_t lines = 0;
    for (char *p = t; *p; p++)
        lines += *p == '\n';
    ck_assert_uint_eq(lines, 1 + loom_graph_buffer_count(g) + loom_graph_kernel_count(g) +
                                 loom_graph_node_count(g) + 4);
    ck_assert_ptr_nonnull(strstr(t, "barrier (RAW on 'y': node 2 -> node 4)\n"));
    ck_assert_ptr_nonnull(strstr(t, "barrier-sentinel"));
    free(t);
    loom_format f;
    ck_assert(loom_format_from_name("dot", &f) && f == LOOM_FORMAT_DOT);
    ck_assert(loom_format_from_name("json", &f) && f == LOOM_FORMAT_JSON);
    ck_assert(loom_format_from_name("text", &f) && f == LOOM_FORMAT_TEXT);
    ck_assert(!loom_format_from_name("svg", &f));
    ck_assert_int_eq(loom_graph_dump(g, (loom_format)9, &(loom_str){ 0 }), LOOM_INVALID_ARGUMENT);
    loom_graph_destroy(g);
}
END_TEST

START_TEST(test_dot_edges_linear)
{
    /* A chain of n nodes all touching one buffer must draw n-1 hazard edges,
     * not n^2/2. */
    loom_graph *g = new_graph("chain");
    uint32_t buf;
    OK(loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = "acc", .size = 64 }, &buf));
    const uint32_t n = 200;
    loom_binding b = bind(0, buf, 0, 64, LOOM_ACCESS_RW);
    for (uint32_t i = 0; i < n; i++)
        OK(loom_graph_add_dispatch(g, &(loom_dispatch_desc){ .kernel = "inc", .op = LOOM_OP_ADD, .groups = { 1, 1, 1 },
                                                             .bindings = &b, .n_bindings = 1 }, NULL));
    char *d = dump(g, LOOM_FORMAT_DOT);
    size_t edges = 0;
    for (char *p = d; (p = strstr(p, " -> ")); p++)
        edges++;
    ck_assert_uint_eq(edges, n - 1);
    ck_assert_ptr_nonnull(strstr(d, "n0 -> n1 [label=\"RAW acc\"]"));
    free(d);
    loom_graph_destroy(g);
}
END_TEST

/* ---- allocation failure injection --------------------------------------- */

typedef struct failing {
    long n, fail_at;
    size_t live;
} failing;

static void *failing_realloc(void *user, void *p, size_t old_size, size_t new_size)
{
    failing *f = user;
    if (new_size == 0) {
        if (p)
            f->live -= old_size;
        free(p);
        return NULL;
    }
    if (++f->n == f->fail_at)
        return NULL;
    void *q = realloc(p, new_size);
    if (q)
        f->live += new_size - (p ? old_size : 0);
    return q;
}

/* Everything the module does with memory, stopping at the first failure. */
static loom_result exercise(const loom_allocator *a)
{
    loom_graph *g = NULL, *g2 = NULL, *c = NULL;
    loom_str s = { 0 }, s2 = { 0 };
    loom_str_init(&s, a);
    loom_str_init(&s2, a);
    loom_hash h;
    loom_result rc = loom_graph_create(&(loom_graph_desc){ .name = "oom", .allocator = a }, &g);
    if (!rc)
        rc = build_sample(g);
    if (!rc)
        rc = annotate(g);
    if (!rc)
        rc = loom_graph_dump(g, LOOM_FORMAT_TEXT, &s);
    if (!rc)
        rc = loom_graph_dump(g, LOOM_FORMAT_DOT, &s);
    if (!rc)
        rc = loom_graph_hash(g, &h);
    if (!rc)
        rc = loom_graph_clone(g, &c);
    loom_str_free(&s);
    loom_str_init(&s, a);
    if (!rc)
        rc = loom_graph_dump(g, LOOM_FORMAT_JSON, &s);
    if (!rc)
        rc = loom_graph_parse_json(s.data, s.len, &(loom_graph_desc){ .allocator = a }, &g2);
    if (!rc)
        rc = loom_graph_dump(g2, LOOM_FORMAT_JSON, &s2);
    if (!rc)
        ck_assert_str_eq(s.data, s2.data);
    loom_str_free(&s);
    loom_str_free(&s2);
    loom_graph_destroy(g);
    loom_graph_destroy(g2);
    loom_graph_destroy(c);
    return rc;
}

START_TEST(test_alloc_failure)
{
    long n;
    for (n = 1; n < 100000; n++) {
        failing f = { 0, n, 0 };
        loom_allocator a = { failing_realloc, &f };
        loom_result rc = exercise(&a);
        ck_assert_msg(rc == LOOM_OK || rc == LOOM_OUT_OF_MEMORY, "failing allocation %ld gave %s: %s", n,
                      loom_result_str(rc), loom_last_error());
        ck_assert_msg(f.live == 0, "failing allocation %ld leaked %zu bytes", n, f.live);
        if (f.n < n) {  /* the run finished before reaching allocation n */
            ck_assert_int_eq(rc, LOOM_OK);
            break;
        }
        ck_assert_msg(rc == LOOM_OUT_OF_MEMORY, "failing allocation %ld went unnoticed", n);
    }
    ck_assert_int_gt(n, 10);
    ck_assert_int_lt(n, 100000);
}
END_TEST

/* ---- no Vulkan under ir/ and passes/ ------------------------------------ */

typedef struct scan {
    char seen[64][512];
    int n_seen, files;
    char bad[2200];
} scan;

static bool scan_file(scan *s, const char *root, const char *path, int depth)
{
    for (int i = 0; i < s->n_seen; i++)
        if (!strcmp(s->seen[i], path))
            return true;
    if (s->n_seen < 64)
        snprintf(s->seen[s->n_seen++], sizeof s->seen[0], "%s", path);
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    s->files++;
    char line[1024];
    bool ok = true;
    while (ok && fgets(line, sizeof line, f)) {
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (*p++ != '#')
            continue;
        while (isspace((unsigned char)*p))
            p++;
        if (strncmp(p, "include", 7) != 0)
            continue;
        char lower[1024];
        size_t k = 0;
        for (; p[k] && k < sizeof lower - 1; k++)
            lower[k] = (char)tolower((unsigned char)p[k]);
        lower[k] = 0;
        if (strstr(lower, "vulkan")) {
            snprintf(s->bad, sizeof s->bad, "%s: %s", path, line);
            ok = false;
            break;
        }
        char *q = strchr(p, '"');
        char *e = q ? strchr(q + 1, '"') : NULL;
        if (!q || !e || depth > 16)
            continue;
        *e = 0;
        static const char *const dirs[] = { "ir", "passes" };
        for (int d = 0; ok && d < 2; d++) {
            char sub[2048];
            snprintf(sub, sizeof sub, "%.500s/%s/%.1000s", root, dirs[d], q + 1);
            ok = scan_file(s, root, sub, depth + 1);
        }
    }
    fclose(f);
    return ok;
}

START_TEST(test_no_vulkan_in_headers)
{
    const char *data = getenv("LOOM_TEST_DATA");
    ck_assert_ptr_nonnull(data);
    char root[512];
    snprintf(root, sizeof root, "%s/..", data);
    scan s = { .n_seen = 0 };
    static const char *const dirs[] = { "ir", "passes" };
    for (int d = 0; d < 2; d++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/%s", root, dirs[d]);
        DIR *dh = opendir(dir);
        ck_assert_msg(dh != NULL, "cannot open %s", dir);
        for (struct dirent *e; (e = readdir(dh));) {
            size_t n = strlen(e->d_name);
            if (n < 3 || (strcmp(e->d_name + n - 2, ".h") && strcmp(e->d_name + n - 4, ".def")))
                continue;
            char path[1400];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            ck_assert_msg(scan_file(&s, root, path, 0), "Vulkan reached from %s", s.bad);
        }
        closedir(dh);
    }
    ck_assert_int_ge(s.files, 3);  /* the scan found the headers at all */
    /* And the scanner does notice an include when there is one. */
    char path[] = "/tmp/loom-vk-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char *text = "/* x */\n  #  include <Vulkan/vulkan_core.h>\n";
    ck_assert_int_eq(write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
    scan t = { .n_seen = 0 };
    ck_assert(!scan_file(&t, root, path, 0));
    unlink(path);
}
END_TEST

/* ---- suite -------------------------------------------------------------- */

static Suite *ir_suite(void)
{
    Suite *s = suite_create("ir");
    TCase *tc = tcase_create("builder");
    tcase_add_test(tc, test_buffers);
    tcase_add_test(tc, test_kernels_interned);
    tcase_add_test(tc, test_dispatch_ranges);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_reset_clone);
    suite_add_tcase(s, tc);
    tc = tcase_create("verifier");
    tcase_add_test(tc, test_verify_valid);
    tcase_add_loop_test(tc, test_verify_each_check, 0, N_BREAKS);
    tcase_add_test(tc, test_verify_blocks);
    tcase_add_test(tc, test_forms);
    suite_add_tcase(s, tc);
    tc = tcase_create("hash");
    tcase_add_test(tc, test_hash_layout);
    tcase_add_test(tc, test_hash_fields);
    suite_add_tcase(s, tc);
    tc = tcase_create("json");
    tcase_add_test(tc, test_json_round_trip);
    tcase_add_test(tc, test_json_file);
    tcase_add_test(tc, test_json_errors);
    tcase_add_test(tc, test_json_truncated);
    tcase_add_test(tc, test_json_semantic_errors_parse);
    suite_add_tcase(s, tc);
    tc = tcase_create("dump");
    tcase_add_test(tc, test_golden);
    tcase_add_test(tc, test_text_shape);
    tcase_add_test(tc, test_dot_edges_linear);
    suite_add_tcase(s, tc);
    tc = tcase_create("alloc_failure");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_alloc_failure);
    suite_add_tcase(s, tc);
    tc = tcase_create("layering");
    tcase_add_test(tc, test_no_vulkan_in_headers);
    suite_add_tcase(s, tc);
    return s;
}

void loom_test_register(loom_test_runner *r, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    loom_test_add_suite(r, ir_suite());
}
