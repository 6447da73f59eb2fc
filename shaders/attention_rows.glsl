// ATTENTION_ROWS: causal attention of a T-token step (prefill), flash-
// attention style. Query row t (position pos + t) attends to cache rows
// [0, min(pos + t + 1, max_seq)); the step's own rows are already in the
// cache. A padding row (t >= params.rows) attends as the last real row, so
// its output is finite and no cache row past the step is ever loaded.
//
// A workgroup takes NB query vectors of one kv head: the consecutive (row,
// head) pairs t * G + j of its group of G = n_heads / n_kv_heads query
// heads, so the heads that share a kv head share its K/V tiles too. It walks
// the cache in tiles of NB rows up to the causal limit of its last row (the
// tiles past it are never loaded), each tile staged in shared memory once
// and used by all NB queries:
//   1. K and V rows of the tile into shared memory (f16 caches widened);
//   2. the NB x NB scores: lpq = 256 / NB invocations a query, each taking
//      NB / lpq keys whole, or where the tile has fewer keys than a query has
//      invocations (head_dim > 128), a 1 / spl share of every key's dims;
//   3. online softmax, an invocation a query: the running maximum and sum,
//      the tile's weights p (0 past the query's causal limit), and the
//      factor alpha that rescales what was accumulated before;
//   4. out += p V: each invocation keeps dims lane, lane + lpq, ... of its
//      query in registers (at most 8), f32 throughout.
// NB is the largest power of two with NB * head_dim <= 2048, at most 32
// (ir/ops.c: attn_rows_tile picks the same): the q, K and V tiles are 8 KiB
// each, with the score tile 30 KiB of shared memory in all. q and K rows are
// head_dim + 1 floats apart, so the invocations reading different rows at
// the same dim hit different banks.
// ATT_KH: the caches are f16.
#define WG_SIZE 256u
#define TILE 2048u
#define NB_MAX 32u
#define ACC_MAX 8u   // TILE / WG_SIZE: dims of one query an invocation keeps
#define KEYS_MAX 4u  // NB_MAX * NB_MAX / WG_SIZE: keys an invocation scores whole
layout(local_size_x = 256) in;
#ifdef ATT_KH
#extension GL_EXT_shader_16bit_storage : require
#define CACHE_T float16_t
#else
#define CACHE_T float
#endif
#include "params.glsl"
layout(set = 0, binding = 1) readonly buffer Q { float q[]; };
layout(set = 0, binding = 2) readonly buffer KC { CACHE_T kcache[]; };
layout(set = 0, binding = 3) readonly buffer VC { CACHE_T vcache[]; };
layout(set = 0, binding = 4) writeonly buffer O { float o[]; };
layout(push_constant) uniform Pc {
    uint n_heads; uint n_kv_heads; uint head_dim; uint max_seq; float scale; uint T;
} pc;

const float NEG_BIG = -3.402823466e38;
shared float sq[TILE + NB_MAX];        // the queries, scaled; rows head_dim + 1 apart
shared float sk[TILE + NB_MAX];        // the tile's keys; rows head_dim + 1 apart
shared float sv[TILE];                 // the tile's values
shared float sc[NB_MAX * NB_MAX];      // scores, then weights (split: partial dots)
shared float sp[WG_SIZE];              // split: scores, then weights
shared float salpha[NB_MAX];           // each query's rescale factor for the tile
shared float sl[NB_MAX];               // each query's softmax sum, at the end

// Keys query vector f (of its kv head) attends to: the causal limit.
uint key_limit(uint f, uint G, uint rows)
{
    uint t = min(f / G, rows - 1u);
    return min(step_params.pos + t + 1u, pc.max_seq);
}

