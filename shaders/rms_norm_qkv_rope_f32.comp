#version 450
#extension GL_GOOGLE_include_directive : require
// RMS_NORM_QKV_ROPE (fused), f32 weights: see matvec.glsl.
#define MV_QKV
#include "matvec.glsl"
