// Unary elementwise ops (shaders/unary.comp) and their gradients
// (shaders/unary_grad.comp).
#include <fmt/format.h>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "cast.h"
#include "elementwise.h"
#include "elementwise_chain.h"
#include "kernel_util.h"

namespace vkt {
namespace {

// The OP codes of unary.comp and unary_grad.comp.
enum class UnaryKind : std::uint32_t {
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Square,
  Pow,
  Relu,
  LeakyRelu,
  Elu,
  Gelu,
  Sigmoid,
  Tanh,
  Softplus,
  Sign,
  Identity,
  GeluErf,
  RoundF16,
  RoundBF16
};

// The codes cast's chain steps use (elementwise_chain.h).
static_assert(static_cast<std::uint32_t>(UnaryKind::Identity) == ops_detail::kIdentityStepCode);
static_assert(static_cast<std::uint32_t>(UnaryKind::RoundF16) == ops_detail::kRoundF16StepCode);
static_assert(static_cast<std::uint32_t>(UnaryKind::RoundBF16) == ops_detail::kRoundBF16StepCode);

const char* name_of(UnaryKind k) {
  static const char* names[] = {"neg",      "abs",      "exp",       "log",        "sqrt",
                                "square",   "pow",      "relu",      "leaky_relu", "elu",
                                "gelu",     "sigmoid",  "tanh",      "softplus",   "sign",
                                "identity", "gelu_erf", "round_f16", "round_bf16"};
  return names[static_cast<int>(k)];
}

struct UnaryPush {
  std::uint32_t n;
  float alpha;
};

Tensor unary(UnaryKind kind, const Tensor& x, float alpha = 0.0f);

class UnaryGradOp final : public Op {
 public:
  UnaryGradOp(UnaryKind kind, float alpha) : kind_(kind), alpha_(alpha) {}
  std::string type() const override { return std::string(name_of(kind_)) + "_grad"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const bool vec4 = ops_detail::elementwise_vec4(out.shape().elements());
    const std::int64_t n = out.shape().elements() / (vec4 ? 4 : 1);
    ops_detail::dispatch_1d(
        ctx,
        ops_detail::kernel_1d(ctx, vec4 ? "unary_grad_vec4" : "unary_grad",
                              static_cast<std::uint32_t>(kind_)),
        {ctx.buffer(in[0]), ctx.buffer(in[1]), ctx.buffer(in[2]), ctx.buffer(out)},
        UnaryPush{static_cast<std::uint32_t>(n), alpha_}, n);
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error(fmt::format("{}: second derivatives are not supported", type()));
  }

 private:
  UnaryKind kind_;
  float alpha_;
};

class UnaryOp final : public Op {
 public:
  UnaryOp(UnaryKind kind, float alpha) : kind_(kind), alpha_(alpha) {}
  std::string type() const override { return name_of(kind_); }
  std::optional<ElementwiseStep> elementwise_step() const override {
    return ElementwiseStep{static_cast<std::uint32_t>(kind_), alpha_};
  }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const bool vec4 = ops_detail::elementwise_vec4(out.shape().elements());
    const std::int64_t n = out.shape().elements() / (vec4 ? 4 : 1);
    ops_detail::dispatch_1d(ctx,
                            ops_detail::kernel_1d(ctx, vec4 ? "unary_vec4" : "unary",
                                                  static_cast<std::uint32_t>(kind_)),
                            {ctx.buffer(in[0]), ctx.buffer(out)},
                            UnaryPush{static_cast<std::uint32_t>(n), alpha_}, n);
  }
  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor& out,
                                 const Tensor& dy) const override {
    switch (kind_) {
      case UnaryKind::Sign:
        return {Gradient{}};
      case UnaryKind::Identity:
        return {Gradient{dy}};
      case UnaryKind::Neg:
        return {Gradient{neg(dy)}};
      case UnaryKind::RoundF16:
      case UnaryKind::RoundBF16:
        // As cast's: the gradient of cast(cast(x, half), f32) is dy cast
        // through the half type the same way.
        return {Gradient{unary(kind_, dy)}};
      default:
        break;
    }
    Graph& g = out.graph();
    // Where f' is a function of the output alone (unary_grad.comp reads only y,
    // or x > 0 for relu, which y > 0 says as well), the gradient does not read
    // x: a fused elementwise chain that computes x need not write it.
    const bool from_output = kind_ == UnaryKind::Exp || kind_ == UnaryKind::Sqrt ||
                             kind_ == UnaryKind::Relu || kind_ == UnaryKind::Sigmoid ||
                             kind_ == UnaryKind::Tanh;
    const Tensor x = from_output ? out : in[0];
    return {Gradient{
        g.add_node(std::make_unique<UnaryGradOp>(kind_, alpha_), {x, out, dy}, out.shape())}};
  }

