/* The split pass's last step (the device's forms): with
 * loom_pass_ctx.coopmat, every node of a matmul kind (MATMUL, MATMUL_ADD,
 * MATMUL_SILU_MUL) on a tiled kernel form (forms.def: MM_TILED) takes the
 * same form with MM_COOP, where forms.def has one (f16 and block-typed
 * weights; f32 weights stay tiled, whose precision f16 inputs would lose),
 * and the workgroup count of its tiles (ir/loom_ops.h: LOOM_MATMUL_COOP_*).
 * A node of one matrix (MATMUL, MATMUL_ADD) of fewer tiles than
 * LOOM_MATMUL_COOP_KS_BELOW takes the form that splits each tile's K walk
 * between two halves of a workgroup (MM_KS): twice the loads in flight
 * where the tiles are too few to fill the device (`1b`'s residual
 * projections at T = 128: 27% less time on an H100), and the plain form
 * where they are many (T = 512: MM_KS took 2% more). Before either, a
 * node whose K reaches LOOM_MATMUL_COOP_L_COLS
 * (loom_pass_ctx.coop_large_cols) takes the large tiles where they number
 * at least LOOM_MATMUL_COOP_L_FROM (or, for MATMUL nodes reading one x,
 * where their large tiles together number half that up to that: q, k and
 * v of `1b`, matmul_coop below): a matrix of one weight MM_L=128, else
 * MM_L=64 (`7b`'s residual projections at T = 512 took 43% less time on
 * an H100, `1b`'s down projection about 25% less); the gated FFN MM_L=128
 * with MM_SILU, 64 rows of each matrix, reading f16 x (on an H200 `7b`
 * with 8 layers pp512 16.9 -> 13.6 ms, its gated FFN 1,381 -> 903 us a
 * node; `1b` pp512 12.9 -> 10.9 ms with K 2048 taking the large tiles
 * too: docs/perf-log.md, "the gated FFN in large tiles").
 * Nodes on the multi-column form (small T) over f16 weights take the narrow
 * form (MM_NARROW: the products in cooperative matrices, every token row in
 * one 16-column tile) where T is at least LOOM_MATMUL_NARROW_FROM_T and the
 * rows and cols are whole 16 x 16 tiles; below it, and for the block types,
 * they keep their form. An ATTENTION_ROWS node over f16 caches
 * whose head_dim has a form (ATT_HD: 64, 128) and whose kv heads each serve
 * at least LOOM_ATTN_ROWS_COOP_Q query vectors takes ATT_COOP's form (fewer
 * would leave most of a workgroup's queries empty: a verification step of
 * a few rows keeps the portable form). Bindings, ranges and push constants
 * stay as they are; the new node stands for the same captured nodes. Then
 * the vectors that pass only between coopmat forms are stored as f16
 * (half_pair below). On every device, last, an f16 MATMUL of many rows
 * left on the multi-column form takes its 2-rows-a-subgroup layout
 * (to_rows2). */
#include <stdio.h>
#include <string.h>
#include "internal.h"
#include "loom_ops.h"

static bool matmul_kind(uint32_t op)
{
    return op == LOOM_OP_MATMUL || op == LOOM_OP_MATMUL_ADD || op == LOOM_OP_MATMUL_SILU_MUL;
}

/* The ATT_COOP form of an ATTENTION_ROWS node on kernel k, and its
 * workgroups; NULL where it keeps its form. */
static const char *attn_coop(const char *k, const loom_op_args *pc, uint64_t *groups)
{
    if (!loom_form_has(k, "ATT_KH") || loom_form_has(k, "ATT_COOP") || pc->kv_heads == 0)
        return NULL;
    const char *hd = pc->head_dim == 64 ? "ATT_COOP ATT_HD=64" : pc->head_dim == 128 ? "ATT_COOP ATT_HD=128" : NULL;
    uint64_t per_kv = (uint64_t)pc->T * (pc->heads / pc->kv_heads);
    if (!hd || per_kv < LOOM_ATTN_ROWS_COOP_Q)
        return NULL;
    *groups = pc->kv_heads * ((per_kv + LOOM_ATTN_ROWS_COOP_Q - 1) / LOOM_ATTN_ROWS_COOP_Q);
    return loom_form_variant(k, hd, NULL);
}

