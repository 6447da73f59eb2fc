#version 450
#extension GL_GOOGLE_include_directive : require
// ATTENTION for head_dim <= 64 (attention.comp), storing the shares only:
// the gather pass's form, whose consumer combines them. TPR and RPT as in
// attention.comp: ir/ops.c sizes the shares for both. See attention.glsl.
#define TPR 8u
#define RPT 8u
#define ATT_CONTIG
#define ATT_PART
#include "attention.glsl"
