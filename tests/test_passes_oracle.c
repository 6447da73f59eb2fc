/* The executable oracle of the passes. Thousands of seeded graphs are built
 * the way a frontend builds them — through the op builders, with real
 * bindings, ranges and push constants — so every fuse rule has chains to
 * match, and next to them the things that make fusion illegal: interfering
 * readers and writers between chain members, read-write bindings, consumers
 * reading the intermediate in several slots, sentinels and non-reorderable
 * ops, every usage hint, partial overlaps, shared external ids. Each graph is
 * compiled under several switch sets and windows up to 1000, then:
 *
 * - both the captured graph (in capture order) and the plan (in plan order,
 *   scratch buffers placed in one poisoned arena at their offsets) are run
 *   on the CPU with the reference ops of reference/reference.c, two decode
 *   steps each; the plan is run three times, the nodes of every barrier
 *   epoch forward, reversed and shuffled, so a missing barrier shows up as
 *   a different answer. Every host-visible buffer must match after each
 *   step: bit for bit when nothing was fused, else within a tolerance that
 *   a fused kernel's single rounding explains;
 * - a brute-force pair scan of the plan: every captured node is stood for
 *   exactly once; every conflicting pair keeps capture order, has a barrier
 *   between and is not grouped together; with reorder and barriers on the
 *   barriers meet the reported lower bound.
 *
 * LOOM_ORACLE_SEED=N runs seed N alone and prints its graph and plans;
 * LOOM_ORACLE_SEEDS=K runs K seeds (default 2000). A failure names its seed
 * and the command that reproduces it. The interpreter has one case per op
 * kind, each a call of the op's reference function: a new op adds a case. */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "loom_compiler.h"
#include "loom_ir_edit.h"
#include "loom_ops.h"
#include "loom_ref.h"
#include "runner.h"

#define N 64u                /* floats per vector view: one 256-byte binding unit */
#define VB (N * 4u)          /* bytes per view */
#define SEQ 4u               /* KV cache rows */
#define VOCAB 64u
#define MAXB 40
#define MAXNODES 320

static uint32_t cur_seed;
static bool verbose;

#define FAIL(...)                                                                                       \
    ck_abort_msg("seed %u: %s — reproduce: LOOM_ORACLE_SEED=%u build/bin/test_passes_oracle", cur_seed, \
                 fmt_msg(__VA_ARGS__), cur_seed)
#define CHECK(cond, ...)   \
    do {                   \
        if (!(cond))       \
            FAIL(__VA_ARGS__); \
    } while (0)

static const char *fmt_msg(const char *fmt, ...)
{
    static char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

typedef struct rng { uint64_t s; } rng;
static uint32_t rnd(rng *r, uint32_t n)
{
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)((r->s >> 33) % n);
}
static bool chance(rng *r, uint32_t pct) { return rnd(r, 100) < pct; }

/* ---- the generator -------------------------------------------------------- */

typedef enum { K_VEC, K_WEIGHT, K_KV, K_TOKEN, K_TABLE } buf_kind;

typedef struct gen_buf {
    uint32_t id;
    buf_kind kind;
    loom_usage usage;
    uint32_t slots;          /* K_VEC: views of N floats */
    uint32_t written;        /* K_VEC: slots written so far this step (for SCRATCH hints) */
    loom_dtype dtype;        /* K_WEIGHT, K_TABLE, K_KV */
    bool exact;              /* compare bit for bit (u32 data) */
} gen_buf;

typedef struct gen {
    rng r;
    loom_graph *g;
    gen_buf b[MAXB];
    uint32_t nb;
    uint32_t nodes_target;
    bool alias;              /* two buffers share an external id: compile must refuse */
} gen;

static uint32_t add_buf(gen *G, buf_kind kind, uint64_t size, loom_usage u, uint64_t external)
{
    uint32_t id;
    char name[16];
    snprintf(name, sizeof name, "b%u", G->nb);
    ck_assert_int_eq(loom_graph_add_buffer(G->g, &(loom_buffer_desc){ .name = name, .size = size, .usage = u,
                                                                      .external = external }, &id), LOOM_OK);
    gen_buf *b = &G->b[G->nb++];
    *b = (gen_buf){ .id = id, .kind = kind, .usage = u };
    return G->nb - 1;
}

static bool writable(const gen_buf *b)
{
    return b->kind == K_VEC && b->usage != LOOM_USAGE_INPUT && b->usage != LOOM_USAGE_WEIGHT;
}

/* A vector view of `slots` slots (1 or 2: a wide view partly overlaps two
 * narrow ones) for reading: a SCRATCH-hinted buffer only where written. */
static bool pick_read(gen *G, uint32_t slots, loom_tensor *t)
{
    for (int tries = 0; tries < 20; tries++) {
        gen_buf *b = &G->b[rnd(&G->r, G->nb)];
        if (b->kind != K_VEC || b->slots < slots)
            continue;
        uint32_t s = rnd(&G->r, b->slots - slots + 1), mask = ((1u << slots) - 1) << s;
        if (b->usage == LOOM_USAGE_SCRATCH && (b->written & mask) != mask)
            continue;
        *t = loom_vec_at(b->id, (uint64_t)s * VB, slots * N);
        return true;
    }
    return false;
}

/* A view to write; `priv` prefers plan-private buffers (what fusion may
 * eliminate). */
static bool pick_write(gen *G, uint32_t slots, bool priv, loom_tensor *t)
{
    for (int tries = 0; tries < 30; tries++) {
        gen_buf *b = &G->b[rnd(&G->r, G->nb)];
        if (!writable(b) || b->slots < slots)
            continue;
        bool is_priv = b->usage == LOOM_USAGE_NONE || b->usage == LOOM_USAGE_SCRATCH;
        if (priv && !is_priv && tries < 25)
            continue;
        uint32_t s = rnd(&G->r, b->slots - slots + 1);
        *t = loom_vec_at(b->id, (uint64_t)s * VB, slots * N);
        return true;
    }
    return false;
}

static gen_buf *find(gen *G, uint32_t id)
{
    for (uint32_t i = 0; i < G->nb; i++)
        if (G->b[i].id == id)
            return &G->b[i];
    return NULL;
}

static void mark_written(gen *G, const loom_tensor *t)
{
    gen_buf *b = find(G, t->buffer);
    if (b && b->kind == K_VEC) {
        uint32_t s = (uint32_t)(t->offset / VB), k = (t->cols * t->rows + N - 1) / N;
        b->written |= ((1u << k) - 1) << s;
    }
}

static uint32_t pick_kind(gen *G, buf_kind kind, loom_dtype dt)
{
    uint32_t n = 0, hits[MAXB];
    for (uint32_t i = 0; i < G->nb; i++)
        if (G->b[i].kind == kind && (kind != K_WEIGHT || G->b[i].dtype == dt))
            hits[n++] = i;
    return n ? hits[rnd(&G->r, n)] : LOOM_NONE;
}

static loom_tensor weight(gen *G, loom_dtype dt, uint32_t which)
{
    uint32_t i = pick_kind(G, K_WEIGHT, dt);
    loom_tensor W = loom_mat(G->b[i].id, dt, N, N);
    W.offset = (uint64_t)which * N * N * loom_dtype_size(dt);
    return W;
}

