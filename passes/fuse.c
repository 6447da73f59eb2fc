/* fuse: replaces chains of nodes by one fused node, driven by a table of
 * rules. Each rule names its chain of op kinds, a matcher that finds the
 * chain ending at an anchor node and reconstructs the tensors from the
 * bindings and push constants (ir/loom_ops.h layouts), and the op builder
 * that makes the fused node.
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
 * The fused node records the capture indices of all its members. Anchors are visited from
 * the end so the longest rule claims a node first; all replacements are
 * applied at the end in one permutation, and every legality question is
 * asked of the original positions (a node moves only past nodes it was
 * checked against). */
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
} fuse_state;

typedef struct fuse_match {
    uint32_t nodes[3], n_nodes;   /* ascending positions; the last is the anchor */
    uint32_t elim[2], n_elim;     /* producers whose output disappears */
    loom_tensor in[3], out[2];
    uint32_t n_in, n_out;
    float eps;
} fuse_match;

typedef struct fuse_rule {
    const char *name;
    loom_op chain[3];
    uint32_t len;
    loom_op fused;
    bool (*match)(fuse_state *fs, uint32_t anchor, fuse_match *m);
    loom_result (*build)(loom_graph *g, const fuse_match *m, uint32_t *out);
} fuse_rule;

/* ---- reading nodes back as ops ------------------------------------------ */

typedef struct op_view {
    const loom_binding *b[3];
    uint32_t n, rows, cols;
    float eps;
} op_view;

static const loom_binding *slot(const loom_graph *g, const loom_node *nd, uint32_t s)
{
    const loom_binding *b = loom_node_bindings(g, nd);
    for (uint32_t i = 0; i < nd->n_bindings; i++)
        if (b[i].slot == s)
            return &b[i];
    return NULL;
}

/* Fills v when node id is a dispatch of op with the builder's layout. */
static bool view(const fuse_state *fs, uint32_t id, loom_op op, op_view *v)
{
    if (id == LOOM_NONE || fs->consumed[id])
        return false;
    const loom_node *nd = loom_graph_node(fs->g, id);
    if (nd->type != LOOM_NODE_DISPATCH || nd->op != op || nd->n_writes != 1)
        return false;
    const uint8_t *pc = loom_node_push(fs->g, nd);
    uint32_t nbind = op == LOOM_OP_RMS_NORM ? 2 : 3;
    uint32_t npush = op == LOOM_OP_RMS_NORM || op == LOOM_OP_MATVEC ? 8 : 4;
    if (nd->n_bindings != nbind || nd->push_size != npush)
        return false;
    for (uint32_t s = 0; s < nbind; s++)
        if (!(v->b[s] = slot(fs->g, nd, s)))
            return false;
    if (op == LOOM_OP_MATVEC) {
        loom_pc_matvec p;
        memcpy(&p, pc, sizeof p);
        v->rows = p.rows;
        v->cols = p.cols;
        v->n = p.rows;
    } else if (op == LOOM_OP_RMS_NORM) {
        loom_pc_norm p;
        memcpy(&p, pc, sizeof p);
        v->n = p.n;
        v->eps = p.eps;
    } else {
        loom_pc_n p;
        memcpy(&p, pc, sizeof p);
        v->n = p.n;
    }
    return v->n > 0;
}

static bool same_view(const loom_binding *a, const loom_binding *b)
{
    return a->buffer == b->buffer && a->offset == b->offset && a->size == b->size;
}

static bool vec_of(const loom_binding *b, uint32_t n, loom_tensor *t)
{
    if (b->size < (uint64_t)n * 4)
        return false;
    *t = loom_vec_at(b->buffer, b->offset, n);
    return true;
}

static bool mat_of(const loom_binding *b, uint32_t rows, uint32_t cols, loom_tensor *t)
{
    uint64_t elems = (uint64_t)rows * cols;
    loom_dtype dt;
    if (b->size == elems * 2)
        dt = LOOM_F16;
    else if (b->size == elems * 4)
        dt = LOOM_F32;
    else
        return false;
    *t = (loom_tensor){ b->buffer, (uint32_t)dt, b->offset, rows, cols };
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

static uint64_t tensor_bytes(const loom_tensor *t)
{
    return (uint64_t)t->rows * t->cols * loom_dtype_size((loom_dtype)t->dtype);
}

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

/* A sentinel or a non-reorderable node between chain members: nothing may
 * be moved across it, whatever the reorder pass does. */
static bool is_fence(const loom_node *nd)
{
    return nd->type == LOOM_NODE_BARRIER || !loom_op_reorderable((loom_op)nd->op);
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
            if (is_fence(kn) || loom_nodes_conflict(fs->g, cn, kn, &buf) != LOOM_HAZARD_NONE)
                return false;
        }
    }
    return true;
}

