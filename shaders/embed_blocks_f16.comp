#version 450
#extension GL_GOOGLE_include_directive : require
// EMBED over up to seven row blocks of an f16 table, read as packed pairs
// (dim is even, so a row starts on a pair): see embed.glsl.
#define TABLE_WORD uint
#include "embed_blocks.glsl"
#include "embed.glsl"
float table_at(uint b, uint i)
{
    vec2 h = unpackHalf2x16(word(b, i >> 1));
    return (i & 1u) != 0u ? h.y : h.x;
}