/* Workgroups of a tile of rows by t token rows over the node's shape. */
static uint64_t tiles(const loom_op_args *pc, uint32_t rows, uint32_t t)
{
    return (uint64_t)(pc->rows + rows - 1) / rows * ((pc->T + t - 1) / t);
}

/* The large tiles of the MATMUL nodes on tiled forms that read node i's x
 * with its T and K (i among them): the siblings of one level, such as
 * q, k and v, whose workgroups run side by side. The pass appends the
 * nodes it makes and permutes at the end, so the originals are all still
 * here, on their tiled forms. */
static uint64_t sibling_tiles(const loom_graph *g, uint32_t i, const loom_op_args *pc)
{
    const loom_binding *x = pass_named(g, loom_graph_node(g, i), "x");
    uint64_t sum = 0;
    uint32_t n = loom_graph_node_count(g);
    for (uint32_t d = 0; x && d < n; d++) {
        const loom_node *nd = loom_graph_node(g, d);
        const char *k = nd->type == LOOM_NODE_DISPATCH ? loom_graph_kernel_name(g, nd->kernel) : NULL;
        const loom_binding *dx;
        loom_op_args dp;
        if (!k || nd->op != LOOM_OP_MATMUL || (nd->flags & LOOM_NODE_SPLIT) || !loom_form_has(k, "MM_TILED") ||
            loom_form_has(k, "MM_COOP") ||   /* a node this pass made: its original is still counted */
            !(dx = pass_named(g, nd, "x")) || !loom_binding_same(dx, x) || loom_op_args_of(g, d, &dp) ||
            dp.T != pc->T || dp.cols != pc->cols)
            continue;
        sum += tiles(&dp, LOOM_MATMUL_COOP_L_ROWS, LOOM_MATMUL_COOP_L_T);
    }
    return sum;
}

/* The cooperative-matrix form of a matmul-kind node on tiled kernel k, and
 * its workgroups: a matrix of one weight whose K is long takes the large
 * tiles where they are many, or where its siblings' and its own (sib: the
 * sum of their large tiles) number LOOM_MATMUL_COOP_L_FROM / 2 up to
 * LOOM_MATMUL_COOP_L_FROM, about one wave of them side by side (`1b`
 * pp512: q, k and v 64, 16 and 16 tiles, where q split its K walk and k
 * and v took the small tiles: on an H200 their level 81.5 -> 62.3 us, the
 * step 9,667 -> 9,245; `7b`'s 128, 32 and 32 read the same either way);
 * then 128 token rows before 64 (with split_k, a split K walk, MM_SK,
 * where the large tiles are half as many); else the small tiles, K split
 * where a matrix of one weight has few. */
static const char *matmul_coop(const char *k, uint32_t op, const loom_op_args *pc, uint32_t large_cols,
                               bool split_k, uint64_t sib, uint64_t *groups)
{
    bool one = op != LOOM_OP_MATMUL_SILU_MUL;
    if (!one && pc->cols >= large_cols &&
        (*groups = tiles(pc, LOOM_MATMUL_COOP_LS_ROWS, LOOM_MATMUL_COOP_L_T)) >= LOOM_MATMUL_COOP_L_FROM)
        return loom_form_variant(k, "MM_COOP MM_L=128", NULL);
    if (one && pc->cols >= large_cols) {
        *groups = tiles(pc, LOOM_MATMUL_COOP_L_ROWS, LOOM_MATMUL_COOP_L_T);
        if (*groups >= LOOM_MATMUL_COOP_L_FROM ||
            (sib > *groups && sib >= LOOM_MATMUL_COOP_L_FROM / 2 && sib <= LOOM_MATMUL_COOP_L_FROM))
            return loom_form_variant(k, "MM_COOP MM_L=128", NULL);
        if (split_k && *groups >= LOOM_MATMUL_COOP_L_FROM / 2) {
            *groups *= 2;
            return loom_form_variant(k, "MM_COOP MM_L=128 MM_SK", NULL);
        }
        if ((*groups = tiles(pc, LOOM_MATMUL_COOP_L_ROWS, LOOM_MATMUL_COOP_L_T64)) >= LOOM_MATMUL_COOP_L_FROM)
            return loom_form_variant(k, "MM_COOP MM_L=64", NULL);
    }
    *groups = tiles(pc, LOOM_MATMUL_COOP_ROWS, LOOM_MATMUL_COOP_T);
    return loom_form_variant(k, one && *groups < LOOM_MATMUL_COOP_KS_BELOW ? "MM_COOP MM_KS" : "MM_COOP", NULL);
}

