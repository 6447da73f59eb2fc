#version 450
#extension GL_GOOGLE_include_directive : require
// attention_kh.comp with a tagged output (ATT_TAG, tag.glsl): see attention.glsl.
#define TPR 8u
#define RPT 16u
#define KH_ROWS 16
#define ATT_CONTIG
#define ATT_KH
#define ATT_TAG
#include "attention.glsl"
