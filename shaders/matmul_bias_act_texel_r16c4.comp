#version 450
// The fused dense forward, lavapipe variant, 16-row x 4-texel register block
// (see matmul_bias_act_texel.glsl).
#extension GL_GOOGLE_include_directive : require
#define RM 16
#define RN4 4
#include "matmul_bias_act_texel.glsl"
