#version 450
#extension GL_GOOGLE_include_directive : require
// bias_add: y[i] = x[i] + bias[i % D] for x [..., D]. Its own kernel rather
// than the broadcasting add, whose 4-D index arithmetic costs more per element.
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params {
  uint n;  // elements of x
  uint d;  // length of bias
};

void main() {
  uint i = linear_index();
  if (i < n) y[i] = x[i] + bias[i % d];
}
