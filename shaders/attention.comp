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
#define MAX_SPLITS 16u   // ir/ops.c: attn_splits
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
#include "reduce.glsl"

const float NEG_BIG = -3.402823466e38;
shared float qs[256];      // head_dim <= 256 (checked by the builder)
shared float score[CHUNK];
shared float partial[WG_SIZE];
shared bool is_last;

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

    uint lane = gl_SubgroupInvocationID, S = gl_SubgroupSize;
    uint teams = WG_SIZE / hd, d = t % hd, team = t / hd;
    float m = NEG_BIG, l = 0.0, acc = 0.0;
    for (uint base = first; base < last; base += CHUNK) {
        uint cnt = min(CHUNK, last - base);
        // Scores: a subgroup per row, coalesced over the row's dimensions.
        for (uint j = gl_SubgroupID; j < cnt; j += gl_NumSubgroups) {
            uint row = (base + j) * dim + koff;
            float s = 0.0;
            for (uint e = lane; e < hd; e += S)
                s += qs[e] * kcache[row + e];
            s = subgroupAdd(s);
            if (subgroupElect())
                score[j] = s;
        }
        memoryBarrierShared();
        barrier();
        float lmax = NEG_BIG;
        for (uint j = t; j < cnt; j += WG_SIZE)
            lmax = max(lmax, score[j]);
        float mnew = max(m, wg_reduce_max(lmax));
        float alpha = exp(m - mnew);
        float lsum = 0.0;
        for (uint j = t; j < cnt; j += WG_SIZE) {
            float e = exp(score[j] - mnew);
            score[j] = e;
            lsum += e;
        }
        l = l * alpha + wg_reduce_sum(lsum);
        if (team < teams) {
            acc *= alpha;
            for (uint j = team; j < cnt; j += teams)
                acc += score[j] * vcache[(base + j) * dim + koff + d];
        }
        m = mnew;
        barrier();  // the next chunk overwrites score
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
