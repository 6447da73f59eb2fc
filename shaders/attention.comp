#version 450
#extension GL_GOOGLE_include_directive : require
// ATTENTION for head_dim <= 64: eight invocations per cache row, two rows
// each in flight. See attention.glsl.
#define TPR 8u
#define RPT 2u
#include "attention.glsl"
