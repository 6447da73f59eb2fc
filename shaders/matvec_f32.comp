#version 450
#extension GL_GOOGLE_include_directive : require
// MATVEC, f32 weights: see matvec.glsl.
#include "matvec.glsl"
