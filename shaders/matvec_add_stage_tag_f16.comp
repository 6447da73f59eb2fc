#version 450
#extension GL_GOOGLE_include_directive : require
// MATVEC_ADD_STAGE, f16 weights,
// with tagged vectors (MV_TAG, tag.glsl): see matvec.glsl.
#define MV_F16
#define MV_ADD
#define MV_STAGE
#define MV_TAG
#include "matvec.glsl"
