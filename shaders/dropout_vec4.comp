#version 450
#extension GL_GOOGLE_include_directive : require
// dropout.comp where a row's elements are a multiple of 4: an invocation's
// four elements are one vec4 of one row, loaded and stored at once (lavapipe
// makes every storage-buffer access a loop over its lanes, so one access
// beats four). The same mask and bits as dropout.comp.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROW_ELEMENTS = 4;  // elements of x per row, a multiple of 4
#include "dropout_hash.glsl"
#include "index.glsl"

layout(std430, binding = 0) readonly buffer X {
  vec4 x[];
};
layout(std430, binding = 1) readonly buffer Step {
  uint step_params[];
};  // step, seed, first row
layout(std430, binding = 2) writeonly buffer Out {
  vec4 o[];
};
layout(push_constant) uniform Params {
  uint n;  // elements (not vec4s)
  uint threshold;
  uint key;
  float scale;
};

void main() {
  uint v = linear_index();
  uint first = v * 4u;
  if (first >= n) return;
  uint row = first / ROW_ELEMENTS, element = first % ROW_ELEMENTS;
  uint h = dropout_row_hash(step_params[1], step_params[0], key, step_params[2] + row);
  bvec4 keep = bvec4(dropout_element_hash(h, key, element) >= threshold,
                     dropout_element_hash(h, key, element + 1u) >= threshold,
                     dropout_element_hash(h, key, element + 2u) >= threshold,
                     dropout_element_hash(h, key, element + 3u) >= threshold);
  o[v] = mix(vec4(0.0), x[v] * scale, keep);
}
