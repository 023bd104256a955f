#pragma once
// RMSprop, as torch.optim.RMSprop defines it.

#include "optimizer.h"

namespace vkt {

/// Hyperparameters are doubles, as PyTorch's: 1 - alpha is formed in double
/// (write 0.99, not 0.99f, whose 1 - alpha is 0.0099999905).
struct RMSpropOptions {
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0;
  bool centered = false;
  Clipping clipping{};
};

/// torch.optim.RMSprop:
///   g = g + weight_decay * p
///   sq = alpha * sq + (1 - alpha) * g^2
///   centered: ga = alpha * ga + (1 - alpha) * g;  avg = sqrt(sq - ga^2) + eps
///   else:     avg = sqrt(sq) + eps
///   momentum > 0: b = momentum * b + g / avg;  p = p - lr * b
///   else:         p = p - lr * g / avg
/// Slots "square_avg", "momentum_buffer", "grad_avg". Sparse rows (see
/// Optimizer): only named rows update their averages and momentum (tf
/// sparse_apply_rms_prop); the others do not decay.
class RMSprop : public Optimizer {
 public:
  explicit RMSprop(LearningRate lr, RMSpropOptions options = {}, std::string name = "RMSprop");
  std::vector<std::string> slot_names() const override {
    return {"square_avg", "momentum_buffer", "grad_avg"};
  }
  const char* shader() const override { return "opt_rmsprop"; }
  std::function<StepValues(std::uint64_t)> step_values() const override;
  std::unique_ptr<Optimizer> clone() const override {
    return std::make_unique<RMSprop>(learning_rate(), options_, name());
  }

 private:
  RMSpropOptions options_;
};

}  // namespace vkt