/* The narrow cooperative-matrix form of a matmul-kind node on the
 * multi-column form k (a few token rows), and its workgroups: f16 weights
 * (the form exists for them alone; the q/k/v fold and the integer forms have
 * none), rows and cols multiples of 16 (whole 16 x 16 tiles, rows of whole
 * 16-byte loads). NULL where it keeps its form. */
static const char *matmul_narrow(const char *k, uint32_t op, const loom_op_args *pc, uint64_t *groups)
{
    const char *to = loom_form_variant(k, "MM_COOP MM_NARROW", NULL);
    uint32_t per = op == LOOM_OP_MATMUL_SILU_MUL ? LOOM_MATMUL_NARROW_GATED_ROWS : LOOM_MATMUL_NARROW_ROWS;
    if (!to || pc->rows % 16u || pc->cols % 16u || pc->T < LOOM_MATMUL_NARROW_FROM_T || pc->T > LOOM_MATMUL_SMALL_T)
        return NULL;
    *groups = loom_matmul_row_groups(pc->rows, per);
    return to;
}

/* Node i on the split K walk's form kernel (MM_SK) of `tiles` tiles of
 * tile_elems elements: the same bindings, ranges and push constants, and
 * after y a partial tile a half of each tile and a counter a tile. The
 * partials are SCRATCH, bound and ranged as written only: the dispatch
 * reads back only what its own workgroups wrote (the counter orders it),
 * so no byte of them is live before or after the node and the arena may
 * lend them. The counters are STATE (zeroed once, left at zero by each
 * dispatch), read and written. */
static loom_result retarget_split(loom_graph *g, uint32_t i, const char *kernel, uint64_t tiles, uint64_t tile_elems,
                                  uint32_t *out)
{
    const loom_node *nd = loom_graph_node(g, i);
    uint32_t nb = nd->n_bindings, nr = nd->n_reads, nw = nd->n_writes;
    if (nb + 2 > LOOM_MAX_BINDINGS || nr + 1 > LOOM_MAX_RANGES || nw + 2 > LOOM_MAX_RANGES)
        return loom_fail(LOOM_LIMIT, "split: node %u: no room for the split K walk's two workspaces", i);
    uint64_t sizes[2] = { 2 * tiles * tile_elems * 4, tiles * 4 };
    static const char *const what[2] = { "part", "count" };
    static const loom_usage usage[2] = { LOOM_USAGE_SCRATCH, LOOM_USAGE_STATE };
    uint32_t ids[2];
    for (int w = 0; w < 2; w++) {
        char name[64];
        snprintf(name, sizeof name, "n%u.split_k.%s", i, what[w]);
        loom_result rc = loom_graph_add_buffer(g, &(loom_buffer_desc){ .name = name, .size = sizes[w], .usage = usage[w] },
                                               &ids[w]);
        if (rc)
            return rc;
    }
    nd = loom_graph_node(g, i);
    loom_binding b[LOOM_MAX_BINDINGS];
    loom_range r[2 * LOOM_MAX_RANGES];
    uint8_t push[LOOM_MAX_PUSH];
    const loom_range *rd = loom_node_reads(g, nd), *wr = loom_node_writes(g, nd);
    memcpy(b, loom_node_bindings(g, nd), nb * sizeof *b);
    memcpy(r, rd, nr * sizeof *r);
    memcpy(r + nr + 1, wr, nw * sizeof *r);
    memcpy(push, loom_node_push(g, nd), nd->push_size);
    for (uint32_t w = 0; w < 2; w++) {
        b[nb + w] = (loom_binding){ .buffer = ids[w], .slot = nb + w, .offset = 0, .size = sizes[w],
                                    .access = w ? LOOM_ACCESS_READ | LOOM_ACCESS_WRITE : LOOM_ACCESS_WRITE };
        r[nr + 1 + nw + w] = (loom_range){ .buffer = ids[w], .offset = 0, .size = sizes[w] };
    }
    r[nr] = (loom_range){ .buffer = ids[1], .offset = 0, .size = sizes[1] };
    return pass_add_like(g, i, kernel, b, nb + 2, r, nr + 1, nw + 2, push, nd->push_size, out);
}

