#version 450
// A split-K product of half matrices (TYPE 1 f16, 2 bf16): each slice's f32
// partial sums of matmul_half_tiled.comp's product, which sum_slices.comp adds
// in slice order before the one rounding to TYPE (a cast), as the f32 kernel
// splits its products (matmul_tiled.glsl: SLICES, KSLICE).
#extension GL_GOOGLE_include_directive : require
#define MATMUL_CUSTOM_OPERANDS
#define MATMUL_WORD_OPERANDS
layout(constant_id = 18) const uint TYPE = 1u;
#include "half.glsl"
#include "matmul_tiled.glsl"
#include "matmul_half_operands.glsl"
