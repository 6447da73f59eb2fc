// MV_ARGMAX, the LM head's forms (matvec.glsl includes this after block()):
// each row's value also goes to the workgroup's best (max, index), the
// workgroup loops over row blocks, and the last workgroup to finish (an
// atomic counter) picks the best of all. Rows that are at most one chunk an
// invocation (the LM head) take short_blocks(), which keeps the next
// block's weights in flight while a block's sums meet.

layout(set = 0, binding = B_OUT) writeonly buffer Out { uint result[]; };
layout(set = 0, binding = B_PART) coherent buffer Part { uvec2 part[]; };
layout(set = 0, binding = B_COUNT) coherent buffer Count { uint counter[]; };
#ifdef MV_LOG
layout(set = 0, binding = B_RING) writeonly buffer Ring { uint ring[]; };
#endif

const uint NONE = 0xffffffffu;
bool better(float v, uint i, float bv, uint bi)
{
    return i != NONE && (bi == NONE || v > bv || (v == bv && i < bi));
}
shared float best_v[WG];
shared uint best_i[WG];
shared bool is_last;
// Tree over the workgroup's (v, i) candidates; every invocation calls it.
uint wg_best(float v, uint i, out float outv)
{
    uint t = gl_LocalInvocationID.x;
    best_v[t] = v;
    best_i[t] = i;
    memoryBarrierShared();
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1u) {
        if (t < s && better(best_v[t + s], best_i[t + s], best_v[t], best_i[t])) {
            best_v[t] = best_v[t + s];
            best_i[t] = best_i[t + s];
        }
        memoryBarrierShared();
        barrier();
    }
    outv = best_v[0];
    uint r = best_i[0];
    barrier();
    return r;
}

// Invocation k < MV_ROWS: the best of the rows it has written (its row slot
// of every block), folded in as it writes each; main() meets the MV_ROWS
// bests once. Invocation 0 folding every block's rows in turn held the
// workgroup's next block by its serial loop (measured: docs/perf-log.md).
float best_val = 0.0;
uint best_row = 0xffffffffu;

void fold_row(uint row, float v)
{
    if (row < pc.rows && better(v, row, best_val, best_row)) {
        best_val = v;
        best_row = row;
    }
}
shared float slot_v[MV_ROWS];
shared uint slot_i[MV_ROWS];

#ifndef MV_Q   // block types take block_sums_q
// The weights of block blk's rows at this invocation's chunk t.
void load_rows(uint blk, uint t, uint n, out WVEC w[MV_ROWS])
{
    for (uint k = 0u; k < MV_ROWS; k++) {
        uint row = blk * MV_ROWS + k;
        w[k] = row < pc.rows && t < n ? w0v[row * n + t] : WVEC(0);
    }
}

// Rows of at most WG vector chunks, one per invocation (the LM head's
// shape): x (and g) are read once, and the next block's weights are in
// flight while this block's sums meet in shared memory, so a workgroup
// looping over blocks does not wait a memory round trip per block.
void short_blocks(uint nblocks)
{
    const uint NS = MV_ROWS + 1u;
    uint t = gl_LocalInvocationID.x;
    uint n = pc.cols / VW;
    vec4 xa = vec4(0.0), xb = vec4(0.0);
    if (t < n)
        x_chunk(t, xa, xb);
#ifdef MV_PRE
    float ss = t < SS_SLOTS ? g1[t * SS_STRIDE] : 0.0;
#else
    float ss = dot(xa, xa) + dot(xb, xb);
#endif
#if defined(HAS_NORM) && !defined(MV_PRE)
    if (t < n) {
#ifdef MV_VW8
        xa *= g4[2u * t];
        xb *= g4[2u * t + 1u];
#else
        xa *= g4[t];
#endif
    }
#endif
    uint step = gl_NumWorkGroups.x;
    WVEC w[MV_ROWS], nw[MV_ROWS];
    load_rows(gl_WorkGroupID.x, t, n, w);
    for (uint blk = gl_WorkGroupID.x; blk < nblocks; blk += step) {
        if (blk + step < nblocks)
            load_rows(blk + step, t, n, nw);
        float acc[NS];
        for (uint k = 0u; k < MV_ROWS; k++)
            acc[k] = vdot(w[k], xa, xb);
        acc[NS - 1u] = ss;
        wg_sum(acc);
        float scale = 1.0;
#ifdef HAS_NORM
        scale = inversesqrt(total[NS - 1u] / float(pc.cols) + pc.eps);
#endif
        uint row = blk * MV_ROWS + t;
        if (t < MV_ROWS && row < pc.rows) {
            float v = total[t] * scale;
            y[row] = v;
            fold_row(row, v);
        }
        for (uint k = 0u; k < MV_ROWS; k++)
            w[k] = nw[k];
    }
}
#endif

// The workgroup's blocks, then the meeting of every workgroup's best.
void argmax_main()
{
    // A workgroup takes blocks gl_WorkGroupID.x, + gl_NumWorkGroups.x, ...
    // (the builder caps the workgroups), so each pays the publish-and-count
    // tail once, not once per four rows. Then the last workgroup to finish
    // picks the best of all.
    uint nblocks = (total_rows() + MV_ROWS - 1u) / MV_ROWS;
#ifndef MV_Q   // block types take block_sums_q
    if (pc.cols % VW == 0u && pc.cols / VW <= WG)
        short_blocks(nblocks);
    else
#endif
        for (wg_block = gl_WorkGroupID.x; wg_block < nblocks; wg_block += gl_NumWorkGroups.x)
            block();
    uint t = gl_LocalInvocationID.x;
    uint groups = gl_NumWorkGroups.x;
    if (t < MV_ROWS) {
        slot_v[t] = best_val;
        slot_i[t] = best_row;
    }
    memoryBarrierShared();
    barrier();
    if (t == 0u) {
        float bv = slot_v[0];
        uint bi = slot_i[0];
        for (uint k = 1u; k < MV_ROWS; k++)
            if (better(slot_v[k], slot_i[k], bv, bi)) {
                bv = slot_v[k];
                bi = slot_i[k];
            }
        part[gl_WorkGroupID.x] = uvec2(floatBitsToUint(bv), bi);
        memoryBarrierBuffer();
        is_last = atomicAdd(counter[0], 1u) == groups - 1u;
    }
    memoryBarrierShared();
    barrier();
    if (is_last) {
        memoryBarrierBuffer();
        float cv = 0.0;
        uint ci = NONE;
        // Eight independent loads per round trip: this loop is the
        // dispatch's serial tail.
        for (uint i = t; i < groups; i += 8u * WG) {
            uvec2 e[8];
            for (uint k = 0u; k < 8u; k++)
                e[k] = i + k * WG < groups ? part[i + k * WG] : uvec2(0u, NONE);
            for (uint k = 0u; k < 8u; k++)
                if (better(uintBitsToFloat(e[k].x), e[k].y, cv, ci)) {
                    cv = uintBitsToFloat(e[k].x);
                    ci = e[k].y;
                }
        }
        float fv;
        uint fi = wg_best(cv, ci, fv);
        if (t == 0u) {
            result[0] = fi;
#ifdef MV_LOG
            ring[step_params.step % pc.slots] = fi;
#endif
            counter[0] = 0u;   // ready for the next replay
        }
    }
}
