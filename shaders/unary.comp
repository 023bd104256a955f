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

void main() {
  uint i = linear_index();
  if (i >= n) return;
  float v = x[i];
  float r;
  switch (OP) {
    case 0: r = -v; break;
    case 1: r = abs(v); break;
    case 2: r = exp(v); break;
    case 3: r = log(v); break;
    case 4: r = sqrt(v); break;
    case 5: r = v * v; break;
    case 6: r = power(v, alpha); break;
    case 7: r = max(v, 0.0); break;
    case 8: r = v >= 0.0 ? v : alpha * v; break;
    case 9: r = v > 0.0 ? v : alpha * (exp(v) - 1.0); break;
    case 10: r = gelu_tanh(v); break;
    case 11: r = sigmoid(v); break;
    case 12: r = stable_tanh(v); break;
    case 13: r = softplus(v); break;
    case 14: r = sign(v); break;
    case 16: r = gelu_erf(v); break;
    default: r = v; break;  // 15: identity
  }
  y[i] = r;
}
