#version 450
#extension GL_GOOGLE_include_directive : require
// ROW_PICK: y = row params.rows - 1 of the T x n matrix x, the last real row
// of a T-token step (the one the LM head reads). rows is clamped to [1, T]
// so that a bad step parameter cannot read out of bounds.
layout(local_size_x = 256) in;
#include "params.glsl"
layout(set = 0, binding = 1) readonly buffer X { float x[]; };
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Pc { uint n; uint T; } pc;
void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= pc.n)
        return;
    uint row = clamp(step_params.rows, 1u, pc.T) - 1u;
    y[i] = x[row * pc.n + i];
}
