#version 450
#extension GL_GOOGLE_include_directive : require
// MATVEC_ADD_STAGE, f16 weights,
// with a tagged x it waits for whole (MV_TAG, MV_TAG_GATE, tag.glsl): see matvec.glsl.
#define MV_F16
#define MV_ADD
#define MV_STAGE
#define MV_TAG
#define MV_TAG_GATE
#include "matvec.glsl"
