#version 450
// Backward of softmax_rows.comp from its output y, one workgroup of 64 per
// row (x as [rows, len]), the row's sum by row_tree.glsl's fixed tree:
//   OP 0, softmax:      dx = y * (dy - sum(dy * y))
//   OP 1, log_softmax:  dx = dy - exp(y) * sum(dy)
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;  // 64, always
layout(constant_id = 1) const uint OP = 0;

layout(std430, binding = 0) readonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer DY { float dy[]; };
layout(std430, binding = 2) writeonly buffer DX { float dx[]; };
layout(push_constant) uniform Params {
  uint rows;
  uint len;
  float scale;  // of the forward's input: dx is the gradient wrt x of softmax(scale * x)
};

#include "row_tree.glsl"

void main() {
  uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (r >= rows) return;
  uint lane = gl_LocalInvocationID.x, base = r * len;
  float s = 0.0;
  for (uint k = lane; k < len; k += ROW_LANES) {
    uint i = base + k;
    s += OP == 0 ? dy[i] * y[i] : dy[i];
  }
  s = row_sum(s);
  for (uint k = lane; k < len; k += ROW_LANES) {
    uint i = base + k;
    dx[i] = scale * (OP == 0 ? y[i] * (dy[i] - s) : dy[i] - exp(y[i]) * s);
  }
}
