#version 450
#extension GL_GOOGLE_include_directive : require
// ADD_RMS_NORM_MUL: see norm.glsl.
#define NORM_ADD
#define NORM_MUL
#include "norm.glsl"
