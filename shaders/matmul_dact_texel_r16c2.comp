#version 450
// The fused dense backward products, lavapipe variant, 16-row x 2-texel
// register block (see matmul_dact_texel.glsl).
#extension GL_GOOGLE_include_directive : require
#define RM 16
#define RN4 2
#include "matmul_dact_texel.glsl"
