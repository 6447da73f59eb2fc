#version 450
#extension GL_GOOGLE_include_directive : require
// KV_APPEND over f32 caches. See kv_append.glsl.
#include "kv_append.glsl"
