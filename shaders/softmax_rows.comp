#version 450
// Softmax (OP 0) or log_softmax (OP 1) over the last axis, one workgroup of
// 64 per row: x is [rows, len]. Each invocation folds every 64th element,
// then a fixed tree in shared memory combines the 64 (the same pairs in the
// same order every run, on every device: the workgroup's size is fixed), for
// the maximum and then the sum of exp(x - max). softmax.comp's one invocation
// per row leaves a GPU nearly idle on a few long rows (attention scores).
// The input is scale * x, with softmax.comp's causal mask when queries > 0.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;  // 64, always
layout(constant_id = 1) const uint OP = 0;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params {
  uint rows;
  uint len;
  float scale;
  uint queries;  // causal mask: queries per matrix (0: none)
};

const float NEG_INF = -1.0 / 0.0;

float at(uint r, uint base, uint k) {
  if (queries != 0u && int(k) > int(r % queries) + int(len) - int(queries)) return NEG_INF;
  return scale * x[base + k];
}

#include "row_tree.glsl"

void main() {
  uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (r >= rows) return;  // the whole workgroup: r is the workgroup's
  uint lane = gl_LocalInvocationID.x, base = r * len;
  float m = NEG_INF;
  for (uint k = lane; k < len; k += ROW_LANES) m = max(m, at(r, base, k));
  m = row_max(m);
  float s = 0.0;
  for (uint k = lane; k < len; k += ROW_LANES) s += exp(at(r, base, k) - m);
  s = row_sum(s);
  if (OP == 0) {
    float inv = 1.0 / s;
    for (uint k = lane; k < len; k += ROW_LANES) y[base + k] = exp(at(r, base, k) - m) * inv;
  } else {
    float ls = log(s);  // (x - m) first, as softmax.comp
    for (uint k = lane; k < len; k += ROW_LANES) y[base + k] = (at(r, base, k) - m) - ls;
  }
}
