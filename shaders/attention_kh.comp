#version 450
#extension GL_GOOGLE_include_directive : require
// ATTENTION for head_dim <= 64 over f16 KV caches (ATT_KH): as attention.comp,
// each row in flight one 16-byte load of K and one of V. See attention.glsl.
#define TPR 8u
#define RPT 8u
#define ATT_CONTIG
#define ATT_KH
#include "attention.glsl"
