/* fuse: replaces chains of nodes by one fused node, driven by a table of
 * rules. Each rule names its chain of op kinds, a matcher that finds the
 * chain ending at an anchor node and reconstructs the tensors from the
 * bindings and push constants (the slots of ops.def, the push read back by
 * loom_op_args_read), and the op builder that makes the fused node.
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

typedef struct fuse_rule {
    const char *name;
    loom_op chain[FUSE_MAX_CHAIN];
    uint32_t len;
    loom_op fused;
    bool (*match)(fuse_state *fs, uint32_t anchor, fuse_match *m);
    loom_result (*build)(loom_graph *g, const fuse_match *m, uint32_t *out);
} fuse_rule;

/* ---- reading nodes back as ops ------------------------------------------ */

typedef struct op_view {
    const loom_binding *b[LOOM_MAX_BINDINGS];
    loom_op_args a;                      /* the push constants */
    uint32_t n;                          /* the elements of the output, as an elementwise consumer counts
                                            them (STEP_LOG: a row's; RMS_NORM_QKV_ROPE_KV: x's) */
    loom_dtype wt, wv;                   /* a block-typed kernel form's weights (Wv: wv), else F32:
                                            mat_of infers f32 or f16 from the bytes */
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

/* ---- rules -------------------------------------------------------------- */

/* RMS_NORM whose output is input `side` of the binary node v (at pos). */
static bool norm_into(fuse_state *fs, uint32_t pos, const op_view *v, int side, uint32_t *id, op_view *nv)
{
    *id = producer(fs, pos, v->b[side]);
    return view(fs, *id, LOOM_OP_RMS_NORM, nv) && loom_binding_same(nv->b[1], v->b[side]) && nv->n == v->n;
}

/* An ADD one of whose inputs a MATVEC just produced is left to matvec_add:
 * folding it into that matvec removes a barrier level, and the norm after it
 * can then fold into the matvecs that consume the norm. */
static bool add_after_matvec(fuse_state *fs, uint32_t pos, const op_view *av)
{
    for (int side = 0; side < 2; side++) {
        op_view mv;
        uint32_t id = producer(fs, pos, av->b[side]);
        if (view(fs, id, LOOM_OP_MATVEC, &mv) && loom_binding_same(mv.b[2], av->b[side]) && mv.a.rows == av->n)
            return true;
    }
    return false;
}

static bool add_into(fuse_state *fs, uint32_t pos, const op_view *nv, uint32_t *id, op_view *av)
{
    *id = producer(fs, pos, nv->b[0]);
    return view(fs, *id, LOOM_OP_ADD, av) && loom_binding_same(av->b[2], nv->b[0]) && av->n == nv->n &&
           !add_after_matvec(fs, *id, av);
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
        *m = (fuse_match){ .nodes = { aid, nid, anchor }, .n_nodes = 3, .elim = { nid }, .n_elim = 1, .n_in = 3,
                           .n_out = 2, .eps = nv.a.eps };
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
        *m = (fuse_match){ .nodes = { nid, anchor }, .n_nodes = 2, .elim = { nid }, .n_elim = 1, .n_in = 2,
                           .n_out = 1, .eps = nv.a.eps };
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
    *m = (fuse_match){ .nodes = { aid, anchor }, .n_nodes = 2, .n_in = 2, .n_out = 2, .eps = nv.a.eps };
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
    if (!loom_binding_same(gv.b[2], sv.b[0]) || !loom_binding_same(uv.b[2], sv.b[1]) ||
        !loom_binding_same(gv.b[1], uv.b[1]) ||
        gv.a.rows != uv.a.rows || gv.a.cols != uv.a.cols || gv.a.rows != sv.n || gv.b[0]->size != uv.b[0]->size)
        return false;
    *m = (fuse_match){ .nodes = { gid < uid ? gid : uid, gid < uid ? uid : gid, anchor }, .n_nodes = 3,
                       .elim = { gid, uid }, .n_elim = 2, .n_in = 3, .n_out = 1 };
    return mat_of(gv.b[0], gv.a.rows, gv.a.cols, gv.wt, &m->in[0]) &&
           mat_of(uv.b[0], uv.a.rows, uv.a.cols, uv.wt, &m->in[1]) &&
           m->in[0].dtype == m->in[1].dtype && vec_of(gv.b[1], gv.a.cols, &m->in[2]) &&
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
        if (!view(fs, id, LOOM_OP_MATVEC, &mv) || !loom_binding_same(mv.b[2], av.b[side]) || mv.a.rows != av.n)
            continue;
        *m = (fuse_match){ .nodes = { id, anchor }, .n_nodes = 2, .elim = { id }, .n_elim = 1, .n_in = 3, .n_out = 1 };
        if (mat_of(mv.b[0], mv.a.rows, mv.a.cols, mv.wt, &m->in[0]) && vec_of(mv.b[1], mv.a.cols, &m->in[1]) &&
            vec_of(av.b[1 - side], av.n, &m->in[2]) && vec_of(av.b[2], av.n, &m->out[0]) && legal(fs, m))
            return true;
    }
    return false;
}

