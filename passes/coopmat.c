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
 * node of one matrix whose K reaches LOOM_MATMUL_COOP_L_COLS
 * (loom_pass_ctx.coop_large_cols) takes the large tiles (MM_L=128, else
 * MM_L=64) where they number at least LOOM_MATMUL_COOP_L_FROM: `7b`'s
 * residual projections at T = 512 took 43% less time, `1b`'s down
 * projection about 25% less; at K 2048 they took a little more, and the
 * gated FFN more in tiles of 64 rows of each matrix.
 * Nodes on the multi-column form (small T) keep it: they stream the weights
 * once, which is what bounds them. An ATTENTION_ROWS node over f16 caches
 * whose head_dim has a form (ATT_HD: 64, 128) and whose kv heads each serve
 * at least LOOM_ATTN_ROWS_COOP_Q query vectors takes ATT_COOP's form (fewer
 * would leave most of a workgroup's queries empty: a verification step of
 * a few rows keeps the portable form). Bindings, ranges and push constants
 * stay as they are; the new node stands for the same captured nodes. */
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

/* The cooperative-matrix form of a matmul-kind node on tiled kernel k, and
 * its workgroups: a matrix of one weight whose K is long takes the large
 * tiles where they are many, 128 token rows before 64; else the small
 * tiles, K split where a matrix of one weight has few. */
static const char *matmul_coop(const char *k, uint32_t op, const loom_op_args *pc, uint32_t large_cols,
                               uint64_t *groups)
{
    bool one = op != LOOM_OP_MATMUL_SILU_MUL;
    if (one && pc->cols >= large_cols) {
        if ((*groups = tiles(pc, LOOM_MATMUL_COOP_L_ROWS, LOOM_MATMUL_COOP_L_T)) >= LOOM_MATMUL_COOP_L_FROM)
            return loom_form_variant(k, "MM_COOP MM_L=128", NULL);
        if ((*groups = tiles(pc, LOOM_MATMUL_COOP_L_ROWS, LOOM_MATMUL_COOP_L_T64)) >= LOOM_MATMUL_COOP_L_FROM)
            return loom_form_variant(k, "MM_COOP MM_L=64", NULL);
    }
    *groups = tiles(pc, LOOM_MATMUL_COOP_ROWS, LOOM_MATMUL_COOP_T);
    return loom_form_variant(k, one && *groups < LOOM_MATMUL_COOP_KS_BELOW ? "MM_COOP MM_KS" : "MM_COOP", NULL);
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
                         &groups);
    }
    if (!to)
        return LOOM_OK;
    if (groups == 0 || groups > 65535u)   /* Vulkan's minimum maxComputeWorkGroupCount: keep the form */
        return LOOM_OK;
    loom_result rc = pass_retarget(g, i, to, &repl[i]);
    if (rc)
        return rc;
    loom_graph_node_mut(g, repl[i])->groups[0] = (uint32_t)groups;
    (*count)++;
    return LOOM_OK;
}

loom_result pass_coopmat(loom_graph *g, const loom_pass_ctx *ctx)
{
    uint32_t count;
    return ctx && ctx->coopmat ? pass_rename_nodes(g, "split", to_coop, ctx, &count) : LOOM_OK;
}