static loom_result to_coop(loom_graph *g, uint32_t i, uint32_t *repl, uint32_t *count, const void *arg)
{
    const loom_pass_ctx *ctx = arg;
    const loom_node *nd = loom_graph_node(g, i);
    loom_op_args pc;
    if (nd->type != LOOM_NODE_DISPATCH || (!matmul_kind(nd->op) && nd->op != LOOM_OP_ATTENTION_ROWS) ||
        loom_op_args_of(g, i, &pc))
        return LOOM_OK;
    const char *k = loom_graph_kernel_name(g, nd->kernel);
    const char *to = NULL;
    uint64_t groups = 0;
    if (nd->op == LOOM_OP_ATTENTION_ROWS) {
        to = attn_coop(k, &pc, &groups);
    } else if (loom_form_has(k, "MM_TILED") && !loom_form_has(k, "MM_COOP")) {
        to = matmul_coop(k, nd->op, &pc, ctx->coop_large_cols ? ctx->coop_large_cols : LOOM_MATMUL_COOP_L_COLS,
                         ctx->split_k, nd->op == LOOM_OP_MATMUL ? sibling_tiles(g, i, &pc) : 0, &groups);
    } else if (!loom_form_has(k, "MM_TILED") && !loom_form_has(k, "MM_COOP")) {
        to = matmul_narrow(k, nd->op, &pc, &groups);
    }
    if (!to)
        return LOOM_OK;
    if (groups == 0 || groups > 65535u)   /* Vulkan's minimum maxComputeWorkGroupCount: keep the form */
        return LOOM_OK;
    loom_result rc = loom_form_has(to, "MM_SK") ? retarget_split(g, i, to, groups / 2,
                                         (uint64_t)LOOM_MATMUL_COOP_L_ROWS * LOOM_MATMUL_COOP_L_T, &repl[i])
                        : pass_retarget(g, i, to, &repl[i]);
    if (rc)
        return rc;
    loom_graph_node_mut(g, repl[i])->groups[0] = (uint32_t)groups;
    (*count)++;
    return LOOM_OK;
}

/* Whether node i, a reader of y, may read it as f16: a matmul kind on its
 * coopmat form (not yet MM_X16, whose form it has), not a row block, reading
 * y whole as x and nothing else of it, in chunks of 8 (cols). The gated
 * FFN's small tiles have no MM_X16 form: on an H100 they read f16 x slower
 * (docs/perf-log.md, "f16 x"), so the norm before them keeps writing f32;
 * its large tiles have one. */
static bool half_reader(const loom_graph *g, uint32_t i, const loom_binding *y)
{
    const loom_node *nd = loom_graph_node(g, i);
    const loom_binding *x = pass_named(g, nd, "x");
    const char *k = loom_graph_kernel_name(g, nd->kernel);
    loom_op_args pc;
    if (pass_writes(g, nd, y) || (nd->flags & LOOM_NODE_SPLIT) || !matmul_kind(nd->op) ||
        !loom_form_has(k, "MM_COOP") || loom_form_has(k, "MM_X16") || !loom_form_variant(k, "MM_X16", NULL) || !x ||
        !loom_binding_same(x, y) || loom_op_args_of(g, i, &pc) || pc.cols % 8)
        return false;
    const loom_range *r = loom_node_reads(g, nd);
    for (uint32_t k2 = 0; k2 < nd->n_reads; k2++)
        if (loom_range_meets(&r[k2], y) && !pass_same_range(&r[k2], y))
            return false;
    return true;
}

