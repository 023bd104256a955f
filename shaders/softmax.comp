#version 450
#extension GL_GOOGLE_include_directive : require
// Softmax (OP 0) or log_softmax (OP 1) along one axis. x is read as
// [outer, len, inner]; each invocation owns one (outer, inner) row, strided by
// `inner`, and makes three passes over it: the maximum, the sum of exp(x - max),
// then the outputs. Subtracting the maximum keeps exp() at most 1, so no logit
// overflows, and log_softmax never takes log(0).
layout(local_size_x_id = 0) in;
#include "index.glsl"
layout(constant_id = 1) const uint OP = 0;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params {
  uint rows;  // outer * inner
  uint len;   // size of the softmax axis
  uint inner; // elements after the axis: the stride along it
};

void main() {
  uint r = linear_index();
  if (r >= rows) return;
  uint base = (r / inner) * len * inner + r % inner;
  float m = -1.0 / 0.0;
  for (uint k = 0; k < len; ++k) m = max(m, x[base + k * inner]);
  float s = 0.0;
  for (uint k = 0; k < len; ++k) s += exp(x[base + k * inner] - m);
  if (OP == 0) {
    float inv = 1.0 / s;
    for (uint k = 0; k < len; ++k) y[base + k * inner] = exp(x[base + k * inner] - m) * inv;
  } else {
    // (x - m) first: exact for x near m, where x - (m + log(s)) would lose the
    // low bits of log(s) to a large m.
    float ls = log(s);
    for (uint k = 0; k < len; ++k) y[base + k * inner] = (x[base + k * inner] - m) - ls;
  }
}
