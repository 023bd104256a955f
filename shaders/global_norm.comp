#version 450
// sqrt(sum of squares) over segments of a buffer (the gradients a call clips
// by their global norm), in two passes whose sums run in a fixed order:
//   0 each segment is cut into chunks of 256 floats from its start; a
//     workgroup sums a chunk's squares by a fixed tree and writes the sum to
//     partial[c] (c counts chunks over the segments in order); workgroups
//     take chunks in turn, so many run at once;
//   1 one workgroup sums the partials (invocation t those at t, t + 256, ...,
//     then a tree) and writes the norm.
// The buffer is bound as windows of at most the device's storage-buffer range
// (optimizers/global_norm.cpp), several pass-0 dispatches when it spans more;
// a window holds whole chunks, so each chunk's sum, and the norm, are the
// same bits however the segments are split.
// CHUNK_PER_INVOCATION (pass 0 on CPU devices, where a barrier is a switch
// between lane groups): each invocation sums a whole chunk by the same tree in
// its own registers, so the same bits without a barrier.
layout(local_size_x_id = 0) in;  // 256; 64 with CHUNK_PER_INVOCATION
layout(constant_id = 1) const bool CHUNK_PER_INVOCATION = false;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Params {
  uint segments;
  uint chunks;  // over every segment
  uint pad0, pad1;
  uvec4 seg[];  // (first float, count, first chunk, -)
};
// [0] the norm, [1 + c] chunk c's sum of squares.
layout(std430, binding = 2) buffer Out { float norm[]; };
layout(push_constant) uniform Window {
  uint first_segment, end_segment;
  uint first_chunk, end_chunk;  // this dispatch's chunks, counted over every segment
  uint base;                    // floats of the buffer before the window
  uint pass;
};

const uint kChunk = 256;
shared float partial[256];

// The workgroup's sum of `v`, by a fixed tree; every invocation must call it.
float workgroup_sum(float v) {
  uint t = gl_LocalInvocationID.x;
  partial[t] = v;
  barrier();
  for (uint width = 128; width > 0; width /= 2) {
    if (t < width) partial[t] += partial[t + width];
    barrier();
  }
  float sum = partial[0];
  barrier();  // before partial is written again
  return sum;
}

// The segment that chunk c lies in: the last of [first_segment, end_segment)
// whose first chunk is at or before c.
uint segment_of(uint c) {
  uint lo = first_segment, hi = end_segment - 1;
  while (lo < hi) {
    uint mid = (lo + hi + 1) / 2;
    if (seg[mid].z <= c) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// Chunk c's sum of squares by workgroup_sum's tree, on one invocation.
float chunk_sum(uint c) {
  uvec4 s = seg[segment_of(c)];
  float v[kChunk];
  for (uint k = 0; k < kChunk; ++k) {
    uint e = (c - s.z) * kChunk + k;
    float a = e < s.y ? x[s.x - base + e] : 0.0;
    v[k] = a * a;
  }
  for (uint width = kChunk / 2; width > 0; width /= 2) {
    for (uint k = 0; k < width; ++k) v[k] += v[k + width];
  }
  return v[0];
}

void main() {
  uint t = gl_LocalInvocationID.x;
  if (pass == 0 && CHUNK_PER_INVOCATION) {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint c = first_chunk + gl_GlobalInvocationID.x; c < end_chunk; c += stride) {
      norm[1 + c] = chunk_sum(c);
    }
    return;
  }
  if (pass == 0) {
    for (uint c = first_chunk + gl_WorkGroupID.x; c < end_chunk; c += gl_NumWorkGroups.x) {
      uvec4 s = seg[segment_of(c)];
      uint e = (c - s.z) * kChunk + t;
      // s.x - base wraps when the window starts past the segment's start; the
      // sum does not.
      float v = e < s.y ? x[s.x - base + e] : 0.0;
      float sum = workgroup_sum(v * v);
      if (t == 0) norm[1 + c] = sum;
    }
    return;
  }
  float acc = 0.0;
  for (uint c = t; c < chunks; c += 256) acc += norm[1 + c];
  float sum = workgroup_sum(acc);
  if (t == 0) norm[0] = sqrt(sum);
}
