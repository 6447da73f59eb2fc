/* split: cuts every node with a binding larger than the binding limit (the
 * device's maxStorageBufferRange, or less: loom_pass_ctx.max_binding_range)
 * into row blocks, so weights larger than one binding run while the capture
 * stays as the frontend made it.
 *
 * - The matvec forms (MATVEC, MATVEC_ADD, MATVEC_SILU_MUL, RMS_NORM_MATVEC,
 *   RMS_NORM_MATVEC_SILU_MUL) become one node of the same op per block of
 *   rows: rows [r0, r1) of the matrices, of y and of r, with x and g whole.
 *   The blocks write disjoint bytes, so reorder runs them as one group.
 * - The argmax forms become the blocks of their form without the argmax,
 *   then one ARGMAX over the whole of y (the logits a frontend reads anyway).
 * - EMBED becomes EMBED_BLOCKS nodes (loom_op_embed_blocks): one dispatch
 *   binds up to LOOM_EMBED_MAX_BLOCKS row blocks of the table and the token
 *   picks one; a table needing more blocks takes several such nodes, each
 *   writing the output only for its own tokens (ordered by their
 *   write-after-write).
 *
 * Blocks are as even as the alignment allows and start where every binding
 * offset stays a multiple of LOOM_BIND_ALIGN (256 bytes, the largest
 * minStorageBufferOffsetAlignment Vulkan allows, so a plan suits any
 * device): matvec blocks at multiples of 64 rows (a row of y is 4 bytes, a
 * matrix row a multiple of 4), EMBED blocks wherever a table row boundary
 * is 256-aligned. A node the pass cannot cut — another op, a node not laid
 * out as its builder makes it, a part that is not split (x, g, the logits
 * an ARGMAX reads whole) above the limit, or a limit below one block — is
 * LOOM_LIMIT naming the node, the field and the sizes.
 *
 * The argmax forms left whole are then capped at loom_pass_ctx.wave_groups
 * workgroups (where it is nonzero and lower than theirs): their workgroups
 * loop over the row blocks, and one wave of them, where a second would
 * start as the first ends, reads faster on the H100 and H200 (figures:
 * docs/perf-log.md). Their partial-result workspace, sized for
 * the builder's count, holds the fewer.
 *
 * Last, with loom_pass_ctx.coopmat, the matmul kinds' tiled forms and the
 * prefill's ATTENTION_ROWS take their cooperative-matrix forms (coopmat.c):
 * the device's forms, decided where the device's limits are.
 *
 * Every new node stands for the captured nodes of the node it replaces and
 * carries LOOM_NODE_SPLIT. The pass runs after fuse (fusion is decided on
 * whole matrices; fuse makes no node this pass could not cut) and before
 * reorder; with no limit, or nothing above it, it leaves the graph as is. */
#include <inttypes.h>
#include <stdio.h>
#include "internal.h"
#include "loom_ops.h"

#define ROW_ALIGN (LOOM_BIND_ALIGN / 4u)   /* matvec block rows: y's offsets stay aligned */

/* The matvec forms and the op each row block takes: the same, or for the
 * argmax forms the same without the argmax. Their slots (W or Wg, Wu, x,
 * g, r, y, out) are read back by name from their rows of ops.def. */
static const struct { loom_op op, block_op; } mv_forms[] = {
    { LOOM_OP_MATVEC, LOOM_OP_MATVEC },
    { LOOM_OP_MATVEC_ADD, LOOM_OP_MATVEC_ADD },
    { LOOM_OP_MATVEC_SILU_MUL, LOOM_OP_MATVEC_SILU_MUL },
    { LOOM_OP_RMS_NORM_MATVEC, LOOM_OP_RMS_NORM_MATVEC },
    { LOOM_OP_RMS_NORM_MATVEC_SILU_MUL, LOOM_OP_RMS_NORM_MATVEC_SILU_MUL },
    { LOOM_OP_MATVEC_ARGMAX, LOOM_OP_MATVEC },
    { LOOM_OP_RMS_NORM_MATVEC_ARGMAX, LOOM_OP_RMS_NORM_MATVEC },
};

