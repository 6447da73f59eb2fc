// Decode ATTENTION, split over the cache length so that it fills the GPU:
// workgroup (h, s) takes query head h (kv head h / (n_heads / n_kv_heads))
// and the s-th of `splits` equal shares of cache rows [0, min(kv_len,
// max_seq)). The dispatch runs alone between two barriers, so what counts is
// how many dependent trips to memory it makes, not its arithmetic:
//
//   - TPR invocations take one cache row, DPT dimensions each, so a pass
//     covers ROWS = WG_SIZE / TPR rows. Every invocation issues its q, K and
//     V loads together, before any of them is used: one trip for the whole
//     share (256 rows at the full cache). With ATT_CONTIG (the narrow kernel,
//     where TPR * DPT is the largest head_dim it takes) invocation c takes
//     dims c * DPT .. c * DPT + DPT - 1 and loads them as two 16-byte vectors
//     where head_dim is a multiple of 4: ten loads an invocation where
//     scalars took forty. Otherwise dims c, c + TPR, ..., one scalar each.
//   - Scores are summed across a row's invocations by subgroup shuffles, and
//     the pass's maximum is a subgroup maximum plus one shared slot per
//     subgroup (where subgroups are narrower than a row, as on llvmpipe for
//     the wide kernel, through shared memory instead); every invocation
//     keeps the running maximum and weights its own V values (online softmax: the partial output and
//     the exponent sum are rescaled when the maximum grows). The exponent
//     sum rides along as one more accumulated value.
//   - The rows' partial outputs are summed in shared memory at the end.
//
// With one split the workgroup writes the head's output itself; otherwise
// it stores (max, sum, partial output) and the last workgroup of the head to
// finish, found through an atomic counter per head, combines the shares. No
// workgroup ever waits for another, and the last one resets its counter for
// the next replay. A head's block of the partial results is the shares'
// (max, sum) pairs, padded to a multiple of 4 floats (HDR), then their
// partial outputs, head_dim each (ir/ops.c sizes it): the combine loads the
// pairs as 16-byte vectors. With ATT_PART (the gather pass's form) the
// workgroups only store their shares: the matvec reading the output
// combines them, and the dispatch binds no output and no counter
// (attention_part.comp: the narrow kernel only). With ATT_O16 the output
// is stored as f16 pairs, for a consumer reading x as f16 (MV_X16 in
// matvec.glsl; attention_wide_o16.comp). With ATT_PART_H as well
// (attention_part_h.comp) each share's output is divided by its own sum and
// stored as f16 pairs, head_dim / 2 words a share after the same header.
// With ATT_TAG (not with ATT_PART or ATT_O16) the output may be a tagged
// vector (tag.glsl), as the push constants say, for a matvec recorded
// behind the dispatch with no barrier.
// With ATT_QKVT q may be a tagged vector (tag_in) of n_heads * head_dim + 2
// kv_dim words: q, then the step's k and v rows (MV_QKV with MV_TAG in
// matvec.glsl), so that the dispatch runs behind its q/k/v with no barrier.
// Each invocation polls its q words; the cache rows before the step's own
// were written by earlier steps, and row kv_len - 1, which the producer
// has just appended where kv_len <= max_seq, is taken from the tagged words
// instead: the workgroup whose share holds it loads them with its cache
// rows and weighs the row after them, every invocation scoring it alike
// and row slot 0 adding its V. (passes/awaits.c: LOOM_ENABLE_QKV_AWAIT,
// off by default.)
// With ATT_ROWS (the few-query form of ATTENTION_ROWS: a verification step
// of a few token rows) the dispatch takes the T rows' query vectors as
// T x n_heads heads, row t's vectors attending to cache rows [0, pos + t]:
// a workgroup a (vector, share), where the tiled form (attention_rows.glsl)
// gives a kv head's few vectors one workgroup that walks the cache in
// dependent trips.
// With ATT_KH the caches are f16: an invocation keeps its DPT (8) values of
// a row packed, one uvec4 for K and one for V, and unpacks them where they
// are used, so a row in flight costs half the registers of an f32 row
// (attention_kh.comp has twice the rows in flight: a pass is 512 rows).
// Where head_dim is a multiple of 8 (ATT_CONTIG) the packed values are one
// 16-byte load; else they are gathered from 16-bit loads. The kernel
// defines KH_ROWS, RPT as a plain number, and the pass's rows are written
// out one by one (KH_EACH) behind one branch on the load path: the
// compiler kept a 16-row loop and moved the packed rows to local memory
// (704 bytes an invocation: far slower, docs/perf-log.md), and rows
// written out with a branch each ran slower than the loop (docs/perf.md).
#define WG_SIZE 256u
#define DPT 8u           // dimensions per invocation
// TPR (invocations per row, head_dim <= DPT * TPR) and RPT (rows each
// invocation has in flight at once) come from the including kernel; ir/ops.c
// picks the kernel by head_dim.
#define RPP (WG_SIZE / TPR)   // rows per pass and per row slot
#define MAX_SPLITS 16u   // ir/ops.c: attn_splits
layout(local_size_x = 256) in;
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#if defined(ATT_PART_H) || defined(ATT_O16)
#include "half.glsl"
#endif
#ifdef ATT_KH
#extension GL_EXT_shader_16bit_storage : require
// KH_EACH(X) is X of every row of a pass: the first 8, then the rest behind
// a workgroup-uniform test, so that a pass over a short cache does the
// arithmetic of 8 rows, not of 16.
#if KH_ROWS == 16
#define KH_EACH(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) \
    if (last > base + 8u * RPP) { X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) }
