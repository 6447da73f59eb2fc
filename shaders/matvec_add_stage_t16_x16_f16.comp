#version 450
#extension GL_GOOGLE_include_directive : require
// MATVEC_ADD_STAGE, f16 weights, x stored as f16 (MV_X16), the staged
// vector stored as f16 (MV_T16): see matvec.glsl.
#define MV_F16
#define MV_ADD
#define MV_STAGE
#define MV_T16
#define MV_X16
#include "matvec.glsl"