/* The RW kernel the oracle knows for OTHER: y = y * 0.5 + 0.25 in place. */
static loom_result scale_rw(loom_graph *g, loom_tensor t)
{
    loom_binding b = { .buffer = t.buffer, .slot = 0, .offset = t.offset, .size = (uint64_t)t.cols * 4,
                       .access = LOOM_ACCESS_RW };
    loom_pc_n pc = { t.cols };
    loom_dispatch_desc d = { .kernel = "scale_rw", .op = LOOM_OP_OTHER, .groups = { 1, 1, 1 }, .bindings = &b,
                             .n_bindings = 1, .push = &pc, .push_size = sizeof pc };
    return loom_graph_add_dispatch(g, &d, NULL);
}

/* Keeps a builder's refusal (its aliasing and shape rules) from ending the
 * graph: a frontend would get the error and do something else. */
static bool ok(loom_result rc)
{
    if (rc)
        loom_clear_error();
    return rc == LOOM_OK;
}

static void emit_write(gen *G, loom_result rc, const loom_tensor *y)
{
    if (ok(rc))
        mark_written(G, y);
}

/* Something between chain members that may make fusion illegal. */
static void interferer(gen *G, const loom_tensor *mid, const loom_tensor *in)
{
    loom_tensor t;
    switch (rnd(&G->r, 8)) {
    case 0:   /* another reader of the intermediate */
        if (pick_write(G, 1, false, &t))
            emit_write(G, loom_op_copy(G->g, *mid, t, NULL), &t);
        break;
    case 1:   /* a read-write node on the intermediate */
        ok(scale_rw(G->g, *mid));
        break;
    case 2:   /* overwrites the chain's input (the earlier member may not move past it) */
        if (writable(find(G, in->buffer)) && pick_read(G, 1, &t))
            emit_write(G, loom_op_copy(G->g, t, *in, NULL), in);
        break;
    case 3:   /* a non-reorderable op */
        if (pick_read(G, 1, &t)) {
            loom_tensor y;
            if (pick_write(G, 1, false, &y))
                emit_write(G, loom_op_softmax(G->g, t, y, NULL), &y);
        }
        break;
    case 4:
        ck_assert_int_eq(loom_graph_add_barrier(G->g, NULL), LOOM_OK);
        break;
    default:  /* unrelated traffic */
        if (pick_read(G, 1, &t)) {
            loom_tensor y;
            if (pick_write(G, 1, false, &y))
                emit_write(G, loom_op_copy(G->g, t, y, NULL), &y);
        }
        break;
    }
}

static void maybe_interfere(gen *G, const loom_tensor *mid, const loom_tensor *in)
{
    if (chance(&G->r, 30))
        interferer(G, mid, in);
}

static const float EPS = 1e-5f;

static void chain_norm_mul(gen *G, bool with_add, bool with_mul)
{
    loom_tensor a, b, s, x, t, w, y;
    if (with_add) {
        if (!pick_read(G, 1, &a) || !pick_read(G, 1, &b) || !pick_write(G, 1, !with_mul, &s))
            return;
        emit_write(G, loom_op_add(G->g, a, b, s, NULL), &s);
        maybe_interfere(G, &s, &a);
        x = s;
    } else if (!pick_read(G, 1, &x)) {
        return;
    }
    if (!pick_write(G, 1, true, &t))
        return;
    emit_write(G, loom_op_rms_norm(G->g, x, t, EPS, NULL), &t);
    if (!with_mul)
        return;
    maybe_interfere(G, &t, &x);
    if (!pick_read(G, 1, &w) || !pick_write(G, 1, false, &y))
        return;
    switch (rnd(&G->r, 5)) {
    case 0: emit_write(G, loom_op_mul(G->g, w, t, y, NULL), &y); break;
    case 1: emit_write(G, loom_op_mul(G->g, t, t, y, NULL), &y); break;   /* reads t in two slots */
    default: emit_write(G, loom_op_mul(G->g, t, w, y, NULL), &y); break;
    }
}

static void chain_silu(gen *G)
{
    loom_dtype dt = chance(&G->r, 50) ? LOOM_F16 : LOOM_F32;
    loom_tensor x, gt, ut, y;
    if (!pick_read(G, 1, &x) || !pick_write(G, 1, true, &gt) || !pick_write(G, 1, true, &ut))
        return;
    emit_write(G, loom_op_matvec(G->g, weight(G, dt, 0), x, gt, NULL), &gt);
    maybe_interfere(G, &gt, &x);
    emit_write(G, loom_op_matvec(G->g, weight(G, dt, 1), x, ut, NULL), &ut);
    maybe_interfere(G, &ut, &x);
    if (pick_write(G, 1, false, &y))
        emit_write(G, loom_op_silu_mul(G->g, gt, ut, y, NULL), &y);
}

static void chain_matvec_add(gen *G)
{
    loom_dtype dt = chance(&G->r, 50) ? LOOM_F16 : LOOM_F32;
    loom_tensor x, t, r, y;
    if (!pick_read(G, 1, &x) || !pick_write(G, 1, true, &t))
        return;
    emit_write(G, loom_op_matvec(G->g, weight(G, dt, rnd(&G->r, 2)), x, t, NULL), &t);
    maybe_interfere(G, &t, &x);
    if (!pick_read(G, 1, &r) || !pick_write(G, 1, false, &y))
        return;
    if (chance(&G->r, 50))
        emit_write(G, loom_op_add(G->g, t, r, y, NULL), &y);
    else
        emit_write(G, loom_op_add(G->g, r, t, y, NULL), &y);
}

/* A two-slot view as the 2 x N matrix of a 2-token step. */
static loom_tensor two_rows(loom_tensor t)
{
    t.rows = 2;
    t.cols = N;
    return t;
}

