#version 450
#extension GL_GOOGLE_include_directive : require
// ATTENTION for head_dim <= 256: 32 invocations per cache row, one row each
// in flight. See attention.glsl.
#define TPR 32u
#define RPT 1u
#include "attention.glsl"
