#version 450
#extension GL_GOOGLE_include_directive : require
// out[i, j] = indices[i] == j ? on : off over a flattened [n / depth, depth]
// output. A negative or too large index matches no j: a row of `off`.
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer Indices { int indices[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params {
  uint n;
  uint depth;
  float on_value;
  float off_value;
};

void main() {
  uint i = linear_index();
  if (i >= n) return;
  o[i] = indices[i / depth] == int(i % depth) ? on_value : off_value;
}
