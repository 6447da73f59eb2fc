#version 450
#extension GL_GOOGLE_include_directive : require
// ATTENTION for head_dim <= 64 storing the shares only, each divided by its
// own sum and stored as f16 pairs (ATT_PART_H): the gather pass's half form,
// whose consumer (MV_COMB_H) loads a chunk of a share in one 16-byte load.
// TPR and RPT as in attention_part.comp. See attention.glsl.
#define TPR 8u
#define RPT 8u
#define ATT_CONTIG
#define ATT_PART
#define ATT_PART_H
#include "attention.glsl"
