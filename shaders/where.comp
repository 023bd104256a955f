#version 450
#extension GL_GOOGLE_include_directive : require
// out = condition != 0 ? a : b, NumPy broadcasting over up to 4 dimensions
// (each operand read through strides, 0 along its broadcast dimensions). A
// select, not a blend: an infinity or NaN in the branch not taken never
// reaches the output.
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer C { float c[]; };
layout(std430, binding = 1) readonly buffer A { float a[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(std430, binding = 3) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params {
  uint n;
  uint pad0, pad1, pad2;
  uvec4 dims;  // output dimensions, outermost first, padded with 1 on the left
  uvec4 c_strides;
  uvec4 a_strides;
  uvec4 b_strides;
};

void main() {
  uint i = linear_index();
  if (i >= n) return;
  uint rest = i;
  uint ic = 0, ia = 0, ib = 0;
  for (int d = 3; d >= 0; --d) {
    uint k = rest % dims[d];
    rest /= dims[d];
    ic += k * c_strides[d];
    ia += k * a_strides[d];
    ib += k * b_strides[d];
  }
  o[i] = c[ic] != 0.0 ? a[ia] : b[ib];
}
