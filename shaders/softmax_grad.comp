#version 450
#extension GL_GOOGLE_include_directive : require
// Backward of softmax.comp from its output y, one fused kernel instead of four
// elementwise ops (a dispatch costs tens of microseconds on lavapipe):
//   OP 0, softmax:      dx = y * (dy - sum(dy * y))
//   OP 1, log_softmax:  dx = dy - exp(y) * sum(dy)
// Same row layout as softmax.comp.
layout(local_size_x_id = 0) in;
#include "index.glsl"
layout(constant_id = 1) const uint OP = 0;

layout(std430, binding = 0) readonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer DY { float dy[]; };
layout(std430, binding = 2) writeonly buffer DX { float dx[]; };
layout(push_constant) uniform Params {
  uint rows;
  uint len;
  uint inner;
  float scale;  // of the forward's input: dx is the gradient wrt x of softmax(scale * x)
};

void main() {
  uint r = linear_index();
  if (r >= rows) return;
  uint base = (r / inner) * len * inner + r % inner;
  float s = 0.0;
  for (uint k = 0; k < len; ++k) {
    uint i = base + k * inner;
    s += OP == 0 ? dy[i] * y[i] : dy[i];
  }
  for (uint k = 0; k < len; ++k) {
    uint i = base + k * inner;
    dx[i] = scale * (OP == 0 ? y[i] * (dy[i] - s) : dy[i] - exp(y[i]) * s);
  }
}
