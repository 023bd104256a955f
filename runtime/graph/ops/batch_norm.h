#pragma once
// Batch normalization: the layer, with its moving statistics.

#include <string>

#include "../tensor.h"

namespace vkt::layers {

/// Options of layers::batch_norm (Keras' defaults).
struct BatchNorm {
  /// moving = momentum * moving + (1 - momentum) * batch statistic, once per
  /// training step (PyTorch's momentum 0.1 is 0.9 here).
  float momentum = 0.99f;
  float epsilon = 1e-3f;
  /// false: each tower normalizes with its own shard's statistics and the
  /// moving averages follow tower 0 (as a TensorFlow model under
  /// replicate_model_fn behaves). true: every tower normalizes with the
  /// statistics of the whole global batch, its sums and sums of squares added
  /// up across the towers inside the step (PyTorch's SyncBatchNorm), so N
  /// towers compute what one tower computes on the whole batch.
  bool sync = false;
  std::string name = "batch_norm";
};

/// Normalizes x [..., C] over every dimension but the last (each channel of
/// an NHWC image over N, H and W; each feature of [N, C] over the batch), then
/// scales by "<name>/gamma" [C] (ones) and shifts by "<name>/beta" [C] (zeros).
/// Training (training = true) uses the batch's mean and (biased) variance and
/// updates the non-trainable "<name>/moving_mean" [C] (zeros) and
/// "<name>/moving_variance" [C] (ones, updated with the unbiased variance, as
/// PyTorch's running_var) by state updates that run with the step, take no
/// gradient and do not advance the global step. Inference (training = false)
/// uses the moving statistics. Calling it again with the same name reuses
/// the variables (as every tower does).
///
///   bool training = mode == vkt::Mode::Train;
///   vkt::Tensor h = vkt::layers::conv2d(x, 32, {5, 5}, {.padding = vkt::Padding::Same});
///   h = vkt::relu(vkt::layers::batch_norm(h, training, {.sync = true, .name = "bn1"}));
Tensor batch_norm(const Tensor& x, bool training, const BatchNorm& options = {});

}  // namespace vkt::layers
