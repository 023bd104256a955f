// cast (shaders/cast.comp): f32 <-> f16 <-> bf16 in integer arithmetic.
#include "cast.h"

#include <fmt/format.h>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "elementwise_chain.h"
#include "kernel_util.h"
#include "matmul.h"

namespace vkt {
namespace {

class CastOp final : public Op {
 public:
  explicit CastOp(DType to) : to_(to) {}
  std::string type() const override { return "cast"; }
  bool takes_half() const override { return true; }
  /// In a fused chain (elementwise_chain.comp reads and writes each tensor in
  /// its type): to a half type the value rounded to it, to f32 the value as
  /// it is (a half input is widened as it is read). The same bits as cast.comp.
  std::optional<ElementwiseStep> elementwise_step() const override {
    return ElementwiseStep{to_ == DType::F16    ? ops_detail::kRoundF16StepCode
                           : to_ == DType::BF16 ? ops_detail::kRoundBF16StepCode
                                                : ops_detail::kIdentityStepCode};
  }

  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const std::int64_t n = out.shape().elements();
    const Kernel& kernel = ctx.device().kernel(
        {.shader = "cast",
         .local_size = {ops_detail::kLocalSize, 1, 1},
         .constants = {SpecConstant::u32(1, ops_detail::float_type_code(in[0].dtype())),
                       SpecConstant::u32(2, ops_detail::float_type_code(to_))}});
    // Two elements an invocation: a half word is never shared.
    ops_detail::dispatch_1d(ctx, kernel, {ctx.buffer(in[0]), ctx.buffer(out)},
                            static_cast<std::uint32_t>(n), (n + 1) / 2);
  }

  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    return {Gradient{cast(dy, in[0].dtype())}};
  }

 private:
  DType to_;
};

}  // namespace

Tensor cast(const Tensor& x, DType dtype) {
  if (!x.valid()) throw Error("cast: the input tensor is empty");
  if (x.dtype() == DType::I32 || dtype == DType::I32) {
    throw Error(fmt::format(
        "cast('{}'): {} -> {}: cast converts between f32, f16 and bf16; i32 holds labels and "
        "indices",
        x.name(), to_string(x.dtype()), to_string(dtype)));
  }
  if (x.dtype() == dtype) return x;
  // Widening is exact, so rounding a widened half tensor back gives its own bits.
  if (const std::optional<Tensor> h = widened_from(x); h && h->dtype() == dtype) return *h;
  return x.graph().add_node(std::make_unique<CastOp>(dtype), {x}, x.shape(), dtype);
}

std::optional<Tensor> widened_from(const Tensor& x) {
  if (!x.valid() || x.dtype() != DType::F32) return std::nullopt;
  const Graph& g = x.graph();
  const TensorInfo& info = g.info(x);
  if (info.kind != TensorKind::Op) return std::nullopt;
  const Node& producer = g.nodes()[info.node];
  if (producer.op->type() != "cast" || !is_half(producer.inputs.front().dtype())) {
    return std::nullopt;
  }
  return producer.inputs.front();
}

Tensor policy_operand(const Tensor& x) {
  if (!x.valid() || x.dtype() != DType::F32) return x;
  const DType half = compute_dtype(x.graph().options().precision);
  if (!is_half(half)) return x;
  if (matmul_variant(x.graph().device()) == MatmulVariant::Texel) return round_to_half(x, half);
  return cast(x, half);
}

Tensor policy_round(const Tensor& x) {
  return cast(policy_operand(x), DType::F32);
}

}  // namespace vkt
