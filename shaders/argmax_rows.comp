#version 450
#extension GL_GOOGLE_include_directive : require
// ARGMAX_ROWS: see argmax.glsl.
#define ARGMAX_ROWS
#include "argmax.glsl"
