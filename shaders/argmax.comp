#version 450
#extension GL_GOOGLE_include_directive : require
// ARGMAX: see argmax.glsl.
#include "argmax.glsl"
