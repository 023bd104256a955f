#version 450
// The fused dense forward, lavapipe variant, 8-row x 2-texel register block
// (see matmul_bias_act_texel.glsl).
#extension GL_GOOGLE_include_directive : require
#define RM 8
#define RN4 2
#include "matmul_bias_act_texel.glsl"
