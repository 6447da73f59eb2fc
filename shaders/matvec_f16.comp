#version 450
#extension GL_GOOGLE_include_directive : require
// MATVEC, f16 weights: see matvec.glsl.
#define MV_F16
#include "matvec.glsl"