/* The op a row block of op takes; LOOM_OP_COUNT when op is not a matvec form. */
static loom_op block_op_of(uint32_t op)
{
    for (size_t i = 0; i < sizeof mv_forms / sizeof mv_forms[0]; i++)
        if ((uint32_t)mv_forms[i].op == op)
            return mv_forms[i].block_op;
    return LOOM_OP_COUNT;
}

bool pass_split_handles(loom_op op) { return op == LOOM_OP_EMBED || block_op_of(op) != LOOM_OP_COUNT; }

/* The node being cut, copied out of the graph: the builders append to the
 * arrays its pointers would point into. */
typedef struct cut {
    uint32_t pos;
    loom_node nd;
    const char *op;
    loom_binding b[LOOM_MAX_BINDINGS];
    uint8_t push[LOOM_MAX_PUSH];
    uint32_t caps[256];          /* captured nodes it stands for (fused <= 255) */
} cut;

typedef struct split_state {
    loom_graph *g;
    const loom_allocator *a;
    uint64_t limit;
    uint32_t *made;              /* new node ids, in plan order */
    uint32_t n_made, cap_made;
} split_state;

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
static uint64_t gcd(uint64_t a, uint64_t b) { return b ? gcd(b, a % b) : a; }

/* c's push constants read back by its op's layout; all zeros when they are
 * not that layout. */
static loom_op_args args_of(const cut *c)
{
    loom_op_args a;
    loom_op_args_read((loom_op)c->nd.op, c->push, c->nd.push_size, &a);
    return a;
}

static const loom_binding *at_slot(const cut *c, uint32_t slot)
{
    for (uint32_t i = 0; i < c->nd.n_bindings; i++)
        if (c->b[i].slot == slot)
            return &c->b[i];
    return NULL;
}

static bool over(const loom_graph *g, const loom_node *nd, uint64_t limit)
{
    const loom_binding *b = loom_node_bindings(g, nd);
    for (uint32_t i = 0; nd->type == LOOM_NODE_DISPATCH && i < nd->n_bindings; i++)
        if (b[i].size > limit)
            return true;
    return false;
}

/* The first binding above the limit, for "cannot be cut" messages. */
static loom_result refuse(const split_state *s, const cut *c, const char *why)
{
    const loom_binding *big = &c->b[0];
    for (uint32_t i = 0; i < c->nd.n_bindings; i++)
        if (c->b[i].size > s->limit) {
            big = &c->b[i];
            break;
        }
    return loom_fail(LOOM_LIMIT,
                     "node %u (%s, capture %u): binding slot %u (buffer %u '%s') is %" PRIu64
                     " bytes, above the binding limit of %" PRIu64 " bytes, and %s",
                     c->pos, c->op, c->nd.capture_index, big->slot, big->buffer,
                     loom_graph_buffer_name(s->g, big->buffer), big->size, s->limit, why);
}

static loom_result whole_part(const split_state *s, const cut *c, const char *field, uint64_t bytes)
{
    if (bytes <= s->limit)
        return LOOM_OK;
    return loom_fail(LOOM_LIMIT,
                     "node %u (%s, capture %u): %s is %" PRIu64 " bytes, above the binding limit of %" PRIu64
                     " bytes; only matrix and table rows are split",
                     c->pos, c->op, c->nd.capture_index, field, bytes, s->limit);
}

/* The dtype of the matrix c binds, rows x cols of size bytes: a block type
 * where c's kernel form says so (Q4_0 and Q4_K take the same bytes, so
 * never from the size), else f32 or f16 by the bytes; LOOM_U32 when the
 * bytes do not fit either. */
static loom_dtype weight_dtype(const split_state *s, const cut *c, uint64_t size, uint32_t rows, uint32_t cols)
{
    loom_dtype w, v;
    uint64_t elems = (uint64_t)rows * cols;
    if (loom_form_weights(loom_graph_kernel_name(s->g, c->nd.kernel), &w, &v) && loom_dtype_is_block(w)) {
        uint64_t vb = loom_view_bytes(w, rows, cols);
        return vb && size == vb ? w : LOOM_U32;
    }
    return elems && size == elems * 2 ? LOOM_F16 : elems && size == elems * 4 ? LOOM_F32 : LOOM_U32;
}

