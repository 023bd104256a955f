#version 450
// Per-element losses times their weights: out[i] = w[i] * loss_at(i) over S
// (Reduction::None, and the per-element losses the weights' gradient needs).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
#include "index.glsl"
layout(constant_id = 1) const uint OP = 0;
layout(constant_id = 2) const bool HAS_W = false;

layout(std430, binding = 0) readonly buffer Z { uint z_bits[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer W { float w[]; };
layout(std430, binding = 3) writeonly buffer Out { float o[]; };

#include "losses.glsl"

void main() {
  uint i = linear_index();
  if (i >= n) return;
  float l = loss_at(OP, i);
  o[i] = HAS_W ? weight_of(i) * l : l;
}