#elif KH_ROWS == 8
#define KH_EACH(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#elif KH_ROWS == 1
#define KH_EACH(X) X(0)
#else
#error "KH_ROWS: 1, 8 or 16"
#endif
#endif
#if defined(ATT_TAG) && (defined(ATT_PART) || defined(ATT_O16))
#error "ATT_TAG writes the output as f32 words"
#endif
#if defined(ATT_TAG) || defined(ATT_QKVT)
#include "tag.glsl"
#define TAG_PC layout(offset = 120) uint tag_in; uint tag_out;
#else
#define TAG_PC
#endif
#include "params.glsl"
layout(set = 0, binding = 1) readonly buffer Q { float q[]; };
layout(set = 0, binding = 1) readonly buffer Q4 { vec4 q4[]; };
#ifdef ATT_QKVT
layout(set = 0, binding = 1) volatile coherent readonly buffer Qt { uint qt[]; };
#endif
#ifdef ATT_KH
layout(set = 0, binding = 2) readonly buffer KC { float16_t kcache[]; };
layout(set = 0, binding = 2) readonly buffer KC8 { uvec4 kcache8[]; };
layout(set = 0, binding = 3) readonly buffer VC { float16_t vcache[]; };
layout(set = 0, binding = 3) readonly buffer VC8 { uvec4 vcache8[]; };
#else
layout(set = 0, binding = 2) readonly buffer KC { float kcache[]; };
layout(set = 0, binding = 2) readonly buffer KC4 { vec4 kcache4[]; };
layout(set = 0, binding = 3) readonly buffer VC { float vcache[]; };
layout(set = 0, binding = 3) readonly buffer VC4 { vec4 vcache4[]; };
#endif
#ifndef ATT_PART
#ifdef ATT_O16
layout(set = 0, binding = 4) writeonly buffer O { uint o16[]; };
#else
layout(set = 0, binding = 4) writeonly buffer O { float o[]; };
#ifdef ATT_TAG
layout(set = 0, binding = 4) writeonly buffer Ot { uint ot_words[]; };
#endif
#endif
#endif
layout(set = 0, binding = 5) coherent buffer Part { float part[]; };   // n_heads * (HDR + splits * head_dim)
layout(set = 0, binding = 5) coherent buffer Part4 { vec4 part4[]; };
#ifdef ATT_PART_H
layout(set = 0, binding = 5) coherent buffer PartH { uint parth[]; };
#endif
#ifndef ATT_PART
layout(set = 0, binding = 6) coherent buffer Count { uint counter[]; }; // n_heads
#endif
#ifdef ATT_ROWS
#if defined(ATT_TAG) || defined(ATT_QKVT) || defined(ATT_PART) || defined(ATT_O16)
#error "ATT_ROWS: the plain output alone"
#endif
#define ROWS_PC uint T;
#else
#define ROWS_PC
#endif
layout(push_constant) uniform Pc {
    uint n_heads; uint n_kv_heads; uint head_dim; uint max_seq; float scale; uint splits;
    ROWS_PC
    TAG_PC
} pc;

