#version 450
// binary.comp where neither operand is broadcast and the element count is a
// multiple of 4 (a residual add, a gradient sum): an invocation takes one vec4
// of each operand (see unary_vec4.comp). Each component goes through
// binary_op, so the bits are binary.comp's.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
#include "index.glsl"
layout(constant_id = 1) const uint OP = 0;

layout(std430, binding = 0) readonly buffer A {
  vec4 a[];
};
layout(std430, binding = 1) readonly buffer B {
  vec4 b[];
};
layout(std430, binding = 2) writeonly buffer Out {
  vec4 o[];
};
layout(push_constant) uniform Params {
  uint n;  // vec4s
};

#include "activations.glsl"
#include "elementwise.glsl"

void main() {
  uint i = linear_index();
  if (i >= n) return;
  vec4 x = a[i], y = b[i];
  o[i] = vec4(binary_op(OP, x.x, y.x), binary_op(OP, x.y, y.y), binary_op(OP, x.z, y.z),
              binary_op(OP, x.w, y.w));
}
