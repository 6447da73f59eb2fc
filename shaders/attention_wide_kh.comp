#version 450
#extension GL_GOOGLE_include_directive : require
// attention_wide.comp over f16 KV caches (ATT_KH). See attention.glsl.
#define TPR 32u
#define RPT 1u
#define KH_ROWS 1
#define ATT_KH
#include "attention.glsl"