/* One op of the rest of the library, or a fence. */
static void single(gen *G)
{
    loom_tensor x, y, q;
    uint32_t k;
    switch (rnd(&G->r, 15)) {
    case 0:   /* wide copy: partial overlaps with the one-slot views */
        if (pick_read(G, 2, &x) && pick_write(G, 2, false, &y))
            emit_write(G, loom_op_copy(G->g, x, y, NULL), &y);
        break;
    case 1:
        if ((k = pick_kind(G, K_TABLE, LOOM_F32)) != LOOM_NONE && pick_write(G, 1, false, &y)) {
            uint32_t tok = pick_kind(G, K_TOKEN, LOOM_F32);
            loom_tensor T = loom_mat(G->b[k].id, G->b[k].dtype, VOCAB, N);
            emit_write(G, loom_op_embed(G->g, T, G->b[tok].id, 64 * rnd(&G->r, 4), y, NULL), &y);
        }
        break;
    case 2:
        if (pick_read(G, 1, &x) && pick_write(G, 1, false, &y))
            emit_write(G, loom_op_rope(G->g, x, y, 2, N / 2, 10000.0f, NULL), &y);
        break;
    case 3:
        if ((k = pick_kind(G, K_KV, LOOM_F32)) != LOOM_NONE && pick_read(G, 1, &x) && pick_read(G, 1, &y)) {
            loom_tensor kc = loom_mat(G->b[k].id, G->b[k].dtype, SEQ, N), vc = kc;
            vc.offset = (uint64_t)SEQ * N * loom_dtype_size(G->b[k].dtype);
            ok(loom_op_kv_append(G->g, x, y, kc, vc, NULL));
        }
        break;
    case 4:
        if ((k = pick_kind(G, K_KV, LOOM_F32)) != LOOM_NONE && pick_read(G, 1, &q) && pick_write(G, 1, false, &y)) {
            loom_tensor kc = loom_mat(G->b[k].id, G->b[k].dtype, SEQ, N), vc = kc;
            vc.offset = (uint64_t)SEQ * N * loom_dtype_size(G->b[k].dtype);
            uint32_t kvh = chance(&G->r, 50) ? 1 : 2;
            emit_write(G, loom_op_attention(G->g, q, kc, vc, y, 2, kvh, N / 2, NULL), &y);
        }
        break;
    case 5:
        if (pick_read(G, 1, &x) && pick_write(G, 1, false, &y))
            emit_write(G, loom_op_softmax(G->g, x, y, NULL), &y);
        break;
    case 6: {   /* argmax of host data into a token slot, which EMBED reads */
        uint32_t tok = pick_kind(G, K_TOKEN, LOOM_F32);
        for (uint32_t i = 0; i < G->nb; i++)
            if (G->b[i].kind == K_VEC && G->b[i].usage == LOOM_USAGE_INPUT) {
                loom_tensor out = { G->b[tok].id, LOOM_U32, 256u * rnd(&G->r, 4), 1, 1 };
                ok(loom_op_argmax(G->g, loom_vec(G->b[i].id, N), out, NULL));
                /* the token logged into a ring of 3 beside it, as a frontend
                 * keeps it for the host: at the step's end or the next's start */
                if (chance(&G->r, 50))
                    ck_assert_int_eq(loom_op_step_log(G->g, out,
                                                      (loom_tensor){ out.buffer, LOOM_U32, out.offset + 1024, 3, 1 },
                                                      rnd(&G->r, 2), NULL),
                                     LOOM_OK);
                break;
            }
        break;
    }
    case 7:
        if (pick_write(G, 1, false, &y) && (find(G, y.buffer)->usage != LOOM_USAGE_SCRATCH ||
                                            (find(G, y.buffer)->written >> (y.offset / VB) & 1)))
            ok(scale_rw(G->g, y));
        break;
    case 8:
        ck_assert_int_eq(loom_graph_add_barrier(G->g, NULL), LOOM_OK);
        break;
    case 11:   /* a 2-token step's appends, then its attention over them */
    case 12:
        if ((k = pick_kind(G, K_KV, LOOM_F32)) != LOOM_NONE && pick_read(G, 2, &x) && pick_read(G, 2, &q)) {
            loom_tensor kc = loom_mat(G->b[k].id, G->b[k].dtype, SEQ, N), vc = kc;
            vc.offset = (uint64_t)SEQ * N * loom_dtype_size(G->b[k].dtype);
            if (rnd(&G->r, 2) == 0)
                ok(loom_op_kv_append_rows(G->g, two_rows(x), two_rows(q), kc, vc, NULL));
            else if (pick_write(G, 2, false, &y))
                emit_write(G, loom_op_attention_rows(G->g, two_rows(q), kc, vc, two_rows(y), 2,
                                                     chance(&G->r, 50) ? 1 : 2, N / 2, NULL), &y);
        }
        break;
    case 13:
        if (pick_read(G, 2, &x) && pick_write(G, 2, false, &y)) {
            loom_tensor w;
            switch (rnd(&G->r, 3)) {
            case 0: emit_write(G, loom_op_rope_rows(G->g, two_rows(x), two_rows(y), 2, N / 2, 10000.0f, NULL), &y); break;
            case 1:
                if (pick_read(G, 1, &w))
                    emit_write(G, loom_op_rms_norm_mul_rows(G->g, two_rows(x), w, two_rows(y), 1e-5f, NULL), &y);
                break;
            default:
                y.cols = N;
                emit_write(G, loom_op_row_pick(G->g, two_rows(x), y, NULL), &y);
                break;
            }
        }
        break;
    case 14: {   /* the step's rows embedded from the prompt, or their argmax into a token slot */
        uint32_t tok = pick_kind(G, K_TOKEN, LOOM_F32);
        if ((k = pick_kind(G, K_TABLE, LOOM_F32)) != LOOM_NONE && chance(&G->r, 50)) {
            if (pick_write(G, 2, false, &y))
                emit_write(G, loom_op_embed_rows(G->g, loom_mat(G->b[k].id, G->b[k].dtype, VOCAB, N),
                                                 (loom_tensor){ G->b[tok].id, LOOM_U32, 0, 1, 256 }, two_rows(y), NULL),
                           &y);
        } else if (pick_read(G, 2, &x)) {
            loom_tensor out = { G->b[tok].id, LOOM_U32, 256u * rnd(&G->r, 4), 1, 2 };
            ok(loom_op_argmax_rows(G->g, two_rows(x), out, NULL));
        }
        break;
    }
    default:
        if (pick_read(G, 1, &x) && pick_write(G, 1, false, &y))
            emit_write(G, loom_op_copy(G->g, x, y, NULL), &y);
        break;
    }
}

static const loom_usage vec_usages[] = { LOOM_USAGE_NONE, LOOM_USAGE_NONE, LOOM_USAGE_NONE, LOOM_USAGE_NONE,
                                         LOOM_USAGE_SCRATCH, LOOM_USAGE_SCRATCH, LOOM_USAGE_STATE, LOOM_USAGE_OUTPUT,
                                         LOOM_USAGE_INPUT };

static void make_buffers(gen *G)
{
    uint64_t ext = 1000;
    uint32_t nvec = 6 + rnd(&G->r, 14);
    for (uint32_t i = 0; i < nvec; i++) {
        loom_usage u = i == 0 ? LOOM_USAGE_INPUT : vec_usages[rnd(&G->r, sizeof vec_usages / sizeof vec_usages[0])];
        bool external = u != LOOM_USAGE_SCRATCH && chance(&G->r, 25);
        uint32_t slots = 1 + rnd(&G->r, 4);
        uint32_t k = add_buf(G, K_VEC, (uint64_t)slots * VB, u, external ? ext++ : 0);
        G->b[k].slots = slots;
    }
    for (int dt = 0; dt < 2; dt++) {   /* two matrices each (gate/up), f32 and f16 */
        loom_dtype d = dt ? LOOM_F16 : LOOM_F32;
        uint32_t k = add_buf(G, K_WEIGHT, 2ull * N * N * loom_dtype_size(d),
                             chance(&G->r, 50) ? LOOM_USAGE_WEIGHT : LOOM_USAGE_NONE, chance(&G->r, 30) ? ext++ : 0);
        G->b[k].dtype = d;
    }
    loom_dtype td = chance(&G->r, 50) ? LOOM_F16 : LOOM_F32;
    uint32_t k = add_buf(G, K_TABLE, (uint64_t)VOCAB * N * loom_dtype_size(td), LOOM_USAGE_WEIGHT, 0);
    G->b[k].dtype = td;
    /* tokens at 256-byte slots of the first KB; rings of logged tokens in the second */
    k = add_buf(G, K_TOKEN, 2048, chance(&G->r, 50) ? LOOM_USAGE_STATE : LOOM_USAGE_NONE, 0);
    G->b[k].exact = true;
    loom_dtype kd = chance(&G->r, 50) ? LOOM_F16 : LOOM_F32;   /* f32 or f16 caches */
    k = add_buf(G, K_KV, 2ull * SEQ * N * loom_dtype_size(kd), chance(&G->r, 50) ? LOOM_USAGE_KV_CACHE : LOOM_USAGE_NONE,
                chance(&G->r, 30) ? ext++ : 0);
    G->b[k].dtype = kd;
    if (ext > 1000 && chance(&G->r, 4)) {   /* a second buffer over external memory 1000 */
        G->alias = true;
        G->b[add_buf(G, K_VEC, VB, LOOM_USAGE_OUTPUT, 1000)].slots = 1;
    }
}

