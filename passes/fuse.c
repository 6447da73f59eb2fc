/* fuse: replaces chains of nodes by one fused node, driven by a table of
 * rules. A rule is data, in the manner of MLIR's declarative rewrite
 * patterns: what matches (its pattern: the chain's nodes, how each is
 * found from another, and the fields that must agree) and what it becomes
 * (the fused op, each of its tensors wired from a member's binding slot
 * and shaped by a member's push fields — the slots of ops.def, the push
 * read back by loom_op_args_read). One matcher walks every pattern, and
 * one builder call hands the wired tensors to the fused op's builder; a
 * new rule is a row of the table (and a case of build() for a new fused
 * op). See "rules as data" below for how a row is written.
 *
 * A chain is legal when every eliminated intermediate (a producer's output
 * that only the chain reads) is read by no other node while it holds that
 * value, is not host visible, the shapes agree, no input of the fused node
 * partly overlaps one of its outputs (an exact in-place view is the
 * builder's call), the fused node reads nothing the chain wrote (an
 * eliminated intermediate, or bytes one member wrote before another read
 * them), and moving the chain's earlier nodes down to the anchor crosses
 * no node they conflict with and no sentinel or non-reorderable node. A
 * node that reads and rewrites the intermediate is one of its readers.
 * With a binding limit (loom_pass_ctx.max_binding_range), a chain that
 * binds more than the limit anywhere fuses only into an op the split pass
 * can cut into row blocks (RMS_NORM_QKV_ROPE_KV, say, stays unfused then).
 * The fused node records the capture indices of all its members. Anchors are visited from
 * the end so the longest rule claims a node first; all replacements are
 * applied at the end in one permutation, and every legality question is
 * asked of the original positions (a node moves only past nodes it was
 * checked against). */
#include <stddef.h>
#include "internal.h"
#include "loom_ops.h"

#define FUSE_SCAN_LIMIT 256u   /* nodes between chain members, writers walked back */

typedef struct fuse_acc { uint32_t node; uint64_t lo, hi; } fuse_acc;

typedef struct fuse_state {
    loom_graph *g;
    const loom_allocator *a;
    uint32_t n, nb;
    uint32_t *rstart, *wstart;    /* CSR per buffer, nb + 1 entries */
    fuse_acc *racc, *wacc;
    uint32_t nr, nw;
    uint8_t *consumed;
    uint32_t *repl;
    uint64_t limit;               /* binding limit; 0: none */
} fuse_state;

#define FUSE_MAX_CHAIN 7u

typedef struct fuse_match {
    uint32_t nodes[FUSE_MAX_CHAIN], n_nodes;   /* ascending positions; the last is the anchor */
    uint32_t elim[FUSE_MAX_CHAIN], n_elim;     /* producers whose output disappears */
    loom_tensor in[6], out[4];
    uint32_t n_in, n_out;
    float eps;
    float theta;                  /* RoPE rules */
    uint32_t head_dim;
    uint32_t token_buf, token_index;   /* embed_qkv */
} fuse_match;

/* ---- reading nodes back as ops ------------------------------------------ */

typedef struct op_view {
    loom_op_args a;                      /* the push constants */
    uint32_t n;                          /* the elements of the output, as an elementwise consumer counts
                                            them (STEP_LOG: a row's; RMS_NORM_QKV_ROPE_KV: x's) */
    loom_dtype wt, wv;                   /* a block-typed kernel form's weights (Wv: wv), else F32:
                                            mat_of infers f32 or f16 from the bytes */
    const loom_binding *b[LOOM_MAX_BINDINGS];
} op_view;

/* Fills v when node id is a dispatch of op with the builder's layout: the
 * slots, written ranges and push bytes of op's row of ops.def. */
static bool view(const fuse_state *fs, uint32_t id, loom_op op, op_view *v)
{
    if (id >= fs->n || fs->consumed[id])   /* LOOM_NONE, or made this round: seen next round */
        return false;
    const loom_node *nd = loom_graph_node(fs->g, id);
    const loom_op_info *info = loom_op_info_get(op);
    uint32_t writes = 0;
    for (uint32_t s = 0; s < info->n_slots; s++)
        writes += (info->writable >> s) & 1u;
    if (nd->type != LOOM_NODE_DISPATCH || nd->op != op || nd->n_writes != writes)
        return false;
    if (nd->n_bindings != info->n_slots || loom_op_args_read(op, loom_node_push(fs->g, nd), nd->push_size, &v->a))
        return false;
    /* Q4_0 and Q4_K take the same bytes a weight: a block type comes from
     * the kernel form, never from a size. */
    if (!loom_form_weights(loom_graph_kernel_name(fs->g, nd->kernel), &v->wt, &v->wv) ||
        !loom_dtype_is_block(v->wt))
        v->wt = v->wv = LOOM_F32;
    for (uint32_t s = 0; s < info->n_slots; s++)
        if (!(v->b[s] = loom_node_slot(fs->g, nd, s)))
            return false;
    switch (op) {
    case LOOM_OP_MATVEC: case LOOM_OP_MATVEC_SILU_MUL: case LOOM_OP_MATVEC_ARGMAX:
    case LOOM_OP_RMS_NORM_MATVEC_ARGMAX:
        v->n = v->a.rows;
        break;
    case LOOM_OP_MATMUL:
        v->n = v->a.rows * v->a.T;
        break;
    case LOOM_OP_ROPE:
        v->n = v->a.heads * v->a.head_dim;
        break;
    case LOOM_OP_ROPE_ROWS:
        v->n = v->a.heads * v->a.head_dim * v->a.T;
        break;
    case LOOM_OP_RMS_NORM_QKV_ROPE_KV: case LOOM_OP_EMBED:
        v->n = v->a.cols;
        break;
    default:
        v->n = v->a.n;
    }
    return v->n > 0;
}

static bool vec_of(const loom_binding *b, uint32_t n, loom_tensor *t)
{
    if (b->size < (uint64_t)n * 4)
        return false;
    *t = loom_vec_at(b->buffer, b->offset, n);
    return true;
}

/* The matrix bound at b: of block type bt where the node's kernel form says
 * so (op_view.wt), else f32 or f16 by its bytes. */
static bool mat_of(const loom_binding *b, uint32_t rows, uint32_t cols, loom_dtype bt, loom_tensor *t)
{
    uint64_t elems = (uint64_t)rows * cols;
    loom_dtype dt;
    if (loom_dtype_is_block(bt)) {
        uint64_t vb = loom_view_bytes(bt, rows, cols);
        if (!vb || b->size != vb)
            return false;
        dt = bt;
    } else if (b->size == elems * 2)
        dt = LOOM_F16;
    else if (b->size == elems * 4)
        dt = LOOM_F32;
    else
        return false;
    *t = (loom_tensor){ b->buffer, (uint32_t)dt, b->offset, rows, cols };
    return true;
}

/* The T x n f32 rows bound at b (a T-token step's activations). */
static bool rows_of(const loom_binding *b, uint32_t T, uint32_t n, loom_tensor *t)
{
    if (b->size != (uint64_t)T * n * 4)
        return false;
    *t = (loom_tensor){ b->buffer, LOOM_F32, b->offset, T, n };
    return true;
}

/* A ring of `slots` u32 words, one a row; a single word is a ring of one. */
static bool u32_of(const loom_binding *b, uint32_t slots, loom_tensor *t)
{
    if (b->size != (uint64_t)slots * 4)
        return false;
    *t = (loom_tensor){ b->buffer, LOOM_U32, b->offset, slots, 1 };
    return true;
}

/* ---- graph queries ------------------------------------------------------ */

