// The step's values, as both optimizer mains (optimizer_common.glsl, dense, and
// optimizer_sparse_common.glsl, sparse rows) read them, and the helpers that let
// one update() body (shaders/opt_<name>.glsl) compile for vec4 and for float.
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 2) readonly buffer Params {
  float lr;
  float h[11];  // the optimizer's values for this step (StepValues)
  float clip_value;
  float clip_norm;
  uint segments;
  uint total;  // elements (dense) or work items (sparse) of all segments
  // The segment table (optimizers/apply_op.cpp): its layout depends on the main.
  uvec4 seg[];
};
layout(std430, binding = 3) readonly buffer Norm { float global_norm[]; };
layout(std430, binding = 4) writeonly buffer Out { float used_lr[]; };
// Dynamic loss scaling (optimizers/loss_scaler.h): the gradients arrive
// multiplied by the loss scale, and the call's check (shaders/finite_check.comp)
// left (1 / scale, 1 if any of the call's gradients is inf or NaN). A call
// with one changes nothing, weights or slots, as GradScaler skips its step.
// 1 / scale is a power of two, so the unscaled gradients are the bits an
// unscaled run would have had, wherever no value overflowed or underflowed.
layout(constant_id = 1) const bool SCALED = false;
layout(std430, binding = SCALER_BINDING) readonly buffer Scaler { float scaler[]; };

// This invocation's copies of the step's values: read from the buffer once,
// not once per element (on lavapipe every buffer load is a loop over lanes).
float LR;
float H[11];
float INV_SCALE;  // 1 unless SCALED

void load_step_values() {
  LR = lr;
  for (int k = 0; k < 11; ++k) H[k] = h[k];
  INV_SCALE = SCALED ? scaler[0] : 1.0;
}

// True when the loss scaler found an inf or NaN among the call's gradients.
bool skip_step() { return SCALED && scaler[1] != 0.0; }

// The call's global norm, of the unscaled gradients.
float unscaled_global_norm() { return global_norm[0] * INV_SCALE; }

// Comparisons that GLSL spells differently for vectors and scalars.
bvec4 gt(vec4 a, vec4 b) { return greaterThan(a, b); }
bool gt(float a, float b) { return a > b; }
