#version 450
#extension GL_GOOGLE_include_directive : require
// ROPE: see rope.glsl.
#include "rope.glsl"