static loom_result build_matvec_add(loom_graph *g, const fuse_match *m, uint32_t *out)
{
    return loom_op_matvec_add(g, m->in[0], m->in[1], m->in[2], m->out[0], out);
}

/* The T x n f32 rows bound at b (a T-token step's activations). */
static bool rows_of(const loom_binding *b, uint32_t T, uint32_t n, loom_tensor *t)
{
    if (b->size != (uint64_t)T * n * 4)
        return false;
    *t = (loom_tensor){ b->buffer, LOOM_F32, b->offset, T, n };
    return true;
}

/* The T-row forms of the two rules above: MATMUL then ADD of its whole
 * output (the residual), and two MATMULs of one x gated by SILU_MUL. The
 * elementwise op counts T x rows elements. */
static bool match_matmul_add(fuse_state *fs, uint32_t anchor, fuse_match *m)
{
    op_view av, mv;
    if (!view(fs, anchor, LOOM_OP_ADD, &av))
        return false;
    for (int side = 0; side < 2; side++) {
        uint32_t id = producer(fs, anchor, av.b[side]);
        if (!view(fs, id, LOOM_OP_MATMUL, &mv) || !loom_binding_same(mv.b[2], av.b[side]) || mv.n != av.n)
            continue;
        *m = (fuse_match){ .nodes = { id, anchor }, .n_nodes = 2, .elim = { id }, .n_elim = 1, .n_in = 3, .n_out = 1 };
        if (mat_of(mv.b[0], mv.a.rows, mv.a.cols, mv.wt, &m->in[0]) && rows_of(mv.b[1], mv.a.T, mv.a.cols, &m->in[1]) &&
            rows_of(av.b[1 - side], mv.a.T, mv.a.rows, &m->in[2]) && rows_of(av.b[2], mv.a.T, mv.a.rows, &m->out[0]) &&
            legal(fs, m))
            return true;
    }
    return false;
}

static loom_result build_matmul_add(loom_graph *g, const fuse_match *m, uint32_t *out)
{
    return loom_op_matmul_add(g, m->in[0], m->in[1], m->in[2], m->out[0], out);
}

