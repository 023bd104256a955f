#pragma once
// Adagrad, as torch.optim.Adagrad defines it.

#include "optimizer.h"

namespace vkt {

/// Hyperparameters are doubles, as PyTorch's (the decayed rate is formed in
/// double).
struct AdagradOptions {
  double lr_decay = 0.0;
  double weight_decay = 0.0;
  double initial_accumulator_value = 0.0;
  double eps = 1e-10;
  Clipping clipping{};
};

/// torch.optim.Adagrad, at step t = 1, 2, ...:
///   g = g + weight_decay * p
///   clr = lr / (1 + (t - 1) * lr_decay)   (in double, on the host)
///   sum = sum + g^2                 (starts at initial_accumulator_value)
///   p = p - clr * g / (sqrt(sum) + eps)
/// Slot "sum". Sparse rows (see Optimizer): only named rows add to their sum
/// (tf sparse_apply_adagrad); t and clr are the global step's.
class Adagrad : public Optimizer {
 public:
  explicit Adagrad(LearningRate lr, AdagradOptions options = {}, std::string name = "Adagrad");
  std::vector<std::string> slot_names() const override { return {"sum"}; }
  const char* shader() const override { return "opt_adagrad"; }
  std::function<StepValues(std::uint64_t)> step_values() const override;
  std::unique_ptr<Optimizer> clone() const override {
    return std::make_unique<Adagrad>(learning_rate(), options_, name());
  }
  float slot_initial_value(const std::string&) const override {
    return static_cast<float>(options_.initial_accumulator_value);
  }

 private:
  AdagradOptions options_;
};

}  // namespace vkt
