#pragma once
// The optimizer wrapper that model functions use under replicate_model_fn.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "optimizer.h"

namespace vkt {

/// Wraps an optimizer, or a function that makes one (called lazily, on first
/// use, exactly once), as TensorFlow's TowerOptimizer does. The wrapper owns
/// its optimizer for its whole life. With one tower every call is forwarded
/// unchanged. With several towers, each tower's gradients of one call are
/// gathered and applied once, on their sum: tower 0's first call
/// through a wrapper gives the towers their own copy of its optimizer
/// (Optimizer::clone), which applies every call made through that wrapper (so
/// one wrapper may minimize several losses, its calls sharing their slots).
/// The slots are then the towers' (read them with TowerRun::variable(
/// "<variable>/<optimizer name>/<slot>")): get_slot() and variables() of the
/// wrapper find none. replicate_model_fn rejects optimizers not wrapped in it.
///
///   vkt::TowerOptimizer opt([] { return std::make_unique<vkt::Adam>(0.001f); });
///   vkt::Tensor train_op = opt.minimize(loss);
class TowerOptimizer {
 public:
  explicit TowerOptimizer(std::unique_ptr<Optimizer> optimizer);
  explicit TowerOptimizer(std::function<std::unique_ptr<Optimizer>()> make);

  Tensor minimize(const Tensor& loss, std::optional<std::vector<Tensor>> var_list = std::nullopt);
  std::vector<GradVar> compute_gradients(
      const Tensor& loss, std::optional<std::vector<Tensor>> var_list = std::nullopt);
  Tensor apply_gradients(const std::vector<GradVar>& grads_and_vars);
  Tensor get_slot(const Tensor& var, const std::string& slot) {
    return optimizer().get_slot(var, slot);
  }
  std::vector<std::string> slot_names() { return optimizer().slot_names(); }
  std::vector<Tensor> variables() { return optimizer().variables(); }
  const std::string& name() { return optimizer().name(); }

  /// The wrapped optimizer, made now if it was given as a function.
  Optimizer& optimizer();
  /// Apply steps made through this wrapper so far (towers check they agree).
  std::size_t apply_calls() const { return apply_calls_; }
  /// True once the optimizer exists (from the start when given as an object).
  bool made() const { return optimizer_ != nullptr; }

 private:
  std::unique_ptr<Optimizer> optimizer_;
  std::function<std::unique_ptr<Optimizer>()> make_;  // until the optimizer is made
  std::uint64_t id_;  // names this wrapper to the towers; no other wrapper has it
  std::size_t apply_calls_ = 0;
};

}  // namespace vkt
