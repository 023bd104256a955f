#version 450
// act(op(A) * op(B) + bias), the fused dense forward on matmul_tiled.glsl (the
// variant for GPUs): bias and activation applied as each element is stored.
#extension GL_GOOGLE_include_directive : require
float bias_act(uint n, float v);
#define MATMUL_EPILOGUE(m, n, v) bias_act(n, v)
#include "matmul_tiled.glsl"

layout(std430, binding = 3) readonly buffer Bias { float bias[]; };
layout(constant_id = 9) const uint ACT = 0;  // layers::Activation (dense_act.glsl)

#include "activations.glsl"
#include "dense_act.glsl"

float bias_act(uint n, float v) { return dense_act(ACT, v + bias[n]); }