/* The last node before pos that writes bytes of view b, or LOOM_NONE. */
static uint32_t producer(const fuse_state *fs, uint32_t pos, const loom_binding *b)
{
    if (b->buffer >= fs->nb)
        return LOOM_NONE;
    uint32_t lo = fs->wstart[b->buffer], hi = fs->wstart[b->buffer + 1];
    while (lo < hi) {   /* first entry at or after pos */
        uint32_t mid = lo + (hi - lo) / 2;
        if (fs->wacc[mid].node < pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t blo = b->offset, bhi = b->offset + b->size;
    for (uint32_t i = lo, k = 0; i-- > fs->wstart[b->buffer] && k < FUSE_SCAN_LIMIT; k++)
        if (fs->wacc[i].lo < bhi && blo < fs->wacc[i].hi)
            return fs->wacc[i].node;
    return LOOM_NONE;
}

static bool host_visible(const loom_buffer *b)
{
    if (b->keep)
        return true;
    switch ((loom_usage)b->usage) {
    case LOOM_USAGE_INPUT: case LOOM_USAGE_OUTPUT: case LOOM_USAGE_STATE:
    case LOOM_USAGE_PARAMS: case LOOM_USAGE_KV_CACHE:
        return true;
    case LOOM_USAGE_SCRATCH:
        return false;
    default:
        return b->external != 0;
    }
}

static bool in_chain(const fuse_match *m, uint32_t node)
{
    for (uint32_t i = 0; i < m->n_nodes; i++)
        if (m->nodes[i] == node)
            return true;
    return false;
}

/* The producer's output is seen by nobody outside the chain: no reader
 * between it and the next write that covers it, none before it unless the
 * value cannot survive to the next step or the reader sees an earlier
 * covering write, and never the host. */
static bool intermediate_private(const fuse_state *fs, const fuse_match *m, uint32_t prod)
{
    const loom_graph *g = fs->g;
    const loom_range *w = loom_node_writes(g, loom_graph_node(g, prod));
    uint32_t buf = w->buffer;
    uint64_t lo = w->offset, hi = w->offset + w->size;
    if (host_visible(loom_graph_buffer(g, buf)))
        return false;
    uint32_t first_cover = LOOM_NONE, next_cover = LOOM_NONE;
    for (uint32_t i = fs->wstart[buf]; i < fs->wstart[buf + 1]; i++) {
        const fuse_acc *e = &fs->wacc[i];
        if (e->lo <= lo && hi <= e->hi) {
            if (first_cover == LOOM_NONE)
                first_cover = e->node;
            if (e->node > prod && next_cover == LOOM_NONE)
                next_cover = e->node;
        }
    }
    for (uint32_t i = fs->rstart[buf]; i < fs->rstart[buf + 1]; i++) {
        const fuse_acc *e = &fs->racc[i];
        if (!(e->lo < hi && lo < e->hi) || in_chain(m, e->node))
            continue;
        /* A node that reads and rewrites the bytes (read-write) still reads them. */
        if (e->node > prod && (next_cover == LOOM_NONE || e->node <= next_cover))
            return false;
        if (e->node < prod && next_cover == LOOM_NONE && !(first_cover < e->node))
            return false;
        if (e->node == prod)
            return false;
    }
    return true;
}

static uint64_t tensor_bytes(const loom_tensor *t) { return loom_view_bytes((loom_dtype)t->dtype, t->rows, t->cols); }

/* Overlap between two views other than exact identity. The builders allow
 * an output to replace an input of the same view (each element is read
 * before the invocation that owns it writes it) and reject the in-place
 * forms their kernel cannot do, so identity is left to them. */
static bool views_clash(const loom_tensor *a, const loom_tensor *b)
{
    if (a->buffer != b->buffer)
        return false;
    if (a->offset == b->offset && a->dtype == b->dtype && a->rows == b->rows && a->cols == b->cols)
        return false;
    return a->offset < b->offset + tensor_bytes(b) && b->offset < a->offset + tensor_bytes(a);
}

static bool tensor_in(const loom_tensor *t, const loom_range *r)
{
    return t->buffer == r->buffer && r->offset <= t->offset && t->offset + tensor_bytes(t) <= r->offset + r->size;
}

static bool tensor_meets(const loom_tensor *t, const loom_range *r)
{
    return t->buffer == r->buffer && t->offset < r->offset + r->size && r->offset < t->offset + tensor_bytes(t);
}

/* The fused node reads its inputs from memory before it writes anything.
 * So no input may be bytes an eliminated producer wrote (nobody writes them
 * any more: MUL(t, t) after t = norm(x)), nor bytes another chain member
 * wrote before the member that read them (ADD → s, then MUL reads s as its
 * weight: the fused node would see s from before the chain). Inputs of the
 * chain's first node are read before any chain write; whether one may also
 * be written in place is the builder's call. */
static bool reads_chain_writes(const fuse_state *fs, const fuse_match *m)
{
    const loom_node *first = loom_graph_node(fs->g, m->nodes[0]);
    const loom_range *fr = loom_node_reads(fs->g, first);
    for (uint32_t i = 0; i < m->n_in; i++) {
        bool early = false;
        for (uint32_t k = 0; k < first->n_reads && !early; k++)
            early = tensor_in(&m->in[i], &fr[k]);
        for (uint32_t c = 0; c < m->n_nodes; c++) {
            bool elim = false;
            for (uint32_t e = 0; e < m->n_elim; e++)
                elim |= m->elim[e] == m->nodes[c];
            if (early && !elim)
                continue;
            const loom_node *cn = loom_graph_node(fs->g, m->nodes[c]);
            const loom_range *w = loom_node_writes(fs->g, cn);
            for (uint32_t k = 0; k < cn->n_writes; k++)
                if (tensor_meets(&m->in[i], &w[k]))
                    return true;
        }
    }
    return false;
}

static bool legal(const fuse_state *fs, const fuse_match *m)
{
    for (uint32_t i = 0; i < m->n_elim; i++)
        if (!intermediate_private(fs, m, m->elim[i]))
            return false;
    if (reads_chain_writes(fs, m))
        return false;
    for (uint32_t i = 0; i < m->n_in; i++)
        for (uint32_t o = 0; o < m->n_out; o++)
            if (views_clash(&m->in[i], &m->out[o]))
                return false;
    for (uint32_t o = 1; o < m->n_out; o++) {
        const loom_tensor *a = &m->out[0], *b = &m->out[o];
        if (a->buffer == b->buffer && a->offset < b->offset + tensor_bytes(b) &&
            b->offset < a->offset + tensor_bytes(a))
            return false;
    }
    uint32_t anchor = m->nodes[m->n_nodes - 1];
    for (uint32_t c = 0; c + 1 < m->n_nodes; c++) {
        uint32_t from = m->nodes[c];
        if (anchor - from > FUSE_SCAN_LIMIT)
            return false;
        const loom_node *cn = loom_graph_node(fs->g, from);
        for (uint32_t k = from + 1; k < anchor; k++) {
            if (in_chain(m, k))
                continue;
            const loom_node *kn = loom_graph_node(fs->g, k);
            uint32_t buf;
            /* a fence between chain members: nothing may be moved across it */
            if (loom_node_is_fence(kn) || loom_nodes_conflict(fs->g, cn, kn, &buf) != LOOM_HAZARD_NONE)
                return false;
        }
    }
    return true;
}

/* ---- rules as data ------------------------------------------------------ *
 * A row of rules[] is a pattern and a rewrite.
 *
 * pat[]   the chain's nodes, the anchor (the chain's last node) first; each
 *         later one is found from one found before it:
 *         PRODUCER(op, j, s, o)  the last writer of node j's binding slot s
 *                                before j, an op whose slot o binds exactly
 *                                that view;
 *         PRODUCER_EITHER(op, j, o)  the same for slot 0 or, failing that,
 *                                slot 1 of j (ADD and MUL commute); slot
 *                                OTHER of j is then the one not taken;
 *         PRODUCER_BEFORE(op, j, s, o, k)  written before j and k both;
 *         READER(op, j, s, r)    the first node after j and before the
 *                                anchor, not yet matched, that reads j's
 *                                slot s as its slot r.
 * eq[]    what else must hold: FIELDS (two push fields equal: ARG(rows),
 *         ELEMS the elements op_view.n counts), FIELD_IS (a field is a
 *         constant), VIEWS (two slots bind the same bytes), BYTES (two
 *         slots bind as many bytes), DISTINCT (two pattern nodes are two
 *         nodes). check: a native condition the fields cannot say.
 * elim    the pattern nodes whose output disappears (bit k: node k).
 * wire[]  the fused op's inputs (the first n_in), then its outputs, in the
 *         order build() hands them on: VEC, MAT, ROWS, U32 (one word) or
 *         RING (a u32 a row) bound at a node's slot, shaped by fields of a
 *         node; a MAT's block type is its node's weights' (DT_WT, DT_WV) or
 *         none (DT_F32: f32 or f16 by its bytes). like[]: pairs of wired
 *         tensors of one dtype.
 * eps, rope, token  the pattern nodes whose eps, theta and head_dim, token
 *         buffer (a slot) and index the fused op takes; build() passes on
 *         only what its builder takes, so a rule without them leaves 0. */

enum { PAT_END, PAT_ANCHOR, PAT_PRODUCER, PAT_READER };
enum { EQ_END, EQ_FIELD, EQ_CONST, EQ_VIEW, EQ_BYTES, EQ_DISTINCT };
enum { W_END, W_VEC, W_MAT, W_ROWS, W_U32, W_RING };
enum { DT_F32, DT_WT, DT_WV };

#define FUSE_MAX_EQ 10u
#define FUSE_MAX_WIRE 10u
#define OTHER 0xffu   /* wire slot: the input of a commuting node its producer did not take */

typedef struct fuse_pat {
    loom_op op;
    uint8_t how;        /* PAT_* */
    uint8_t from;       /* the pattern node it is found from */
    uint8_t slot, alt;  /* from's slot (alt: the other input it may be) */
    uint8_t at;         /* its own slot bound to that view */
    uint8_t before;     /* PRODUCER: written before this pattern node too */
} fuse_pat;

typedef struct fuse_eq { uint8_t kind, a, fa, b, fb; } fuse_eq;

typedef struct fuse_wire { uint8_t kind, node, slot, shape, rows, cols, dt; } fuse_wire;

typedef struct fuse_find fuse_find;

typedef struct fuse_rule {
    const char *name;
    loom_op fused;
    fuse_pat pat[FUSE_MAX_CHAIN];
    fuse_eq eq[FUSE_MAX_EQ];
    bool (*check)(const fuse_state *fs, const fuse_find *f);
    uint8_t elim;
    fuse_wire wire[FUSE_MAX_WIRE];
    uint8_t n_in;
    uint8_t like[2][2];
    uint8_t eps, rope;
    struct { uint8_t node, slot; } token;   /* slot 0: no token */
} fuse_rule;

/* A match in progress: pattern node k is node id[k], read back as v[k]. */
struct fuse_find {
    const fuse_rule *r;
    uint32_t n;
    uint32_t id[FUSE_MAX_CHAIN];
    op_view v[FUSE_MAX_CHAIN];
    uint8_t other[FUSE_MAX_CHAIN];   /* the slot OTHER stands for, per node */
};

_Static_assert(offsetof(op_view, b) < 256, "push fields are named by a byte offset");

static uint32_t field_bits(const op_view *v, uint8_t f)
{
    uint32_t x;
    memcpy(&x, (const uint8_t *)v + f, 4);
    return x;
}

static bool fields_equal(const op_view *x, uint8_t fx, const op_view *y, uint8_t fy)
{
    uint32_t a = field_bits(x, fx), b = field_bits(y, fy);
    if (fx == offsetof(op_view, a.eps) || fx == offsetof(op_view, a.theta) || fx == offsetof(op_view, a.scale)) {
        float p, q;   /* float fields compare as floats: -0 is 0 */
        memcpy(&p, &a, 4);
        memcpy(&q, &b, 4);
        return p == q;
    }
    return a == b;
}

static bool eq_holds(const fuse_find *f, const fuse_eq *e)
{
    const op_view *x = &f->v[e->a];
    switch (e->kind) {
    case EQ_FIELD:
        return fields_equal(x, e->fa, &f->v[e->b], e->fb);
    case EQ_CONST:
        return field_bits(x, e->fa) == e->b;
    case EQ_VIEW:
        return loom_binding_same(x->b[e->fa], f->v[e->b].b[e->fb]);
    case EQ_BYTES:
        return x->b[e->fa]->size == f->v[e->b].b[e->fb]->size;
    default:
        return f->id[e->a] != f->id[e->b];
    }
}

/* The rule's conditions that pattern node k completes. */
static bool holds(const fuse_find *f, uint32_t k)
{
    for (uint32_t i = 0; i < FUSE_MAX_EQ && f->r->eq[i].kind; i++) {
        const fuse_eq *e = &f->r->eq[i];
        uint32_t last = e->kind == EQ_CONST || e->a > e->b ? e->a : e->b;
        if (last == k && !eq_holds(f, e))
            return false;
    }
    return true;
}

static bool wire(const fuse_find *f, const fuse_wire *w, loom_tensor *t)
{
    const op_view *v = &f->v[w->node], *s = &f->v[w->shape];
    const loom_binding *b = v->b[w->slot == OTHER ? f->other[w->node] : w->slot];
    uint32_t rows = field_bits(s, w->rows), cols = field_bits(s, w->cols);
    switch (w->kind) {
    case W_VEC:
        return vec_of(b, cols, t);
    case W_MAT:
        return mat_of(b, rows, cols, w->dt == DT_WT ? v->wt : w->dt == DT_WV ? v->wv : LOOM_F32, t);
    case W_ROWS:
        return rows_of(b, rows, cols, t);
    case W_U32:
        return u32_of(b, 1, t);
    default:
        return u32_of(b, rows, t);
    }
}

static void sort_nodes(uint32_t *v, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++)
        for (uint32_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            uint32_t t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
}

/* The whole pattern is found: the native check, the wiring, then legality. */
static bool rewrite(const fuse_state *fs, const fuse_find *f, fuse_match *m)
{
    const fuse_rule *r = f->r;
    if (r->check && !r->check(fs, f))
        return false;
    *m = (fuse_match){ .n_in = r->n_in };
    for (uint32_t k = 0; k < f->n; k++) {
        m->nodes[m->n_nodes++] = f->id[k];
        if ((r->elim >> k) & 1u)
            m->elim[m->n_elim++] = f->id[k];
    }
    sort_nodes(m->nodes, m->n_nodes);   /* every member precedes the anchor */
    loom_tensor *t[FUSE_MAX_WIRE];
    uint32_t w = 0;
    for (; w < FUSE_MAX_WIRE && r->wire[w].kind; w++) {
        t[w] = w < r->n_in ? &m->in[w] : &m->out[w - r->n_in];
        if (!wire(f, &r->wire[w], t[w]))
            return false;
    }
    m->n_out = w - r->n_in;
    for (uint32_t i = 0; i < 2; i++)
        if (t[r->like[i][0]]->dtype != t[r->like[i][1]]->dtype)
            return false;
    m->eps = f->v[r->eps].a.eps;
    m->theta = f->v[r->rope].a.theta;
    m->head_dim = f->v[r->rope].a.head_dim;
    if (r->token.slot) {
        m->token_buf = f->v[r->token.node].b[r->token.slot]->buffer;
        m->token_index = f->v[r->token.node].a.token_index;
    }
    return legal(fs, m);
}

static bool found(const fuse_find *f, uint32_t k, uint32_t id)
{
    for (uint32_t j = 0; j < k; j++)
        if (f->id[j] == id)
            return true;
    return false;
}

/* READER: the first node after `from` and before the anchor, not matched
 * yet, of the pattern's op, whose slot `at` is exactly from's slot. */
static uint32_t reader_of(const fuse_state *fs, fuse_find *f, uint32_t k)
{
    const fuse_pat *p = &f->r->pat[k];
    const loom_binding *b = f->v[p->from].b[p->slot];
    if (b->buffer >= fs->nb)
        return LOOM_NONE;
    for (uint32_t i = fs->rstart[b->buffer]; i < fs->rstart[b->buffer + 1]; i++) {
        uint32_t id = fs->racc[i].node;
        if (id <= f->id[p->from] || id >= f->id[0] || found(f, k, id))
            continue;
        if (view(fs, id, p->op, &f->v[k]) && loom_binding_same(f->v[k].b[p->at], b))
            return id;
    }
    return LOOM_NONE;
}

/* Finds pattern nodes k onward, trying both inputs of a commuting node in
 * turn: the first way through that rewrites legally is the match. */
static bool find(const fuse_state *fs, fuse_find *f, uint32_t k, fuse_match *m)
{
    if (k == f->n)
        return rewrite(fs, f, m);
    const fuse_pat *p = &f->r->pat[k];
    if (p->how == PAT_READER)
        return (f->id[k] = reader_of(fs, f, k)) != LOOM_NONE && holds(f, k) && find(fs, f, k + 1, m);
    uint32_t pos = f->id[p->from] < f->id[p->before] ? f->id[p->from] : f->id[p->before];
    uint8_t sides[2] = { p->slot, p->alt };
    for (uint32_t i = 0; i < (p->alt != p->slot ? 2u : 1u); i++) {
        const loom_binding *b = f->v[p->from].b[sides[i]];
        f->id[k] = producer(fs, pos, b);
        f->other[p->from] = sides[1 - i];
        if (view(fs, f->id[k], p->op, &f->v[k]) && loom_binding_same(f->v[k].b[p->at], b) && holds(f, k) &&
            find(fs, f, k + 1, m))
            return true;
    }
    return false;
}

static bool match(const fuse_state *fs, const fuse_rule *r, uint32_t anchor, fuse_match *m)
{
    fuse_find f = { .r = r, .id = { anchor } };
    while (f.n < FUSE_MAX_CHAIN && r->pat[f.n].how != PAT_END)
        f.n++;
    return view(fs, anchor, r->pat[0].op, &f.v[0]) && holds(&f, 0) && find(fs, &f, 1, m);
}

/* ---- native conditions -------------------------------------------------- */

/* An ADD one of whose inputs a MATVEC just produced is left to matvec_add:
 * folding it into that matvec removes a barrier level, and the norm after it
 * can then fold into the matvecs that consume the norm. */
static bool add_after_matvec(const fuse_state *fs, uint32_t pos, const op_view *av)
{
    for (int side = 0; side < 2; side++) {
        op_view mv;
        uint32_t id = producer(fs, pos, av->b[side]);
        if (view(fs, id, LOOM_OP_MATVEC, &mv) && loom_binding_same(mv.b[2], av->b[side]) && mv.a.rows == av->n)
            return true;
    }
    return false;
}

static bool no_add_after_matvec(const fuse_state *fs, const fuse_find *f)
{
    for (uint32_t k = 0; k < f->n; k++)
        if (f->r->pat[k].op == LOOM_OP_ADD && add_after_matvec(fs, f->id[k], &f->v[k]))
            return false;
    return true;
}

/* The pattern nodes of qkv_rope_kv. */
enum { QKV_KV, QKV_RK, QKV_MV, QKV_MK, QKV_NORM, QKV_MQ, QKV_RQ };

/* Wk and Wv take the same bytes unless Wv is of another block type; a row
 * of Wq takes as many bytes as a row of Wk (one block type for both). */
static bool qkv_weights(const fuse_state *fs, const fuse_find *f)
{
    (void)fs;
    const op_view *mk = &f->v[QKV_MK], *mv = &f->v[QKV_MV], *mq = &f->v[QKV_MQ];
    return !(mk->wt == mv->wt && mk->b[0]->size != mv->b[0]->size) &&
           mq->b[0]->size / mq->a.rows == mk->b[0]->size / mk->a.rows;
}

/* The T-row q/k/v form reads each weight once a pass of 4 token rows:
 * only a step of few rows (a verification's, a short prompt's) takes it
 * (LOOM_QKV_ROWS_FUSE_T). */
static bool qkv_rows_small(const fuse_state *fs, const fuse_find *f)
{
    return f->v[QKV_MK].a.T <= LOOM_QKV_ROWS_FUSE_T && qkv_weights(fs, f);
}

/* ---- the rules ---------------------------------------------------------- */

#define ANCHOR(op) { op, PAT_ANCHOR, 0, 0, 0, 0, 0 }
#define PRODUCER(op, j, s, o) { op, PAT_PRODUCER, j, s, s, o, j }
#define PRODUCER_EITHER(op, j, o) { op, PAT_PRODUCER, j, 0, 1, o, j }
#define PRODUCER_BEFORE(op, j, s, o, k) { op, PAT_PRODUCER, j, s, s, o, k }
#define READER(op, j, s, r) { op, PAT_READER, j, s, s, r, j }
#define ARG(f) (uint8_t)offsetof(op_view, a.f)
#define ELEMS (uint8_t)offsetof(op_view, n)
#define FIELDS(a, fa, b, fb) { EQ_FIELD, a, fa, b, fb }
#define FIELD_IS(a, fa, value) { EQ_CONST, a, fa, value, 0 }
#define VIEWS(a, sa, b, sb) { EQ_VIEW, a, sa, b, sb }
#define BYTES(a, sa, b, sb) { EQ_BYTES, a, sa, b, sb }
#define DISTINCT(a, b) { EQ_DISTINCT, a, 0, b, 0 }
#define VEC(node, slot, shape, n) { W_VEC, node, slot, shape, 0, n, DT_F32 }
#define MAT(node, slot, shape, rows, cols, dt) { W_MAT, node, slot, shape, rows, cols, dt }
#define ROWS(node, slot, shape, T, n) { W_ROWS, node, slot, shape, T, n, DT_F32 }
#define U32(node, slot) { W_U32, node, slot, 0, 0, 0, DT_F32 }
#define RING(node, slot, shape, rows) { W_RING, node, slot, shape, rows, 0, DT_F32 }
#define BIT(k) (uint8_t)(1u << (k))

/* Longer chains first: an anchor takes the first rule that matches. */
static const fuse_rule rules[] = {
    /* MUL(RMS_NORM(ADD(a, b)), w) */
    { .name = "add_rms_norm_mul", .fused = LOOM_OP_ADD_RMS_NORM_MUL,
      .pat = { ANCHOR(LOOM_OP_MUL), PRODUCER_EITHER(LOOM_OP_RMS_NORM, 0, 1), PRODUCER(LOOM_OP_ADD, 1, 0, 2) },
      .eq = { FIELDS(1, ELEMS, 0, ELEMS), FIELDS(2, ELEMS, 1, ELEMS) }, .check = no_add_after_matvec,
      .elim = BIT(1), .n_in = 3, .eps = 1,
      .wire = { VEC(2, 0, 0, ELEMS), VEC(2, 1, 0, ELEMS), VEC(0, OTHER, 0, ELEMS),
                VEC(2, 2, 0, ELEMS), VEC(0, 2, 0, ELEMS) } },
    /* SILU_MUL(MATVEC(Wg, x), MATVEC(Wu, x)) */
    { .name = "matvec_silu_mul", .fused = LOOM_OP_MATVEC_SILU_MUL,
      .pat = { ANCHOR(LOOM_OP_SILU_MUL), PRODUCER(LOOM_OP_MATVEC, 0, 0, 2), PRODUCER(LOOM_OP_MATVEC, 0, 1, 2) },
      .eq = { DISTINCT(1, 2), VIEWS(1, 1, 2, 1), FIELDS(1, ARG(rows), 2, ARG(rows)), FIELDS(1, ARG(cols), 2, ARG(cols)),
              FIELDS(1, ARG(rows), 0, ELEMS), BYTES(1, 0, 2, 0) },
      .elim = BIT(1) | BIT(2), .n_in = 3, .like = { { 0, 1 } },
      .wire = { MAT(1, 0, 1, ARG(rows), ARG(cols), DT_WT), MAT(2, 0, 2, ARG(rows), ARG(cols), DT_WT),
                VEC(1, 1, 1, ARG(cols)), VEC(0, 2, 0, ELEMS) } },
    /* MUL(RMS_NORM(x), w) */
    { .name = "rms_norm_mul", .fused = LOOM_OP_RMS_NORM_MUL,
      .pat = { ANCHOR(LOOM_OP_MUL), PRODUCER_EITHER(LOOM_OP_RMS_NORM, 0, 1) },
      .eq = { FIELDS(1, ELEMS, 0, ELEMS) }, .elim = BIT(1), .n_in = 2, .eps = 1,
      .wire = { VEC(1, 0, 0, ELEMS), VEC(0, OTHER, 0, ELEMS), VEC(0, 2, 0, ELEMS) } },
    /* RMS_NORM(ADD(a, b)); the sum stays written: it usually has other readers (the residual). */
    { .name = "add_rms_norm", .fused = LOOM_OP_ADD_RMS_NORM,
      .pat = { ANCHOR(LOOM_OP_RMS_NORM), PRODUCER(LOOM_OP_ADD, 0, 0, 2) },
      .eq = { FIELDS(1, ELEMS, 0, ELEMS) }, .check = no_add_after_matvec, .n_in = 2, .eps = 0,
      .wire = { VEC(1, 0, 0, ELEMS), VEC(1, 1, 0, ELEMS), VEC(1, 2, 0, ELEMS), VEC(0, 1, 0, ELEMS) } },
    /* ADD(MATVEC(W, x), r), either side */
    { .name = "matvec_add", .fused = LOOM_OP_MATVEC_ADD,
      .pat = { ANCHOR(LOOM_OP_ADD), PRODUCER_EITHER(LOOM_OP_MATVEC, 0, 2) },
      .eq = { FIELDS(1, ARG(rows), 0, ELEMS) }, .elim = BIT(1), .n_in = 3,
      .wire = { MAT(1, 0, 1, ARG(rows), ARG(cols), DT_WT), VEC(1, 1, 1, ARG(cols)), VEC(0, OTHER, 0, ELEMS),
                VEC(0, 2, 0, ELEMS) } },
    /* ARGMAX(MATVEC(W, x)): the logits stay written (the host usually reads them). */
    { .name = "matvec_argmax", .fused = LOOM_OP_MATVEC_ARGMAX,
      .pat = { ANCHOR(LOOM_OP_ARGMAX), PRODUCER(LOOM_OP_MATVEC, 0, 0, 2) },
      .eq = { FIELDS(1, ARG(rows), 0, ELEMS) }, .n_in = 2,
      .wire = { MAT(1, 0, 1, ARG(rows), ARG(cols), DT_WT), VEC(1, 1, 1, ARG(cols)), VEC(1, 2, 1, ARG(rows)),
                U32(0, 1) } },
    /* The T-row forms of matvec_silu_mul and matvec_add: the elementwise op
     * counts T x rows elements. */
    { .name = "matmul_silu_mul", .fused = LOOM_OP_MATMUL_SILU_MUL,
      .pat = { ANCHOR(LOOM_OP_SILU_MUL), PRODUCER(LOOM_OP_MATMUL, 0, 0, 2), PRODUCER(LOOM_OP_MATMUL, 0, 1, 2) },
      .eq = { DISTINCT(1, 2), VIEWS(1, 1, 2, 1), FIELDS(1, ARG(rows), 2, ARG(rows)), FIELDS(1, ARG(cols), 2, ARG(cols)),
              FIELDS(1, ARG(T), 2, ARG(T)), FIELDS(1, ELEMS, 0, ELEMS), BYTES(1, 0, 2, 0) },
      .elim = BIT(1) | BIT(2), .n_in = 3, .like = { { 0, 1 } },
      .wire = { MAT(1, 0, 1, ARG(rows), ARG(cols), DT_WT), MAT(2, 0, 2, ARG(rows), ARG(cols), DT_WT),
                ROWS(1, 1, 1, ARG(T), ARG(cols)), ROWS(0, 2, 1, ARG(T), ARG(rows)) } },
    { .name = "matmul_add", .fused = LOOM_OP_MATMUL_ADD,
      .pat = { ANCHOR(LOOM_OP_ADD), PRODUCER_EITHER(LOOM_OP_MATMUL, 0, 2) },
      .eq = { FIELDS(1, ELEMS, 0, ELEMS) }, .elim = BIT(1), .n_in = 3,
      .wire = { MAT(1, 0, 1, ARG(rows), ARG(cols), DT_WT), ROWS(1, 1, 1, ARG(T), ARG(cols)),
                ROWS(0, OTHER, 1, ARG(T), ARG(rows)), ROWS(0, 2, 1, ARG(T), ARG(rows)) } },
    /* These take what the rules above made, in a later round. */
    /* KV_APPEND(ROPE(MATVEC(Wk, n)), MATVEC(Wv, n)), n = RMS_NORM_MUL(x, g), and
     * ROPE(MATVEC(Wq, n)) among n's readers: one dispatch normalises, streams
     * the three matrices, rotates q and k in its epilogue and writes k and v
     * into the caches. */
    { .name = "qkv_rope_kv", .fused = LOOM_OP_RMS_NORM_QKV_ROPE_KV,
      .pat = { [QKV_KV] = ANCHOR(LOOM_OP_KV_APPEND), [QKV_RK] = PRODUCER(LOOM_OP_ROPE, QKV_KV, 1, 2),
               [QKV_MV] = PRODUCER(LOOM_OP_MATVEC, QKV_KV, 2, 2), [QKV_MK] = PRODUCER(LOOM_OP_MATVEC, QKV_RK, 1, 2),
               [QKV_NORM] = PRODUCER_BEFORE(LOOM_OP_RMS_NORM_MUL, QKV_MK, 1, 2, QKV_MV),
               [QKV_MQ] = READER(LOOM_OP_MATVEC, QKV_NORM, 2, 1), [QKV_RQ] = READER(LOOM_OP_ROPE, QKV_MQ, 2, 1) },
      .eq = { VIEWS(QKV_MK, 1, QKV_MV, 1), FIELDS(QKV_MK, ARG(rows), QKV_KV, ELEMS),
              FIELDS(QKV_MV, ARG(rows), QKV_KV, ELEMS), FIELDS(QKV_MK, ARG(cols), QKV_MV, ARG(cols)),
              FIELDS(QKV_NORM, ELEMS, QKV_MK, ARG(cols)), FIELDS(QKV_MQ, ARG(cols), QKV_MK, ARG(cols)),
              FIELDS(QKV_RQ, ARG(head_dim), QKV_RK, ARG(head_dim)), FIELDS(QKV_RQ, ARG(theta), QKV_RK, ARG(theta)),
              FIELDS(QKV_RQ, ELEMS, QKV_MQ, ARG(rows)), FIELDS(QKV_RK, ELEMS, QKV_MK, ARG(rows)) },
      .check = qkv_weights, .elim = BIT(QKV_NORM) | BIT(QKV_MQ) | BIT(QKV_MK) | BIT(QKV_MV) | BIT(QKV_RK),
      .n_in = 5, .like = { { 2, 3 }, { 6, 7 } }, .eps = QKV_NORM, .rope = QKV_RK,
      .wire = { VEC(QKV_NORM, 0, QKV_NORM, ELEMS), VEC(QKV_NORM, 1, QKV_NORM, ELEMS),
                MAT(QKV_MQ, 0, QKV_MQ, ARG(rows), ARG(cols), DT_WT), MAT(QKV_MK, 0, QKV_MK, ARG(rows), ARG(cols), DT_WT),
                MAT(QKV_MV, 0, QKV_MV, ARG(rows), ARG(cols), DT_WT), VEC(QKV_RQ, 2, QKV_RQ, ELEMS),
                MAT(QKV_KV, 3, QKV_KV, ARG(max_seq), ELEMS, DT_F32), MAT(QKV_KV, 4, QKV_KV, ARG(max_seq), ELEMS, DT_F32) } },
    /* The same over a few token rows: KV_APPEND_ROWS(ROPE_ROWS(MATMUL(Wk, n)),
     * MATMUL(Wv, n)), n = RMS_NORM_MUL_ROWS(x, g), and ROPE_ROWS(MATMUL(Wq,
     * n)) among n's readers, at T <= LOOM_QKV_ROWS_FUSE_T: four levels (the
     * norm, the products, RoPE, the append) become one. */
    { .name = "qkv_rope_kv_rows", .fused = LOOM_OP_RMS_NORM_QKV_ROPE_KV_ROWS,
      .pat = { [QKV_KV] = ANCHOR(LOOM_OP_KV_APPEND_ROWS), [QKV_RK] = PRODUCER(LOOM_OP_ROPE_ROWS, QKV_KV, 1, 2),
               [QKV_MV] = PRODUCER(LOOM_OP_MATMUL, QKV_KV, 2, 2), [QKV_MK] = PRODUCER(LOOM_OP_MATMUL, QKV_RK, 1, 2),
               [QKV_NORM] = PRODUCER_BEFORE(LOOM_OP_RMS_NORM_MUL_ROWS, QKV_MK, 1, 2, QKV_MV),
               [QKV_MQ] = READER(LOOM_OP_MATMUL, QKV_NORM, 2, 1), [QKV_RQ] = READER(LOOM_OP_ROPE_ROWS, QKV_MQ, 2, 1) },
      .eq = { VIEWS(QKV_MK, 1, QKV_MV, 1), FIELDS(QKV_MK, ARG(rows), QKV_KV, ELEMS),
              FIELDS(QKV_MV, ARG(rows), QKV_KV, ELEMS), FIELDS(QKV_MK, ARG(cols), QKV_MV, ARG(cols)),
              FIELDS(QKV_NORM, ELEMS, QKV_MK, ARG(cols)), FIELDS(QKV_MQ, ARG(cols), QKV_MK, ARG(cols)),
              FIELDS(QKV_RQ, ARG(head_dim), QKV_RK, ARG(head_dim)), FIELDS(QKV_RQ, ARG(theta), QKV_RK, ARG(theta)),
              FIELDS(QKV_RQ, ELEMS, QKV_MQ, ELEMS), FIELDS(QKV_RK, ELEMS, QKV_MK, ELEMS) },
      .check = qkv_rows_small, .elim = BIT(QKV_NORM) | BIT(QKV_MQ) | BIT(QKV_MK) | BIT(QKV_MV) | BIT(QKV_RK),
      .n_in = 5, .like = { { 2, 3 }, { 6, 7 } }, .eps = QKV_NORM, .rope = QKV_RK,
      .wire = { ROWS(QKV_NORM, 0, QKV_NORM, ARG(T), ELEMS), VEC(QKV_NORM, 1, QKV_NORM, ELEMS),
                MAT(QKV_MQ, 0, QKV_MQ, ARG(rows), ARG(cols), DT_WT), MAT(QKV_MK, 0, QKV_MK, ARG(rows), ARG(cols), DT_WT),
                MAT(QKV_MV, 0, QKV_MV, ARG(rows), ARG(cols), DT_WT), ROWS(QKV_RQ, 2, QKV_MQ, ARG(T), ARG(rows)),
                MAT(QKV_KV, 3, QKV_KV, ARG(max_seq), ELEMS, DT_F32), MAT(QKV_KV, 4, QKV_KV, ARG(max_seq), ELEMS, DT_F32) } },
    /* A matvec-family node whose x is RMS_NORM_MUL's output read by nothing
     * else: the matvec normalises x itself. */
    { .name = "rms_norm_matvec", .fused = LOOM_OP_RMS_NORM_MATVEC,
      .pat = { ANCHOR(LOOM_OP_MATVEC), PRODUCER(LOOM_OP_RMS_NORM_MUL, 0, 1, 2) },
      .eq = { FIELDS(1, ELEMS, 0, ARG(cols)) }, .elim = BIT(1), .n_in = 3, .eps = 1,
      .wire = { MAT(0, 0, 0, ARG(rows), ARG(cols), DT_WT), VEC(1, 0, 1, ELEMS), VEC(1, 1, 1, ELEMS),
                VEC(0, 2, 0, ARG(rows)) } },
    { .name = "rms_norm_matvec_silu_mul", .fused = LOOM_OP_RMS_NORM_MATVEC_SILU_MUL,
      .pat = { ANCHOR(LOOM_OP_MATVEC_SILU_MUL), PRODUCER(LOOM_OP_RMS_NORM_MUL, 0, 2, 2) },
      .eq = { FIELDS(1, ELEMS, 0, ARG(cols)) }, .elim = BIT(1), .n_in = 4, .like = { { 0, 1 } }, .eps = 1,
      .wire = { MAT(0, 0, 0, ARG(rows), ARG(cols), DT_WT), MAT(0, 1, 0, ARG(rows), ARG(cols), DT_WT),
                VEC(1, 0, 1, ELEMS), VEC(1, 1, 1, ELEMS), VEC(0, 3, 0, ARG(rows)) } },
    { .name = "rms_norm_matvec_argmax", .fused = LOOM_OP_RMS_NORM_MATVEC_ARGMAX,
      .pat = { ANCHOR(LOOM_OP_MATVEC_ARGMAX), PRODUCER(LOOM_OP_RMS_NORM_MUL, 0, 1, 2) },
      .eq = { FIELDS(1, ELEMS, 0, ARG(cols)) }, .elim = BIT(1), .n_in = 3, .eps = 1,
      .wire = { MAT(0, 0, 0, ARG(rows), ARG(cols), DT_WT), VEC(1, 0, 1, ELEMS), VEC(1, 1, 1, ELEMS),
                VEC(0, 2, 0, ARG(rows)), U32(0, 3) } },
    /* RMS_NORM_QKV_ROPE_KV(EMBED(table, token)) (the first layer): the q/k/v
     * workgroups read the row from the table themselves, so the lookup needs
     * no level of its own. The row is still written (by one workgroup) for
     * its other readers, the first residual add; nothing is eliminated. */
    { .name = "embed_qkv", .fused = LOOM_OP_EMBED_RMS_NORM_QKV_ROPE_KV,
      .pat = { ANCHOR(LOOM_OP_RMS_NORM_QKV_ROPE_KV), PRODUCER(LOOM_OP_EMBED, 0, 1, 2) },
      .eq = { FIELDS(1, ELEMS, 0, ARG(cols)) }, .n_in = 5, .like = { { 0, 2 } }, .eps = 0, .rope = 0,
      .token = { 1, 1 },
      .wire = { MAT(1, 0, 1, ARG(vocab), ELEMS, DT_WT), VEC(0, 2, 0, ARG(cols)),
                MAT(0, 3, 0, ARG(q_rows), ARG(cols), DT_WT), MAT(0, 4, 0, ARG(kv_rows), ARG(cols), DT_WT),
                MAT(0, 5, 0, ARG(kv_rows), ARG(cols), DT_WV), VEC(0, 6, 0, ARG(q_rows)),
                MAT(0, 7, 0, ARG(max_seq), ARG(kv_rows), DT_F32), MAT(0, 8, 0, ARG(max_seq), ARG(kv_rows), DT_F32),
                VEC(1, 2, 1, ELEMS) } },
    /* STEP_LOG(RMS_NORM_MATVEC_ARGMAX's index) at the step's end (back 0,
     * one word): the workgroup that finds the index also writes it into the
     * ring, so the log's level goes. The ring keeps its rows. */
    { .name = "argmax_log", .fused = LOOM_OP_RMS_NORM_MATVEC_ARGMAX_LOG,
      .pat = { ANCHOR(LOOM_OP_STEP_LOG), PRODUCER(LOOM_OP_RMS_NORM_MATVEC_ARGMAX, 0, 1, 4) },
      .eq = { FIELD_IS(0, ARG(back), 0), FIELD_IS(0, ELEMS, 1) }, .n_in = 3, .eps = 1,
      .wire = { MAT(1, 0, 1, ARG(rows), ARG(cols), DT_WT), VEC(1, 1, 1, ARG(cols)), VEC(1, 2, 1, ARG(cols)),
                VEC(1, 3, 1, ARG(rows)), U32(1, 4), RING(0, 2, 0, ARG(slots)) } },
};

/* The fused op's builder, handed the wired tensors and the scalars. */
static loom_result build(loom_graph *g, loom_op op, const fuse_match *m, uint32_t *out)
{
    const loom_tensor *i = m->in, *o = m->out;
    switch (op) {
    case LOOM_OP_ADD_RMS_NORM_MUL:
        return loom_op_add_rms_norm_mul(g, i[0], i[1], i[2], o[0], o[1], m->eps, out);
    case LOOM_OP_MATVEC_SILU_MUL:
        return loom_op_matvec_silu_mul(g, i[0], i[1], i[2], o[0], out);
    case LOOM_OP_RMS_NORM_MUL:
        return loom_op_rms_norm_mul(g, i[0], i[1], o[0], m->eps, out);
    case LOOM_OP_ADD_RMS_NORM:
        return loom_op_add_rms_norm(g, i[0], i[1], o[0], o[1], m->eps, out);
    case LOOM_OP_MATVEC_ADD:
        return loom_op_matvec_add(g, i[0], i[1], i[2], o[0], out);
    case LOOM_OP_MATVEC_ARGMAX:
        return loom_op_matvec_argmax(g, i[0], i[1], o[0], o[1], out);
    case LOOM_OP_MATMUL_SILU_MUL:
        return loom_op_matmul_silu_mul(g, i[0], i[1], i[2], o[0], out);
    case LOOM_OP_MATMUL_ADD:
        return loom_op_matmul_add(g, i[0], i[1], i[2], o[0], out);
    case LOOM_OP_RMS_NORM_QKV_ROPE_KV:
        return loom_op_rms_norm_qkv_rope_kv(g, i[0], i[1], i[2], i[3], i[4], o[0], o[1], o[2], m->head_dim, m->theta,
                                            m->eps, out);
    case LOOM_OP_RMS_NORM_QKV_ROPE_KV_ROWS:
        return loom_op_rms_norm_qkv_rope_kv_rows(g, i[0], i[1], i[2], i[3], i[4], o[0], o[1], o[2], m->head_dim,
                                                 m->theta, m->eps, out);
    case LOOM_OP_RMS_NORM_MATVEC:
        return loom_op_rms_norm_matvec(g, i[0], i[1], i[2], o[0], m->eps, out);
    case LOOM_OP_RMS_NORM_MATVEC_SILU_MUL:
        return loom_op_rms_norm_matvec_silu_mul(g, i[0], i[1], i[2], i[3], o[0], m->eps, out);
    case LOOM_OP_RMS_NORM_MATVEC_ARGMAX:
        return loom_op_rms_norm_matvec_argmax(g, i[0], i[1], i[2], o[0], o[1], m->eps, out);
    case LOOM_OP_EMBED_RMS_NORM_QKV_ROPE_KV:
        return loom_op_embed_rms_norm_qkv_rope_kv(g, i[0], m->token_buf, m->token_index, i[1], i[2], i[3], i[4], o[3],
                                                  o[0], o[1], o[2], m->head_dim, m->theta, m->eps, out);
    case LOOM_OP_RMS_NORM_MATVEC_ARGMAX_LOG:
        return loom_op_rms_norm_matvec_argmax_log(g, i[0], i[1], i[2], o[0], o[1], o[2], m->eps, out);
    default:
        return loom_fail(LOOM_UNSUPPORTED, "fuse: no builder for %s", loom_op_name(op));
    }
}

/* ---- driver ------------------------------------------------------------- */

static void state_free(fuse_state *fs)
{
    const loom_allocator *a = fs->a;
    pass_free(a, fs->rstart, ((size_t)fs->nb + 1) * sizeof(uint32_t));
    pass_free(a, fs->wstart, ((size_t)fs->nb + 1) * sizeof(uint32_t));
    pass_free(a, fs->racc, (size_t)fs->nr * sizeof(fuse_acc));
    pass_free(a, fs->wacc, (size_t)fs->nw * sizeof(fuse_acc));
    pass_free(a, fs->consumed, fs->n);
    pass_free(a, fs->repl, (size_t)fs->n * sizeof(uint32_t));
}

/* Per-buffer reader and writer lists in node order (counting sort). */
static loom_result build_index(fuse_state *fs)
{
    const loom_graph *g = fs->g;
    fs->rstart = pass_calloc(fs->a, ((size_t)fs->nb + 1) * sizeof(uint32_t));
    fs->wstart = pass_calloc(fs->a, ((size_t)fs->nb + 1) * sizeof(uint32_t));
    fs->consumed = pass_calloc(fs->a, fs->n);
    fs->repl = pass_alloc(fs->a, (size_t)fs->n * sizeof(uint32_t));
    if (!fs->rstart || !fs->wstart || !fs->consumed || !fs->repl)
        return loom_fail(LOOM_OUT_OF_MEMORY, "fuse: out of memory");
    for (uint32_t i = 0; i < fs->n; i++) {
        const loom_node *nd = loom_graph_node(g, i);
        const loom_range *r = loom_node_reads(g, nd);
        fs->repl[i] = LOOM_NONE;
        for (uint32_t k = 0; k < (uint32_t)nd->n_reads + nd->n_writes; k++) {
            if (r[k].buffer >= fs->nb)
                return loom_fail(LOOM_VERIFY, "node %u (%s): range names buffer %u of %u", i,
                                 loom_op_name((loom_op)nd->op), r[k].buffer, fs->nb);
            (k < nd->n_reads ? fs->rstart : fs->wstart)[r[k].buffer + 1]++;
            *(k < nd->n_reads ? &fs->nr : &fs->nw) += 1;
        }
    }
    for (uint32_t b = 0; b < fs->nb; b++) {
        fs->rstart[b + 1] += fs->rstart[b];
        fs->wstart[b + 1] += fs->wstart[b];
    }
    fs->racc = pass_alloc(fs->a, (size_t)fs->nr * sizeof(fuse_acc));
    fs->wacc = pass_alloc(fs->a, (size_t)fs->nw * sizeof(fuse_acc));
    uint32_t *rfill = pass_alloc(fs->a, (size_t)fs->nb * sizeof(uint32_t) * 2);
    if (!fs->racc || !fs->wacc || !rfill) {
        pass_free(fs->a, rfill, (size_t)fs->nb * sizeof(uint32_t) * 2);
        return loom_fail(LOOM_OUT_OF_MEMORY, "fuse: out of memory");
    }
    uint32_t *wfill = rfill + fs->nb;
    memcpy(rfill, fs->rstart, (size_t)fs->nb * sizeof(uint32_t));
    memcpy(wfill, fs->wstart, (size_t)fs->nb * sizeof(uint32_t));
    for (uint32_t i = 0; i < fs->n; i++) {
        const loom_node *nd = loom_graph_node(g, i);
        const loom_range *r = loom_node_reads(g, nd);
        for (uint32_t k = 0; k < (uint32_t)nd->n_reads + nd->n_writes; k++) {
            fuse_acc e = { i, r[k].offset, r[k].offset + r[k].size };
            if (k < nd->n_reads)
                fs->racc[rfill[r[k].buffer]++] = e;
            else
                fs->wacc[wfill[r[k].buffer]++] = e;
        }
    }
    pass_free(fs->a, rfill, (size_t)fs->nb * sizeof(uint32_t) * 2);
    return LOOM_OK;
}

/* The fused node stands for every captured node its chain stood for, so a
 * plan lists all of them (ascending capture indices). */
static loom_result set_members(fuse_state *fs, const fuse_match *m, uint32_t id, uint32_t total)
{
    uint32_t *caps = pass_alloc(fs->a, (size_t)total * sizeof(uint32_t)), k = 0;
    if (!caps)
        return loom_fail(LOOM_OUT_OF_MEMORY, "fuse: out of memory");
    for (uint32_t i = 0; i < m->n_nodes; i++) {
        const loom_node *cn = loom_graph_node(fs->g, m->nodes[i]);
        const uint32_t *mem = loom_node_members(fs->g, cn);
        for (uint32_t j = 0; j < cn->fused && k < total; j++) {
            uint32_t c = mem[j], at = k++;
            for (; at > 0 && caps[at - 1] > c; at--)   /* insertion sort: a handful of entries */
                caps[at] = caps[at - 1];
            caps[at] = c;
        }
    }
    loom_result rc = loom_graph_set_members(fs->g, id, caps, k);
    pass_free(fs->a, caps, (size_t)total * sizeof(uint32_t));
    return rc;
}

static loom_result apply(fuse_state *fs, const fuse_rule *rule, const fuse_match *m)
{
    uint32_t before = loom_graph_node_count(fs->g), id;
    loom_result rc = build(fs->g, rule->fused, m, &id);
    if (rc == LOOM_OUT_OF_MEMORY)
        return rc;
    if (rc) {
        if (loom_graph_node_count(fs->g) != before)
            return loom_fail(rc, "fuse %s: the builder failed after appending a node", rule->name);
        loom_clear_error();
        return LOOM_OK;   /* the builder's own checks said no: leave the chain */
    }
    uint32_t fused = 0;
    for (uint32_t i = 0; i < m->n_nodes; i++) {
        fused += loom_graph_node(fs->g, m->nodes[i])->fused;
        fs->consumed[m->nodes[i]] = 1;
    }
    if ((rc = set_members(fs, m, id, fused)))
        return rc;
    loom_node *nn = loom_graph_node_mut(fs->g, id);
    nn->group = LOOM_NONE;
    nn->barrier = LOOM_NONE;
    fs->repl[m->nodes[m->n_nodes - 1]] = id;
    return LOOM_OK;
}

/* A member binds more than the limit, so the fused node would too. */
static bool chain_over(const fuse_state *fs, const fuse_match *m)
{
    for (uint32_t i = 0; fs->limit && i < m->n_nodes; i++) {
        const loom_node *nd = loom_graph_node(fs->g, m->nodes[i]);
        const loom_binding *b = loom_node_bindings(fs->g, nd);
        for (uint32_t k = 0; k < nd->n_bindings; k++)
            if (b[k].size > fs->limit)
                return true;
    }
    return false;
}

/* One sweep over the graph: every anchor from the end takes the first rule
 * that matches, then all replacements are applied in one permutation. */
static loom_result fuse_round(loom_graph *g, uint64_t limit, uint32_t *out_chains)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_pass_fuse: graph is NULL");
    fuse_state fs = { .g = g, .a = loom_graph_allocator(g), .limit = limit };
    fs.n = loom_graph_node_count(g);
    fs.nb = loom_graph_buffer_count(g);
    loom_result rc = build_index(&fs);
    uint32_t chains = 0;
    for (uint32_t i = fs.n; rc == LOOM_OK && i-- > 0;) {
        if (fs.consumed[i])
            continue;
        uint8_t op = loom_graph_node(g, i)->op;
        for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
            fuse_match m;
            if (rules[r].pat[0].op != op || !match(&fs, &rules[r], i, &m))
                continue;
            if (!pass_split_handles(rules[r].fused) && chain_over(&fs, &m))
                continue;
            if ((rc = apply(&fs, &rules[r], &m)))
                break;
            if (fs.consumed[i]) {
                chains++;
                break;
            }
        }
    }
    if (rc == LOOM_OK && chains) {
        uint32_t *order = pass_alloc(fs.a, (size_t)fs.n * sizeof(uint32_t)), k = 0;
        if (!order) {
            rc = loom_fail(LOOM_OUT_OF_MEMORY, "fuse: out of memory");
        } else {
            for (uint32_t i = 0; i < fs.n; i++) {
                if (fs.repl[i] != LOOM_NONE)
                    order[k++] = fs.repl[i];
                else if (!fs.consumed[i])
                    order[k++] = i;
            }
            rc = loom_graph_permute(g, order, k);
            pass_free(fs.a, order, (size_t)fs.n * sizeof(uint32_t));
        }
    }
    state_free(&fs);
    *out_chains = chains;
    return rc;
}

/* Rounds until nothing fuses: a fused node can anchor or feed a rule of the
 * next round (a norm folds into the matvec that a first round made). Each
 * round removes nodes, so this ends; the bound only guards the budget. */
#define FUSE_MAX_ROUNDS 8

loom_result loom_pass_fuse(loom_graph *g, loom_pass_ctx *ctx)
{
    loom_graph_clear_schedule(g);
    loom_result rc = LOOM_OK;
    uint32_t declared = loom_graph_buffer_count(g);
    for (int round = 0; round < FUSE_MAX_ROUNDS && rc == LOOM_OK; round++) {
        uint32_t chains = 0;
        rc = fuse_round(g, ctx ? ctx->max_binding_range : 0, &chains);
        if (rc == LOOM_OK && ctx)
            ctx->fused_chains += chains;
        if (chains == 0)
            break;
    }
    /* A node a later round fused again (MATVEC_ARGMAX into
     * RMS_NORM_MATVEC_ARGMAX) took its workspaces with it: no plan keeps
     * buffers that no node uses. */
    if (rc == LOOM_OK)
        rc = loom_graph_drop_unused_buffers(g, declared, NULL);
    return rc;
}