/* c is laid out as its op's builder lays it out (ops.def): every slot bound,
 * the push bytes, and the kernel for weights of dtype dt (for a block type,
 * the form of the row's f32 kernel for it). */
static bool builder_made(const split_state *s, const cut *c, loom_dtype dt)
{
    const loom_op_info *in = loom_op_info_get((loom_op)c->nd.op);
    const char *kernel = loom_graph_kernel_name(s->g, c->nd.kernel);
    const char *want = !in || !in->kernel[0] ? NULL
                       : loom_dtype_is_block(dt) ? loom_form_kernel(loom_form_row(in->kernel[0]), dt, dt)
                                                 : in->kernel[dt == LOOM_F16];
    if (!want || c->nd.n_bindings != in->n_slots || c->nd.push_size != in->push_size || !kernel ||
        strcmp(kernel, want))
        return false;
    for (uint32_t k = 0; k < in->n_slots; k++)
        if (!at_slot(c, k))
            return false;
    return true;
}

/* The binding of c's slot called name in its op's row of ops.def, or NULL. */
static const loom_binding *named(const cut *c, const char *name)
{
    const loom_op_info *in = loom_op_info_get((loom_op)c->nd.op);
    for (uint32_t k = 0; in && k < in->n_slots; k++)
        if (!strcmp(in->slot[k].name, name))
            return at_slot(c, k);
    return NULL;
}

/* Rows per block: at most what fits the limit and a multiple of align
 * (0 when not even one aligned block fits), balanced over the blocks. */
static uint64_t block_rows(uint64_t rows, uint64_t row_bytes, uint64_t align, uint64_t limit)
{
    uint64_t most = limit / row_bytes / align * align;
    if (most == 0)
        return 0;
    uint64_t k = ceil_div(rows, most);
    return ceil_div(ceil_div(rows, k), align) * align;
}

/* Records a node the builders just appended as a block of c. */
static loom_result made(split_state *s, const cut *c, uint32_t id)
{
    if (s->n_made == s->cap_made) {
        uint32_t cap = s->cap_made ? 2 * s->cap_made : 64;
        uint32_t *v = s->a->realloc(s->a->user, s->made, (size_t)s->cap_made * sizeof *v, (size_t)cap * sizeof *v);
        if (!v)
            return loom_fail(LOOM_OUT_OF_MEMORY, "split: out of memory");
        s->made = v;
        s->cap_made = cap;
    }
    s->made[s->n_made++] = id;
    loom_result rc = loom_graph_set_members(s->g, id, c->caps, c->nd.fused);
    if (!rc)
        loom_graph_node_mut(s->g, id)->flags |= LOOM_NODE_SPLIT;
    return rc;
}

/* ---- matvec forms ---------------------------------------------------------- */

typedef struct mv_views {
    loom_tensor w, u, x, gw, r, y, out;
    float eps;
} mv_views;

static loom_result build_block(loom_graph *g, loom_op op, const mv_views *v, uint32_t *id)
{
    switch (op) {
    case LOOM_OP_MATVEC: return loom_op_matvec(g, v->w, v->x, v->y, id);
    case LOOM_OP_MATVEC_ADD: return loom_op_matvec_add(g, v->w, v->x, v->r, v->y, id);
    case LOOM_OP_MATVEC_SILU_MUL: return loom_op_matvec_silu_mul(g, v->w, v->u, v->x, v->y, id);
    case LOOM_OP_RMS_NORM_MATVEC: return loom_op_rms_norm_matvec(g, v->w, v->x, v->gw, v->y, v->eps, id);
    case LOOM_OP_RMS_NORM_MATVEC_SILU_MUL:
        return loom_op_rms_norm_matvec_silu_mul(g, v->w, v->u, v->x, v->gw, v->y, v->eps, id);
    default: return loom_fail(LOOM_UNSUPPORTED, "split: no block builder for %s", loom_op_name(op));
    }
}