static loom_graph *generate(gen *G, uint32_t seed)
{
    memset(G, 0, sizeof *G);
    G->r.s = 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed * 0x100000001b3ull);
    ck_assert_int_eq(loom_graph_create(&(loom_graph_desc){ .name = "oracle" }, &G->g), LOOM_OK);
    make_buffers(G);
    G->nodes_target = 4 + rnd(&G->r, chance(&G->r, 20) ? 300 : 60);
    while (loom_graph_node_count(G->g) < G->nodes_target) {
        switch (rnd(&G->r, 8)) {
        case 0: chain_norm_mul(G, false, true); break;
        case 1: chain_norm_mul(G, true, true); break;
        case 2: chain_norm_mul(G, true, false); break;
        case 3: chain_silu(G); break;
        case 4: chain_matvec_add(G); break;
        default: single(G); break;
        }
    }
    return G->g;
}

/* ---- the interpreter ------------------------------------------------------ */

typedef struct machine {
    const loom_graph *g;
    uint8_t **mem;           /* per buffer: its bytes */
    uint8_t *own;            /* backing store of every buffer not in the arena */
    uint8_t *arena;
    uint64_t arena_size;
} machine;

static const loom_binding *slot_of(const loom_graph *g, const loom_node *nd, uint32_t s)
{
    const loom_binding *b = loom_node_bindings(g, nd);
    for (uint32_t i = 0; i < nd->n_bindings; i++)
        if (b[i].slot == s)
            return &b[i];
    FAIL("node capture %u (%s) has no binding at slot %u", nd->capture_index, loom_op_name((loom_op)nd->op), s);
    return NULL;
}

static void *S(const machine *m, const loom_node *nd, uint32_t s)
{
    const loom_binding *b = slot_of(m->g, nd, s);
    return m->mem[b->buffer] + b->offset;
}

static uint32_t P(const machine *m, const loom_node *nd, uint32_t k)
{
    uint32_t v;
    memcpy(&v, loom_node_push(m->g, nd) + 4 * k, 4);
    return v;
}

static float PF(const machine *m, const loom_node *nd, uint32_t k)
{
    float v;
    memcpy(&v, loom_node_push(m->g, nd) + 4 * k, 4);
    return v;
}

/* A matrix binding's dtype from its size. */
static loom_dtype mat_dtype(const machine *m, const loom_node *nd, uint32_t s, uint64_t elems)
{
    return slot_of(m->g, nd, s)->size == elems * 2 ? LOOM_F16 : LOOM_F32;
}

static const loom_step_params *params(const machine *m, const loom_node *nd)
{
    return (const loom_step_params *)S(m, nd, 0);
}

/* A KV cache of n values at slot s as f32 for the reference: the bytes
 * themselves, or an f16 cache's values widened into a copy, which
 * cache_done rounds back where the op wrote it (to nearest even, as the
 * kernels store) and frees. */
static float *cache_in(const machine *m, const loom_node *nd, uint32_t s, uint64_t n)
{
    if (mat_dtype(m, nd, s, n) != LOOM_F16)
        return S(m, nd, s);
    const uint16_t *h = S(m, nd, s);
    float *f = malloc(n * sizeof *f + 4);
    ck_assert_ptr_nonnull(f);
    for (uint64_t i = 0; i < n; i++)
        f[i] = loom_f16_to_f32(h[i]);
    return f;
}

static void cache_done(const machine *m, const loom_node *nd, uint32_t s, float *f, uint64_t n, bool written)
{
    if (mat_dtype(m, nd, s, n) != LOOM_F16)
        return;
    uint16_t *h = S(m, nd, s);
    for (uint64_t i = 0; written && i < n; i++)
        h[i] = loom_f32_to_f16(f[i]);
    free(f);
}

