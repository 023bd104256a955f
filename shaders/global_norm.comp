#version 450
// sqrt(sum of squares) over segments of a buffer (the gradients a call clips
// by their global norm), in two passes whose sums run in a fixed order:
//   0 each segment is cut into chunks of 256 floats from its start; a
//     workgroup sums a chunk's squares by a fixed tree and writes the sum to
//     partial[c] (c counts chunks over the segments in order); workgroups
//     take chunks in turn, so many run at once;
//   1 one workgroup sums the partials (invocation t those at t, t + 256, ...,
//     then a tree) and writes the norm.
// (shaders/chunk_sum.glsl, shared with finite_check.comp.)
// The buffer is bound as windows of at most the device's storage-buffer range
// (optimizers/global_norm.cpp), several pass-0 dispatches when it spans more;
// a window holds whole chunks, so each chunk's sum, and the norm, are the
// same bits however the segments are split.
// CHUNK_PER_INVOCATION (pass 0 on CPU devices, where a barrier is a switch
// between lane groups): each invocation sums a whole chunk by the same tree in
// its own registers, so the same bits without a barrier.
#extension GL_GOOGLE_include_directive : require
#define PARTIALS 1  // [0] the norm, [1 + c] chunk c's sum of squares
float chunk_value(float a) { return a * a; }
#include "chunk_sum.glsl"

void main() {
  if (chunk_pass()) return;
  float sum = chunks_total();
  if (gl_LocalInvocationID.x == 0) norm[0] = sqrt(sum);
}
