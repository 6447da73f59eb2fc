#version 450
#extension GL_GOOGLE_include_directive : require
// RMS_NORM_MATVEC_SILU_MUL (fused), f16 weights: see matvec.glsl.
#define MV_F16
#define MV_NORM
#define MV_SILU
#include "matvec.glsl"
