#version 450
#extension GL_GOOGLE_include_directive : require
// MATVEC_ARGMAX (fused), f16 weights: see matvec.glsl.
#define MV_F16
#define MV_ARGMAX
#include "matvec.glsl"
