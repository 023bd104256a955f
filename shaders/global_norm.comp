#version 450
// sqrt(sum of squares) over segments of a buffer, by one workgroup: each
// invocation strides over the elements, then a tree in shared memory. One
// workgroup keeps the order of the sum fixed, so results repeat bit for bit.
//
// The buffer is bound as a window of at most the device's storage-buffer range
// (optimizers/apply_op.cpp), so a long list of segments may take several
// dispatches: each covers segments [first_segment, end_segment), the first from
// element first_element, the last up to end_element, and hands its invocations'
// sums to the next through `carry`. Element j of a segment is always summed by
// invocation j % 256, in the same order, however the segments are split.
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Params {
  uint segments;
  uint pad0, pad1, pad2;
  uvec4 seg[];  // (first float, count, -, -)
};
layout(std430, binding = 2) writeonly buffer Out { float norm[]; };
layout(std430, binding = 3) buffer Carry { float carry[256]; };
layout(push_constant) uniform Window {
  uint first_segment, end_segment, first_element, end_element;
  uint base;  // floats of the buffer before the window
  uint first_dispatch, last_dispatch;
};

shared float partial[256];

void main() {
  uint t = gl_LocalInvocationID.x;
  float acc = first_dispatch != 0 ? 0.0 : carry[t];
  for (uint s = first_segment; s < end_segment; ++s) {
    uint from = s == first_segment ? first_element : 0;
    uint to = s + 1 == end_segment ? end_element : seg[s].y;
    uint at = seg[s].x - base;
    for (uint j = from + (t + 256 - from % 256) % 256; j < to; j += 256) {
      float v = x[at + j];
      acc += v * v;
    }
  }
  if (last_dispatch == 0) {
    carry[t] = acc;
    return;
  }
  partial[t] = acc;
  barrier();
  for (uint width = 128; width > 0; width /= 2) {
    if (t < width) partial[t] += partial[t + width];
    barrier();
  }
  if (t == 0) norm[0] = sqrt(partial[0]);
}
