#version 450
#extension GL_GOOGLE_include_directive : require
// RMS_NORM_MUL_ROWS: see norm.glsl.
#define NORM_MUL
#define NORM_ROWS
#include "norm.glsl"
