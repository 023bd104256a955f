#pragma once
// Stochastic gradient descent, with momentum, as torch.optim.SGD defines it.

#include "optimizer.h"

namespace vkt {

/// Hyperparameters are doubles, as PyTorch's: write 0.9, not 0.9f (which is
/// 0.899999976), and the update uses exactly what a float64 run would.
struct SGDOptions {
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
  Clipping clipping{};
};

/// torch.optim.SGD, for each element with gradient g and parameter p at step t:
///   g = g + weight_decay * p
///   if momentum != 0:
///     b = g                                    at t = 1
///     b = momentum * b + (1 - dampening) * g   afterwards
///     g = g + momentum * b   if nesterov, else   g = b
///   p = p - lr * g
/// Slot "momentum" (made whether or not momentum is 0, so checkpoints line up).
/// Sparse rows (see Optimizer): only named rows and their momentum change (tf
/// sparse_apply_momentum); "t = 1" is the global first step, so a row first
/// named later starts its buffer at (1 - dampening) * g.
///
///   vkt::SGD sgd(0.1, {.momentum = 0.9, .nesterov = true});
class SGD : public Optimizer {
 public:
  explicit SGD(LearningRate lr, SGDOptions options = {}, std::string name = "SGD");
  std::vector<std::string> slot_names() const override { return {"momentum"}; }
  const char* shader() const override { return "opt_sgd"; }
  std::function<StepValues(std::uint64_t)> step_values() const override;
  std::unique_ptr<Optimizer> clone() const override {
    return std::make_unique<SGD>(learning_rate(), options_, name());
  }

 private:
  SGDOptions options_;
};

/// TensorFlow's MomentumOptimizer: accum = momentum * accum + g;
/// p -= lr * accum (or lr * (g + momentum * accum) with nesterov). The same
/// update as SGD with momentum and no dampening.
class Momentum : public SGD {
 public:
  Momentum(LearningRate lr, double momentum, bool nesterov = false, std::string name = "Momentum")
      : SGD(std::move(lr), {.momentum = momentum, .nesterov = nesterov}, std::move(name)) {}
};

}  // namespace vkt
