#pragma once
// Updates of state that is no model weight, run once per training step.

#include "../tensor.h"

namespace vkt {

/// variable <- decay * variable + (1 - decay) * scale * value, in place, once
/// per run of every training Executor that computes `value` (the update is
/// registered with Graph::add_state_update, so nothing needs to fetch it). It
/// takes no gradient and is no training step: the global step does not advance
/// for it. `variable` must not be trainable; `value` has its shape. Returns the
/// new average.
///
///   vkt::Tensor mean = vkt::reduce_mean(x, 0);
///   vkt::assign_moving_average(moving_mean, mean, 0.99f);
Tensor assign_moving_average(const Tensor& variable, const Tensor& value, float decay,
                             float scale = 1.0f);

}  // namespace vkt
