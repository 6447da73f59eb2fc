/* The one decoder of push constants: each op kind's bytes read back by the
 * loom_pc_* layout its row of ops.def names (the push column), into the
 * union of what the layouts hold. The builders in ops.c write the layouts;
 * the passes and frontends read them only through here. A layout is data:
 * the loom_op_args field each word fills. */
#include <stddef.h>
#include <string.h>
#include "loom_ops.h"

/* A layout: the field of loom_op_args each 4-byte word of its loom_pc_*
 * struct fills, in the struct's order (the op-args test holds every row
 * against the builders). Layout l is the list L_l. */
#define F(f) (uint8_t)offsetof(loom_op_args, f)
static const uint8_t L_n[] = { F(n) };
static const uint8_t L_norm[] = { F(n), F(eps) };
static const uint8_t L_matvec[] = { F(rows), F(cols) };
static const uint8_t L_embed[] = { F(cols), F(vocab), F(token_index) };
static const uint8_t L_embed_blocks[] = { F(cols), F(vocab), F(token_index), F(block_rows), F(first), F(total) };
static const uint8_t L_rope[] = { F(heads), F(head_dim), F(theta) };
static const uint8_t L_kv[] = { F(n), F(max_seq) };
static const uint8_t L_attn[] = { F(heads), F(kv_heads), F(head_dim), F(max_seq), F(scale), F(splits) };
static const uint8_t L_norm_matvec[] = { F(rows), F(cols), F(eps) };
static const uint8_t L_norm_matvec_log[] = { F(rows), F(cols), F(eps), F(slots) };
static const uint8_t L_step_log[] = { F(n), F(slots), F(back) };
static const uint8_t L_qkv[] = { F(q_rows), F(kv_rows), F(cols), F(eps), F(head_dim), F(max_seq), F(theta) };
static const uint8_t L_embed_qkv[] = { F(q_rows), F(kv_rows), F(cols), F(eps), F(head_dim), F(max_seq), F(theta),
                                       F(vocab), F(token_index) };
static const uint8_t L_embed_rows[] = { F(cols), F(T) };
static const uint8_t L_norm_rows[] = { F(n), F(eps), F(T) };
static const uint8_t L_rope_rows[] = { F(heads), F(head_dim), F(theta), F(T) };
static const uint8_t L_kv_rows[] = { F(n), F(max_seq), F(T) };
static const uint8_t L_attn_rows[] = { F(heads), F(kv_heads), F(head_dim), F(max_seq), F(scale), F(splits), F(T) };
static const uint8_t L_rows_n[] = { F(n), F(T) };
static const uint8_t L_matmul[] = { F(rows), F(cols), F(T) };
static const uint8_t L_qkv_rows[] = { F(q_rows), F(kv_rows), F(cols), F(eps), F(head_dim), F(max_seq), F(theta), F(T) };
#undef F

/* sizeof(loom_pc_l), and a compile error where L_l has not one field for
 * each word of it (a field added to a loom_pc_* struct, say). */
#define CHECKED_SIZE(l) \
    ((uint32_t)sizeof(loom_pc_##l) + 0 * sizeof(char[sizeof L_##l * 4 == sizeof(loom_pc_##l) ? 1 : -1]))

/* Every op kind's layout, by its row of ops.def. */
static const struct {
    const uint8_t *field;
    uint32_t size;   /* bytes */
} layouts[LOOM_OP_COUNT] = {
#define PC(l) { L_##l, CHECKED_SIZE(l) }
#define PC0 { NULL, 0 }
#define X(name, meaning, reorderable, kernel, slots, push, ...) push,
#include "ops.def"
#undef X
#undef PC0
#undef PC
};
_Static_assert(sizeof(loom_op_args) <= 256, "field offsets are bytes");

loom_result loom_op_args_read(loom_op op, const void *push, uint32_t size, loom_op_args *out)
{
    if (!out)
        return LOOM_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    if ((unsigned)op >= LOOM_OP_COUNT || size != layouts[op].size || (size && !push))
        return LOOM_INVALID_ARGUMENT;
    for (uint32_t k = 0; k < size / 4; k++)   /* fields and words are 4 bytes */
        memcpy((uint8_t *)out + layouts[op].field[k], (const uint8_t *)push + 4 * k, 4);
    return LOOM_OK;
}

loom_result loom_op_args_of(const loom_graph *g, uint32_t node, loom_op_args *out)
{
    const loom_node *nd = loom_graph_node(g, node);
    if (!nd || nd->type != LOOM_NODE_DISPATCH) {
        if (out)
            memset(out, 0, sizeof *out);
        return LOOM_INVALID_ARGUMENT;
    }
    return loom_op_args_read((loom_op)nd->op, loom_node_push(g, nd), nd->push_size, out);
}
