#version 450
// Batched matmul, lavapipe variant, 16-row x 4-texel register block
// (see matmul_batched_texel.glsl).
#extension GL_GOOGLE_include_directive : require
#define RM 16
#define RN4 4
#include "matmul_batched_texel.glsl"
