#version 450
// dx = dy * f'(x) for the unary op OP (same codes as unary.comp), using the
// forward output y where that is cheaper (exp, sqrt, sigmoid, tanh, elu).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
#include "index.glsl"
layout(constant_id = 1) const uint OP = 0;

layout(std430, binding = 0) readonly buffer X {
  float x[];
};
layout(std430, binding = 1) readonly buffer Y {
  float y[];
};
layout(std430, binding = 2) readonly buffer DY {
  float dy[];
};
layout(std430, binding = 3) writeonly buffer DX {
  float dx[];
};
layout(push_constant) uniform Params {
  uint n;
  float alpha;
};

#include "activations.glsl"
#include "unary_grad.glsl"

void main() {
  uint i = linear_index();
  if (i < n) dx[i] = dy[i] * unary_derivative(OP, x[i], y[i], alpha);
}
