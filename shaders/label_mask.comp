#version 450
#extension GL_GOOGLE_include_directive : require
// A loss's ignore_index: OP 0 writes the weights, 1.0 where a label is not
// `ignore` and 0.0 where it is; OP 1 writes the labels with `ignore` replaced
// by class 0, which the weight 0 then cancels, so the loss kernel never sees
// a label outside the classes (it would give NaN, and 0 * NaN is NaN).
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0u;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer Labels { int labels[]; };
layout(std430, binding = 1) writeonly buffer Out { uint o[]; };  // f32 (OP 0) or i32 (OP 1) bits
layout(push_constant) uniform Params {
  uint n;
  int ignore;
};

void main() {
  uint i = linear_index();
  if (i >= n) return;
  const bool ignored = labels[i] == ignore;
  o[i] = OP == 0u ? floatBitsToUint(ignored ? 0.0 : 1.0) : uint(ignored ? 0 : labels[i]);
}
