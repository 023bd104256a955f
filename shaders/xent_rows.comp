#version 450
// Sparse softmax cross-entropy with one workgroup of 64 per row of logits
// x [rows, classes] (runtime/graph/ops/losses.cpp takes it for large losses;
// loss_values.comp and loss_grad.comp give a row one invocation, and
// loss_sum.comp the whole loss one workgroup, which leaves a GPU idle over a
// language model's vocabulary):
//   GRAD false: o[r] = w[r] * (logsumexp(x[r, :]) - x[r, label[r]])
//   GRAD true:  dx[r, :] = dy[r * dy_step] * scale * w[r]
//                          * (softmax(x[r, :]) - one_hot(label[r]))
// The row's maximum and sum of exponentials are row_tree.glsl's fixed trees,
// so the same bits every run; a label outside [0, classes) gives NaN.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;  // 64, always
layout(constant_id = 2) const bool HAS_W = false;
layout(constant_id = 3) const bool GRAD = false;

layout(std430, binding = 0) readonly buffer Z { uint z_bits[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer DY { float dy[]; };
layout(std430, binding = 3) readonly buffer W { float w[]; };
layout(std430, binding = 4) writeonly buffer Out { float o[]; };  // o[r] or dx[r, :]

#include "losses.glsl"
#include "row_tree.glsl"

void main() {
  uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (r >= n) return;  // the whole workgroup: r is the workgroup's
  uint lane = gl_LocalInvocationID.x, base = r * classes;
  int label = int(z_bits[r]);
  float weight = HAS_W ? weight_of(r) : 1.0;
  if (!label_ok(label)) {
    if (!GRAD) {
      if (lane == 0) o[r] = quiet_nan();
      return;
    }
    for (uint k = lane; k < classes; k += ROW_LANES) o[base + k] = quiet_nan();
    return;
  }
  float m = -1.0 / 0.0;
  for (uint k = lane; k < classes; k += ROW_LANES) m = max(m, x[base + k]);
  m = row_max(m);
  float s = 0.0;
  for (uint k = lane; k < classes; k += ROW_LANES) s += exp(x[base + k] - m);
  float ls = log(row_sum(s));
  if (!GRAD) {
    if (lane == 0) o[r] = weight * (ls - (x[base + uint(label)] - m));
    return;
  }
  float g = dy[r * dy_step] * scale * weight;
  for (uint k = lane; k < classes; k += ROW_LANES) {
    float p = exp(x[base + k] - m - ls);
    o[base + k] = g * (k == uint(label) ? p - 1.0 : p);
  }
}
