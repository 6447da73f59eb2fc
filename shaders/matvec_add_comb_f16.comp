#version 450
#extension GL_GOOGLE_include_directive : require
// MATVEC_ADD (fused), f16 weights, x an ATTENTION's output still in its
// shares (MV_COMB; the gather pass's form): see matvec.glsl.
#define MV_F16
#define MV_ADD
#define MV_COMB
#include "matvec.glsl"
