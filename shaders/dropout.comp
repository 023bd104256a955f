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
layout(local_size_x_id = 0) in;
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
  uint row_elements;  // elements of x per row (x's size over dimension 0)
};

void main() {
  uint i = linear_index();
  if (i >= n) return;
  const uint h = dropout_hash(step_params[1], step_params[0], key, step_params[2] + i / row_elements,
                              i % row_elements);
  o[i] = h >= threshold ? x[i] * scale : 0.0;
}
