#version 450
#extension GL_GOOGLE_include_directive : require
// Pooling forward: OP 0 takes each window's maximum, OP 1 its mean over the
// cells inside the image. One invocation per output element. The maximum is the
// first largest cell in row-major window order (strict >), which is the cell
// pool_max_grad.comp sends the gradient to.
layout(local_size_x_id = 0) in;
#include "index.glsl"
layout(constant_id = 1) const uint OP = 0;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
#include "pool_params.glsl"

void main() {
  uint i = linear_index();
  if (i >= n) return;
  uint ch = i % c;
  uint r = i / c;
  uint col = r % ow;
  r /= ow;
  uint row = r % oh;
  uint b = r / oh;
  ivec2 lo, hi;
  window_range(row, col, lo, hi);
  // The host guarantees every window holds an image cell, so `best` is always set.
  float best = x[x_index(b, uint(lo.x), uint(lo.y), ch)];
  float sum = 0.0;
  for (int u = lo.x; u < hi.x; ++u) {
    for (int v = lo.y; v < hi.y; ++v) {
      float value = x[x_index(b, uint(u), uint(v), ch)];
      if (OP == 0) {
        if (value > best) best = value;
      } else {
        sum += value;
      }
    }
  }
  y[i] = OP == 0 ? best : sum / float((hi.x - lo.x) * (hi.y - lo.y));
}