static bool match_matmul_silu_mul(fuse_state *fs, uint32_t anchor, fuse_match *m)
{
    op_view sv, gv, uv;
    if (!view(fs, anchor, LOOM_OP_SILU_MUL, &sv))
        return false;
    uint32_t gid = producer(fs, anchor, sv.b[0]), uid = producer(fs, anchor, sv.b[1]);
    if (gid == uid || !view(fs, gid, LOOM_OP_MATMUL, &gv) || !view(fs, uid, LOOM_OP_MATMUL, &uv))
        return false;
    if (!loom_binding_same(gv.b[2], sv.b[0]) || !loom_binding_same(uv.b[2], sv.b[1]) ||
        !loom_binding_same(gv.b[1], uv.b[1]) ||
        gv.a.rows != uv.a.rows || gv.a.cols != uv.a.cols || gv.a.T != uv.a.T || gv.n != sv.n ||
        gv.b[0]->size != uv.b[0]->size)
        return false;
    *m = (fuse_match){ .nodes = { gid < uid ? gid : uid, gid < uid ? uid : gid, anchor }, .n_nodes = 3,
                       .elim = { gid, uid }, .n_elim = 2, .n_in = 3, .n_out = 1 };
    return mat_of(gv.b[0], gv.a.rows, gv.a.cols, gv.wt, &m->in[0]) &&
           mat_of(uv.b[0], uv.a.rows, uv.a.cols, uv.wt, &m->in[1]) &&
           m->in[0].dtype == m->in[1].dtype && rows_of(gv.b[1], gv.a.T, gv.a.cols, &m->in[2]) &&
           rows_of(sv.b[2], gv.a.T, gv.a.rows, &m->out[0]) && legal(fs, m);
}

static loom_result build_matmul_silu_mul(loom_graph *g, const fuse_match *m, uint32_t *out)
{
    return loom_op_matmul_silu_mul(g, m->in[0], m->in[1], m->in[2], m->out[0], out);
}

/* ---- matvec epilogues and prologues ------------------------------------ */

static bool u32_of(const loom_binding *b, loom_tensor *t)
{
    if (b->size != 4)
        return false;
    *t = (loom_tensor){ b->buffer, LOOM_U32, b->offset, 1, 1 };
    return true;
}

/* MATVEC then ARGMAX of its output: the logits stay written (they are
 * usually read by the host); the argmax comes from the same dispatch. */
static bool match_matvec_argmax(fuse_state *fs, uint32_t anchor, fuse_match *m)
{
    op_view av, mv;
    if (!view(fs, anchor, LOOM_OP_ARGMAX, &av))
        return false;
    uint32_t id = producer(fs, anchor, av.b[0]);
    if (!view(fs, id, LOOM_OP_MATVEC, &mv) || !loom_binding_same(mv.b[2], av.b[0]) || mv.a.rows != av.n)
        return false;
    *m = (fuse_match){ .nodes = { id, anchor }, .n_nodes = 2, .n_in = 2, .n_out = 2 };
    return mat_of(mv.b[0], mv.a.rows, mv.a.cols, mv.wt, &m->in[0]) && vec_of(mv.b[1], mv.a.cols, &m->in[1]) &&
           vec_of(mv.b[2], mv.a.rows, &m->out[0]) && u32_of(av.b[1], &m->out[1]) && legal(fs, m);
}

static loom_result build_matvec_argmax(loom_graph *g, const fuse_match *m, uint32_t *out)
{
    return loom_op_matvec_argmax(g, m->in[0], m->in[1], m->out[0], m->out[1], out);
}

/* RMS_NORM_MUL whose output is the x input (binding xs) of a matvec-family
 * anchor and is read by nothing else: the matvec normalises x itself. */
static bool norm_prologue(fuse_state *fs, uint32_t anchor, const op_view *mv, uint32_t xs, fuse_match *m)
{
    op_view nv;
    uint32_t nid = producer(fs, anchor, mv->b[xs]);
    if (!view(fs, nid, LOOM_OP_RMS_NORM_MUL, &nv) || !loom_binding_same(nv.b[2], mv->b[xs]) || nv.n != mv->a.cols)
        return false;
    m->nodes[0] = nid;
    m->nodes[1] = anchor;
    m->n_nodes = 2;
    m->elim[0] = nid;
    m->n_elim = 1;
    m->eps = nv.a.eps;
    return vec_of(nv.b[0], nv.n, &m->in[m->n_in]) && vec_of(nv.b[1], nv.n, &m->in[m->n_in + 1]) &&
           (m->n_in += 2, true);
}

