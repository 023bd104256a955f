#version 450
#extension GL_GOOGLE_include_directive : require
// out = a (op) b with NumPy broadcasting over up to 4 dimensions: each operand
// is read through strides, 0 along its broadcast dimensions. The op codes are
// BinaryKind in runtime/graph/ops/binary.cpp.
layout(local_size_x_id = 0) in;
#include "index.glsl"
layout(constant_id = 1) const uint OP = 0;
// Neither operand broadcast once the axes are folded (a residual add, a
// gradient sum): element i of each, without the index arithmetic (four
// run-time divisions an element, which lavapipe does lane by lane).
layout(constant_id = 2) const bool SAME_SHAPES = false;

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params {
  uint n;
  uint pad0, pad1, pad2;
  uvec4 dims;       // output dimensions, outermost first, padded with 1 on the left
  uvec4 a_strides;  // element strides of a per output dimension (0 = broadcast)
  uvec4 b_strides;
};

#include "activations.glsl"
#include "elementwise.glsl"

void main() {
  uint i = linear_index();
  if (i >= n) return;
  if (SAME_SHAPES) {
    o[i] = binary_op(OP, a[i], b[i]);
    return;
  }
  uint rest = i;
  uint ia = 0, ib = 0;
  for (int d = 3; d >= 0; --d) {
    uint c = rest % dims[d];
    rest /= dims[d];
    ia += c * a_strides[d];
    ib += c * b_strides[d];
  }
  o[i] = binary_op(OP, a[ia], b[ib]);
}