/* One dispatch, by op kind: each case calls the op's reference function. */
static void run_node(const machine *m, const loom_node *nd)
{
    if (nd->type == LOOM_NODE_BARRIER)
        return;
    switch ((loom_op)nd->op) {
    case LOOM_OP_COPY: loom_ref_copy(S(m, nd, 0), S(m, nd, 1), (uint64_t)P(m, nd, 0) * 4); break;
    case LOOM_OP_EMBED: {
        uint32_t dim = P(m, nd, 0), vocab = P(m, nd, 1), tok = ((const uint32_t *)S(m, nd, 1))[P(m, nd, 2)];
        loom_ref_embed(mat_dtype(m, nd, 0, (uint64_t)dim * vocab), S(m, nd, 0), vocab, dim, tok, S(m, nd, 2));
        break;
    }
    case LOOM_OP_RMS_NORM: loom_ref_rms_norm(S(m, nd, 0), NULL, S(m, nd, 1), P(m, nd, 0), PF(m, nd, 1)); break;
    case LOOM_OP_RMS_NORM_MUL:
        loom_ref_rms_norm(S(m, nd, 0), S(m, nd, 1), S(m, nd, 2), P(m, nd, 0), PF(m, nd, 1));
        break;
    case LOOM_OP_ADD_RMS_NORM:
        loom_ref_add_rms_norm(S(m, nd, 0), S(m, nd, 1), NULL, S(m, nd, 2), S(m, nd, 3), P(m, nd, 0), PF(m, nd, 1));
        break;
    case LOOM_OP_ADD_RMS_NORM_MUL:
        loom_ref_add_rms_norm(S(m, nd, 0), S(m, nd, 1), S(m, nd, 2), S(m, nd, 3), S(m, nd, 4), P(m, nd, 0),
                              PF(m, nd, 1));
        break;
    case LOOM_OP_MUL: loom_ref_mul(S(m, nd, 0), S(m, nd, 1), S(m, nd, 2), P(m, nd, 0)); break;
    case LOOM_OP_ADD: loom_ref_add(S(m, nd, 0), S(m, nd, 1), S(m, nd, 2), P(m, nd, 0)); break;
    case LOOM_OP_SILU_MUL: loom_ref_silu_mul(S(m, nd, 0), S(m, nd, 1), S(m, nd, 2), P(m, nd, 0)); break;
    case LOOM_OP_MATVEC: {
        uint32_t rows = P(m, nd, 0), cols = P(m, nd, 1);
        loom_ref_matvec(mat_dtype(m, nd, 0, (uint64_t)rows * cols), S(m, nd, 0), S(m, nd, 1), NULL, S(m, nd, 2),
                        rows, cols);
        break;
    }
    case LOOM_OP_MATVEC_ADD: {
        uint32_t rows = P(m, nd, 0), cols = P(m, nd, 1);
        loom_ref_matvec(mat_dtype(m, nd, 0, (uint64_t)rows * cols), S(m, nd, 0), S(m, nd, 1), S(m, nd, 2),
                        S(m, nd, 3), rows, cols);
        break;
    }
    case LOOM_OP_MATVEC_SILU_MUL: {
        uint32_t rows = P(m, nd, 0), cols = P(m, nd, 1);
        loom_ref_matvec_silu_mul(mat_dtype(m, nd, 0, (uint64_t)rows * cols), S(m, nd, 0), S(m, nd, 1), S(m, nd, 2),
                                 S(m, nd, 3), rows, cols);
        break;
    }
    case LOOM_OP_ROPE:
        loom_ref_rope(S(m, nd, 1), S(m, nd, 2), P(m, nd, 0), P(m, nd, 1), PF(m, nd, 2), params(m, nd)->pos);
        break;
    case LOOM_OP_KV_APPEND: {   /* push: dim, max_seq */
        uint64_t n = (uint64_t)P(m, nd, 0) * P(m, nd, 1);
        float *kc = cache_in(m, nd, 3, n), *vc = cache_in(m, nd, 4, n);
        loom_ref_kv_append(S(m, nd, 1), S(m, nd, 2), kc, vc, P(m, nd, 0), P(m, nd, 1), params(m, nd)->pos);
        cache_done(m, nd, 3, kc, n, true);
        cache_done(m, nd, 4, vc, n, true);
        break;
    }
    case LOOM_OP_ATTENTION: {   /* push: n_heads, n_kv_heads, head_dim, max_seq, scale */
        uint64_t n = (uint64_t)P(m, nd, 1) * P(m, nd, 2) * P(m, nd, 3);
        float *kc = cache_in(m, nd, 2, n), *vc = cache_in(m, nd, 3, n);
        loom_ref_attention(S(m, nd, 1), kc, vc, S(m, nd, 4), P(m, nd, 0), P(m, nd, 1), P(m, nd, 2), P(m, nd, 3),
                           params(m, nd)->kv_len, PF(m, nd, 4));
        cache_done(m, nd, 2, kc, n, false);
        cache_done(m, nd, 3, vc, n, false);
        break;
    }
    case LOOM_OP_EMBED_ROWS: {   /* params, table, tokens, out; push: cols, T */
        uint32_t cols = P(m, nd, 0), n_tok = (uint32_t)(slot_of(m->g, nd, 2)->size / 4);
        loom_ref_embed_rows(mat_dtype(m, nd, 1, (uint64_t)VOCAB * cols), S(m, nd, 1), VOCAB, cols, S(m, nd, 2), n_tok,
                            params(m, nd)->pos, params(m, nd)->rows, P(m, nd, 1), S(m, nd, 3));
        break;
    }
    case LOOM_OP_RMS_NORM_MUL_ROWS:   /* x, w, y; push: n, eps, T */
        loom_ref_rms_norm_mul_rows(S(m, nd, 0), S(m, nd, 1), S(m, nd, 2), P(m, nd, 0), P(m, nd, 2), PF(m, nd, 1));
        break;
    case LOOM_OP_ROPE_ROWS:   /* params, x, y; push: n_heads, head_dim, theta, T */
        loom_ref_rope_rows(S(m, nd, 1), S(m, nd, 2), P(m, nd, 0), P(m, nd, 1), PF(m, nd, 2), params(m, nd)->pos,
                           P(m, nd, 3));
        break;
    case LOOM_OP_KV_APPEND_ROWS: {   /* params, k, v, kcache, vcache; push: kvd, max_seq, T */
        uint64_t n = (uint64_t)P(m, nd, 0) * P(m, nd, 1);
        uint32_t rows = params(m, nd)->rows < P(m, nd, 2) ? params(m, nd)->rows : P(m, nd, 2);
        float *kc = cache_in(m, nd, 3, n), *vc = cache_in(m, nd, 4, n);
        loom_ref_kv_append_rows(S(m, nd, 1), S(m, nd, 2), kc, vc, P(m, nd, 0), P(m, nd, 1), params(m, nd)->pos, rows);
        cache_done(m, nd, 3, kc, n, true);
        cache_done(m, nd, 4, vc, n, true);
        break;
    }
    case LOOM_OP_ATTENTION_ROWS: {   /* params, q, kcache, vcache, out, part, count; push: heads, kv heads, head_dim,
                                        max_seq, scale, splits, T */
        uint64_t n = (uint64_t)P(m, nd, 1) * P(m, nd, 2) * P(m, nd, 3);
        float *kc = cache_in(m, nd, 2, n), *vc = cache_in(m, nd, 3, n);
        loom_ref_attention_rows(S(m, nd, 1), kc, vc, S(m, nd, 4), P(m, nd, 0), P(m, nd, 1), P(m, nd, 2), P(m, nd, 3),
                                params(m, nd)->pos, params(m, nd)->rows, P(m, nd, 6), PF(m, nd, 4));
        cache_done(m, nd, 2, kc, n, false);
        cache_done(m, nd, 3, vc, n, false);
        break;
    }
    case LOOM_OP_ROW_PICK:   /* params, x, y; push: n, T */
        loom_ref_row_pick(S(m, nd, 1), S(m, nd, 2), P(m, nd, 0), params(m, nd)->rows, P(m, nd, 1));
        break;
    case LOOM_OP_ARGMAX_ROWS:   /* x, out; push: n, T */
        loom_ref_argmax_rows(S(m, nd, 0), S(m, nd, 1), P(m, nd, 0), P(m, nd, 1));
        break;
    case LOOM_OP_SOFTMAX: loom_ref_softmax(S(m, nd, 0), S(m, nd, 1), P(m, nd, 0)); break;
    case LOOM_OP_ARGMAX:
        *(uint32_t *)S(m, nd, 1) = loom_ref_argmax(S(m, nd, 0), P(m, nd, 0));
        break;
    case LOOM_OP_STEP_LOG: {   /* params, src, dst */
        uint32_t n = P(m, nd, 0), slots = P(m, nd, 1), back = P(m, nd, 2), step = params(m, nd)->step;
        if (step >= back)
            memcpy((uint32_t *)S(m, nd, 2) + (uint64_t)((step - back) % slots) * n, S(m, nd, 1), (size_t)n * 4);
        break;
    }
    case LOOM_OP_RMS_NORM_MATVEC: {
        uint32_t rows = P(m, nd, 0), cols = P(m, nd, 1);
        loom_ref_rms_norm_matvec(mat_dtype(m, nd, 0, (uint64_t)rows * cols), S(m, nd, 0), S(m, nd, 1), S(m, nd, 2),
                                 S(m, nd, 3), rows, cols, PF(m, nd, 2));
        break;
    }
    case LOOM_OP_RMS_NORM_MATVEC_SILU_MUL: {
        uint32_t rows = P(m, nd, 0), cols = P(m, nd, 1);
        loom_ref_rms_norm_matvec_silu_mul(mat_dtype(m, nd, 0, (uint64_t)rows * cols), S(m, nd, 0), S(m, nd, 1),
                                          S(m, nd, 2), S(m, nd, 3), S(m, nd, 4), rows, cols, PF(m, nd, 2));
        break;
    }
    case LOOM_OP_MATVEC_ARGMAX: {   /* W, x, y, out, workspace */
        uint32_t rows = P(m, nd, 0), cols = P(m, nd, 1);
        loom_ref_matvec(mat_dtype(m, nd, 0, (uint64_t)rows * cols), S(m, nd, 0), S(m, nd, 1), NULL, S(m, nd, 2),
                        rows, cols);
        *(uint32_t *)S(m, nd, 3) = loom_ref_argmax(S(m, nd, 2), rows);
        break;
    }
    case LOOM_OP_RMS_NORM_MATVEC_ARGMAX: {   /* W, x, g, y, out, workspace */
        uint32_t rows = P(m, nd, 0), cols = P(m, nd, 1);
        loom_ref_rms_norm_matvec(mat_dtype(m, nd, 0, (uint64_t)rows * cols), S(m, nd, 0), S(m, nd, 1), S(m, nd, 2),
                                 S(m, nd, 3), rows, cols, PF(m, nd, 2));
        *(uint32_t *)S(m, nd, 4) = loom_ref_argmax(S(m, nd, 3), rows);
        break;
    }
    case LOOM_OP_RMS_NORM_MATVEC_ARGMAX_LOG: {   /* params, W, x, g, y, out, workspace, ring */
        uint32_t rows = P(m, nd, 0), cols = P(m, nd, 1), slots = P(m, nd, 3);
        loom_ref_rms_norm_matvec(mat_dtype(m, nd, 1, (uint64_t)rows * cols), S(m, nd, 1), S(m, nd, 2), S(m, nd, 3),
                                 S(m, nd, 4), rows, cols, PF(m, nd, 2));
        uint32_t idx = loom_ref_argmax(S(m, nd, 4), rows);
        *(uint32_t *)S(m, nd, 5) = idx;
        ((uint32_t *)S(m, nd, 8))[params(m, nd)->step % slots] = idx;
        break;
    }
    case LOOM_OP_RMS_NORM_QKV_ROPE_KV: {   /* params, x, g, Wq, Wk, Wv, q, kcache, vcache */
        uint32_t qr = P(m, nd, 0), kr = P(m, nd, 1), cols = P(m, nd, 2);
        uint64_t n = (uint64_t)kr * P(m, nd, 5);
        float *kc = cache_in(m, nd, 7, n), *vc = cache_in(m, nd, 8, n);
        loom_ref_rms_norm_qkv_rope_kv(mat_dtype(m, nd, 3, (uint64_t)qr * cols), S(m, nd, 1), S(m, nd, 2),
                                      S(m, nd, 3), S(m, nd, 4), S(m, nd, 5), S(m, nd, 6), kc, vc, qr, kr, cols,
                                      P(m, nd, 4), P(m, nd, 5), PF(m, nd, 6), PF(m, nd, 3), params(m, nd)->pos);
        cache_done(m, nd, 7, kc, n, true);
        cache_done(m, nd, 8, vc, n, true);
        break;
    }
    case LOOM_OP_RMS_NORM_QKV_ROPE_KV_ROWS: {   /* the same slots; push: the q/k/v form's, then T */
        uint32_t qr = P(m, nd, 0), kr = P(m, nd, 1), cols = P(m, nd, 2), T = P(m, nd, 7);
        uint64_t n = (uint64_t)kr * P(m, nd, 5);
        loom_dtype dt = mat_dtype(m, nd, 3, (uint64_t)qr * cols);
        float *kc = cache_in(m, nd, 7, n), *vc = cache_in(m, nd, 8, n);
        loom_ref_rms_norm_qkv_rope_kv_rows(dt, dt, S(m, nd, 1), S(m, nd, 2), S(m, nd, 3), S(m, nd, 4), S(m, nd, 5),
                                           S(m, nd, 6), kc, vc, qr, kr, cols, P(m, nd, 4), P(m, nd, 5), PF(m, nd, 6),
                                           PF(m, nd, 3), params(m, nd)->pos, params(m, nd)->rows, T);
        cache_done(m, nd, 7, kc, n, true);
        cache_done(m, nd, 8, vc, n, true);
        break;
    }
    case LOOM_OP_EMBED_RMS_NORM_QKV_ROPE_KV: {   /* params, table, tokens, g, Wq, Wk, Wv, q, kcache, vcache, x */
        uint32_t qr = P(m, nd, 0), kr = P(m, nd, 1), cols = P(m, nd, 2), vocab = P(m, nd, 7);
        uint32_t tok = ((const uint32_t *)S(m, nd, 2))[P(m, nd, 8)];
        uint64_t n = (uint64_t)kr * P(m, nd, 5);
        float *kc = cache_in(m, nd, 8, n), *vc = cache_in(m, nd, 9, n);
        loom_ref_embed(mat_dtype(m, nd, 1, (uint64_t)vocab * cols), S(m, nd, 1), vocab, cols, tok, S(m, nd, 10));
        loom_ref_rms_norm_qkv_rope_kv(mat_dtype(m, nd, 4, (uint64_t)qr * cols), S(m, nd, 10), S(m, nd, 3),
                                      S(m, nd, 4), S(m, nd, 5), S(m, nd, 6), S(m, nd, 7), kc, vc, qr, kr, cols,
                                      P(m, nd, 4), P(m, nd, 5), PF(m, nd, 6), PF(m, nd, 3), params(m, nd)->pos);
        cache_done(m, nd, 8, kc, n, true);
        cache_done(m, nd, 9, vc, n, true);
        break;
    }
    case LOOM_OP_OTHER:
        if (strcmp(loom_graph_kernel_name(m->g, nd->kernel), "scale_rw") == 0) {
            float *y = S(m, nd, 0);
            for (uint32_t i = 0; i < P(m, nd, 0); i++)
                y[i] = y[i] * 0.5f + 0.25f;
            break;
        }
        /* fall through */
    default:
        FAIL("no interpreter for op %s (kernel %s): add a case calling its reference function",
             loom_op_name((loom_op)nd->op), loom_graph_kernel_name(m->g, nd->kernel));
    }
}

