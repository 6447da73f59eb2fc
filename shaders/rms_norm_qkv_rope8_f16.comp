#version 450
#extension GL_GOOGLE_include_directive : require
// RMS_NORM_QKV_ROPE (fused), eight rows a workgroup, f16 weights: see matvec.glsl.
#define MV_F16
#define MV_QKV
#define MV_ROWS 8u
#include "matvec.glsl"