 private:
  UnaryKind kind_;
  float alpha_;
};

Tensor unary(UnaryKind kind, const Tensor& x, float alpha) {
  if (!x.valid()) throw Error(fmt::format("{}: the input tensor is empty", name_of(kind)));
  if (x.dtype() != DType::F32) {
    throw Error(fmt::format("{}: input '{}' {}; elementwise ops take f32", name_of(kind), x.name(),
                            ops_detail::not_f32(x)));
  }
  return x.graph().add_node(std::make_unique<UnaryOp>(kind, alpha), {x}, x.shape());
}

}  // namespace

Tensor neg(const Tensor& x) {
  return unary(UnaryKind::Neg, x);
}
Tensor abs(const Tensor& x) {
  return unary(UnaryKind::Abs, x);
}
Tensor exp(const Tensor& x) {
  return unary(UnaryKind::Exp, x);
}
Tensor log(const Tensor& x) {
  return unary(UnaryKind::Log, x);
}
Tensor sqrt(const Tensor& x) {
  return unary(UnaryKind::Sqrt, x);
}
Tensor square(const Tensor& x) {
  return unary(UnaryKind::Square, x);
}
Tensor pow(const Tensor& x, float c) {
  return unary(UnaryKind::Pow, x, c);
}
Tensor relu(const Tensor& x) {
  return unary(UnaryKind::Relu, x);
}
Tensor leaky_relu(const Tensor& x, float alpha) {
  return unary(UnaryKind::LeakyRelu, x, alpha);
}
Tensor elu(const Tensor& x, float alpha) {
  return unary(UnaryKind::Elu, x, alpha);
}
Tensor gelu(const Tensor& x, GeluForm form) {
  return unary(form == GeluForm::Erf ? UnaryKind::GeluErf : UnaryKind::Gelu, x);
}
Tensor sigmoid(const Tensor& x) {
  return unary(UnaryKind::Sigmoid, x);
}
Tensor tanh(const Tensor& x) {
  return unary(UnaryKind::Tanh, x);
}
Tensor softplus(const Tensor& x) {
  return unary(UnaryKind::Softplus, x);
}
Tensor sign(const Tensor& x) {
  return unary(UnaryKind::Sign, x);
}
Tensor identity(const Tensor& x) {
  return unary(UnaryKind::Identity, x);
}
Tensor operator-(const Tensor& a) {
  return neg(a);
}

Tensor round_to_half(const Tensor& x, DType half) {
  if (!is_half(half)) {
    throw Error(fmt::format("round_to_half: {} is not a half type; give vkt::DType::F16 or BF16",
                            to_string(half)));
  }
  const UnaryKind kind = half == DType::F16 ? UnaryKind::RoundF16 : UnaryKind::RoundBF16;
  // Rounding is idempotent: a value already rounded to `half` (the policy's
  // operands, met again by the gradients' products) is returned as it is.
  if (x.valid() && x.graph().info(x).kind == TensorKind::Op &&
      x.graph().nodes()[x.graph().info(x).node].op->type() == name_of(kind)) {
    return x;
  }
  return unary(kind, x);
}

}  // namespace vkt
