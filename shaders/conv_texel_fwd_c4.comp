#version 450
// conv2d, lavapipe variant: forward, 16-row x 4-texel register block (see conv_texel.glsl).
#extension GL_GOOGLE_include_directive : require
#define CONV_GEMM 0
#define RN4 4
#include "conv_texel.glsl"
