#version 450
#extension GL_GOOGLE_include_directive : require
// Reduces x to a shape whose dimensions are those of x or 1 (keepdims form):
// each invocation makes one output element by looping over the reduced
// dimensions. OP 0 sums, 1 takes the maximum. Used for reduce_sum/mean/max and
// for summing broadcast gradients back to an operand's shape.
layout(local_size_x_id = 0) in;
#include "index.glsl"
layout(constant_id = 1) const uint OP = 0;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params {
  uint n;  // output elements
  uint pad0, pad1, pad2;
  uvec4 out_dims;   // padded with 1 on the left
  uvec4 x_strides;  // element strides of x per dimension
  uvec4 red_dims;   // x's size along reduced dimensions, 1 elsewhere
};

void main() {
  uint i = linear_index();
  if (i >= n) return;
  uint rest = i;
  uint base = 0;
  for (int d = 3; d >= 0; --d) {
    uint c = rest % out_dims[d];
    rest /= out_dims[d];
    base += c * x_strides[d];
  }
  float acc = OP == 0 ? 0.0 : -1.0 / 0.0;
  for (uint r0 = 0; r0 < red_dims[0]; ++r0)
    for (uint r1 = 0; r1 < red_dims[1]; ++r1)
      for (uint r2 = 0; r2 < red_dims[2]; ++r2)
        for (uint r3 = 0; r3 < red_dims[3]; ++r3) {
          float v = x[base + r0 * x_strides[0] + r1 * x_strides[1] + r2 * x_strides[2] +
                      r3 * x_strides[3]];
          acc = OP == 0 ? acc + v : max(acc, v);
        }
  o[i] = acc;
}
