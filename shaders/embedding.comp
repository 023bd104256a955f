#version 450
#extension GL_GOOGLE_include_directive : require
// out[j, c] = params[ids[j], c], widened to f32 when params is a half table
// (TYPE 1 f16, 2 bf16: two elements to a 32-bit word, as every half tensor is
// stored). An id outside [0, rows) gives a row of zeros: a shader cannot raise
// an error, and reading outside params would read another tensor's memory (or
// fault).
//
// A table larger than the device's storage-buffer range is bound as windows of
// rows (runtime/graph/ops/embedding.cpp), one dispatch each, every window
// starting on a whole word: a dispatch writes the outputs whose id lies in its
// rows [first_row, end_row), the first one also those of ids below 0 and the
// last those of ids past the table.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TYPE = 0;
#include "index.glsl"
#include "half.glsl"

layout(std430, binding = 0) readonly buffer Params_ { uint params[]; };
layout(std430, binding = 1) readonly buffer Ids { int ids[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params {
  uint n;     // output elements
  uint dim;   // D
  uint rows;  // V
  uint first_row, end_row;  // the rows of this dispatch's window of params
  uint pad0, pad1, pad2;
};

float element(uint e) {
  if (TYPE == 0u) return uintBitsToFloat(params[e]);
  uint word = params[e >> 1];
  return uintBitsToFloat(to_f32_bits(TYPE, (e & 1u) != 0u ? word >> 16 : word & 0xffffu));
}

void main() {
  uint i = linear_index();
  if (i >= n) return;
  int id = ids[i / dim];
  bool below = id < int(first_row), above = id >= int(end_row);
  if ((below && first_row != 0) || (above && end_row != rows)) return;  // another window's
  o[i] = (!below && !above) ? element(uint(id - int(first_row)) * dim + i % dim) : 0.0;
}
