// Tagged vectors (MV_TAG in matvec.glsl, ATT_TAG in attention.glsl;
// the awaits pass, passes/awaits.c, picks them): a dispatch recorded right behind its
// producer, with no pipeline barrier between them, reads the producer's
// output as it arrives. Every element is one 32-bit word: the f32 value
// rounded to 24 bits (sign, exponent, 15 bits of mantissa; tag_word) with the step's
// tag for that vector in the low byte. A 32-bit store is seen whole or not
// at all, so a word carrying the expected tag holds this step's value: the
// reader polls the data itself, and neither side needs a fence or a
// counter.
//
// The tag of vector e (1..127, numbered by the runtime) in the program's
// step s is (s * 128 + e) mod 255 + 1: never 0 (the runtime keeps the
// tagged vectors in memory of their own, zeroed once), different for two
// vectors of one step, and different from any tag of the step before
// (128 + e - e' is 2..254, never a multiple of 255; 2^32 is 1 mod 255, so
// the step count wrapping keeps that too).
// Every word of a tagged vector is rewritten each step, so nothing older
// than the step before can be left in it. The runtime writes s into the
// word at binding TAG_BINDING before each replay and pushes the vector
// numbers at bytes 120..127 (tag_in for x, tag_out for y; 0: that binding
// holds plain f32).
// The word after it is the fault word: a poll that gives up sets it, and
// the runtime reads it once the step is done (loom_rt_wait's error, the
// program recorded again with every barrier).
#define TAG_BINDING 31
#ifdef TAG_COUNTS
shared bool cnt_ok_shared;
#endif
layout(set = 0, binding = TAG_BINDING) buffer TagSeq {
    readonly uint tag_seq;
    uint tag_fault;
};

// tag_in's TAG_GATE bit: the reader waits for the whole vector before it
// loads anything else (tag_gate in matvec.glsl).
#define TAG_GATE 0x100u

uint tag_of(uint edge) { return (tag_seq * 128u + (edge & 0xffu)) % 255u + 1u; }

// The value rounded to 15 bits of mantissa, ties away from zero (what
// docs/design-notes.md "What a tagged vector rounds" states and
// test_runtime's tag_rounding checks): at most 2^-16 of |v| off for a
// normal v, 2^-142 for a subnormal one; a v within 2^-16 of the largest
// float becomes infinity, as any narrowing does. A NaN stays a NaN: one
// whose payload lies in the dropped bits alone would otherwise read as
// infinity.
uint tag_word(float v, uint tag)
{
    uint b = isnan(v) ? 0x7fc00000u : (floatBitsToUint(v) + 0x80u) & 0xffffff00u;
    return b | tag;
}

float tag_value(uint w) { return uintBitsToFloat(w & 0xffffff00u); }

vec4 tag_values(uvec4 w) { return uintBitsToFloat(w & uvec4(0xffffff00u)); }

bool tags_ok(uvec4 a, uvec4 b, uint tag)
{
    uvec4 d = ((a ^ uvec4(tag)) | (b ^ uvec4(tag))) & uvec4(0xffu);
    return (d.x | d.y | d.z | d.w) == 0u;
}

bool tags_ok2(uint a, uint b, uint tag) { return (((a ^ tag) | (b ^ tag)) & 0xffu) == 0u; }

// A poll gives up after this many trips (a producer that never writes: a
// wrong plan, or a device that breaks what the lowering assumes), sets the
// fault word and reads NaN, so that the error shows in every value that
// depends on it instead of passing for a stale one.
#define TAG_SPINS 0x100000u
#define TAG_LOST uintBitsToFloat(0x7fc00000u)

// A poll that gave up: the runtime finds the fault word set.
void tag_give_up() { tag_fault = 1u; }

#ifdef TAG_COUNTS
// Counted edges (the forms that define TAG_COUNTS: MV_CNT in matvec.glsl):
// a producer whose outputs cannot be tagged words (a staged norm's
// squares summed by atomics, quads, a residual read a level later) counts
// its finished workgroups instead. Each workgroup, its writes done, fences
// them (device scope) and adds 1 to counter c (cnt_out = c) once every
// invocation has passed the fence; a reader (cnt_in = c | workgroups << 8)
// polls the counter until it reaches step * workgroups, then reads the
// producer's outputs through coherent bindings, past the caches that no
// barrier has cleaned. The counters live in the tagged vectors' memory,
// zeroed once, and never reset: every replay of the program adds the
// producer's workgroups once, so after step s (tag_seq) the counter holds
// s * workgroups (mod 2^32; the runtime sets them so again where a step
// lost a signal). Counter c is word CNT_STRIDE * c of binding CNT_BINDING.
#define CNT_BINDING 30
#define CNT_STRIDE 16u   // a counter a 64-byte line
layout(set = 0, binding = CNT_BINDING) coherent buffer TagCounts { uint tag_counts[]; };
layout(set = 0, binding = CNT_BINDING) volatile coherent buffer TagCountsP { uint tag_counts_p[]; };

// Waits (invocation 0 polls, the workgroup behind a barrier) until counter
// cnt_in & 0xff reaches this step's target; false, with the fault word
// set, where it never does within TAG_SPINS polls. Uniform control flow.
bool cnt_wait(uint cnt_in)
{
    bool ok = true;
    if (gl_LocalInvocationIndex == 0u) {
        uint at = CNT_STRIDE * (cnt_in & 0xffu), target = tag_seq * (cnt_in >> 8u), v = tag_counts_p[at];
        // the count carried round the loop and used after it: a loop that
        // only counted its trips was optimised away, leaving one load
        for (uint spins = 0u; int(v - target) < 0 && spins < TAG_SPINS; spins++)
            v = tag_counts_p[at];
        if (int(v - target) < 0) {
            tag_give_up();
            ok = false;
        }
        cnt_ok_shared = ok;
    }
    memoryBarrierBuffer();
    memoryBarrierShared();
    barrier();
    return cnt_ok_shared;
}

// This workgroup's writes fenced, then counted once (cnt_out: the counter;
// 0: none). Uniform control flow, after the workgroup's last write.
void cnt_signal(uint cnt_out)
{
    if (cnt_out == 0u)
        return;
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationIndex == 0u)
        atomicAdd(tag_counts[CNT_STRIDE * (cnt_out & 0xffu)], 1u);
}
#endif