/* Initial contents, the same for every run of a seed: vectors in [-1, 1],
 * f16 weights as halves, tokens below VOCAB. */
static void fill(const gen *G, uint32_t id, uint8_t *p, uint64_t size)
{
    rng r = { 0x51ed270b2f6a1e3dull ^ ((uint64_t)cur_seed << 20) ^ id };
    const gen_buf *b = NULL;
    for (uint32_t i = 0; i < G->nb; i++)
        if (G->b[i].id == id)
            b = &G->b[i];
    for (uint64_t i = 0; i + 4 <= size; i += 4) {
        float f = (float)rnd(&r, 20001) / 10000.0f - 1.0f;
        if (b && b->kind == K_WEIGHT)
            f *= 0.125f;   /* 1/sqrt(N): a matvec keeps magnitudes, repeated ones do not blow up */
        uint32_t w;
        memcpy(&w, &f, 4);
        if (b && b->kind == K_TOKEN)
            w = rnd(&r, VOCAB);
        else if (b && (b->kind == K_WEIGHT || b->kind == K_TABLE || b->kind == K_KV) && b->dtype == LOOM_F16)
            w = loom_f32_to_f16(f) | (uint32_t)loom_f32_to_f16(-f * 0.5f) << 16;
        memcpy(p + i, &w, 4);
    }
}

static bool in_arena(const loom_buffer *b) { return b->cls == LOOM_CLASS_SCRATCH; }

static void machine_init(machine *m, const gen *G, const loom_graph *g)
{
    uint32_t nb = loom_graph_buffer_count(g);
    uint64_t total = 0;
    for (uint32_t i = 0; i < nb; i++)
        total += in_arena(loom_graph_buffer(g, i)) ? 0 : loom_graph_buffer(g, i)->size;
    *m = (machine){ .g = g, .mem = calloc(nb, sizeof(uint8_t *)), .own = malloc(total + 1),
                    .arena_size = loom_graph_arena_size(g) };
    m->arena = malloc(m->arena_size + 1);
    ck_assert(m->mem && m->own && m->arena);
    uint64_t at = 0;
    for (uint32_t i = 0; i < nb; i++) {
        const loom_buffer *b = loom_graph_buffer(g, i);
        if (in_arena(b)) {
            CHECK(b->arena_offset + b->size <= m->arena_size, "buffer %u outside the arena", i);
            m->mem[i] = m->arena + b->arena_offset;
        } else {
            m->mem[i] = m->own + at;
            fill(G, i, m->mem[i], b->size);
            at += b->size;
        }
    }
}

