// Shared by the layer-norm kernels: x is [rows, d], normalized along d. The
// includer declares `x`.
layout(push_constant) uniform Params {
  uint rows;
  uint d;
  float epsilon;
  uint block;  // rows per invocation of layer_norm_param_grad.comp
};

// Two passes (mean, then the mean of squared deviations): the one-pass
// E[x^2] - E[x]^2 loses every digit when the mean is large against the spread.
#ifdef LAYER_NORM_ROWS
// The row kernels (*_rows.comp): a workgroup of ROW_LANES per row, each lane
// folding every ROW_LANES-th element, row_tree.glsl's fixed tree combining them.
#include "row_tree.glsl"
uint row_index() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }
void row_stats(uint base, out float mean, out float rstd) {
  uint lane = gl_LocalInvocationID.x;
  float s = 0.0;
  for (uint k = lane; k < d; k += ROW_LANES) s += x[base + k];
  mean = row_sum(s) / float(d);
  float q = 0.0;
  for (uint k = lane; k < d; k += ROW_LANES) {
    float t = x[base + k] - mean;
    q += t * t;
  }
  rstd = 1.0 / sqrt(row_sum(q) / float(d) + epsilon);
}
#else
void row_stats(uint base, out float mean, out float rstd) {
  float s = 0.0;
  for (uint k = 0; k < d; ++k) s += x[base + k];
  mean = s / float(d);
  float q = 0.0;
  for (uint k = 0; k < d; ++k) {
    float t = x[base + k] - mean;
    q += t * t;
  }
  rstd = 1.0 / sqrt(q / float(d) + epsilon);
}
#endif
