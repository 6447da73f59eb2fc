#version 450
#extension GL_GOOGLE_include_directive : require
// ATTENTION for head_dim <= 64 (attention.comp), storing the shares only:
// the gather pass's form, whose consumer combines them. See attention.glsl.
#define TPR 8u
#define RPT 4u
#define ATT_CONTIG
#define ATT_PART
#include "attention.glsl"
