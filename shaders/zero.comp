#version 450
// y = 0 for n 32-bit words, one word an invocation (y's starting value
// for a kernel that sums into it with atomics, the stage pass).
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) writeonly buffer Y { uint y[]; };
layout(push_constant) uniform Pc { uint n; } pc;
void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i < pc.n)
        y[i] = 0u;
}
