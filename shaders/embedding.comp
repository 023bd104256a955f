#version 450
#extension GL_GOOGLE_include_directive : require
// out[j, c] = params[ids[j], c]. An id outside [0, rows) gives a row of zeros:
// a shader cannot raise an error, and reading outside params would read another
// tensor's memory (or fault).
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer Params_ { float params[]; };
layout(std430, binding = 1) readonly buffer Ids { int ids[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params {
  uint n;     // output elements
  uint dim;   // D
  uint rows;  // V
  uint pad0;
};

void main() {
  uint i = linear_index();
  if (i >= n) return;
  int id = ids[i / dim];
  o[i] = (id >= 0 && uint(id) < rows) ? params[uint(id) * dim + i % dim] : 0.0;
}
