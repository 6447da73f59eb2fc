#version 450
#extension GL_GOOGLE_include_directive : require
// MATVEC_ADD, f32 weights: see matvec.glsl.
#define MV_ADD
#include "matvec.glsl"
