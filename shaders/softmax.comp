#version 450
#extension GL_GOOGLE_include_directive : require
// Softmax (OP 0) or log_softmax (OP 1) along one axis. x is read as
// [outer, len, inner]; each invocation owns one (outer, inner) row, strided by
// `inner`, and makes three passes over it: the maximum, the sum of exp(x - max),
// then the outputs. Subtracting the maximum keeps exp() at most 1, so no logit
// overflows, and log_softmax never takes log(0). The input is scale * x, and
// with `queries` > 0 (the last axis only) key k of row r is masked (weight 0)
// when k > r % queries + len - queries: attention's scaled, causal softmax in
// one pass, where a scale op and a select would each make one more.
layout(local_size_x_id = 0) in;
#include "index.glsl"
layout(constant_id = 1) const uint OP = 0;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params {
  uint rows;  // outer * inner
  uint len;   // size of the softmax axis
  uint inner; // elements after the axis: the stride along it
  float scale;
  uint queries;  // causal mask: queries per matrix (0: none)
};

const float NEG_INF = -1.0 / 0.0;

float at(uint r, uint base, uint k) {
  if (queries != 0u && int(k) > int(r % queries) + int(len) - int(queries)) return NEG_INF;
  return scale * x[base + k * inner];
}

void main() {
  uint r = linear_index();
  if (r >= rows) return;
  uint base = (r / inner) * len * inner + r % inner;
  float m = NEG_INF;
  for (uint k = 0; k < len; ++k) m = max(m, at(r, base, k));
  float s = 0.0;
  for (uint k = 0; k < len; ++k) s += exp(at(r, base, k) - m);
  if (OP == 0) {
    float inv = 1.0 / s;
    for (uint k = 0; k < len; ++k) y[base + k * inner] = exp(at(r, base, k) - m) * inv;
  } else {
    // (x - m) first: exact for x near m, where x - (m + log(s)) would lose the
    // low bits of log(s) to a large m.
    float ls = log(s);
    for (uint k = 0; k < len; ++k) y[base + k * inner] = (at(r, base, k) - m) - ls;
  }
}
