#version 450
#extension GL_GOOGLE_include_directive : require
// RMS_NORM_MATVEC_ARGMAX_LOG (fused: the token also logged, MV_LOG), f32
// weights: see matvec.glsl.
#define MV_NORM
#define MV_ARGMAX
#define MV_LOG
#define MV_ROWS 4u   // ir/ops.def: per_group
#include "matvec.glsl"