static bool match_norm_matvec(fuse_state *fs, uint32_t anchor, fuse_match *m)
{
    op_view mv;
    if (!view(fs, anchor, LOOM_OP_MATVEC, &mv))
        return false;
    *m = (fuse_match){ .n_in = 1, .n_out = 1 };
    return mat_of(mv.b[0], mv.a.rows, mv.a.cols, mv.wt, &m->in[0]) && vec_of(mv.b[2], mv.a.rows, &m->out[0]) &&
           norm_prologue(fs, anchor, &mv, 1, m) && legal(fs, m);
}

static loom_result build_norm_matvec(loom_graph *g, const fuse_match *m, uint32_t *out)
{
    return loom_op_rms_norm_matvec(g, m->in[0], m->in[1], m->in[2], m->out[0], m->eps, out);
}

static bool match_norm_matvec_silu_mul(fuse_state *fs, uint32_t anchor, fuse_match *m)
{
    op_view mv;
    if (!view(fs, anchor, LOOM_OP_MATVEC_SILU_MUL, &mv))
        return false;
    *m = (fuse_match){ .n_in = 2, .n_out = 1 };
    return mat_of(mv.b[0], mv.a.rows, mv.a.cols, mv.wt, &m->in[0]) &&
           mat_of(mv.b[1], mv.a.rows, mv.a.cols, mv.wt, &m->in[1]) &&
           m->in[0].dtype == m->in[1].dtype && vec_of(mv.b[3], mv.a.rows, &m->out[0]) &&
           norm_prologue(fs, anchor, &mv, 2, m) && legal(fs, m);
}

static loom_result build_norm_matvec_silu_mul(loom_graph *g, const fuse_match *m, uint32_t *out)
{
    return loom_op_rms_norm_matvec_silu_mul(g, m->in[0], m->in[1], m->in[2], m->in[3], m->out[0], m->eps, out);
}

static bool match_norm_matvec_argmax(fuse_state *fs, uint32_t anchor, fuse_match *m)
{
    op_view mv;
    if (!view(fs, anchor, LOOM_OP_MATVEC_ARGMAX, &mv))
        return false;
    *m = (fuse_match){ .n_in = 1, .n_out = 2 };
    return mat_of(mv.b[0], mv.a.rows, mv.a.cols, mv.wt, &m->in[0]) && vec_of(mv.b[2], mv.a.rows, &m->out[0]) &&
           u32_of(mv.b[3], &m->out[1]) && norm_prologue(fs, anchor, &mv, 1, m) && legal(fs, m);
}

static loom_result build_norm_matvec_argmax(loom_graph *g, const fuse_match *m, uint32_t *out)
{
    return loom_op_rms_norm_matvec_argmax(g, m->in[0], m->in[1], m->in[2], m->out[0], m->out[1], m->eps, out);
}

/* The first node after pos (and before end) of kind op whose binding s is
 * exactly view b, among the readers of b's buffer. */