// Element i of the output, plain or tagged.
void put_out(uint i, float v)
{
#ifdef ATT_TAG
    if (pc.tag_out != 0u) {
        ot_words[i] = tag_word(v, tag_of(pc.tag_out));
        return;
    }
#endif
#if !defined(ATT_PART) && !defined(ATT_O16)
    o[i] = v;
#endif
}

const float NEG_BIG = -3.402823466e38;
shared float sdot[RPT * WG_SIZE];       // per-invocation dot products of a pass
shared float score[RPT * RPP];          // the pass's row scores
shared float sacc[(DPT + 1u) * WG_SIZE];  // final partial outputs and sums
shared bool is_last;
shared float smax[2][WG_SIZE / 4u];     // per-subgroup pass maxima (subgroups of 4 or more)

// The dimension invocation c of a row takes as its k-th.
uint dim_of(uint c, uint k)
{
#ifdef ATT_CONTIG
    return c * DPT + k;
#else
    return c + k * TPR;
#endif
}

#ifdef ATT_QKVT
// Words at + dim_of(c, k) of the tagged q/k/v vector, loaded together
// (past hd: the tag, so that they pass).
void qkvt_load(uint at, uint c, uint hd, out uint w[DPT])
{
    uint tag = tag_of(pc.tag_in);
    for (uint k = 0u; k < DPT; k++) {
        uint d = dim_of(c, k);
        w[k] = d < hd ? qt[at + d] : tag;
    }
}

// Those words polled until every one carries this step's tag, at most
// TAG_SPINS times, as values (0 past hd); TAG_LOST, with the fault word
// set, where they never do.
void qkvt_finish(uint at, uint c, uint hd, inout uint w[DPT], out float v[DPT])
{
    uint tag = tag_of(pc.tag_in);
    bool ok = true;
    for (uint k = 0u; k < DPT; k++)
        ok = ok && (w[k] & 0xffu) == tag;
    for (uint spins = 0u; !ok && spins < TAG_SPINS; spins++) {
        ok = true;
        for (uint k = 0u; k < DPT; k++) {
            if ((w[k] & 0xffu) != tag)
                w[k] = qt[at + dim_of(c, k)];
            ok = ok && (w[k] & 0xffu) == tag;
        }
    }
    if (!ok)
        tag_give_up();
    for (uint k = 0u; k < DPT; k++)
        v[k] = !ok ? TAG_LOST : dim_of(c, k) < hd ? tag_value(w[k]) : 0.0;
}
#endif

#ifdef ATT_KH
// The 8 f16 values packed in w, in order.
void kh_unpack(uvec4 w, out float f[DPT])
{
    vec2 a = unpackHalf2x16(w.x), b = unpackHalf2x16(w.y), c = unpackHalf2x16(w.z), d = unpackHalf2x16(w.w);
    f[0] = a.x; f[1] = a.y; f[2] = b.x; f[3] = b.y; f[4] = c.x; f[5] = c.y; f[6] = d.x; f[7] = d.y;
}

// Invocation c's values of the cache row at element at (zeros where the
// row is not live or past the head), gathered from 16-bit loads and packed.
void kh_gather(bool live, uint at, uint c, uint hd, out uvec4 k8, out uvec4 v8)
{
    float ka[DPT], va[DPT];
    for (uint k = 0u; k < DPT; k++) {
        uint d = dim_of(c, k);
        bool ok = live && d < hd;
        ka[k] = ok ? float(kcache[at + d]) : 0.0;
        va[k] = ok ? float(vcache[at + d]) : 0.0;
    }
    for (uint j = 0u; j < 4u; j++) {
        k8[j] = packHalf2x16(vec2(ka[2u * j], ka[2u * j + 1u]));
        v8[j] = packHalf2x16(vec2(va[2u * j], va[2u * j + 1u]));
    }
}

float kh_dot(float qv[DPT], uvec4 w)
{
    float f[DPT];
    kh_unpack(w, f);
    float s = 0.0;
    for (uint k = 0u; k < DPT; k++)
        s += qv[k] * f[k];
    return s;
}

