#pragma once
// The graph op behind an optimizer call (internal to optimizers/).

#include <functional>
#include <vector>

#include "../runtime/graph/op.h"
#include "optimizer.h"

namespace vkt::detail {

/// Inputs: [global norm if clipping by it], then per variable: variable,
/// gradient, its slots. Output: a scalar, the learning rate used. One dispatch of
/// `shader` whose element e finds its variable through a segment table written
/// with the step's values before every run.
class ApplyOp final : public Op {
 public:
  ApplyOp(std::string shader, std::function<StepValues(std::uint64_t)> values, Clipping clipping,
          std::size_t variables, std::size_t slots, bool has_norm);
  std::string type() const override { return "apply_" + shader_; }
  void record(RecordContext& ctx, std::span<const Tensor> inputs,
              const Tensor& output) const override;
  std::vector<Gradient> gradient(std::span<const Tensor> inputs, const Tensor& output,
                                 const Tensor& dy) const override;
  bool updates_variables() const override { return true; }
  std::size_t host_params_bytes() const override;
  void write_host_params(std::span<std::byte> out, std::span<const Tensor> inputs,
                         const HostParamsContext& ctx) const override;

 private:
  std::string shader_;
  std::function<StepValues(std::uint64_t)> values_;
  Clipping clipping_;
  std::size_t variables_;
  std::size_t slots_;
  bool has_norm_;
};

/// sqrt(sum of squares) of every element of `tensors` (all in one buffer, the
/// gradient arena), by one workgroup so the order of the sum is fixed.
Tensor global_norm(const std::vector<Tensor>& tensors);

}  // namespace vkt::detail
