#version 450
#extension GL_GOOGLE_include_directive : require
// RMS_NORM_QKV_ROPE (fused), f16 weights, f16 KV caches (MV_KH), reading a
// staged input (MV_PRE): see matvec.glsl.
#define MV_F16
#define MV_QKV
#define MV_KH
#define MV_PRE
#include "matvec.glsl"