static void machine_free(machine *m)
{
    free(m->mem);
    free(m->own);
    free(m->arena);
}

/* The host's part of a step: the step parameters, and scratch memory that
 * holds garbage (a NaN pattern, so reading it is never silent). */
static void begin_step(machine *m, uint32_t step)
{
    memset(m->arena, 0xff, m->arena_size + 1);
    for (uint32_t i = 0; i < loom_graph_buffer_count(m->g); i++)
        if (loom_graph_buffer(m->g, i)->usage == LOOM_USAGE_PARAMS) {
            /* one row, then two: the T-row ops' padding row, then none */
            loom_step_params sp = { .pos = step, .token = 3, .kv_len = step + 1, .step = step,
                                    .rows = 1 + step % 2 };
            memcpy(m->mem[i], &sp, sizeof sp);
        }
}

static bool host_visible(const loom_buffer *b)
{
    return b->external || (b->usage != LOOM_USAGE_NONE && b->usage != LOOM_USAGE_SCRATCH);
}

/* An f16 KV cache: value by value, exact unless fused; else within the
 * f32 tolerance below (relative to the buffer's largest value) plus one
 * unit in f16's last place, as a value a fused kernel rounded differently
 * may round to the neighbouring half. */
static void compare_halves(const machine *want, const machine *got, uint32_t id, bool exact, const char *how)
{
    const loom_buffer *b = loom_graph_buffer(want->g, id);
    const uint16_t *x = (const uint16_t *)want->mem[id], *y = (const uint16_t *)got->mem[id];
    float scale = 0;
    for (uint64_t i = 0; i < b->size / 2; i++) {
        float v = loom_f16_to_f32(x[i]);
        scale = isfinite(v) && fabsf(v) > scale ? fabsf(v) : scale;
    }
    for (uint64_t i = 0; i < b->size / 2; i++) {
        if (x[i] == y[i])
            continue;
        float fx = loom_f16_to_f32(x[i]), fy = loom_f16_to_f32(y[i]);
        bool close = !exact && isfinite(fx) && isfinite(fy) &&
                     fabsf(fx - fy) <= 1e-3f * scale + 0x1p-10f * fabsf(fx) + 1e-6f;
        CHECK(close, "%s: buffer %u '%s' (f16) element %llu: capture order gives %04x (%g), the plan %04x (%g)", how,
              id, loom_graph_buffer_name(want->g, id), (unsigned long long)i, x[i], (double)fx, y[i], (double)fy);
    }
}

/* Buffer `id` of the two machines after a step; exact unless fused. */
static void compare(const gen *G, const machine *want, const machine *got, uint32_t id, bool exact, const char *how)
{
    const loom_buffer *b = loom_graph_buffer(want->g, id);
    const gen_buf *gb = NULL;
    for (uint32_t i = 0; i < G->nb; i++)
        if (G->b[i].id == id)
            gb = &G->b[i];
    exact |= gb && gb->exact;
    if (gb && gb->kind == K_KV && gb->dtype == LOOM_F16) {
        compare_halves(want, got, id, exact, how);
        return;
    }
    /* Fused kernels round once where the chain rounded at each step; what
     * follows (sums with cancellation) may grow that, so the tolerance is
     * relative to the buffer's largest value, per 256-byte view. A missing
     * barrier or a wrong fusion moves values by their own size. */
    float scale = 0;
    for (uint64_t i = 0; i + 4 <= b->size; i += 4) {
        if (i % VB == 0 && !exact) {
            scale = 0;
            for (uint64_t k = i; k < i + VB && k + 4 <= b->size; k += 4) {
                float v;
                memcpy(&v, want->mem[id] + k, 4);
                scale = isfinite(v) && fabsf(v) > scale ? fabsf(v) : scale;
            }
        }
        uint32_t x, y;
        memcpy(&x, want->mem[id] + i, 4);
        memcpy(&y, got->mem[id] + i, 4);
        if (x == y)
            continue;
        float fx, fy;
        memcpy(&fx, &x, 4);
        memcpy(&fy, &y, 4);
        bool close = !exact && isfinite(fx) && isfinite(fy) && fabsf(fx - fy) <= 1e-3f * scale + 1e-6f;
        CHECK(close, "%s: buffer %u '%s' byte %llu: capture order gives %08x (%g), the plan %08x (%g)", how, id,
              loom_graph_buffer_name(want->g, id), (unsigned long long)i, x, (double)fx, y, (double)fy);
    }
}

/* The plan, epoch by epoch; within an epoch in order 0 forward, 1 reverse,
 * 2 shuffled. */
static void run_plan(const machine *m, int order, rng *r)
{
    const loom_graph *g = m->g;
    uint32_t n = loom_graph_node_count(g), idx[MAXNODES];
    for (uint32_t lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo + 1; hi < n && loom_graph_node(g, hi)->barrier == LOOM_NONE; hi++)
            ;
        uint32_t k = hi - lo;
        for (uint32_t i = 0; i < k; i++)
            idx[i] = order == 1 ? hi - 1 - i : lo + i;
        for (uint32_t i = k; order == 2 && i > 1; i--) {
            uint32_t j = rnd(r, i), t = idx[i - 1];
            idx[i - 1] = idx[j];
            idx[j] = t;
        }
        for (uint32_t i = 0; i < k; i++)
            run_node(m, loom_graph_node(g, idx[i]));
    }
}

static void run_capture(const machine *m)
{
    for (uint32_t i = 0; i < loom_graph_node_count(m->g); i++)
        run_node(m, loom_graph_node(m->g, i));
}

/* ---- the pair scan -------------------------------------------------------- */

static bool conflict(const loom_graph *g, const loom_node *a, const loom_node *b)
{
    if (a->type == LOOM_NODE_BARRIER || b->type == LOOM_NODE_BARRIER)
        return true;
    const loom_range *ra = loom_node_reads(g, a), *rb = loom_node_reads(g, b);
    for (uint32_t i = 0; i < (uint32_t)a->n_reads + a->n_writes; i++)
        for (uint32_t j = 0; j < (uint32_t)b->n_reads + b->n_writes; j++) {
            bool wa = i >= a->n_reads, wb = j >= b->n_reads;
            if ((wa || wb) && ra[i].buffer == rb[j].buffer && ra[i].offset < rb[j].offset + rb[j].size &&
                rb[j].offset < ra[i].offset + ra[i].size)
                return true;
        }
    return false;
}

