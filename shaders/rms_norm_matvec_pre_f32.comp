#version 450
#extension GL_GOOGLE_include_directive : require
// RMS_NORM_MATVEC (fused), f32 weights, reading a staged input (MV_PRE): see matvec.glsl.
#define MV_NORM
#define MV_ROWS 4u   // ir/ops.def: per_group (x and g read per workgroup: fewer, larger ones)
#define MV_PRE
#include "matvec.glsl"