/* ---- rules -------------------------------------------------------------- */

/* RMS_NORM whose output is input `side` of the binary node v (at pos). */
static bool norm_into(fuse_state *fs, uint32_t pos, const op_view *v, int side, uint32_t *id, op_view *nv)
{
    *id = producer(fs, pos, v->b[side]);
    return view(fs, *id, LOOM_OP_RMS_NORM, nv) && same_view(nv->b[1], v->b[side]) && nv->n == v->n;
}

static bool add_into(fuse_state *fs, uint32_t pos, const op_view *nv, uint32_t *id, op_view *av)
{
    *id = producer(fs, pos, nv->b[0]);
    return view(fs, *id, LOOM_OP_ADD, av) && same_view(av->b[2], nv->b[0]) && av->n == nv->n;
}

static bool match_add_rms_norm_mul(fuse_state *fs, uint32_t anchor, fuse_match *m)
{
    op_view mv, nv, av;
    if (!view(fs, anchor, LOOM_OP_MUL, &mv))
        return false;
    for (int side = 0; side < 2; side++) {
        uint32_t nid, aid;
        if (!norm_into(fs, anchor, &mv, side, &nid, &nv) || !add_into(fs, nid, &nv, &aid, &av))
            continue;
        uint32_t n = mv.n;
        *m = (fuse_match){ { aid, nid, anchor }, 3, { nid }, 1, { { 0 } }, { { 0 } }, 3, 2, nv.eps };
        if (vec_of(av.b[0], n, &m->in[0]) && vec_of(av.b[1], n, &m->in[1]) && vec_of(mv.b[1 - side], n, &m->in[2]) &&
            vec_of(av.b[2], n, &m->out[0]) && vec_of(mv.b[2], n, &m->out[1]) && legal(fs, m))
            return true;
    }
    return false;
}

static loom_result build_add_rms_norm_mul(loom_graph *g, const fuse_match *m, uint32_t *out)
{
    return loom_op_add_rms_norm_mul(g, m->in[0], m->in[1], m->in[2], m->out[0], m->out[1], m->eps, out);
}

static bool match_rms_norm_mul(fuse_state *fs, uint32_t anchor, fuse_match *m)
{
    op_view mv, nv;
    if (!view(fs, anchor, LOOM_OP_MUL, &mv))
        return false;
    for (int side = 0; side < 2; side++) {
        uint32_t nid;
        if (!norm_into(fs, anchor, &mv, side, &nid, &nv))
            continue;
        uint32_t n = mv.n;
        *m = (fuse_match){ { nid, anchor }, 2, { nid }, 1, { { 0 } }, { { 0 } }, 2, 1, nv.eps };
        if (vec_of(nv.b[0], n, &m->in[0]) && vec_of(mv.b[1 - side], n, &m->in[1]) && vec_of(mv.b[2], n, &m->out[0]) &&
            legal(fs, m))
            return true;
    }
    return false;
}

static loom_result build_rms_norm_mul(loom_graph *g, const fuse_match *m, uint32_t *out)
{
    return loom_op_rms_norm_mul(g, m->in[0], m->in[1], m->out[0], m->eps, out);
}

static bool match_add_rms_norm(fuse_state *fs, uint32_t anchor, fuse_match *m)
{
    op_view nv, av;
    uint32_t aid;
    if (!view(fs, anchor, LOOM_OP_RMS_NORM, &nv) || !add_into(fs, anchor, &nv, &aid, &av))
        return false;
    uint32_t n = nv.n;
    /* The sum stays written: it usually has other readers (the residual). */
    *m = (fuse_match){ { aid, anchor }, 2, { 0 }, 0, { { 0 } }, { { 0 } }, 2, 2, nv.eps };
    return vec_of(av.b[0], n, &m->in[0]) && vec_of(av.b[1], n, &m->in[1]) && vec_of(av.b[2], n, &m->out[0]) &&
           vec_of(nv.b[1], n, &m->out[1]) && legal(fs, m);
}

static loom_result build_add_rms_norm(loom_graph *g, const fuse_match *m, uint32_t *out)
{
    return loom_op_add_rms_norm(g, m->in[0], m->in[1], m->out[0], m->out[1], m->eps, out);
}

