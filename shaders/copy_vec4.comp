#version 450
// dst = src, n vec4s: the shader half of the device's copy bandwidth
// (bench/device_roof.cpp). A grid-stride loop, so the bench picks the number
// of invocations (a few workgroups on a CPU device, many on a GPU) and
// neighbouring invocations touch neighbouring vec4s on every pass.
layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) readonly buffer Src { vec4 src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Dst { vec4 dst[]; };

layout(push_constant) uniform Params { uint n; };

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) {
    dst[i] = src[i];
  }
}
