#version 450
#extension GL_GOOGLE_include_directive : require
// MATVEC_ADD_STAGE, f16 weights: see matvec.glsl.
#define MV_F16
#define MV_ADD
#define MV_STAGE
#include "matvec.glsl"
