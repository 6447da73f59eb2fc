#version 450
#extension GL_GOOGLE_include_directive : require
// ATTENTION for head_dim <= 64 over f16 KV caches (ATT_KH): as attention.comp,
// but sixteen rows in flight per invocation, each one 16-byte load of K and
// one of V, so a pass covers 512 rows with the registers eight f32 rows
// take. See attention.glsl.
#define TPR 8u
#define RPT 16u
#define KH_ROWS 16
#define ATT_CONTIG
#define ATT_KH
#include "attention.glsl"
