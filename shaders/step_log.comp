#version 450
#extension GL_GOOGLE_include_directive : require
// STEP_LOG: row (step - back) % slots of dst takes src's n words, from step
// `back` on (a step's output kept where the steps after it do not write,
// so the host can read it behind the GPU; back 1 logs the step before's
// output at the start of a step). One invocation a word.
layout(local_size_x = 64) in;
#include "params.glsl"
layout(set = 0, binding = 1) readonly buffer S { uint src[]; };
layout(set = 0, binding = 2) writeonly buffer D { uint dst[]; };
layout(push_constant) uniform Pc { uint n; uint slots; uint back; } pc;

void main()
{
    uint i = gl_GlobalInvocationID.x, step = step_params.step;
    if (i < pc.n && step >= pc.back)
        dst[((step - pc.back) % pc.slots) * pc.n + i] = src[i];
}
