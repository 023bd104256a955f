// The chunked sum that global_norm.comp and finite_check.comp share: the
// buffer's segments cut into chunks of 256 floats, each chunk's sum of
// chunk_value(x) by a fixed tree (the includer defines chunk_value and
// PARTIALS, where the chunks' sums start in Out), so the same bits however
// the segments are bound.
layout(local_size_x_id = 0) in;  // 256; 64 with CHUNK_PER_INVOCATION
layout(constant_id = 1) const bool CHUNK_PER_INVOCATION = false;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Params {
  uint segments;
  uint chunks;  // over every segment
  uint pad0, pad1;
  uvec4 seg[];  // (first float, count, first chunk, -)
};
// [PARTIALS + c] chunk c's sum; the includer's results before it.
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
    v[k] = e < s.y ? chunk_value(x[s.x - base + e]) : 0.0;
  }
  for (uint width = kChunk / 2; width > 0; width /= 2) {
    for (uint k = 0; k < width; ++k) v[k] += v[k + width];
  }
  return v[0];
}


// Pass 0: every chunk's sum at norm[PARTIALS + c]. Returns false in pass 1.
bool chunk_pass() {
  uint t = gl_LocalInvocationID.x;
  if (pass == 0 && CHUNK_PER_INVOCATION) {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint c = first_chunk + gl_GlobalInvocationID.x; c < end_chunk; c += stride) {
      norm[PARTIALS + c] = chunk_sum(c);
    }
    return true;
  }
  if (pass == 0) {
    for (uint c = first_chunk + gl_WorkGroupID.x; c < end_chunk; c += gl_NumWorkGroups.x) {
      uvec4 s = seg[segment_of(c)];
      uint e = (c - s.z) * kChunk + t;
      // s.x - base wraps when the window starts past the segment's start; the
      // sum does not.
      float v = e < s.y ? chunk_value(x[s.x - base + e]) : 0.0;
      float sum = workgroup_sum(v);
      if (t == 0) norm[PARTIALS + c] = sum;
    }
    return true;
  }
  return false;
}

// Pass 1 (one workgroup): the sum of every chunk's sum, on every invocation.
float chunks_total() {
  uint t = gl_LocalInvocationID.x;
  float acc = 0.0;
  for (uint c = t; c < chunks; c += 256) acc += norm[PARTIALS + c];
  return workgroup_sum(acc);
}