static uint32_t reader_of(fuse_state *fs, const loom_binding *b, uint32_t s, loom_op op, uint32_t pos, uint32_t end,
                          uint32_t skip0, uint32_t skip1, op_view *v)
{
    if (b->buffer >= fs->nb)
        return LOOM_NONE;
    for (uint32_t i = fs->rstart[b->buffer]; i < fs->rstart[b->buffer + 1]; i++) {
        uint32_t id = fs->racc[i].node;
        if (id <= pos || id >= end || id == skip0 || id == skip1)
            continue;
        if (view(fs, id, op, v) && loom_binding_same(v->b[s], b))
            return id;
    }
    return LOOM_NONE;
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

/* RMS_NORM_MUL -> MATVEC q, k, v (one input) -> ROPE q, ROPE k ->
 * KV_APPEND(k_rope, v): one dispatch normalises, streams the three
 * matrices, rotates q and k in its epilogue and writes k and v into the
 * caches. Anchored at the KV_APPEND; the q chain is found among the norm
 * output's readers. */
static bool match_qkv_rope_kv(fuse_state *fs, uint32_t anchor, fuse_match *m)
{
    op_view kv, rk, mk, mvv, nv, mq, rq;
    if (!view(fs, anchor, LOOM_OP_KV_APPEND, &kv))
        return false;
    uint32_t rk_id = producer(fs, anchor, kv.b[1]), mv_id = producer(fs, anchor, kv.b[2]);
    if (!view(fs, rk_id, LOOM_OP_ROPE, &rk) || !loom_binding_same(rk.b[2], kv.b[1]) ||
        !view(fs, mv_id, LOOM_OP_MATVEC, &mvv) || !loom_binding_same(mvv.b[2], kv.b[2]))
        return false;
    uint32_t mk_id = producer(fs, rk_id, rk.b[1]);
    if (!view(fs, mk_id, LOOM_OP_MATVEC, &mk) || !loom_binding_same(mk.b[2], rk.b[1]) ||
        !loom_binding_same(mk.b[1], mvv.b[1]) ||
        mk.a.rows != kv.n || mvv.a.rows != kv.n || mk.a.cols != mvv.a.cols ||
        (mk.wt == mvv.wt && mk.b[0]->size != mvv.b[0]->size))   /* Wv may be of another block type */
        return false;
    uint32_t first = mk_id < mv_id ? mk_id : mv_id;
    uint32_t nid = producer(fs, first, mk.b[1]);
    if (!view(fs, nid, LOOM_OP_RMS_NORM_MUL, &nv) || !loom_binding_same(nv.b[2], mk.b[1]) || nv.n != mk.a.cols)
        return false;
    uint32_t mq_id = reader_of(fs, nv.b[2], 1, LOOM_OP_MATVEC, nid, anchor, mk_id, mv_id, &mq);
    if (mq_id == LOOM_NONE || mq.a.cols != mk.a.cols || mq.b[0]->size / mq.a.rows != mk.b[0]->size / mk.a.rows)
        return false;
    uint32_t rq_id = reader_of(fs, mq.b[2], 1, LOOM_OP_ROPE, mq_id, anchor, rk_id, LOOM_NONE, &rq);
    if (rq_id == LOOM_NONE || rq.a.head_dim != rk.a.head_dim || rq.a.theta != rk.a.theta || rq.n != mq.a.rows ||
        rk.n != mk.a.rows)
        return false;
    *m = (fuse_match){ .nodes = { nid, mq_id, mk_id, mv_id, rq_id, rk_id, anchor }, .n_nodes = 7,
                       .elim = { nid, mq_id, mk_id, mv_id, rk_id }, .n_elim = 5, .n_in = 5, .n_out = 3,
                       .eps = nv.a.eps, .theta = rk.a.theta, .head_dim = rk.a.head_dim };
    sort_nodes(m->nodes, 6);
    if (m->nodes[5] > anchor)
        return false;
    return vec_of(nv.b[0], nv.n, &m->in[0]) && vec_of(nv.b[1], nv.n, &m->in[1]) &&
           mat_of(mq.b[0], mq.a.rows, mq.a.cols, mq.wt, &m->in[2]) &&
           mat_of(mk.b[0], mk.a.rows, mk.a.cols, mk.wt, &m->in[3]) &&
           mat_of(mvv.b[0], mvv.a.rows, mvv.a.cols, mvv.wt, &m->in[4]) && m->in[2].dtype == m->in[3].dtype &&
           vec_of(rq.b[2], rq.n, &m->out[0]) && mat_of(kv.b[3], kv.a.max_seq, kv.n, LOOM_F32, &m->out[1]) &&
           mat_of(kv.b[4], kv.a.max_seq, kv.n, LOOM_F32, &m->out[2]) && m->out[2].dtype == m->out[1].dtype &&
           legal(fs, m);
}

static loom_result build_qkv_rope_kv(loom_graph *g, const fuse_match *m, uint32_t *out)
{
    return loom_op_rms_norm_qkv_rope_kv(g, m->in[0], m->in[1], m->in[2], m->in[3], m->in[4], m->out[0], m->out[1],
                                        m->out[2], m->head_dim, m->theta, m->eps, out);
}

/* EMBED -> RMS_NORM_QKV_ROPE_KV reading the embedding row as x (the first
 * layer): the q/k/v workgroups read the row from the table themselves, so
 * the lookup needs no level of its own. The row is still written (by one
 * workgroup) for its other readers, the first residual add; nothing is
 * eliminated. */
static bool match_embed_qkv(fuse_state *fs, uint32_t anchor, fuse_match *m)
{
    op_view qv, ev;
    if (!view(fs, anchor, LOOM_OP_RMS_NORM_QKV_ROPE_KV, &qv))
        return false;
    uint32_t id = producer(fs, anchor, qv.b[1]);
    if (!view(fs, id, LOOM_OP_EMBED, &ev) || !loom_binding_same(ev.b[2], qv.b[1]) || ev.n != qv.a.cols)
        return false;
    *m = (fuse_match){ .nodes = { id, anchor }, .n_nodes = 2, .n_in = 5, .n_out = 4, .eps = qv.a.eps,
                       .theta = qv.a.theta, .head_dim = qv.a.head_dim, .token_buf = ev.b[1]->buffer,
                       .token_index = ev.a.token_index };
    return mat_of(ev.b[0], ev.a.vocab, ev.n, ev.wt, &m->in[0]) && vec_of(qv.b[2], qv.a.cols, &m->in[1]) &&
           mat_of(qv.b[3], qv.a.q_rows, qv.a.cols, qv.wt, &m->in[2]) &&
           mat_of(qv.b[4], qv.a.kv_rows, qv.a.cols, qv.wt, &m->in[3]) &&
           mat_of(qv.b[5], qv.a.kv_rows, qv.a.cols, qv.wv, &m->in[4]) && m->in[0].dtype == m->in[2].dtype &&
           vec_of(qv.b[6], qv.a.q_rows, &m->out[0]) &&
           mat_of(qv.b[7], qv.a.max_seq, qv.a.kv_rows, LOOM_F32, &m->out[1]) &&
           mat_of(qv.b[8], qv.a.max_seq, qv.a.kv_rows, LOOM_F32, &m->out[2]) && vec_of(ev.b[2], ev.n, &m->out[3]) &&
           legal(fs, m);
}

static loom_result build_embed_qkv(loom_graph *g, const fuse_match *m, uint32_t *out)
{
    return loom_op_embed_rms_norm_qkv_rope_kv(g, m->in[0], m->token_buf, m->token_index, m->in[1], m->in[2],
                                              m->in[3], m->in[4], m->out[3], m->out[0], m->out[1], m->out[2],
                                              m->head_dim, m->theta, m->eps, out);
}

/* RMS_NORM_MATVEC_ARGMAX -> the STEP_LOG of its index at the step's end
 * (back 0, one word): the workgroup that finds the index also writes it
 * into the ring, so the log's level goes. The ring keeps its rows. */
static bool match_argmax_log(fuse_state *fs, uint32_t anchor, fuse_match *m)
{
    op_view lv, av;
    if (!view(fs, anchor, LOOM_OP_STEP_LOG, &lv) || lv.a.back != 0 || lv.n != 1)
        return false;
    uint32_t id = producer(fs, anchor, lv.b[1]);
    if (!view(fs, id, LOOM_OP_RMS_NORM_MATVEC_ARGMAX, &av) || !loom_binding_same(av.b[4], lv.b[1]) ||
        lv.b[2]->size != (uint64_t)lv.a.slots * 4)
        return false;
    *m = (fuse_match){ .nodes = { id, anchor }, .n_nodes = 2, .n_in = 3, .n_out = 3, .eps = av.a.eps };
    m->out[2] = (loom_tensor){ lv.b[2]->buffer, LOOM_U32, lv.b[2]->offset, lv.a.slots, 1 };
    return mat_of(av.b[0], av.a.rows, av.a.cols, av.wt, &m->in[0]) && vec_of(av.b[1], av.a.cols, &m->in[1]) &&
           vec_of(av.b[2], av.a.cols, &m->in[2]) && vec_of(av.b[3], av.a.rows, &m->out[0]) &&
           u32_of(av.b[4], &m->out[1]) && legal(fs, m);
}

static loom_result build_argmax_log(loom_graph *g, const fuse_match *m, uint32_t *out)
{
    return loom_op_rms_norm_matvec_argmax_log(g, m->in[0], m->in[1], m->in[2], m->out[0], m->out[1], m->out[2],
                                              m->eps, out);
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
    { "matvec_argmax", { LOOM_OP_MATVEC, LOOM_OP_ARGMAX }, 2, LOOM_OP_MATVEC_ARGMAX, match_matvec_argmax,
      build_matvec_argmax },
    { "matmul_silu_mul", { LOOM_OP_MATMUL, LOOM_OP_MATMUL, LOOM_OP_SILU_MUL }, 3, LOOM_OP_MATMUL_SILU_MUL,
      match_matmul_silu_mul, build_matmul_silu_mul },
    { "matmul_add", { LOOM_OP_MATMUL, LOOM_OP_ADD }, 2, LOOM_OP_MATMUL_ADD, match_matmul_add, build_matmul_add },
    /* These take what the rules above made, in a later round. */
    { "qkv_rope_kv",
      { LOOM_OP_RMS_NORM_MUL, LOOM_OP_MATVEC, LOOM_OP_MATVEC, LOOM_OP_MATVEC, LOOM_OP_ROPE, LOOM_OP_ROPE,
        LOOM_OP_KV_APPEND },
      7, LOOM_OP_RMS_NORM_QKV_ROPE_KV, match_qkv_rope_kv, build_qkv_rope_kv },
    { "rms_norm_matvec", { LOOM_OP_RMS_NORM_MUL, LOOM_OP_MATVEC }, 2, LOOM_OP_RMS_NORM_MATVEC, match_norm_matvec,
      build_norm_matvec },
    { "rms_norm_matvec_silu_mul", { LOOM_OP_RMS_NORM_MUL, LOOM_OP_MATVEC_SILU_MUL }, 2,
      LOOM_OP_RMS_NORM_MATVEC_SILU_MUL, match_norm_matvec_silu_mul, build_norm_matvec_silu_mul },
    { "rms_norm_matvec_argmax", { LOOM_OP_RMS_NORM_MUL, LOOM_OP_MATVEC_ARGMAX }, 2, LOOM_OP_RMS_NORM_MATVEC_ARGMAX,
      match_norm_matvec_argmax, build_norm_matvec_argmax },
    { "embed_qkv", { LOOM_OP_EMBED, LOOM_OP_RMS_NORM_QKV_ROPE_KV }, 2, LOOM_OP_EMBED_RMS_NORM_QKV_ROPE_KV,
      match_embed_qkv, build_embed_qkv },
    { "argmax_log", { LOOM_OP_RMS_NORM_MATVEC_ARGMAX, LOOM_OP_STEP_LOG }, 2, LOOM_OP_RMS_NORM_MATVEC_ARGMAX_LOG,
      match_argmax_log, build_argmax_log },
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
            if (rules[r].chain[rules[r].len - 1] != op || !rules[r].match(&fs, i, &m))
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
