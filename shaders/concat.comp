#version 450
#extension GL_GOOGLE_include_directive : require
// Places up to 4 pieces into their blocks of an output along one axis (concat,
// and the zero-padded gradients of slice/split: the op fills the gaps with zeros
// first). Both sides are viewed as [outer, inner]: piece p's element e goes to
// row e / inner[p], column offset[p] + e % inner[p] of the output. Values are
// copied as 32-bit words, so f32 and i32 tensors alike. Pieces a dispatch does
// not use have an empty range in `ends`.
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer S0 { uint s0[]; };
layout(std430, binding = 1) readonly buffer S1 { uint s1[]; };
layout(std430, binding = 2) readonly buffer S2 { uint s2[]; };
layout(std430, binding = 3) readonly buffer S3 { uint s3[]; };
layout(std430, binding = 4) writeonly buffer Out { uint o[]; };
layout(push_constant) uniform Params {
  uint n;          // elements of all pieces of this dispatch (= ends.w)
  uint out_inner;  // output elements per outer index
  uint pad0, pad1;
  uvec4 ends;      // running element counts: piece p covers [ends[p-1], ends[p])
  uvec4 inner;     // elements per outer index of each piece
  uvec4 offset;    // where each piece's block starts within an output row
};

void main() {
  uint i = linear_index();
  if (i >= n) return;
  uint p = i < ends.x ? 0u : (i < ends.y ? 1u : (i < ends.z ? 2u : 3u));
  uint e = i - (p == 0u ? 0u : ends[p - 1u]);
  uint v;
  switch (p) {
    case 0u: v = s0[e]; break;
    case 1u: v = s1[e]; break;
    case 2u: v = s2[e]; break;
    default: v = s3[e]; break;
  }
  o[(e / inner[p]) * out_inner + offset[p] + e % inner[p]] = v;
}