static bool match_matvec_silu_mul(fuse_state *fs, uint32_t anchor, fuse_match *m)
{
    op_view sv, gv, uv;
    if (!view(fs, anchor, LOOM_OP_SILU_MUL, &sv))
        return false;
    uint32_t gid = producer(fs, anchor, sv.b[0]), uid = producer(fs, anchor, sv.b[1]);
    if (gid == uid || !view(fs, gid, LOOM_OP_MATVEC, &gv) || !view(fs, uid, LOOM_OP_MATVEC, &uv))
        return false;
    if (!same_view(gv.b[2], sv.b[0]) || !same_view(uv.b[2], sv.b[1]) || !same_view(gv.b[1], uv.b[1]) ||
        gv.rows != uv.rows || gv.cols != uv.cols || gv.rows != sv.n || gv.b[0]->size != uv.b[0]->size)
        return false;
    *m = (fuse_match){ { gid < uid ? gid : uid, gid < uid ? uid : gid, anchor }, 3, { gid, uid }, 2,
                       { { 0 } }, { { 0 } }, 3, 1, 0.0f };
    return mat_of(gv.b[0], gv.rows, gv.cols, &m->in[0]) && mat_of(uv.b[0], uv.rows, uv.cols, &m->in[1]) &&
           m->in[0].dtype == m->in[1].dtype && vec_of(gv.b[1], gv.cols, &m->in[2]) &&
           vec_of(sv.b[2], sv.n, &m->out[0]) && legal(fs, m);
}

static loom_result build_matvec_silu_mul(loom_graph *g, const fuse_match *m, uint32_t *out)
{
    return loom_op_matvec_silu_mul(g, m->in[0], m->in[1], m->in[2], m->out[0], out);
}

static bool match_matvec_add(fuse_state *fs, uint32_t anchor, fuse_match *m)
{
    op_view av, mv;
    if (!view(fs, anchor, LOOM_OP_ADD, &av))
        return false;
    for (int side = 0; side < 2; side++) {   /* ADD commutes: the matvec may feed either input */
        uint32_t id = producer(fs, anchor, av.b[side]);
        if (!view(fs, id, LOOM_OP_MATVEC, &mv) || !same_view(mv.b[2], av.b[side]) || mv.rows != av.n)
            continue;
        *m = (fuse_match){ { id, anchor }, 2, { id }, 1, { { 0 } }, { { 0 } }, 3, 1, 0.0f };
        if (mat_of(mv.b[0], mv.rows, mv.cols, &m->in[0]) && vec_of(mv.b[1], mv.cols, &m->in[1]) &&
            vec_of(av.b[1 - side], av.n, &m->in[2]) && vec_of(av.b[2], av.n, &m->out[0]) && legal(fs, m))
            return true;
    }
    return false;
}

static loom_result build_matvec_add(loom_graph *g, const fuse_match *m, uint32_t *out)
{
    return loom_op_matvec_add(g, m->in[0], m->in[1], m->in[2], m->out[0], out);
}

/* Longer chains first: an anchor takes the first rule that matches. */
static const fuse_rule rules[] = {
    { "add_rms_norm_mul", { LOOM_OP_ADD, LOOM_OP_RMS_NORM, LOOM_OP_MUL }, 3, LOOM_OP_ADD_RMS_NORM_MUL,
      match_add_rms_norm_mul, build_add_rms_norm_mul },
    { "matvec_silu_mul", { LOOM_OP_MATVEC, LOOM_OP_MATVEC, LOOM_OP_SILU_MUL }, 3, LOOM_OP_MATVEC_SILU_MUL,
      match_matvec_silu_mul, build_matvec_silu_mul },
    { "rms_norm_mul", { LOOM_OP_RMS_NORM, LOOM_OP_MUL }, 2, LOOM_OP_RMS_NORM_MUL, match_rms_norm_mul,
      build_rms_norm_mul },
    { "add_rms_norm", { LOOM_OP_ADD, LOOM_OP_RMS_NORM }, 2, LOOM_OP_ADD_RMS_NORM, match_add_rms_norm,
      build_add_rms_norm },
    { "matvec_add", { LOOM_OP_MATVEC, LOOM_OP_ADD }, 2, LOOM_OP_MATVEC_ADD, match_matvec_add, build_matvec_add },
};

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
    loom_result rc = rule->build(fs->g, m, &id);
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

loom_result loom_pass_fuse(loom_graph *g, loom_pass_ctx *ctx)
{
    fuse_state fs = { .g = g, .a = loom_graph_allocator(g) };
    fs.n = loom_graph_node_count(g);
    fs.nb = loom_graph_buffer_count(g);
    loom_graph_clear_schedule(g);
    loom_result rc = build_index(&fs);
    uint32_t chains = 0;
    for (uint32_t i = fs.n; rc == LOOM_OK && i-- > 0;) {
        if (fs.consumed[i])
            continue;
        uint8_t op = loom_graph_node(g, i)->op;
        for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
            fuse_match m;
            if (rules[r].chain[rules[r].len - 1] != op || !rules[r].match(&fs, i, &m))
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
    if (rc == LOOM_OK && ctx)
        ctx->fused_chains += chains;
    state_free(&fs);
    return rc;
}
