#version 450
// y = f(x) elementwise; f chosen by the OP specialization constant (the codes
// are UnaryKind in runtime/graph/ops/unary.cpp). ALPHA is the op's parameter:
// leaky_relu slope, elu alpha, pow exponent.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
#include "index.glsl"
layout(constant_id = 1) const uint OP = 0;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params {
  uint n;
  float alpha;
};

#include "activations.glsl"
#include "elementwise.glsl"

void main() {
  uint i = linear_index();
  if (i < n) y[i] = unary_op(OP, x[i], alpha);
}
