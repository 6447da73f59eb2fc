#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// Decode ATTENTION, split over the cache length so that it fills the GPU:
// workgroup (h, s) takes query head h (kv head h / (n_heads / n_kv_heads))
// and the s-th of `splits` equal shares of cache rows [0, min(kv_len,
// max_seq)). Each share is scored a subgroup per row (lanes over the head's
// dimensions), then weighted with an online softmax CHUNK rows at a time
// (running max and sum, rescaling the partial output). With one split the
// workgroup writes the head's output itself; otherwise it stores (max, sum,
// partial output) and the last workgroup of the head to finish — an atomic
// counter per head — combines them. No workgroup ever waits for another,
// and the last one resets its counter for the next replay.
#define WG_SIZE 256u
#define CHUNK 256u
#define MAX_SPLITS 32u   // ir/ops.c: attn_splits
layout(local_size_x = 256) in;
#include "params.glsl"
layout(set = 0, binding = 1) readonly buffer Q { float q[]; };
layout(set = 0, binding = 2) readonly buffer KC { float kcache[]; };
layout(set = 0, binding = 3) readonly buffer VC { float vcache[]; };
layout(set = 0, binding = 4) writeonly buffer O { float o[]; };
layout(set = 0, binding = 5) coherent buffer Part { float part[]; };   // n_heads * splits * (head_dim + 2)
layout(set = 0, binding = 6) coherent buffer Count { uint counter[]; }; // n_heads
layout(push_constant) uniform Pc {
    uint n_heads; uint n_kv_heads; uint head_dim; uint max_seq; float scale; uint splits;
} pc;

const float NEG_BIG = -3.402823466e38;
#define TPR 4u                     // invocations scoring one row
shared float qs[256];      // head_dim <= 256 (checked by the builder)
shared float score[CHUNK];
shared float partial[WG_SIZE];
shared float sg_red[WG_SIZE];      // one slot per subgroup (>= 1 lane each)
shared bool is_last;

// Workgroup max and sum through subgroup operations: two barriers each,
// where a shared-memory tree would take nine.
float wg_max(float v)
{
    v = subgroupMax(v);
    if (subgroupElect())
        sg_red[gl_SubgroupID] = v;
    memoryBarrierShared();
    barrier();
    float r = NEG_BIG;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
        r = max(r, sg_red[i]);
    barrier();
    return r;
}

float wg_sum(float v)
{
    v = subgroupAdd(v);
    if (subgroupElect())
        sg_red[gl_SubgroupID] = v;
    memoryBarrierShared();
    barrier();
    float r = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
        r += sg_red[i];
    barrier();
    return r;
}

float vrow(uint j, uint base, uint dim, uint koff, uint d) { return vcache[(base + j) * dim + koff + d]; }

