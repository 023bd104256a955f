#pragma once
// Adam and AdamW, as torch.optim.Adam and torch.optim.AdamW define them.

#include "optimizer.h"

namespace vkt {

/// Hyperparameters are doubles, as PyTorch's: 1 - beta2, the bias corrections
/// and the step size are formed from them in double (write 0.999, not 0.999f,
/// which is 0.99900001).
struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  Clipping clipping{};
};

/// torch.optim.Adam, for each element with gradient g and parameter p at step
/// t = 1, 2, ... (t is the global step before the update, plus one):
///   g = g + weight_decay * p                      (L2 penalty, Adam only)
///   m = beta1 * m + (1 - beta1) * g
///   v = beta2 * v + (1 - beta2) * g^2
///   v_max = max(v_max, v)  and use v_max for v    (amsgrad)
///   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
/// with lr / (1 - beta1^t) and sqrt(1 - beta2^t) formed in double, as PyTorch.
/// Slots "m", "v", "v_max" (v_max stays 0 without amsgrad).
/// Sparse rows (see Optimizer) are lazy, as torch.optim.SparseAdam and
/// tfa LazyAdam: rows not named keep m and v (no decay), named rows use the
/// global t in the bias corrections.
///
///   vkt::Adam adam(0.001, {.beta2 = 0.98});
class Adam : public Optimizer {
 public:
  explicit Adam(LearningRate lr, AdamOptions options = {}, std::string name = "Adam");
  std::vector<std::string> slot_names() const override { return {"m", "v", "v_max"}; }
  const char* shader() const override { return "opt_adam"; }
  std::function<StepValues(std::uint64_t)> step_values() const override;
  std::unique_ptr<Optimizer> clone() const override {
    return std::unique_ptr<Optimizer>(new Adam(learning_rate(), options_, name(), decoupled_));
  }

 protected:
  Adam(LearningRate lr, AdamOptions options, std::string name, bool decoupled);

 private:
  AdamOptions options_;
  bool decoupled_;
};

/// torch.optim.AdamW: Adam with decoupled weight decay, applied before the
/// Adam step and not through the gradient:  p = p * (1 - lr * weight_decay),
/// the factor formed in double.
/// PyTorch's default weight_decay for AdamW is 0.01.
class AdamW : public Adam {
 public:
  explicit AdamW(LearningRate lr, AdamOptions options = {.weight_decay = 0.01},
                 std::string name = "AdamW")
      : Adam(std::move(lr), options, std::move(name), true) {}
};

}  // namespace vkt
