#version 450
#extension GL_GOOGLE_include_directive : require
// EMBED_RMS_NORM_QKV_ROPE_KV (fused), f32 table and weights, f16 KV caches
// (MV_KH): see matvec.glsl.
#define MV_QKV
#define MV_EMBED
#define MV_KH
#include "matvec.glsl"
