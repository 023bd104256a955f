#version 450
// x viewed as [R, n] reduced over its R rows to [n], for few outputs over many
// rows (a batch norm's moments, a bias gradient, a loss): one workgroup per
// output, each invocation folding every WG-th row, then a fixed-order tree in
// shared memory, so the result has the same bits every run. (reduce.comp's
// one invocation per output leaves the device nearly idle there: 32 outputs
// of 50,000 rows each run on 32 invocations.) OP 0 sums, 1 takes the maximum.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params {
  uint rows;  // R
  uint n;     // outputs (columns of x)
};

shared float partial[gl_WorkGroupSize.x];

float fold(float a, float b) { return OP == 0u ? a + b : max(a, b); }

void main() {
  uint column = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  uint lane = gl_LocalInvocationID.x;
  float acc = OP == 0u ? 0.0 : -1.0 / 0.0;
  if (column < n) {
    for (uint r = lane; r < rows; r += gl_WorkGroupSize.x) acc = fold(acc, x[r * n + column]);
  }
  partial[lane] = acc;
  barrier();
  for (uint half_ = gl_WorkGroupSize.x / 2u; half_ > 0u; half_ /= 2u) {
    if (lane < half_) partial[lane] = fold(partial[lane], partial[lane + half_]);
    barrier();
  }
  if (lane == 0u && column < n) o[column] = partial[0];
}
