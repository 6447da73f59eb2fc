#version 450
#extension GL_GOOGLE_include_directive : require
// ADD_RMS_NORM: see norm.glsl.
#define NORM_ADD
#include "norm.glsl"