void main()
{
    uint t = gl_LocalInvocationID.x, hd = pc.head_dim;
    uint h = gl_WorkGroupID.x / pc.splits, split = gl_WorkGroupID.x % pc.splits;
    uint kvh = h / (pc.n_heads / pc.n_kv_heads);
    uint dim = pc.n_kv_heads * hd, koff = kvh * hd;
    uint len = min(step_params.kv_len, pc.max_seq);
    uint share = (len + pc.splits - 1u) / pc.splits;
    uint first = min(len, split * share), last = min(len, first + share);
    if (t < hd)
        qs[t] = q[h * hd + t] * pc.scale;
    memoryBarrierShared();
    barrier();

    uint teams = WG_SIZE / hd, d = t % hd, team = t / hd;
    uint per = (hd + TPR - 1u) / TPR;   // dimensions each scoring invocation takes
    float m = NEG_BIG, l = 0.0, acc = 0.0;
    for (uint base = first; base < last; base += CHUNK) {
        uint cnt = min(CHUNK, last - base);
        // Scores: TPR invocations per row, every row of a sweep loaded at
        // once (a decode share is one sweep), partial dots met in shared.
        for (uint r0 = 0u; r0 < cnt; r0 += WG_SIZE / TPR) {
            uint j = r0 + t / TPR, e0 = (t % TPR) * per, e1 = min(hd, e0 + per);
            float sc = 0.0;
            if (j < cnt) {
                uint row = (base + j) * dim + koff;
                for (uint e = e0; e < e1; e++)
                    sc += qs[e] * kcache[row + e];
            }
            partial[t] = sc;
            memoryBarrierShared();
            barrier();
            if (t < WG_SIZE / TPR && r0 + t < cnt) {
                float tot = 0.0;
                for (uint k = 0u; k < TPR; k++)
                    tot += partial[t * TPR + k];
                score[r0 + t] = tot;
            }
            memoryBarrierShared();
            barrier();
        }
        float lmax = NEG_BIG;
        for (uint j = t; j < cnt; j += WG_SIZE)
            lmax = max(lmax, score[j]);
        float mnew = max(m, wg_max(lmax));
        float alpha = exp(m - mnew);
        float lsum = 0.0;
        for (uint j = t; j < cnt; j += WG_SIZE) {
            float e = exp(score[j] - mnew);
            score[j] = e;
            lsum += e;
        }
        l = l * alpha + wg_sum(lsum);   // its barrier publishes score
        if (team < teams) {
            acc *= alpha;
            // Four rows' loads before their arithmetic: latency, not
            // bandwidth, bounds this loop.
            uint j = team;
            for (; j + 3u * teams < cnt; j += 4u * teams) {
                float v0 = vrow(j, base, dim, koff, d), v1 = vrow(j + teams, base, dim, koff, d);
                float v2 = vrow(j + 2u * teams, base, dim, koff, d), v3 = vrow(j + 3u * teams, base, dim, koff, d);
                acc += (score[j] * v0 + score[j + teams] * v1) + (score[j + 2u * teams] * v2 + score[j + 3u * teams] * v3);
            }
            for (; j < cnt; j += teams)
                acc += score[j] * vrow(j, base, dim, koff, d);
        }
        m = mnew;
        barrier();  // the next chunk overwrites score and partial
    }
    partial[t] = team < teams ? acc : 0.0;
    memoryBarrierShared();
    barrier();
    float sum = 0.0;
    if (t < hd)
        for (uint k = 0u; k < teams; k++)
            sum += partial[k * hd + t];

    if (pc.splits == 1u) {
        if (t < hd)
            o[h * hd + t] = l > 0.0 ? sum / l : 0.0;
        return;
    }
    uint stride = hd + 2u, mine = (h * pc.splits + split) * stride;
    if (t < hd)
        part[mine + 2u + t] = sum;
    if (t == 0u) {
        part[mine] = m;
        part[mine + 1u] = l;
    }
    memoryBarrierBuffer();
    barrier();
    if (t == 0u)
        is_last = atomicAdd(counter[h], 1u) == pc.splits - 1u;
    memoryBarrierShared();
    barrier();
    if (!is_last)
        return;
    memoryBarrierBuffer();
    if (t < hd) {
        // Fixed trip counts so every share's loads are issued together:
        // this is the dispatch's serial tail.
        uint head = h * pc.splits * stride;
        float ms[MAX_SPLITS], ls[MAX_SPLITS], os[MAX_SPLITS];
        float mx = NEG_BIG;
        for (uint s = 0u; s < MAX_SPLITS; s++) {
            bool live = s < pc.splits;
            ms[s] = live ? part[head + s * stride] : NEG_BIG;
            ls[s] = live ? part[head + s * stride + 1u] : 0.0;
            os[s] = live ? part[head + s * stride + 2u + t] : 0.0;
        }
        for (uint s = 0u; s < MAX_SPLITS; s++)
            mx = max(mx, ms[s]);
        float lt = 0.0, ot = 0.0;
        for (uint s = 0u; s < MAX_SPLITS; s++) {
            float w = s < pc.splits ? exp(ms[s] - mx) : 0.0;
            lt += ls[s] * w;
            ot += os[s] * w;
        }
        o[h * hd + t] = lt > 0.0 ? ot / lt : 0.0;
    }
    if (t == 0u)
        counter[h] = 0u;
}