/* The f16 vectors between cooperative-matrix forms. A producer, below, of a
 * plan buffer it writes whole, whose every other toucher reads it as x of a
 * coopmat matmul form (half_reader): the producer writes it as f16 pairs
 * and the readers read it so. Those forms round x to f16 as they stage it,
 * so they compute what they did, and move half the bytes of what is their
 * largest traffic (x is read once a 64-row tile; docs/perf-log.md). The
 * buffer keeps its f32 size and every range stays. Producers (flag added,
 * the slot written): the gated FFN's coopmat form (MM_Y16, y), the
 * prefill attention's (ATT_O16, out) and the T-row norm (NORM_Y16, y),
 * where the vector's rows have an even length. */
static const struct { uint32_t op; const char *has, *add, *slot; } half_writers[] = {
    { LOOM_OP_MATMUL_SILU_MUL, "MM_COOP", "MM_Y16", "y" },
    { LOOM_OP_ATTENTION_ROWS, "ATT_COOP", "ATT_O16", "out" },
    { LOOM_OP_RMS_NORM_MUL_ROWS, "NORM_ROWS", "NORM_Y16", "y" },
};

static loom_result half_pair(loom_graph *g, uint32_t i, uint32_t *repl, uint32_t *count, const void *arg)
{
    (void)arg;
    const loom_node *f = loom_graph_node(g, i);
    const char *k = f->type == LOOM_NODE_DISPATCH ? loom_graph_kernel_name(g, f->kernel) : NULL;
    const char *fk = NULL, *slot = NULL;
    for (size_t w = 0; k && !fk && w < sizeof half_writers / sizeof half_writers[0]; w++)
        if (f->op == half_writers[w].op && loom_form_has(k, half_writers[w].has) &&
            !loom_form_has(k, half_writers[w].add)) {
            fk = loom_form_variant(k, half_writers[w].add, NULL);
            slot = half_writers[w].slot;
        }
    if (!fk || (f->flags & LOOM_NODE_SPLIT))
        return LOOM_OK;
    const loom_binding *yb = pass_named(g, f, slot);
    if (!yb || !pass_plan_buffer(g, yb->buffer))
        return LOOM_OK;
    const loom_binding y = *yb;
    loom_op_args pc;
    uint32_t row;   /* the vector's row length: a pair never straddles rows */
    if (loom_op_args_of(g, i, &pc))
        return LOOM_OK;
    row = f->op == LOOM_OP_ATTENTION_ROWS ? pc.heads * pc.head_dim : f->op == LOOM_OP_RMS_NORM_MUL_ROWS ? pc.n : pc.rows;
    if (row % 2)
        return LOOM_OK;
    const loom_range *w = loom_node_writes(g, f);
    for (uint32_t k2 = 0; k2 < f->n_writes; k2++)
        if (loom_range_meets(&w[k2], &y) && !pass_same_range(&w[k2], &y))
            return LOOM_OK;
    uint32_t readers[64], nr = 0, n = loom_graph_node_count(g);
    for (uint32_t d = 0; d < n; d++) {
        const loom_node *nd = loom_graph_node(g, d);
        if (d == i || nd->type != LOOM_NODE_DISPATCH || !(pass_reads(g, nd, &y) || pass_writes(g, nd, &y)))
            continue;
        if (nr == 64 || repl[d] != d || !half_reader(g, d, &y))
            return LOOM_OK;
        readers[nr++] = d;
    }
    if (!nr)
        return LOOM_OK;
    loom_result rc = pass_retarget(g, i, fk, &repl[i]);
    for (uint32_t r = 0; !rc && r < nr; r++) {
        const char *dk = loom_form_variant(loom_graph_kernel_name(g, loom_graph_node(g, readers[r])->kernel), "MM_X16",
                                           NULL);
        rc = pass_retarget(g, readers[r], dk, &repl[readers[r]]);
    }
    *count += !rc;
    return rc;
}

