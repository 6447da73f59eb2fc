#version 450
#extension GL_GOOGLE_include_directive : require
// MATVEC_SILU_MUL, f16 weights: see matvec.glsl.
#define MV_F16
#define MV_SILU
#include "matvec.glsl"
