#version 450
// The fused dense backward products, lavapipe variant, 8-row x 4-texel
// register block (see matmul_dact_texel.glsl).
#extension GL_GOOGLE_include_directive : require
#define RM 8
#define RN4 4
#include "matmul_dact_texel.glsl"
