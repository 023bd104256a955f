// Unary elementwise ops (shaders/unary.comp) and their gradients
// (shaders/unary_grad.comp), and swiglu, composed of silu and mul.
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
  RoundBF16,
  Silu
};

// The codes cast's chain steps use (elementwise_chain.h).
static_assert(static_cast<std::uint32_t>(UnaryKind::Identity) == ops_detail::kIdentityStepCode);
static_assert(static_cast<std::uint32_t>(UnaryKind::RoundF16) == ops_detail::kRoundF16StepCode);
static_assert(static_cast<std::uint32_t>(UnaryKind::RoundBF16) == ops_detail::kRoundBF16StepCode);

const char* name_of(UnaryKind k) {
  static const char* names[] = {"neg",      "abs",      "exp",       "log",        "sqrt",
                                "square",   "pow",      "relu",      "leaky_relu", "elu",
                                "gelu",     "sigmoid",  "tanh",      "softplus",   "sign",
                                "identity", "gelu_erf", "round_f16", "round_bf16", "silu"};
  return names[static_cast<int>(k)];
}

struct UnaryPush {
  std::uint32_t n;
  float alpha;
};

Tensor unary(UnaryKind kind, const Tensor& x, float alpha = 0.0f);

/// The copy of `t` in the graph's policy type that the forward pass makes for
/// a product (a cast to the half type where products run on half kernels, or
/// round_to_half where they run on the f32 texel kernel), or the half tensor
/// t is widened from, if there is one.
std::optional<Tensor> policy_half_copy(const Tensor& t) {
  const Graph& g = t.graph();
  const DType half = compute_dtype(g.options().precision);
  if (!is_half(half) || t.dtype() != DType::F32) return std::nullopt;
  // t widened exactly from a half tensor (policy_round's, a half product's):
  // that tensor is the copy.
  if (const std::optional<Tensor> h = widened_from(t); h && h->dtype() == half) return h;
  const char* round = name_of(half == DType::F16 ? UnaryKind::RoundF16 : UnaryKind::RoundBF16);
  for (const Node& node : g.nodes()) {
    if (node.inputs.empty() || node.inputs.front() != t) continue;
    const std::string type = node.op->type();
    if ((type == "cast" && node.output.dtype() == half) || type == round) return node.output;
  }
  return std::nullopt;
}

/// dx = dy * f'(x). Inputs {t, dy} where f' reads one forward tensor t (x, or
/// the output y where that says as much), which makes it a step of fused
/// elementwise chains; {x, y, dy} where it reads both (elu).
class UnaryGradOp final : public Op {
 public:
  UnaryGradOp(UnaryKind kind, float alpha, bool one_operand)
      : kind_(kind), alpha_(alpha), one_operand_(one_operand) {}
  std::string type() const override { return std::string(name_of(kind_)) + "_grad"; }
  /// x and y may be the half copies the precision policy stores (both of one type).
  bool takes_half() const override { return true; }
  std::optional<ElementwiseStep> elementwise_step() const override {
    if (!one_operand_) return std::nullopt;
    return ElementwiseStep{ops_detail::kUnaryGradStepCode + static_cast<std::uint32_t>(kind_),
                           alpha_};
  }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const Tensor& x = in[0];
    const Tensor& y = one_operand_ ? in[0] : in[1];
    const Tensor& dy = in.back();
    const std::int64_t n = out.shape().elements();
    if (is_half(y.dtype())) {
      const Kernel& kernel = ctx.device().kernel(
          {.shader = "unary_grad_half",
           .local_size = {ops_detail::kLocalSize, 1, 1},
           .constants = {SpecConstant::u32(1, static_cast<std::uint32_t>(kind_)),
                         SpecConstant::u32(2, ops_detail::float_type_code(y.dtype()))}});
      // Two elements an invocation: each half word is read whole.
      ops_detail::dispatch_1d(ctx, kernel,
                              {ctx.buffer(x), ctx.buffer(y), ctx.buffer(dy), ctx.buffer(out)},
                              UnaryPush{static_cast<std::uint32_t>(n), alpha_}, (n + 1) / 2);
      return;
    }
    const bool vec4 = ops_detail::elementwise_vec4(n);
    const std::int64_t invocations = n / (vec4 ? 4 : 1);
    ops_detail::dispatch_1d(ctx,
                            ops_detail::kernel_1d(ctx, vec4 ? "unary_grad_vec4" : "unary_grad",
                                                  static_cast<std::uint32_t>(kind_)),
                            {ctx.buffer(x), ctx.buffer(y), ctx.buffer(dy), ctx.buffer(out)},
                            UnaryPush{static_cast<std::uint32_t>(invocations), alpha_},
                            invocations);
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error(fmt::format("{}: second derivatives are not supported", type()));
  }

 private:
  UnaryKind kind_;
  float alpha_;
  bool one_operand_;
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
    // Where f' is a function of the output alone (unary_grad.glsl reads only y,
    // or x > 0 for relu, which y > 0 says as well), the gradient does not read
    // x, and where it is a function of x alone it does not read y: a fused
    // elementwise chain that computes the one not read need not write it.
    const bool from_output = kind_ == UnaryKind::Exp || kind_ == UnaryKind::Sqrt ||
                             kind_ == UnaryKind::Relu || kind_ == UnaryKind::Sigmoid ||
                             kind_ == UnaryKind::Tanh;
    const bool reads_y = from_output || kind_ == UnaryKind::Elu;
    Tensor x = from_output ? out : in[0];
    Tensor y = reads_y ? out : x;
    // Under a half precision, a value that the next product reads as a half
    // copy is read back from that copy (autocast's activations stored in half):
    // the f32 value then has no reader after the forward pass, and its chain
    // does not write it.
    const std::optional<Tensor> x_half = policy_half_copy(x);
    const std::optional<Tensor> y_half = x == y ? x_half : policy_half_copy(y);
    if (x_half && y_half) {
      x = *x_half;
      y = *y_half;
    }
    const bool one_operand = x == y;
    std::vector<Tensor> operands =
        one_operand ? std::vector<Tensor>{x, dy} : std::vector<Tensor>{x, y, dy};
    return {Gradient{g.add_node(std::make_unique<UnaryGradOp>(kind_, alpha_, one_operand),
                                std::move(operands), out.shape())}};
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
Tensor silu(const Tensor& x) {
  return unary(UnaryKind::Silu, x);
}
Tensor swiglu(const Tensor& gate, const Tensor& up) {
  if (!gate.valid() || !up.valid()) throw Error("swiglu: an input tensor is empty");
  if (gate.shape() != up.shape()) {
    throw Error(fmt::format("swiglu(gate '{}' {}, up '{}' {}): gate and up must have one shape",
                            gate.name(), gate.shape().str(), up.name(), up.shape().str()));
  }
  return mul(silu(gate), up);
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
  // operands, met again by the gradients' products; a frozen half variable
  // widened, which takes no gradient) is returned as it is.
  if (x.valid() && x.graph().info(x).kind == TensorKind::Op &&
      x.graph().nodes()[x.graph().info(x).node].op->type() == name_of(kind)) {
    return x;
  }
  if (const std::optional<Tensor> h = widened_from(x);
      h && h->dtype() == half && x.graph().info(*h).kind == TensorKind::Variable) {
    return x;
  }
  return unary(kind, x);
}

}  // namespace vkt
