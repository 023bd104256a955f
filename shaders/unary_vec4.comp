#version 450
// unary.comp where the element count is a multiple of 4: an invocation maps
// one vec4 (lavapipe makes every storage-buffer access a loop over its lanes,
// so one access beats four). Each component goes through unary_op, so the
// bits are unary.comp's.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
#include "index.glsl"
layout(constant_id = 1) const uint OP = 0;

layout(std430, binding = 0) readonly buffer X {
  vec4 x[];
};
layout(std430, binding = 1) writeonly buffer Y {
  vec4 y[];
};
layout(push_constant) uniform Params {
  uint n;  // vec4s
  float alpha;
};

#include "activations.glsl"
#include "elementwise.glsl"

void main() {
  uint i = linear_index();
  if (i >= n) return;
  vec4 v = x[i];
  y[i] = vec4(unary_op(OP, v.x, alpha), unary_op(OP, v.y, alpha), unary_op(OP, v.z, alpha),
              unary_op(OP, v.w, alpha));
}