/* One vector slot of c read back: n floats; false when it is bound with
 * another length. Absent (NULL) slots leave *t zero. */
static bool vec_slot(const loom_binding *b, uint32_t n, loom_tensor *t)
{
    if (b)
        *t = loom_vec_at(b->buffer, b->offset, n);
    return !b || b->size == (uint64_t)n * 4;
}

/* Reads c back as the views its builder was given; false when it is not
 * laid out the way the builder lays it out. */
static bool mv_read(const split_state *s, const cut *c, mv_views *v)
{
    const loom_binding *w = named(c, "W"), *wg = named(c, "Wg"), *u = named(c, "Wu"), *out = named(c, "out");
    const loom_binding *x = named(c, "x"), *g = named(c, "g"), *r = named(c, "r"), *y = named(c, "y");
    w = w ? w : wg;
    loom_op_args pc = args_of(c);
    if (!w || !x || !y || !pc.rows)
        return false;
    uint32_t rows = pc.rows, cols = pc.cols;
    loom_dtype dt = weight_dtype(s, c, w->size, rows, cols);
    if (dt == LOOM_U32 || (u && u->size != w->size) || (out && out->size != 4) || !builder_made(s, c, dt))
        return false;
    memset(v, 0, sizeof *v);
    if (g)
        v->eps = pc.eps;
    v->w = (loom_tensor){ w->buffer, dt, w->offset, rows, cols };
    if (u)
        v->u = (loom_tensor){ u->buffer, dt, u->offset, rows, cols };
    if (out)
        v->out = (loom_tensor){ out->buffer, LOOM_U32, out->offset, 1, 1 };
    return vec_slot(x, cols, &v->x) && vec_slot(g, cols, &v->gw) && vec_slot(r, rows, &v->r) &&
           vec_slot(y, rows, &v->y);
}

static loom_result cut_matvec(split_state *s, const cut *c, loom_op block_op)
{
    mv_views v;
    if (!mv_read(s, c, &v))
        return refuse(s, c, "it is not laid out as its op builder lays it out, so it cannot be cut into row blocks");
    bool argmax = block_op != (loom_op)c->nd.op, gated = v.u.cols != 0;
    loom_result rc = whole_part(s, c, "x", (uint64_t)v.x.cols * 4);
    if (!rc && v.gw.cols)
        rc = whole_part(s, c, "g", (uint64_t)v.gw.cols * 4);
    if (!rc && argmax)
        rc = whole_part(s, c, "y (read whole by the ARGMAX that follows the blocks)", (uint64_t)v.y.cols * 4);
    if (rc)
        return rc;
    uint32_t rows = v.w.rows;
    uint64_t row_bytes = loom_dtype_row_bytes((loom_dtype)v.w.dtype, v.w.cols);
    /* y's offsets stay aligned (ROW_ALIGN rows), and W's: a block type's row
     * may be 2 bytes short of a word (Q8_0, Q4_0 and Q6_K). */
    uint64_t align = LOOM_BIND_ALIGN / gcd(row_bytes, LOOM_BIND_ALIGN);
    align = align > ROW_ALIGN ? align : ROW_ALIGN;
    uint64_t block = block_rows(rows, row_bytes, align, s->limit);
    if (block == 0)
        return loom_fail(LOOM_LIMIT,
                         "node %u (%s, capture %u): a row block of %s is at least %u rows of %" PRIu64
                         " bytes (binding offsets stay multiples of %u), %" PRIu64
                         " bytes, above the binding limit of %" PRIu64 " bytes",
                         c->pos, c->op, c->nd.capture_index, gated ? "Wg" : "W", (unsigned)align, row_bytes,
                         LOOM_BIND_ALIGN, align * row_bytes, s->limit);
    for (uint64_t r0 = 0; r0 < rows; r0 += block) {
        uint32_t n = (uint32_t)(rows - r0 < block ? rows - r0 : block);
        mv_views bv = v;
        bv.w.offset += r0 * row_bytes;
        bv.w.rows = n;
        bv.u.offset += r0 * row_bytes;
        bv.u.rows = n;
        bv.y = loom_vec_at(v.y.buffer, v.y.offset + r0 * 4, n);
        bv.r = loom_vec_at(v.r.buffer, v.r.offset + r0 * 4, n);
        uint32_t id;
        if ((rc = build_block(s->g, block_op, &bv, &id)))
            return loom_fail_wrap(rc, "split node %u (%s), rows [%" PRIu64 ", %" PRIu64 ")", c->pos, c->op, r0,
                                  r0 + n);
        if ((rc = made(s, c, id)))
            return rc;
    }
    if (!argmax)
        return LOOM_OK;
    uint32_t id;
    if ((rc = loom_op_argmax(s->g, v.y, v.out, &id)))
        return loom_fail_wrap(rc, "split node %u (%s), the ARGMAX after its blocks", c->pos, c->op);
    return made(s, c, id);
}

