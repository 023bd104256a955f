#version 450
#extension GL_GOOGLE_include_directive : require
// out = x with its axes reordered: output element i has coordinates c (in the
// output's dims, up to 6, padded with 1 on the left) and reads x at
// sum(c[k] * S[k]), where S[k] is x's stride along the axis that output axis k
// takes. 32-bit words are copied, so f32 and i32 alike.
// Where the last axis stays last and is a multiple of 4 long,
// permute_vec4.comp copies 4 elements an invocation.
layout(local_size_x_id = 0) in;
#include "index.glsl"
#include "permute.glsl"

layout(std430, binding = 0) readonly buffer X {
  uint x[];
};
layout(std430, binding = 1) writeonly buffer Out {
  uint o[];
};
layout(push_constant) uniform Params {
  uint n;  // elements
};

void main() {
  uint i = linear_index();
  if (i < n) o[i] = x[permuted_source(i)];
}