/* Without cooperative matrices, with split_k: a matrix of one weight on the
 * portable tiles (MM_TILED) of fewer than LOOM_MATMUL_COOP_L_FROM tiles and
 * at least two slices of K takes them with its K walk split (MM_SK). */
static loom_result to_tiled_split(loom_graph *g, uint32_t i, uint32_t *repl, uint32_t *count, const void *arg)
{
    (void)arg;
    const loom_node *nd = loom_graph_node(g, i);
    loom_op_args pc;
    if (nd->type != LOOM_NODE_DISPATCH || (nd->op != LOOM_OP_MATMUL && nd->op != LOOM_OP_MATMUL_ADD) ||
        (nd->flags & LOOM_NODE_SPLIT) || loom_op_args_of(g, i, &pc))
        return LOOM_OK;
    const char *k = loom_graph_kernel_name(g, nd->kernel);
    uint64_t n = tiles(&pc, LOOM_MATMUL_TILE_ROWS, LOOM_MATMUL_TILE_T);
    const char *to = loom_form_has(k, "MM_TILED") && !loom_form_has(k, "MM_SK") && pc.cols > 32 &&
                             n < LOOM_MATMUL_COOP_L_FROM && 2 * n <= 65535u
                         ? loom_form_variant(k, "MM_SK", NULL)
                         : NULL;
    if (!to)
        return LOOM_OK;
    loom_result rc = retarget_split(g, i, to, n, (uint64_t)LOOM_MATMUL_TILE_ROWS * LOOM_MATMUL_TILE_T, &repl[i]);
    if (rc)
        return rc;
    loom_graph_node_mut(g, repl[i])->groups[0] = (uint32_t)(2 * n);
    (*count)++;
    return LOOM_OK;
}

/* On any device: an f16 MATMUL on the multi-column form (no narrow form
 * taken) of at least LOOM_MATMUL_SMALL_R2_ROWS rows takes it at 2 rows a
 * subgroup, 16 a workgroup (MM_R2: the gated FFN's layout), the LM head of
 * a verification step. */
static loom_result to_rows2(loom_graph *g, uint32_t i, uint32_t *repl, uint32_t *count, const void *arg)
{
    (void)arg;
    const loom_node *nd = loom_graph_node(g, i);
    loom_op_args pc;
    if (nd->type != LOOM_NODE_DISPATCH || nd->op != LOOM_OP_MATMUL || loom_op_args_of(g, i, &pc) ||
        pc.rows < LOOM_MATMUL_SMALL_R2_ROWS)
        return LOOM_OK;
    const char *to = loom_form_variant(loom_graph_kernel_name(g, nd->kernel), "MM_R2", NULL);
    if (!to)
        return LOOM_OK;
    loom_result rc = pass_retarget(g, i, to, &repl[i]);
    if (rc)
        return rc;
    loom_graph_node_mut(g, repl[i])->groups[0] = loom_matmul_row_groups(pc.rows, LOOM_MATMUL_SMALL_GATED_ROWS);
    (*count)++;
    return LOOM_OK;
}

loom_result pass_coopmat(loom_graph *g, const loom_pass_ctx *ctx)
{
    uint32_t count;
    loom_result rc = LOOM_OK;
    if (ctx && !ctx->coopmat && ctx->split_k) {
        rc = pass_rename_nodes(g, "split", to_tiled_split, NULL, &count);
    } else if (ctx && ctx->coopmat) {
        rc = pass_rename_nodes(g, "split", to_coop, ctx, &count);
        if (!rc)
            rc = pass_rename_nodes(g, "split", half_pair, NULL, &count);
        /* Again: a node that became a reader's f16 form in the first round
         * (the gated FFN's large tiles, MM_X16) is a producer of f16 too
         * (MM_Y16). */
        if (!rc && count)
            rc = pass_rename_nodes(g, "split", half_pair, NULL, &count);
    }
    return rc ? rc : pass_rename_nodes(g, "split", to_rows2, NULL, &count);
}
