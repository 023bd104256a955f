#pragma once
// The graph op behind an optimizer call (internal to optimizers/).

#include <functional>
#include <vector>

#include "../runtime/graph/op.h"
#include "optimizer.h"

namespace vkt::detail {

/// Inputs: [global norm if clipping by it], [the loss scaler's check (finite_check)
/// when the gradients are scaled], then per variable: variable, gradient, its
/// slots. Output: a scalar, the learning rate used. One dispatch of
/// `shader` whose element e finds its variable through a segment table written
/// with the step's values before every run.
class ApplyOp final : public Op {
 public:
  ApplyOp(std::string shader, std::function<StepValues(std::uint64_t)> values, Clipping clipping,
          std::size_t variables, std::size_t slots, bool has_norm, bool has_check);
  std::string type() const override { return "apply_" + shader_; }
  void record(RecordContext& ctx, std::span<const Tensor> inputs,
              const Tensor& output) const override;
  std::vector<Gradient> gradient(std::span<const Tensor> inputs, const Tensor& output,
                                 const Tensor& dy) const override;
  bool updates_variables() const override { return true; }
  bool windows_input(std::size_t) const override { return true; }
  std::size_t host_params_bytes() const override;
  void write_host_params(std::span<std::byte> out, std::span<const Tensor> inputs,
                         const HostParamsContext& ctx) const override;

 private:
  std::size_t first_variable() const { return (has_norm_ ? 1 : 0) + (has_check_ ? 1 : 0); }

  std::string shader_;
  std::function<StepValues(std::uint64_t)> values_;
  Clipping clipping_;
  std::size_t variables_;
  std::size_t slots_;
  bool has_norm_;
  bool has_check_;
};

/// The lazy update of the variables of one call whose gradients are sparse
/// rows (shaders/optimizer_sparse_common.glsl with `shader`'s formula, one
/// dispatch of <shader>_sparse): only the rows named in the indices change,
/// each once, with the sum of its values rows. Inputs: [global norm if clipping
/// by it], [the loss scaler's check], [the call's dense ApplyOp output, so that it runs first and
/// one train op covers both], then per variable: variable, values [k, D...] and indices [k] (both
/// in the gradient arena), the indices' sparse_row_links (every variable's in one buffer), its
/// slots. Output: a scalar, the learning rate used.
class SparseApplyOp final : public Op {
 public:
  SparseApplyOp(std::string shader, std::function<StepValues(std::uint64_t)> values,
                Clipping clipping, std::size_t variables, std::size_t slots, bool has_norm,
                bool has_check, bool has_dense);
  std::string type() const override { return "apply_" + shader_ + "_sparse"; }
  void record(RecordContext& ctx, std::span<const Tensor> inputs,
              const Tensor& output) const override;
  std::vector<Gradient> gradient(std::span<const Tensor> inputs, const Tensor& output,
                                 const Tensor& dy) const override;
  bool updates_variables() const override { return true; }
  bool windows_input(std::size_t) const override { return true; }
  std::size_t host_params_bytes() const override;
  void write_host_params(std::span<std::byte> out, std::span<const Tensor> inputs,
                         const HostParamsContext& ctx) const override;

 private:
  std::size_t first_variable() const {
    return (has_norm_ ? 1 : 0) + (has_check_ ? 1 : 0) + (has_dense_ ? 1 : 0);
  }

  std::string shader_;
  std::function<StepValues(std::uint64_t)> values_;
  Clipping clipping_;
  std::size_t variables_;
  std::size_t slots_;
  bool has_norm_;
  bool has_check_;
  bool has_dense_;
};

/// A copy of `t` (any dtype) in memory of its own, marked as a gradient of
/// `var` so that the Executor places it in the gradient arena.
Tensor gradient_copy(const Tensor& t, const Tensor& var);

/// sqrt(sum of squares) of every element of `tensors` (all in one buffer, the
/// gradient arena) at element 0 of the result, the partial sums after it; the
/// order of the sum is fixed, so the same bits run to run and however the
/// gradients are bound.
Tensor global_norm(const std::vector<Tensor>& tensors);

/// The loss scaler's check of one call's gradients (`tensors`, in the gradient
/// arena), scaled by the variable `scale` [1]: (1 / scale, 1 if any is inf or
/// NaN, 1 if any is or `previous` (the step's earlier check, may be empty)
/// found one), then the chunks' counts. What the update shaders read when
/// SCALED.
Tensor finite_check(const std::vector<Tensor>& tensors, const Tensor& scale,
                    const Tensor& previous);

}  // namespace vkt::detail
