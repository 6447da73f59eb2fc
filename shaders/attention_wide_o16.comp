#version 450
#extension GL_GOOGLE_include_directive : require
// ATTENTION for head_dim above 64 (attention_wide.comp), the output stored
// as f16 pairs for an f16 consumer (ATT_O16; the stage pass's half
// activations form). See attention.glsl.
#define TPR 32u
#define RPT 1u
#define ATT_O16
#include "attention.glsl"
