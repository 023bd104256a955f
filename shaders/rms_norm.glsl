// Shared by the RMS-norm kernels: x is [rows, d], scaled along d by
//   rstd = 1 / sqrt(mean(x^2) + epsilon).
// The push constants are layer_norm.glsl's, so the gradient to gamma is
// layer_norm_param_grad.comp's (stats (0, rstd): xhat = x * rstd). The
// includer declares `x`.
layout(push_constant) uniform Params {
  uint rows;
  uint d;
  float epsilon;
  uint block;  // rows per invocation of layer_norm_param_grad.comp
};

#ifdef RMS_NORM_ROWS
// The row kernels (*_rows.comp): a workgroup of ROW_LANES per row, each lane
// folding every ROW_LANES-th element, row_tree.glsl's fixed tree combining them.
#include "row_tree.glsl"
uint row_index() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }
float row_rstd(uint base) {
  float q = 0.0;
  for (uint k = gl_LocalInvocationID.x; k < d; k += ROW_LANES) {
    float v = x[base + k];
    q += v * v;
  }
  return 1.0 / sqrt(row_sum(q) / float(d) + epsilon);
}
#else
float row_rstd(uint base) {
  float q = 0.0;
  for (uint k = 0; k < d; ++k) {
    float v = x[base + k];
    q += v * v;
  }
  return 1.0 / sqrt(q / float(d) + epsilon);
}
#endif
