#version 450
#extension GL_GOOGLE_include_directive : require
// SILU_MUL: y = silu(a) * b; exp overflowing to inf gives silu = -0.
#define OP(p, q) ((p) / (1.0 + exp(-(p))) * (q))
#include "binary.glsl"
