#version 450
#extension GL_GOOGLE_include_directive : require
// MUL: y = a * b.
#define OP(p, q) ((p) * (q))
#include "binary.glsl"
