#version 450
#extension GL_GOOGLE_include_directive : require
// y = x * scale where an element is kept, else 0. Whether element i is kept is
// a pure function of (graph seed, global step, op key, the row of the global
// batch it belongs to, its place in that row): a counter-based hash, so the
// gradient recomputes the same mask from the same step parameters instead of
// storing it, every device and run draws the same mask for the same seed and
// step, and an example draws the same mask whichever tower or process holds
// it. Rows are dimension 0 of x (the batch); the graph's first row is where
// its shard starts in the global batch. An element is kept when its 32-bit
// hash is >= threshold (= rate * 2^32, computed on the host), i.e. with
// probability 1 - rate.
// Each invocation takes PER consecutive elements and hashes their row's part
// once (the row's length a constant, so no run-time division on lavapipe,
// which divides lane by lane): the same bits as one element an invocation.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROW_ELEMENTS = 1;  // elements of x per row (over dimension 0)
#include "index.glsl"
#include "dropout_hash.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Step { uint step_params[]; };  // step, seed, first row
layout(std430, binding = 2) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params {
  uint n;
  uint threshold;
  uint key;  // the op's position in its graph mixed with the user's seed_offset
  float scale;
};

const uint PER = 4u;

void main() {
  uint first = linear_index() * PER;
  if (first >= n) return;
  uint seed = step_params[1], step = step_params[0], first_row = step_params[2];
  uint row = first / ROW_ELEMENTS, element = first % ROW_ELEMENTS;
  uint h = dropout_row_hash(seed, step, key, first_row + row);
  for (uint i = first; i < min(first + PER, n); ++i) {
    if (element == ROW_ELEMENTS) {
      element = 0u;
      h = dropout_row_hash(seed, step, key, first_row + ++row);
    }
    o[i] = dropout_element_hash(h, key, element) >= threshold ? x[i] * scale : 0.0;
    ++element;
  }
}