void kh_axpy(inout float acc[DPT], float p, uvec4 w)
{
    float f[DPT];
    kh_unpack(w, f);
    for (uint k = 0u; k < DPT; k++)
        acc[k] += p * f[k];
}

// One row of a pass, I a literal: load (one 16-byte load of K and one of V,
// or 16-bit loads), score, weight its V values.
#define KH_ROW_LOAD8(I) { uint row = base + r + (I) * RPP; bool live = row < last; \
                          uint at8 = (row * dim + koff + c * DPT) / 8u; \
                          kp[I] = live ? kcache8[at8] : uvec4(0u); vp[I] = live ? vcache8[at8] : uvec4(0u); }
#define KH_ROW_GATHER(I) { uint row = base + r + (I) * RPP; \
                           kh_gather(row < last, row * dim + koff, c, hd, kp[I], vp[I]); }
#define KH_ROW_SCORE(I) s[I] = kh_dot(qv, kp[I]);
#define KH_ROW_ACC(I) { float p = base + r + (I) * RPP < last ? exp(s[I] - mx) : 0.0; \
                        kh_axpy(acc, p, vp[I]); l += c == 0u ? p : 0.0; }
#endif

void main()
{
    uint t = gl_LocalInvocationID.x, hd = pc.head_dim;
    uint h = gl_WorkGroupID.x / pc.splits, split = gl_WorkGroupID.x % pc.splits;
#ifdef ATT_ROWS
    // h is query vector (t, head) of the step's T rows, t * n_heads + head:
    // its q, output, shares and counter are where a decode step's head h
    // would have them. Row t attends to rows [0, pos + t]; a padding row
    // as the last real row (attention_rows.glsl's key_limit).
    uint kvh = (h % pc.n_heads) / (pc.n_heads / pc.n_kv_heads);
    uint qt_row = min(h / pc.n_heads, clamp(step_params.rows, 1u, pc.T) - 1u);
    uint len = min(step_params.pos + qt_row + 1u, pc.max_seq);
#else
    uint kvh = h / (pc.n_heads / pc.n_kv_heads);
    uint len = min(step_params.kv_len, pc.max_seq);
#endif
    uint dim = pc.n_kv_heads * hd, koff = kvh * hd;
    uint share = (len + pc.splits - 1u) / pc.splits;
    uint first = min(len, split * share), last = min(len, first + share);
    uint r = t / TPR, c = t % TPR;   // row slot r takes rows r, r + RPP, ...
#ifdef ATT_CONTIG
    // Vector loads need every row and head to start on 16 bytes.
#ifdef ATT_KH
    bool vec = (hd & 7u) == 0u && c * DPT < hd;
#else
    bool vec = (hd & 3u) == 0u && c * DPT < hd;
#endif
#elif defined(ATT_KH)
    const bool vec = false;
#endif

#ifdef ATT_KH
    float qv[DPT], acc[DPT];
    uvec4 kp[RPT], vp[RPT];
#else
    float qv[DPT], kv[RPT][DPT], vv[RPT][DPT], acc[DPT];
#endif
#ifdef ATT_QKVT
    bool tq = pc.tag_in != 0u;
    if (tq) {
        uint qw[DPT];
        qkvt_load(h * hd, c, hd, qw);
        qkvt_finish(h * hd, c, hd, qw, qv);
        for (uint k = 0u; k < DPT; k++)
            qv[k] *= pc.scale;
    } else
#endif
#ifdef ATT_CONTIG
    if (vec) {
        uint at = (h * hd + c * DPT) / 4u;
        for (uint j = 0u; j < DPT / 4u; j++) {
            bool ok = c * DPT + j * 4u < hd;
            vec4 v = ok ? q4[at + j] * pc.scale : vec4(0.0);
            qv[j * 4u] = v.x; qv[j * 4u + 1u] = v.y; qv[j * 4u + 2u] = v.z; qv[j * 4u + 3u] = v.w;
        }
    } else
#endif
    for (uint k = 0u; k < DPT; k++) {
        uint d = dim_of(c, k);
        qv[k] = d < hd ? q[h * hd + d] * pc.scale : 0.0;
    }
    for (uint k = 0u; k < DPT; k++)
        acc[k] = 0.0;
    float m = NEG_BIG, l = 0.0;
#ifdef ATT_QKVT
    // The step's own row: its k and v words are loaded now, beside the
    // cache rows, and weighed after them. The workgroup of the last share
    // polls them even where the row is past the caches (kv_len > max_seq),
    // so that every word of q/k/v is waited for by some workgroup.
    uint own = step_params.kv_len - 1u, kat = pc.n_heads * hd + koff, kw[DPT], vw[DPT];
    bool poll_kv = tq && step_params.kv_len >= 1u && first < last && last == len;
    bool has_own = poll_kv && step_params.kv_len <= pc.max_seq;   // then own == last - 1
    if (poll_kv && r == 0u) {
        qkvt_load(kat, c, hd, kw);
        qkvt_load(kat + dim, c, hd, vw);
    }
    if (has_own)
        last = own;   // the cache rows before it
#endif
    for (uint base = first; base < last; base += RPT * RPP) {
#ifdef ATT_KH
        // One branch on the load path for the whole pass, every row's
        // loads behind it (a branch a row ran slower: docs/perf-log.md).
        if (vec) {
            KH_EACH(KH_ROW_LOAD8)
        } else {
            KH_EACH(KH_ROW_GATHER)
        }
#else
        for (uint i = 0u; i < RPT; i++) {
            uint row = base + r + i * RPP;
            bool live = row < last;
            uint at = row * dim + koff;
#ifdef ATT_CONTIG
            if (vec) {
                uint at4 = (at + c * DPT) / 4u;
                for (uint j = 0u; j < DPT / 4u; j++) {
                    bool ok = live && c * DPT + j * 4u < hd;
                    vec4 a = ok ? kcache4[at4 + j] : vec4(0.0), b = ok ? vcache4[at4 + j] : vec4(0.0);
                    kv[i][j * 4u] = a.x; kv[i][j * 4u + 1u] = a.y; kv[i][j * 4u + 2u] = a.z; kv[i][j * 4u + 3u] = a.w;
                    vv[i][j * 4u] = b.x; vv[i][j * 4u + 1u] = b.y; vv[i][j * 4u + 2u] = b.z; vv[i][j * 4u + 3u] = b.w;
                }
                continue;
            }
#endif
            for (uint k = 0u; k < DPT; k++) {
                uint d = dim_of(c, k);
                bool ok = live && d < hd;
                kv[i][k] = ok ? kcache[at + d] : 0.0;
                vv[i][k] = ok ? vcache[at + d] : 0.0;
            }
        }
#endif
        float s[RPT];
#ifdef ATT_KH
        for (uint i = 0u; i < RPT; i++)
            s[i] = 0.0;   /* rows the pass skips */
        KH_EACH(KH_ROW_SCORE)
#else
        for (uint i = 0u; i < RPT; i++) {
            s[i] = 0.0;
            for (uint k = 0u; k < DPT; k++)
                s[i] += qv[k] * kv[i][k];
        }
#endif
        float mx = m;
        if (gl_SubgroupSize >= TPR) {
            // A row's TPR invocations are neighbours in one subgroup: they
            // sum its score by shuffles, every one of them ending with it;
            // the pass's maximum is a subgroup maximum, then one slot per
            // subgroup in shared memory (two sets, by pass parity, so one
            // barrier a pass keeps readers and the next writers apart).
            float rmax = NEG_BIG;
            for (uint i = 0u; i < RPT; i++) {
                for (uint o = 1u; o < TPR; o <<= 1u)
                    s[i] += subgroupShuffleXor(s[i], o);
                if (base + r + i * RPP < last)
                    rmax = max(rmax, s[i]);
            }
            rmax = subgroupMax(rmax);
            uint set = ((base - first) / (RPT * RPP)) & 1u;
            if (subgroupElect())
                smax[set][gl_SubgroupID] = rmax;
            memoryBarrierShared();
            barrier();
            for (uint j = 0u; j < gl_NumSubgroups; j++)
                mx = max(mx, smax[set][j]);
        } else {
            for (uint i = 0u; i < RPT; i++)
                sdot[i * WG_SIZE + t] = s[i];
            memoryBarrierShared();
            barrier();
            if (t < RPT * RPP) {
                // Row base + t: slot t % RPP, round t / RPP.
                uint i = t / RPP, slot = t % RPP;
                float sum = 0.0;
                for (uint j = 0u; j < TPR; j++)
                    sum += sdot[i * WG_SIZE + slot * TPR + j];
                uint row = base + slot + i * RPP;
                score[t] = row < last ? sum : NEG_BIG;
            }
            memoryBarrierShared();
            barrier();
            for (uint j = 0u; j < RPT * RPP; j++)
                mx = max(mx, score[j]);
            for (uint i = 0u; i < RPT; i++)
                s[i] = score[i * RPP + r];
            // the next pass writes sdot and score only after every
            // invocation has read them
            barrier();
        }
        float alpha = exp(m - mx);
        for (uint k = 0u; k < DPT; k++)
            acc[k] *= alpha;
        l *= alpha;
#ifdef ATT_KH
        KH_EACH(KH_ROW_ACC)
#else
        for (uint i = 0u; i < RPT; i++) {
            bool live = base + r + i * RPP < last;
            float p = live ? exp(s[i] - mx) : 0.0;
            for (uint k = 0u; k < DPT; k++)
                acc[k] += p * vv[i][k];
            l += c == 0u ? p : 0.0;
        }
#endif
        m = mx;
    }
#ifdef ATT_QKVT
    float kn[DPT], vn[DPT];
    if (poll_kv && r == 0u) {
        qkvt_finish(kat, c, hd, kw, kn);
        qkvt_finish(kat + dim, c, hd, vw, vn);
        float sp = 0.0;
        for (uint k = 0u; k < DPT; k++)
            sp += qv[k] * kn[k];
        sdot[c] = sp;   // free: the passes' last barrier is behind every read of it
    }
    if (has_own) {
        // Every invocation scores the row alike, so m stays uniform; row
        // slot 0 weighs its V.
        memoryBarrierShared();
        barrier();
        float sn = 0.0;
        for (uint j = 0u; j < TPR; j++)
            sn += sdot[j];
        float mx = max(m, sn), alpha = exp(m - mx), p = exp(sn - mx);
        for (uint k = 0u; k < DPT; k++)
            acc[k] = acc[k] * alpha + (r == 0u ? p * vn[k] : 0.0);
        l = l * alpha + (r == 0u && c == 0u ? p : 0.0);
        m = mx;
    }
#endif

    // Sum the rows' partial outputs: dimension dim_of(c, k) of this
    // workgroup's share is the sum over r of acc[k] of invocation (r, c).
    // Where a subgroup holds several rows, shuffles first sum its rows, so
    // shared memory takes one entry per subgroup instead of one per row.
    // Entry slot * TPR + c of each dimension's column: one per row slot,
    // or one per subgroup after the shuffles.
    uint slot = r, entries = RPP;
    bool writes = true;
    if (gl_SubgroupSize >= TPR) {
        for (uint o = TPR; o < gl_SubgroupSize; o <<= 1u) {
            for (uint k = 0u; k < DPT; k++)
                acc[k] += subgroupShuffleXor(acc[k], o);
            l += subgroupShuffleXor(l, o);
        }
        slot = gl_SubgroupID;
        entries = gl_NumSubgroups;
        writes = gl_SubgroupInvocationID < TPR;
    }
    if (writes) {
        for (uint k = 0u; k < DPT; k++)
            sacc[k * WG_SIZE + slot * TPR + c] = acc[k];
        sacc[DPT * WG_SIZE + slot * TPR + c] = l;
    }
    memoryBarrierShared();
    barrier();
    float sum = 0.0, lw = 0.0;
    if (t < hd) {
#ifdef ATT_CONTIG
        uint k = t % DPT, cc = t / DPT;
#else
        uint k = t / TPR, cc = t % TPR;
#endif
        for (uint j = 0u; j < entries; j++)
            sum += sacc[k * WG_SIZE + j * TPR + cc];
    }
#ifdef ATT_PART_H
    // Every invocation needs the share's sum to divide by: a broadcast read.
    for (uint j = 0u; j < entries; j++)
        lw += sacc[DPT * WG_SIZE + j * TPR];
#else
    if (t == 0u)
        for (uint j = 0u; j < entries; j++)
            lw += sacc[DPT * WG_SIZE + j * TPR];
#endif

#ifndef ATT_PART
    if (pc.splits == 1u) {
        // Every invocation's l is its share of the sum; invocation 0 holds
        // the total in lw. Publish it.
        if (t == 0u)
            score[0] = lw;
        memoryBarrierShared();
        barrier();
        float lt = score[0];
#ifdef ATT_O16
        uint ow = pair_half(t < hd && lt > 0.0 ? sum / lt : 0.0);
        if (t < hd && (t & 1u) == 0u)
            o16[(h * hd + t) / 2u] = ow;
#else
        if (t < hd)
            put_out(h * hd + t, lt > 0.0 ? sum / lt : 0.0);
#endif
        return;
    }
#endif
    uint hdr = (2u * pc.splits + 3u) & ~3u;
#ifdef ATT_PART_H
    // Dimension pairs (t, t + 1) as one word (head_dim is even, so a pair
    // never straddles a subgroup of 2 or more).
    uint pw = pair_half(lw > 0.0 ? sum / lw : 0.0);
    uint head = h * (hdr + pc.splits * hd / 2u);
    if (t < hd && (t & 1u) == 0u)
        parth[head + hdr + split * (hd / 2u) + t / 2u] = pw;
#else
    uint head = h * (hdr + pc.splits * hd);
    if (t < hd)
        part[head + hdr + split * hd + t] = sum;
#endif
    if (t == 0u) {
        part[head + 2u * split] = m;
        part[head + 2u * split + 1u] = lw;
    }
#ifdef ATT_PART
    // The shares stay apart: the matvec that reads the output combines
    // them (MV_COMB in matvec.glsl; the gather pass binds it).
    return;
#else
    memoryBarrierBuffer();
    barrier();
    if (t == 0u)
        is_last = atomicAdd(counter[h], 1u) == pc.splits - 1u;
    memoryBarrierShared();
    barrier();
    if (!is_last)
        return;
    memoryBarrierBuffer();
#ifdef ATT_O16
    float ov = 0.0;
#endif
    if (t < hd) {
        // Fixed trip counts so every share's loads are issued together:
        // this is the dispatch's serial tail. The (max, sum) pairs come two
        // shares to a 16-byte load where the head's block starts on 16 bytes.
        float ms[MAX_SPLITS], ls[MAX_SPLITS], os[MAX_SPLITS];
        float mx = NEG_BIG;
        if ((head & 3u) == 0u) {
            for (uint s = 0u; s < MAX_SPLITS; s += 2u) {
                vec4 v = s < pc.splits ? part4[(head + 2u * s) / 4u] : vec4(NEG_BIG, 0.0, NEG_BIG, 0.0);
                ms[s] = v.x; ls[s] = v.y; ms[s + 1u] = v.z; ls[s + 1u] = v.w;
            }
        } else {
            for (uint s = 0u; s < MAX_SPLITS; s++) {
                ms[s] = s < pc.splits ? part[head + 2u * s] : NEG_BIG;
                ls[s] = s < pc.splits ? part[head + 2u * s + 1u] : 0.0;
            }
        }
        for (uint s = 0u; s < MAX_SPLITS; s++)
            os[s] = s < pc.splits ? part[head + hdr + s * hd + t] : 0.0;
        for (uint s = 0u; s < MAX_SPLITS; s++)
            mx = s < pc.splits ? max(mx, ms[s]) : mx;   // a vector's second share may lie past the last
        float lt = 0.0, ot = 0.0;
        for (uint s = 0u; s < MAX_SPLITS; s++) {
            float w = s < pc.splits ? exp(ms[s] - mx) : 0.0;
            lt += ls[s] * w;
            ot += os[s] * w;
        }
#ifdef ATT_O16
        ov = lt > 0.0 ? ot / lt : 0.0;
#else
        put_out(h * hd + t, lt > 0.0 ? ot / lt : 0.0);
#endif
    }
#ifdef ATT_O16
    // Dimension pairs (t, t + 1) as one f16 word (head_dim is even).
    uint ow = pair_half(ov);
    if (t < hd && (t & 1u) == 0u)
        o16[(h * hd + t) / 2u] = ow;
#endif
    if (t == 0u)
        counter[h] = 0u;
#endif
}
