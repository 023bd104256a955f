#version 450
#extension GL_GOOGLE_include_directive : require
// Copies x into a block of the output and fills the rest with `value`: output
// element at coordinates c reads x at c - offset when that lies inside x. A
// positive offset pads (pad); a negative one cuts a block out (its gradient),
// where every element lies inside. Shapes are 4-D, padded with 1 on the left.
// They are specialization constants so that the coordinates come from
// divisions by constants (multiplies), not per-lane divides on lavapipe.
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(constant_id = 1) const uint O0 = 1;  // output dims
layout(constant_id = 2) const uint O1 = 1;
layout(constant_id = 3) const uint O2 = 1;
layout(constant_id = 4) const uint O3 = 1;
layout(constant_id = 5) const uint I0 = 1;  // input dims
layout(constant_id = 6) const uint I1 = 1;
layout(constant_id = 7) const uint I2 = 1;
layout(constant_id = 8) const uint I3 = 1;
layout(constant_id = 9) const int F0 = 0;  // offsets: where x's first element lies
layout(constant_id = 10) const int F1 = 0;
layout(constant_id = 11) const int F2 = 0;
layout(constant_id = 12) const int F3 = 0;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params {
  uint n;  // output elements
  float value;
};

void main() {
  uint i = linear_index();
  if (i >= n) return;
  ivec4 at = ivec4(int(i / (O3 * O2 * O1)), int((i / (O3 * O2)) % O1), int((i / O3) % O2),
                   int(i % O3)) - ivec4(F0, F1, F2, F3);
  ivec4 dims = ivec4(I0, I1, I2, I3);
  bool inside = all(greaterThanEqual(at, ivec4(0))) && all(lessThan(at, dims));
  o[i] = inside ? x[((uint(at.x) * I1 + uint(at.y)) * I2 + uint(at.z)) * I3 + uint(at.w)] : value;
}
