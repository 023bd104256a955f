#version 450
// The dynamic loss scale's step, after every optimizer call of the step
// (optimizers/loss_scaler.cpp), as PyTorch's GradScaler.update(): a step with
// an inf or NaN gradient in any call halves the scale and restarts the count
// of good steps, and counts the skip; otherwise the count grows, and at
// growth_interval the scale doubles (unless that overflows) and the count
// restarts. The counts are floats: exact to 2^24.
layout(local_size_x = 1) in;

layout(std430, binding = 0) buffer Scale { float loss_scale[]; };
layout(std430, binding = 1) buffer GoodSteps { float good_steps[]; };
layout(std430, binding = 2) buffer Skipped { float skipped[]; };  // every skip so far
layout(std430, binding = 3) readonly buffer Check { float check[]; };  // the step's last check
// (the scale this step used, 1 if it was skipped)
layout(std430, binding = 4) writeonly buffer Out { float result[]; };
layout(push_constant) uniform Params { uint growth_interval; };

void main() {
  float scale = loss_scale[0];
  bool found = check[2] != 0.0;
  result[0] = scale;
  result[1] = found ? 1.0 : 0.0;
  if (found) {
    loss_scale[0] = scale * 0.5;
    good_steps[0] = 0.0;
    skipped[0] += 1.0;
    return;
  }
  float good = good_steps[0] + 1.0;
  if (good >= float(growth_interval)) {
    float grown = scale * 2.0;
    // An overflowing scale stays where it is; the count restarts all the same.
    if ((floatBitsToUint(grown) & 0x7f800000u) != 0x7f800000u) loss_scale[0] = grown;
    good = 0.0;
  }
  good_steps[0] = good;
}
