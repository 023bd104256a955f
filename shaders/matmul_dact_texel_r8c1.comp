#version 450
// The fused dense backward products, lavapipe variant, 8-row x 1-texel
// register block (see matmul_dact_texel.glsl).
#extension GL_GOOGLE_include_directive : require
#define RM 8
#define RN4 1
#include "matmul_dact_texel.glsl"
