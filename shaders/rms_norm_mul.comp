#version 450
#extension GL_GOOGLE_include_directive : require
// RMS_NORM_MUL: see norm.glsl.
#define NORM_MUL
#include "norm.glsl"
