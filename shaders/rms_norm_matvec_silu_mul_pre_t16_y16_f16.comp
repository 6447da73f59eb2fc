#version 450
#extension GL_GOOGLE_include_directive : require
// RMS_NORM_MATVEC_SILU_MUL (fused), f16 weights, reading a staged input
// stored as f16 (MV_PRE, MV_X16), y stored as f16 for the down projection
// (MV_Y16): see matvec.glsl.
#define MV_F16
#define MV_NORM
#define MV_SILU
#define MV_PRE
#define MV_X16
#define MV_Y16
#include "matvec.glsl"
