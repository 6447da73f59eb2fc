#version 450
#extension GL_GOOGLE_include_directive : require
// EMBED_RMS_NORM_QKV_ROPE_KV (fused), f32 table and weights: see matvec.glsl.
#define MV_QKV
#define MV_EMBED
#include "matvec.glsl"
