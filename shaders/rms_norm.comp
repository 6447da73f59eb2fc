#version 450
#extension GL_GOOGLE_include_directive : require
// RMS_NORM: see norm.glsl.
#include "norm.glsl"
