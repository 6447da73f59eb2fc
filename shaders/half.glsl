// The f16 storage forms' idioms.
// pair_half (MV_T16, MV_Y16, ATT_PART_H, ATT_O16): invocations t and t ^ 1
// hold neighbouring values, and the even one stores both as one word. Call
// it from every invocation of the subgroup (a shuffle), then let the even
// ones store.
// pack8 (the cooperative-matrix forms' staging): 8 values as the 16 bytes
// of their halves.
#extension GL_KHR_shader_subgroup_shuffle : require
uint pair_half(float v) { return packHalf2x16(vec2(v, subgroupShuffleXor(v, 1u))); }

uvec4 pack8(vec4 a, vec4 b)
{
    return uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
}
