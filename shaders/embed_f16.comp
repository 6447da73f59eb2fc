#version 450
#extension GL_GOOGLE_include_directive : require
// EMBED from an f16 table read as packed pairs (dim is even, so a row
// starts on a pair), which needs no 16-bit storage feature.
layout(set = 0, binding = 0) readonly buffer Table { uint table[]; };
#include "embed.glsl"
float table_at(uint i)
{
    vec2 h = unpackHalf2x16(table[i >> 1]);
    return (i & 1u) != 0u ? h.y : h.x;
}
