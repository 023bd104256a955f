#version 450
// Gradient of a loss op (loss_values.comp or loss_sum.comp) wrt predictions or
// logits (WRT_LABELS false) or f32 labels (true):
//   g[i] = dy[i * dy_step] * scale * w[i]     (dy_step 0: the loss was summed)
//   pointwise: dx[i] = g[i] * d loss / d input at i, one invocation per element
//   SPARSE_XENT: dx[r, :] = g[r] * (softmax(x[r, :]) - one_hot(label[r])), one
//   invocation per row; a row whose label is out of range is NaN.
// The loss and its reduction's backward are one dispatch.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
#include "index.glsl"
layout(constant_id = 1) const uint OP = 0;
layout(constant_id = 2) const bool HAS_W = false;
layout(constant_id = 3) const bool WRT_LABELS = false;

layout(std430, binding = 0) readonly buffer Z { uint z_bits[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer DY { float dy[]; };
layout(std430, binding = 3) readonly buffer W { float w[]; };
layout(std430, binding = 4) writeonly buffer DX { float dx[]; };

#define LOSS_WRITES_DX
#include "losses.glsl"

void main() {
  uint i = linear_index();
  if (i >= n) return;
  float g = dy[i * dy_step] * scale;
  if (HAS_W) g *= weight_of(i);
  write_loss_grad(OP, i, g, WRT_LABELS);  // the loss itself is not needed here
}
