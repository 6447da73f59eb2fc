#version 450
#extension GL_GOOGLE_include_directive : require
// attention.comp with a tagged output (ATT_TAG, tag.glsl): see attention.glsl.
#define TPR 8u
#define RPT 8u
#define ATT_CONTIG
#define ATT_TAG
#include "attention.glsl"
