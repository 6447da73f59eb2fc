#version 450
#extension GL_GOOGLE_include_directive : require
// Decode ATTENTION: one workgroup per query head over cache rows
// [0, min(kv_len, max_seq)), grouped-query (head h reads kv head
// h / (n_heads / n_kv_heads)). Rows are taken CHUNK at a time with an
// online softmax (running max and sum, rescaling the partial output), so
// any cache length works with fixed shared memory. Within a chunk each
// invocation scores whole rows; for the weighted sum of V the workgroup is
// split into WG_SIZE / head_dim teams, each invocation owning one dimension
// and a strided share of the rows, and the teams are summed at the end.
#define WG_SIZE 256u
#define CHUNK 1024u
layout(local_size_x = 256) in;
#include "params.glsl"
layout(set = 0, binding = 1) readonly buffer Q { float q[]; };
layout(set = 0, binding = 2) readonly buffer KC { float kcache[]; };
layout(set = 0, binding = 3) readonly buffer VC { float vcache[]; };
layout(set = 0, binding = 4) writeonly buffer O { float o[]; };
layout(push_constant) uniform Pc { uint n_heads; uint n_kv_heads; uint head_dim; uint max_seq; float scale; } pc;
#include "reduce.glsl"

shared float qs[256];      // head_dim <= 256 (checked by the builder)
shared float score[CHUNK];
shared float partial[WG_SIZE];

void main()
{
    uint t = gl_LocalInvocationID.x, h = gl_WorkGroupID.x, hd = pc.head_dim;
    uint kvh = h / (pc.n_heads / pc.n_kv_heads);
    uint dim = pc.n_kv_heads * hd, koff = kvh * hd;
    uint len = min(step_params.kv_len, pc.max_seq);
    if (t < hd)
        qs[t] = q[h * hd + t] * pc.scale;
    memoryBarrierShared();
    barrier();

    uint teams = WG_SIZE / hd, d = t % hd, team = t / hd;
    float m = -3.402823466e38, l = 0.0, acc = 0.0;
    for (uint base = 0u; base < len; base += CHUNK) {
        uint cnt = min(CHUNK, len - base);
        float lmax = -3.402823466e38;
        for (uint j = t; j < cnt; j += WG_SIZE) {
            uint row = (base + j) * dim + koff;
            float s = 0.0;
            for (uint e = 0u; e < hd; e++)
                s += qs[e] * kcache[row + e];
            score[j] = s;
            lmax = max(lmax, s);
        }
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
    if (t < hd) {
        float sum = 0.0;
        for (uint k = 0u; k < teams; k++)
            sum += partial[k * hd + t];
        o[h * hd + t] = len > 0u ? sum / l : 0.0;
    }
}
