#version 450
// y[i] = a * x[i] + y[i] for i < n. The self-test kernel of vkt-info and the
// runtime tests; one invocation per element, workgroup size set at pipeline
// creation (specialization constant 0).
layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) buffer Y { float y[]; };

layout(push_constant) uniform Params {
  float a;
  uint n;
};

void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < n) {
    y[i] = a * x[i] + y[i];
  }
}
