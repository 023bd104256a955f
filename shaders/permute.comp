#version 450
#extension GL_GOOGLE_include_directive : require
// out = x with its axes reordered: output element i has coordinates c (in the
// output's dims, up to 6, padded with 1 on the left) and reads x at
// sum(c[k] * S[k]), where S[k] is x's stride along the axis that output axis k
// takes. 32-bit words are copied, so f32 and i32 alike. Dims and strides are
// specialization constants: the coordinates come from divisions by constants.
// Where the last axis stays last (stride 1) an invocation copies RUN
// consecutive elements of it, its coordinates found once.
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(constant_id = 1) const uint O0 = 1;  // output dims
layout(constant_id = 2) const uint O1 = 1;
layout(constant_id = 3) const uint O2 = 1;
layout(constant_id = 4) const uint O3 = 1;
layout(constant_id = 5) const uint O4 = 1;
layout(constant_id = 6) const uint O5 = 1;
layout(constant_id = 7) const uint S0 = 0;  // x's strides, in output axis order
layout(constant_id = 8) const uint S1 = 0;
layout(constant_id = 9) const uint S2 = 0;
layout(constant_id = 10) const uint S3 = 0;
layout(constant_id = 11) const uint S4 = 0;
layout(constant_id = 12) const uint S5 = 0;
layout(constant_id = 13) const uint RUN = 1;  // divides O5; > 1 only where S5 is 1

layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) writeonly buffer Out { uint o[]; };
layout(push_constant) uniform Params {
  uint n;  // elements
};

void main() {
  uint i = linear_index() * RUN;
  if (i >= n) return;
  uint rest = i;
  uint from = (rest % O5) * S5;
  rest /= O5;
  from += (rest % O4) * S4;
  rest /= O4;
  from += (rest % O3) * S3;
  rest /= O3;
  from += (rest % O2) * S2;
  rest /= O2;
  from += (rest % O1) * S1;
  rest /= O1;
  from += rest * S0;
  for (uint r = 0u; r < RUN; ++r) o[i + r] = x[from + r];
}
