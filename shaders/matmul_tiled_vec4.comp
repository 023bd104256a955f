#version 450
// matmul for GPUs with vec4 loads of A and B (see matmul_tiled.glsl): for
// products whose M, N and K are multiples of 4.
#extension GL_GOOGLE_include_directive : require
#define MATMUL_VEC4_LOADS
#include "matmul_tiled.glsl"