/* ---- EMBED ----------------------------------------------------------------- */

static loom_result cut_embed(split_state *s, const cut *c)
{
    const loom_binding *bt = named(c, "table"), *bk = named(c, "token_buf"), *bo = named(c, "out");
    loom_op_args pc = args_of(c);
    uint32_t dim = pc.cols, vocab = pc.vocab, token_index = pc.token_index;
    loom_dtype dt = bt ? weight_dtype(s, c, bt->size, vocab, dim) : LOOM_U32;
    if (!bt || !bk || !bo || dt == LOOM_U32 ||
        bo->size != (uint64_t)dim * 4 || bk->offset != 0 || !builder_made(s, c, dt))
        return refuse(s, c, "it is not laid out as loom_op_embed lays it out, so it cannot be cut into row blocks");
    loom_result rc = whole_part(s, c, "token_buf", bk->size);
    if (!rc)
        rc = whole_part(s, c, "out", bo->size);
    if (rc)
        return rc;
    uint64_t row_bytes = loom_dtype_row_bytes(dt, dim);
    uint64_t align = LOOM_BIND_ALIGN / gcd(row_bytes, LOOM_BIND_ALIGN);
    uint64_t block = block_rows(vocab, row_bytes, align, s->limit);
    if (block == 0)
        return loom_fail(LOOM_LIMIT,
                         "node %u (%s, capture %u): a row block of table is at least %" PRIu64 " rows of %" PRIu64
                         " bytes (binding offsets stay multiples of %u), %" PRIu64
                         " bytes, above the binding limit of %" PRIu64 " bytes",
                         c->pos, c->op, c->nd.capture_index, align, row_bytes, LOOM_BIND_ALIGN, align * row_bytes,
                         s->limit);
    loom_tensor out = loom_vec_at(bo->buffer, bo->offset, dim);
    for (uint64_t first = 0; first < vocab;) {
        loom_tensor t[LOOM_EMBED_MAX_BLOCKS];
        uint32_t n = 0;
        for (uint64_t r0 = first; r0 < vocab && n < LOOM_EMBED_MAX_BLOCKS; r0 += block, n++) {
            uint32_t rows = (uint32_t)(vocab - r0 < block ? vocab - r0 : block);
            t[n] = (loom_tensor){ bt->buffer, dt, bt->offset + r0 * row_bytes, rows, dim };
        }
        uint32_t id;
        if ((rc = loom_op_embed_blocks(s->g, t, n, (uint32_t)first, vocab, bk->buffer, token_index, out, &id)))
            return loom_fail_wrap(rc, "split node %u (%s), tokens from %" PRIu64, c->pos, c->op, first);
        if ((rc = made(s, c, id)))
            return rc;
        first += (uint64_t)n * block;
    }
    return LOOM_OK;
}

/* ---- driver ------------------------------------------------------------- */

