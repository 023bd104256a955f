#version 450
// unary_grad.comp where the element count is a multiple of 4: an invocation
// takes one vec4 of each operand (see unary_vec4.comp); the same bits.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
#include "index.glsl"
layout(constant_id = 1) const uint OP = 0;

layout(std430, binding = 0) readonly buffer X {
  vec4 x[];
};
layout(std430, binding = 1) readonly buffer Y {
  vec4 y[];
};
layout(std430, binding = 2) readonly buffer DY {
  vec4 dy[];
};
layout(std430, binding = 3) writeonly buffer DX {
  vec4 dx[];
};
layout(push_constant) uniform Params {
  uint n;  // vec4s
  float alpha;
};

#include "activations.glsl"
#include "unary_grad.glsl"

void main() {
  uint i = linear_index();
  if (i >= n) return;
  vec4 v = x[i], out_v = y[i];
  dx[i] = dy[i] * vec4(unary_derivative(OP, v.x, out_v.x, alpha),
                       unary_derivative(OP, v.y, out_v.y, alpha),
                       unary_derivative(OP, v.z, out_v.z, alpha),
                       unary_derivative(OP, v.w, out_v.w, alpha));
}
