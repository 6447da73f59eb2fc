// MV_QKV, q/k/v with RoPE and the KV append fused (matvec.glsl includes
// this before block()): which matrix and row each of a workgroup's rows is,
// and the epilogue that rotates q and k in RoPE pairs and writes k and v
// straight into the caches at the step's position.

#ifdef MV_KH
layout(set = 0, binding = B_KC) writeonly buffer KC { float16_t kcache[]; };
layout(set = 0, binding = B_VC) writeonly buffer VC { float16_t vcache[]; };
#define CACHED(v) float16_t(v)
#else
layout(set = 0, binding = B_KC) writeonly buffer KC { float kcache[]; };
layout(set = 0, binding = B_VC) writeonly buffer VC { float vcache[]; };
#define CACHED(v) (v)
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
            uint i = la % pc.head_dim;   // < head_dim / 2 by construction
            float freq = exp2(-2.0 * float(i) / float(pc.head_dim) * log2(pc.theta));
            float ang = float(pos) * freq;
            const float TWO_PI = 6.28318530717958647692;
            ang -= TWO_PI * floor(ang / TWO_PI + 0.5);
            float cs = cos(ang), sn = sin(ang);
            float ra = va * cs - vb * sn, rb = va * sn + vb * cs;
            va = ra;
            vb = rb;
        }
        if (m == 0u) {
            y[la] = va;
            y[lb] = vb;
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
