#version 450
#extension GL_GOOGLE_include_directive : require
// MATVEC_ARGMAX (fused), f32 weights: see matvec.glsl.
#define MV_ARGMAX
#define MV_ROWS 4u   // ir/ops.def: per_group
#include "matvec.glsl"
