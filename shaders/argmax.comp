#version 450
#extension GL_GOOGLE_include_directive : require
// The index of the maximum along one axis (rows as in softmax.comp), as i32.
// A strict comparison keeps the first index on ties, as TensorFlow does; NaNs
// never compare greater, so they are skipped unless the whole row is NaN (0).
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { int o[]; };
layout(push_constant) uniform Params {
  uint rows;
  uint len;
  uint inner;
};

void main() {
  uint r = linear_index();
  if (r >= rows) return;
  uint base = (r / inner) * len * inner + r % inner;
  float best = -1.0 / 0.0;
  int index = 0;
  for (uint k = 0; k < len; ++k) {
    float v = x[base + k * inner];
    if (v > best) {
      best = v;
      index = int(k);
    }
  }
  o[r] = index;
}
