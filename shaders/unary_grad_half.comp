#version 450
// unary_grad.comp where the forward values x and y are stored in a half type
// (TYPE 1 f16, 2 bf16: the precision policy keeps an activation only as the
// half copy the next product reads). Both are widened exactly; dy and dx stay
// f32. Two elements an invocation, so each half word is read whole; an odd
// count's last word has one element.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
#include "index.glsl"
#include "half.glsl"
layout(constant_id = 1) const uint OP = 0;
layout(constant_id = 2) const uint TYPE = 1;

layout(std430, binding = 0) readonly buffer X {
  uint x[];
};
layout(std430, binding = 1) readonly buffer Y {
  uint y[];
};
layout(std430, binding = 2) readonly buffer DY {
  float dy[];
};
layout(std430, binding = 3) writeonly buffer DX {
  float dx[];
};
layout(push_constant) uniform Params {
  uint n;  // elements
  float alpha;
};

#include "activations.glsl"
#include "unary_grad.glsl"

float widened(uint word, uint half_index) {
  return uintBitsToFloat(to_f32_bits(TYPE, (word >> (16u * half_index)) & 0xffffu));
}

void main() {
  uint pair = linear_index();
  uint first = pair * 2u;
  if (first >= n) return;
  uint xw = x[pair], yw = y[pair];
  dx[first] = dy[first] * unary_derivative(OP, widened(xw, 0u), widened(yw, 0u), alpha);
  if (first + 1u < n) {
    dx[first + 1u] = dy[first + 1u] * unary_derivative(OP, widened(xw, 1u), widened(yw, 1u), alpha);
  }
}
