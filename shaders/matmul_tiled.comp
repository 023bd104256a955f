#version 450
// matmul, the variant for GPUs (see matmul_tiled.glsl).
#extension GL_GOOGLE_include_directive : require
#include "matmul_tiled.glsl"
