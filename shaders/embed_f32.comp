#version 450
#extension GL_GOOGLE_include_directive : require
// EMBED from an f32 table.
layout(set = 0, binding = 0) readonly buffer Table { float table[]; };
#include "embed.glsl"
float table_at(uint i) { return table[i]; }
