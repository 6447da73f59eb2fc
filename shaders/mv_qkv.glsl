// MV_QKV, q/k/v with RoPE and the KV append fused (matvec.glsl includes
// this before block()): which matrix and row each of a workgroup's rows is,
// and the epilogue that rotates q and k in RoPE pairs and writes k and v
// straight into the caches at the step's position. With MV_TAG, where the
// push constants say y is tagged (tag_out), y is q_rows + 2 kv_rows tagged
// words: q, then the step's k and v rows as the caches hold them (f16
// values are exact in a tagged word), so that the attention behind it with
// no barrier (ATT_QKVT) takes the step's own row from there, not from the
// caches, whose untagged writes it cannot see land. The caches are written
// too, for the steps after; the tagged words every step, whatever the
// position, since every word of a tagged vector is rewritten each step.

#include "rope_angle.glsl"
#ifdef MV_KH
layout(set = 0, binding = B_KC) writeonly buffer KC { float16_t kcache[]; };
layout(set = 0, binding = B_VC) writeonly buffer VC { float16_t vcache[]; };
#define CACHED(v) float16_t(v)
#else
layout(set = 0, binding = B_KC) writeonly buffer KC { float kcache[]; };
layout(set = 0, binding = B_VC) writeonly buffer VC { float vcache[]; };
#define CACHED(v) (v)
#endif
#ifdef MV_TAG   // tag.glsl: matvec.glsl includes it
layout(set = 0, binding = B_Y) writeonly buffer Yt { uint yt[]; };
#endif

// Rows are numbered q, then k, then v. Pair p covers rows (a, a + hd/2) of
// one head; the workgroup's rows are pairs 2w.., laid out as
// [a0, a1, .., a0 + hd/2, a1 + hd/2, ..].
uint total_rows() { return pc.q_rows + 2u * pc.kv_rows; }
uint row_of(uint k)
{
    uint half_hd = pc.head_dim / 2u, np = MV_ROWS / 2u;
    uint p = wg_block * np + (k % np);
    uint row = (p / half_hd) * pc.head_dim + p % half_hd;
    return k < np ? row : row + half_hd;
}
uint mat_of(uint k)
{
    uint row = row_of(k);
    return row < pc.q_rows ? 0u : row < pc.q_rows + pc.kv_rows ? 1u : 2u;
}
uint local_row(uint k)
{
    uint row = row_of(k), m = mat_of(k);
    return m == 0u ? row : m == 1u ? row - pc.q_rows : row - pc.q_rows - pc.kv_rows;
}

// The workgroup's rows once their sums have met in total[]: invocation t
// stores its pair (x the norm's scale); pos is the step's position.
void qkv_store(uint t, uint rows, float scale, uint pos)
{
    // Invocation k < MV_ROWS/2 owns pair (k, k + MV_ROWS/2).
    uint np = MV_ROWS / 2u;
    if (t < np && row_of(t) < rows) {
        float va = total[t] * scale, vb = total[t + np] * scale;
        uint m = mat_of(t), la = local_row(t), lb = local_row(t + np);
        if (m < 2u) {
            // la % head_dim < head_dim / 2 by construction
            vec2 r = rope_rotate(vec2(va, vb), pos, la % pc.head_dim, pc.head_dim, pc.theta);
            va = r.x;
            vb = r.y;
        }
        bool tagged = false;
#ifdef MV_TAG
        tagged = pc.tag_out != 0u;
        if (tagged) {
            uint tag = tag_of(pc.tag_out), at = m == 0u ? 0u : pc.q_rows + (m - 1u) * pc.kv_rows;
            yt[at + la] = tag_word(m == 0u ? va : float(CACHED(va)), tag);
            yt[at + lb] = tag_word(m == 0u ? vb : float(CACHED(vb)), tag);
        }
#endif
        if (m == 0u) {
            if (!tagged) {
                y[la] = va;
                y[lb] = vb;
            }
        } else if (pos < pc.max_seq) {
            uint off = pos * pc.kv_rows;
            if (m == 1u) {
                kcache[off + la] = CACHED(va);
                kcache[off + lb] = CACHED(vb);
            } else {
                vcache[off + la] = CACHED(va);
                vcache[off + lb] = CACHED(vb);
            }
        }
    }
}
