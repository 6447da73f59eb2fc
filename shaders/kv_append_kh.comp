#version 450
#extension GL_GOOGLE_include_directive : require
// KV_APPEND into f16 caches, each value rounded to f16. See kv_append.glsl.
#define KV_KH
#include "kv_append.glsl"
