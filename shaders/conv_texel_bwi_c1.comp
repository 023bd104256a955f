#version 450
// conv2d, lavapipe variant: the input gradient, 16-row x 1-texel register block (see conv_texel.glsl).
#extension GL_GOOGLE_include_directive : require
#define CONV_GEMM 1
#define RN4 1
#include "conv_texel.glsl"
