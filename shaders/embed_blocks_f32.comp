#version 450
#extension GL_GOOGLE_include_directive : require
// EMBED over up to seven row blocks of an f32 table: see embed.glsl.
#define TABLE_WORD float
#include "embed_blocks.glsl"
#include "embed.glsl"
float table_at(uint b, uint i) { return word(b, i); }
