#version 450
// sqrt(sum of squares) over segments of a buffer, by one workgroup: each
// invocation strides over the elements, then a tree in shared memory. One
// workgroup keeps the order of the sum fixed, so results repeat bit for bit.
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Params {
  uint segments;
  uint pad0, pad1, pad2;
  uvec4 seg[];  // (first float, count, -, -)
};
layout(std430, binding = 2) writeonly buffer Out { float norm[]; };

shared float partial[256];

void main() {
  uint t = gl_LocalInvocationID.x;
  float acc = 0.0;
  for (uint s = 0; s < segments; ++s) {
    for (uint j = t; j < seg[s].y; j += 256) {
      float v = x[seg[s].x + j];
      acc += v * v;
    }
  }
  partial[t] = acc;
  barrier();
  for (uint width = 128; width > 0; width /= 2) {
    if (t < width) partial[t] += partial[t + width];
    barrier();
  }
  if (t == 0) norm[0] = sqrt(partial[0]);
}
