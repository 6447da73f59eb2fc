#version 450
#extension GL_GOOGLE_include_directive : require
// attention_part.comp over f16 KV caches (ATT_KH; rows in flight as in
// attention_kh.comp). See attention.glsl.
#define TPR 8u
#define RPT 16u
#define KH_ROWS 16
#define ATT_CONTIG
#define ATT_PART
#define ATT_KH
#include "attention.glsl"
