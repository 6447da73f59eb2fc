#version 450
#extension GL_GOOGLE_include_directive : require
// ATTENTION for head_dim <= 64: eight invocations per cache row, eight rows
// each in flight (ir/ops.c: attn_rows_per_pass). See attention.glsl.
#define TPR 8u
#define RPT 8u
#define ATT_CONTIG
#include "attention.glsl"