static void pair_scan(const loom_plan *p, uint32_t captured, bool reorder)
{
    const loom_graph *pg = loom_plan_graph(p);
    uint32_t n = loom_graph_node_count(pg), epoch[MAXNODES], e = 0;
    uint8_t seen[MAXNODES] = { 0 };
    CHECK(loom_graph_scheduled(pg), "plan not scheduled");
    for (uint32_t i = 0; i < n; i++) {
        const loom_node *nd = loom_graph_node(pg, i);
        const uint32_t *mem = loom_node_members(pg, nd);
        for (uint32_t k = 0; k < nd->fused; k++) {
            CHECK(mem[k] < captured && !seen[mem[k]], "captured node %u stood for twice or out of range", mem[k]);
            seen[mem[k]] = 1;
        }
        CHECK(nd->fused == 0 || mem[nd->fused - 1] == nd->capture_index,
              "plan node %u: capture_index is not its last member", i);
        e += nd->barrier != LOOM_NONE;
        epoch[i] = e;
    }
    for (uint32_t c = 0; c < captured; c++)
        CHECK(seen[c], "captured node %u is missing from the plan", c);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = i + 1; j < n; j++) {
            const loom_node *a = loom_graph_node(pg, i), *b = loom_graph_node(pg, j);
            if (!conflict(pg, a, b))
                continue;
            CHECK(a->capture_index < b->capture_index, "plan nodes %u, %u conflict but run out of capture order", i,
                  j);
            CHECK(a->group != b->group, "conflicting plan nodes %u, %u share group %u", i, j, a->group);
            if (a->type != LOOM_NODE_BARRIER && b->type != LOOM_NODE_BARRIER)
                CHECK(epoch[i] < epoch[j], "conflicting plan nodes %u, %u have no barrier between", i, j);
        }
    for (uint32_t s = 0; s < n; s++)   /* a sentinel separates everything before it from everything after */
        for (uint32_t i = 0; loom_graph_node(pg, s)->type == LOOM_NODE_BARRIER && i < s; i++)
            for (uint32_t j = s + 1; j < n; j++)
                if (loom_graph_node(pg, i)->type != LOOM_NODE_BARRIER &&
                    loom_graph_node(pg, j)->type != LOOM_NODE_BARRIER)
                    CHECK(epoch[i] < epoch[j], "nodes %u and %u on both sides of sentinel %u share an epoch", i, j, s);
    const loom_plan_stats *st = loom_plan_get_stats(p);
    CHECK(st->barriers >= st->barrier_lower_bound, "%u barriers, below the bound %u", st->barriers,
          st->barrier_lower_bound);
    if (reorder)
        CHECK(st->barriers == st->barrier_lower_bound, "%u barriers, the bound is %u", st->barriers,
              st->barrier_lower_bound);
}

/* ---- the driver ----------------------------------------------------------- */

typedef struct tally {
    uint32_t seeds, fused_seeds, aliased, fired[LOOM_OP_COUNT];
} tally;

static void dump(const loom_graph *g, const char *what)
{
    loom_str s;
    loom_str_init(&s, NULL);
    if (loom_graph_dump(g, LOOM_FORMAT_TEXT, &s) == LOOM_OK && s.len)
        printf("---- %s\n%s", what, s.data);
    loom_str_free(&s);
}

static const uint32_t windows[] = { 1, 2, 3, 5, 8, 16, 64, 1000 };
static const uint32_t modes[] = { 0, LOOM_DISABLE_FUSE, LOOM_DISABLE_REORDER, LOOM_DISABLE_BARRIERS };

static void run_seed(uint32_t seed, tally *t)
{
    cur_seed = seed;
    gen G;
    loom_graph *g = generate(&G, seed);
    uint32_t captured = loom_graph_node_count(g);
    CHECK(captured <= MAXNODES, "%u nodes", captured);
    if (verbose)
        dump(g, "captured");
    t->seeds++;
    loom_plan *p;
    if (G.alias) {   /* shared external ids: refused, naming the buffers */
        CHECK(loom_compile(g, NULL, &p) == LOOM_VERIFY, "two buffers over one external id were accepted");
        t->aliased++;
        loom_graph_destroy(g);
        return;
    }
    /* The reference: capture order, two steps, snapshots of each. */
    machine ref;
    loom_graph *plain;
    ck_assert_int_eq(loom_graph_clone(g, &plain), LOOM_OK);   /* unclassified: every buffer its own memory */
    machine_init(&ref, &G, plain);
    uint32_t nb = loom_graph_buffer_count(g);
    uint8_t *snap[2];
    uint64_t total = 0;
    for (uint32_t i = 0; i < nb; i++)
        total += loom_graph_buffer(g, i)->size;
    for (uint32_t step = 0; step < 2; step++) {
        begin_step(&ref, step);
        run_capture(&ref);
        snap[step] = malloc(total + 1);
        memcpy(snap[step], ref.own, total);
    }
    bool fused_any = false;
    uint32_t window = windows[rnd(&G.r, sizeof windows / sizeof windows[0])];
    for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++) {
        loom_compile_options o = { .window = window, .disable = modes[mi], .verify_each = true, .dump_dir = "" };
        loom_result rc = loom_compile(g, &o, &p);
        CHECK(rc == LOOM_OK, "compile (disable 0x%x, window %u): %s: %s", modes[mi], window, loom_result_str(rc),
              loom_last_error());
        const loom_graph *pg = loom_plan_graph(p);
        if (verbose)
            dump(pg, "plan");
        bool fused = false;
        for (uint32_t i = 0; i < loom_graph_node_count(pg); i++)
            if (loom_graph_node(pg, i)->fused > 1) {
                fused = true;
                if (mi == 0)
                    t->fired[loom_graph_node(pg, i)->op]++;
            }
        fused_any |= fused;
        pair_scan(p, captured, !(modes[mi] & (LOOM_DISABLE_REORDER | LOOM_DISABLE_BARRIERS)));
        rng r = { seed };
        for (int order = 0; order < 3; order++) {
            machine m;
            machine_init(&m, &G, pg);
            for (uint32_t step = 0; step < 2; step++) {
                begin_step(&m, step);
                run_plan(&m, order, &r);
                memcpy(ref.own, snap[step], total);   /* the reference after this step */
                char how[96];
                snprintf(how, sizeof how, "disable 0x%x, window %u, epoch order %d, step %u", modes[mi], window,
                         order, step);
                for (uint32_t i = 0; i < nb; i++)
                    if (host_visible(loom_graph_buffer(g, i)))
                        compare(&G, &ref, &m, i, !fused, how);
            }
            machine_free(&m);
        }
        loom_plan_release(p);
    }
    t->fused_seeds += fused_any;
    free(snap[0]);
    free(snap[1]);
    machine_free(&ref);
    loom_graph_destroy(plain);
    loom_graph_destroy(g);
}

START_TEST(test_oracle)
{
    tally t = { 0 };
    const char *one = getenv("LOOM_ORACLE_SEED"), *count = getenv("LOOM_ORACLE_SEEDS");
    if (one) {
        verbose = true;
        run_seed((uint32_t)strtoul(one, NULL, 10), &t);
        return;
    }
    uint32_t seeds = count ? (uint32_t)strtoul(count, NULL, 10) : 2000;
    for (uint32_t s = 1; s <= seeds; s++)
        run_seed(s, &t);
    printf("oracle: %u seeds, fusion fired on %u, %u refused for shared external ids\n", t.seeds, t.fused_seeds,
           t.aliased);
    for (int op = 0; op < LOOM_OP_COUNT; op++)
        if (t.fired[op])
            printf("oracle: %-18s fused %u times\n", loom_op_name((loom_op)op), t.fired[op]);
    /* Fusion must be what this test sees most of the time. */
    ck_assert_uint_ge(t.fused_seeds * 2, t.seeds - t.aliased);
}
END_TEST

static Suite *oracle_suite(void)
{
    Suite *s = suite_create("passes");
    TCase *tc = tcase_create("oracle");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_oracle);
    suite_add_tcase(s, tc);
    return s;
}

void loom_test_register(loom_test_runner *r, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    loom_test_add_suite(r, oracle_suite());
}
