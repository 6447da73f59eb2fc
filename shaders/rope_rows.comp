#version 450
#extension GL_GOOGLE_include_directive : require
// ROPE_ROWS: see rope.glsl.
#define ROPE_ROWS
#include "rope.glsl"
