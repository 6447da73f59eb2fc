#version 450
#extension GL_GOOGLE_include_directive : require
// ATTENTION for head_dim <= 64 over f16 KV caches (ATT_KH): as attention.comp,
// but sixteen rows in flight an invocation, each one 16-byte load of K and
// one of V: a pass is 512 rows, in the registers of eight f32 rows. See
// attention.glsl.
#define TPR 8u
#define RPT 16u
#define KH_ROWS 16
#define ATT_CONTIG
#define ATT_KH
#include "attention.glsl"
