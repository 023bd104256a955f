#version 450
// out[i] = in[i] * SCALE + OFFSET, with SCALE and OFFSET fixed when the
// pipeline is created (specialization constants 1 and 2): the test that a
// kernel's behaviour follows its specialization constants.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const float SCALE = 1.0;
layout(constant_id = 2) const float OFFSET = 0.0;

layout(std430, set = 0, binding = 0) readonly buffer In { float src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { float dst[]; };

layout(push_constant) uniform Params { uint n; };

void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < n) {
    dst[i] = src[i] * SCALE + OFFSET;
  }
}
