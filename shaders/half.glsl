// The f16 storage forms' one idiom (MV_T16, MV_Y16, ATT_PART_H, ATT_O16):
// invocations t and t ^ 1 hold neighbouring values, and the even one stores
// both as one word. Call it from every invocation of the subgroup (a
// shuffle), then let the even ones store.
#extension GL_KHR_shader_subgroup_shuffle : require
uint pair_half(float v) { return packHalf2x16(vec2(v, subgroupShuffleXor(v, 1u))); }