void main()
{
    uint hd = pc.head_dim, inv = gl_LocalInvocationID.x;
    uint nb = NB_MAX;
    while (nb > 1u && nb * hd > TILE)
        nb >>= 1u;
    uint lpq = WG_SIZE / nb, qi = inv / lpq, lane = inv % lpq;
    bool split = nb * nb < WG_SIZE;
    uint G = pc.n_heads / pc.n_kv_heads, per_kv = pc.T * G;
    uint tiles = (per_kv + nb - 1u) / nb;
    uint kvh = gl_WorkGroupID.x / tiles, f0 = (gl_WorkGroupID.x % tiles) * nb;
    uint rows = clamp(step_params.rows, 1u, pc.T);
    uint nq = pc.n_heads * hd, kvd = pc.n_kv_heads * hd, hs = hd + 1u;
    uint kend = key_limit(min(f0 + nb, per_kv) - 1u, G, rows);   // the workgroup's last row's limit

    // The queries, scaled; past the last query vector zeros.
    for (uint e = inv; e < nb * hd; e += WG_SIZE) {
        uint qq = e / hd, d = e - qq * hd, f = f0 + qq;
        float v = 0.0;
        if (f < per_kv)
            v = q[(f / G) * nq + (kvh * G + f % G) * hd + d] * pc.scale;
        sq[qq * hs + d] = v;
    }
    float acc[ACC_MAX];
    for (uint k = 0u; k < ACC_MAX; k++)
        acc[k] = 0.0;
    // Invocation i < nb keeps query i's running maximum and sum.
    float m = NEG_BIG, l = 0.0;
    uint lim = inv < nb ? key_limit(f0 + inv, G, rows) : 0u;

    for (uint k0 = 0u; k0 < kend; k0 += nb) {
        // The previous tile's readers are done (and the queries stored).
        barrier();
        for (uint e = inv; e < nb * hd; e += WG_SIZE) {
            uint j = e / hd, d = e - j * hd, key = k0 + j;
            float kv = 0.0, vv = 0.0;
            if (key < kend) {
                uint at = key * kvd + kvh * hd + d;
                kv = float(kcache[at]);
                vv = float(vcache[at]);
            }
            sk[j * hs + d] = kv;
            sv[e] = vv;
        }
        memoryBarrierShared();
        barrier();

        if (!split) {
            // Keys lane, lane + lpq, ...: NB / lpq of them, each dot whole.
            uint nk = nb / lpq;
            float s[KEYS_MAX];
            for (uint r = 0u; r < KEYS_MAX; r++)
                s[r] = 0.0;
            for (uint d = 0u; d < hd; d++) {
                float qv = sq[qi * hs + d];
                for (uint r = 0u; r < KEYS_MAX; r++)
                    if (r < nk)
                        s[r] += qv * sk[(lane + r * lpq) * hs + d];
            }
            for (uint r = 0u; r < KEYS_MAX; r++)
                if (r < nk)
                    sc[qi * nb + lane + r * lpq] = s[r];
        } else {
            // spl = lpq / NB invocations a key, dims part, part + spl, ...
            uint spl = lpq / nb, j = lane % nb, part = lane / nb;
            float s = 0.0;
            for (uint d = part; d < hd; d += spl)
                s += sq[qi * hs + d] * sk[j * hs + d];
            sc[qi * lpq + lane] = s;   // qi * lpq + part * nb + j
        }
        memoryBarrierShared();
        barrier();

        if (inv < nb) {
            float mx = m;
            for (uint j = 0u; j < nb; j++) {
                float s;
                if (split) {
                    s = 0.0;
                    for (uint p = 0u; p < lpq / nb; p++)
                        s += sc[inv * lpq + p * nb + j];
                    sp[inv * nb + j] = s;
                } else {
                    s = sc[inv * nb + j];
                }
                if (k0 + j < lim)
                    mx = max(mx, s);
            }
            float sum = 0.0;
            for (uint j = 0u; j < nb; j++) {
                float s = split ? sp[inv * nb + j] : sc[inv * nb + j];
                float p = k0 + j < lim ? exp(s - mx) : 0.0;
                sum += p;
                if (split)
                    sp[inv * nb + j] = p;
                else
                    sc[inv * nb + j] = p;
            }
            float alpha = exp(m - mx);
            l = l * alpha + sum;
            m = mx;
            salpha[inv] = alpha;
        }
        memoryBarrierShared();
        barrier();

        float alpha = salpha[qi];
        for (uint k = 0u; k < ACC_MAX; k++)
            acc[k] *= alpha;
        for (uint j = 0u; j < nb; j++) {
            float p = split ? sp[qi * nb + j] : sc[qi * nb + j];
            for (uint k = 0u; k < ACC_MAX; k++) {
                uint d = lane + k * lpq;
                if (d < hd)
                    acc[k] += p * sv[j * hd + d];
            }
        }
    }

    if (inv < nb)
        sl[inv] = l;
    memoryBarrierShared();
    barrier();
    uint f = f0 + qi;
    if (f >= per_kv)
        return;
    float lt = sl[qi];
    uint at = (f / G) * nq + (kvh * G + f % G) * hd;
    for (uint k = 0u; k < ACC_MAX; k++) {
        uint d = lane + k * lpq;
        if (d < hd)
            o[at + d] = lt > 0.0 ? acc[k] / lt : 0.0;
    }
}