static loom_result cut_node(split_state *s, uint32_t pos)
{
    cut c;
    const loom_node *nd = loom_graph_node(s->g, pos);
    c.pos = pos;
    c.nd = *nd;
    c.op = loom_op_name((loom_op)nd->op);
    memcpy(c.b, loom_node_bindings(s->g, nd), (size_t)nd->n_bindings * sizeof c.b[0]);
    memcpy(c.push, loom_node_push(s->g, nd), nd->push_size);
    if (nd->fused > sizeof c.caps / sizeof c.caps[0])
        return loom_fail(LOOM_LIMIT, "node %u (%s) stands for %u captured nodes; the split pass takes at most %zu",
                         pos, c.op, (unsigned)nd->fused, sizeof c.caps / sizeof c.caps[0]);
    memcpy(c.caps, loom_node_members(s->g, nd), (size_t)nd->fused * sizeof c.caps[0]);
    if (c.nd.op == LOOM_OP_EMBED)
        return cut_embed(s, &c);
    loom_op block_op = block_op_of(c.nd.op);
    if (block_op == LOOM_OP_COUNT)
        return refuse(s, &c, "only the matvec forms and EMBED are cut into row blocks");
    return cut_matvec(s, &c, block_op);
}

static bool argmax_form(loom_op op)
{
    return op == LOOM_OP_MATVEC_ARGMAX || op == LOOM_OP_RMS_NORM_MATVEC_ARGMAX ||
           op == LOOM_OP_RMS_NORM_MATVEC_ARGMAX_LOG;
}

static void cap_waves(loom_graph *g, uint32_t wave)
{
    for (uint32_t i = 0; wave && i < loom_graph_node_count(g); i++) {
        loom_node *n = loom_graph_node_mut(g, i);
        if (n->type == LOOM_NODE_DISPATCH && argmax_form((loom_op)n->op) && n->groups[0] > wave)
            n->groups[0] = wave;
    }
}

static loom_result cut_all(loom_graph *g, loom_pass_ctx *ctx)
{
    split_state s = { .g = g, .a = loom_graph_allocator(g), .limit = ctx ? ctx->max_binding_range : 0 };
    uint32_t n = loom_graph_node_count(g), n_cut = 0;
    for (uint32_t i = 0; s.limit && i < n; i++)
        n_cut += over(g, loom_graph_node(g, i), s.limit);
    if (n_cut == 0)
        return LOOM_OK;
    /* Per original node: where its blocks start in s.made, and how many. */
    uint32_t *first = pass_alloc(s.a, (size_t)n * 2 * sizeof(uint32_t));
    if (!first)
        return loom_fail(LOOM_OUT_OF_MEMORY, "split: out of memory for %u nodes", n);
    uint32_t *count = first + n;
    loom_graph_clear_schedule(g);
    loom_result rc = LOOM_OK;
    for (uint32_t i = 0; i < n && !rc; i++) {
        first[i] = s.n_made;
        rc = over(g, loom_graph_node(g, i), s.limit) ? cut_node(&s, i) : LOOM_OK;
        count[i] = s.n_made - first[i];
    }
    uint32_t total = n - n_cut + s.n_made;
    uint32_t *order = rc ? NULL : pass_alloc(s.a, (size_t)total * sizeof(uint32_t));
    if (!rc && !order)
        rc = loom_fail(LOOM_OUT_OF_MEMORY, "split: out of memory for %u nodes", total);
    if (!rc) {
        uint32_t k = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (!count[i])
                order[k++] = i;
            for (uint32_t j = 0; j < count[i]; j++)
                order[k++] = s.made[first[i] + j];
        }
        rc = loom_graph_permute(g, order, k);
        pass_free(s.a, order, (size_t)total * sizeof(uint32_t));
    }
    pass_free(s.a, first, (size_t)n * 2 * sizeof(uint32_t));
    pass_free(s.a, s.made, (size_t)s.cap_made * sizeof(uint32_t));
    if (!rc && ctx)
        ctx->split_nodes += n_cut;
    return rc;
}

loom_result loom_pass_split(loom_graph *g, loom_pass_ctx *ctx)
{
    if (!g)
        return loom_fail(LOOM_INVALID_ARGUMENT, "loom_pass_split: graph is NULL");
    loom_result rc = cut_all(g, ctx);
    if (!rc && ctx)
        cap_waves(g, ctx->wave_groups);
    if (!rc)
        rc = pass_coopmat(g, ctx);
    return rc;
}
