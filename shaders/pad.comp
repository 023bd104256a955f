#version 450
#extension GL_GOOGLE_include_directive : require
// Copies x into a block of the output and fills the rest with `value`: output
// element at coordinates c reads x at c - offset when that lies inside x. A
// positive offset pads (pad); a negative one cuts a block out (its gradient),
// where every element lies inside.
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params {
  uint n;  // output elements
  float value;
  uint pad0, pad1;
  uvec4 out_dims;  // padded with 1 on the left
  uvec4 in_dims;
  ivec4 offset;    // where x's first element lies in the output, per dimension
};

void main() {
  uint i = linear_index();
  if (i >= n) return;
  uint rest = i;
  uint src = 0;
  uint stride = 1;
  bool inside = true;
  for (int k = 3; k >= 0; --k) {
    int at = int(rest % out_dims[k]) - offset[k];
    rest /= out_dims[k];
    inside = inside && at >= 0 && at < int(in_dims[k]);
    src += uint(at) * stride;
    stride *= in_dims[k];
  }
  o[i] = inside ? x[src] : value;
}
