#version 450
// dst = src for n 32-bit words: 16-byte loads and stores, striding over the
// grid (the builder caps the workgroup count), then the n % 4 tail.
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer Src4 { uvec4 src4[]; };
layout(set = 0, binding = 0) readonly buffer Src1 { uint src1[]; };
layout(set = 0, binding = 1) writeonly buffer Dst4 { uvec4 dst4[]; };
layout(set = 0, binding = 1) writeonly buffer Dst1 { uint dst1[]; };
layout(push_constant) uniform Pc { uint n; } pc;
void main()
{
    uint gid = gl_GlobalInvocationID.x;
    uint n4 = pc.n >> 2;
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gid; i < n4; i += stride)
        dst4[i] = src4[i];
    uint tail = pc.n & 3u;
    if (gid < tail)
        dst1[n4 * 4u + gid] = src1[n4 * 4u + gid];
}
