#version 450
#extension GL_GOOGLE_include_directive : require
// RMS_NORM_MATVEC_SILU_MUL (fused), f16 weights, staged input (MV_PRE),
// with tagged vectors (MV_TAG, tag.glsl): see matvec.glsl.
#define MV_F16
#define MV_NORM
#define MV_SILU
#define MV_PRE
#define MV_TAG
#include "matvec.glsl"
