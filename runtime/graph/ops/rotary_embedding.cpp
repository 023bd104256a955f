// rotary_embedding (shaders/rotary_embedding.comp): the rotation forward, and
// the same kernel turning the other way for its gradient.
#include "rotary_embedding.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "kernel_util.h"

namespace vkt {
namespace {

/// rotary_embedding.comp's push constants.
struct RotaryPush {
  std::uint32_t pairs, half_dh, seq, heads, batched;
  float direction;
};

/// Rotates x [B, H, T, Dh] (inputs {x, positions, inv_freq}) by the angles of
/// its positions, or back by them (`inverse`, the gradient).
class RotaryOp final : public Op {
 public:
  explicit RotaryOp(bool inverse) : inverse_(inverse) {}
  std::string type() const override {
    return inverse_ ? "rotary_embedding_grad" : "rotary_embedding";
  }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const Shape& s = out.shape();
    const RotaryPush push{.pairs = static_cast<std::uint32_t>(s.elements() / 2),
                          .half_dh = static_cast<std::uint32_t>(s[3] / 2),
                          .seq = static_cast<std::uint32_t>(s[2]),
                          .heads = static_cast<std::uint32_t>(s[1]),
                          .batched = in[1].shape().rank() == 2 ? 1u : 0u,
                          .direction = inverse_ ? -1.0f : 1.0f};
    const Kernel& kernel = ctx.device().kernel(
        {.shader = "rotary_embedding", .local_size = {ops_detail::kLocalSize, 1, 1}});
    ops_detail::dispatch_1d(
        ctx, kernel, {ctx.buffer(in[0]), ctx.buffer(in[1]), ctx.buffer(in[2]), ctx.buffer(out)},
        push, push.pairs);
  }
  // y = R x with R orthogonal: dx = R^T dy, the rotation back; and back again
  // for the gradient of that.
  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor& out,
                                 const Tensor& dy) const override {
    const Tensor dx = out.graph().add_node(std::make_unique<RotaryOp>(!inverse_),
                                           {dy, in[1], in[2]}, out.shape());
    return {Gradient{dx}, Gradient{}, Gradient{}};
  }

 private:
  bool inverse_;
};

/// inv_freq[i] = 1 / theta^(2i / dh) for i < dh / 2, rounded as Hugging Face's
/// f32 computation rounds it: the exponent an f32 quotient, the power rounded
/// to f32 (here from double, which is what a correctly rounded powf gives),
/// then the f32 reciprocal.
std::vector<float> inverse_frequencies(float theta, std::int64_t dh) {
  std::vector<float> inv_freq(static_cast<std::size_t>(dh / 2));
  for (std::size_t i = 0; i < inv_freq.size(); ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dh);
    const auto power = static_cast<float>(std::pow(double{theta}, double{exponent}));
    inv_freq[i] = 1.0f / power;
  }
  return inv_freq;
}

void check_rotary(const Tensor& x, const Tensor& positions, float theta, const std::string& what) {
  if (x.dtype() != DType::F32) throw Error(what + ": x " + ops_detail::not_f32(x));
  const Shape& s = x.shape();
  if (s.rank() != 4 || s[3] % 2 != 0 || s[3] == 0) {
    throw Error(what + ": x must be [B, H, T, Dh] with an even head size Dh");
  }
  if (s.elements() > std::numeric_limits<std::uint32_t>::max()) {
    throw Error(fmt::format("{}: x has {} elements; the kernel indexes at most 2^32 - 1", what,
                            s.elements()));
  }
  const Shape& p = positions.shape();
  if (positions.dtype() != DType::I32 || !(p == Shape{s[2]} || p == Shape{s[0], s[2]})) {
    throw Error(fmt::format("{}: positions must be i32 [T] = [{}] or [B, T] = [{}, {}]", what, s[2],
                            s[0], s[2]));
  }
  if (!std::isfinite(theta) || theta <= 0.0f) {
    throw Error(fmt::format("{}: theta is {}; it must be finite and positive (10000 is usual)",
                            what, theta));
  }
}

}  // namespace

Tensor rotary_embedding(const Tensor& x, const Tensor& positions, float theta) {
  if (!x.valid() || !positions.valid()) {
    throw Error("rotary_embedding: an input tensor is empty");
  }
  const std::string what = fmt::format(
      "rotary_embedding('{}' {} {}, positions '{}' {} {})", x.name(), to_string(x.dtype()),
      x.shape().str(), positions.name(), to_string(positions.dtype()), positions.shape().str());
  check_rotary(x, positions, theta, what);
  Graph& g = x.graph();
  const std::vector<float> inv_freq = inverse_frequencies(theta, x.shape()[3]);
  const Tensor freqs = g.constant(Shape{x.shape()[3] / 2}, inv_freq);
  return g.add_node(std::make_unique<RotaryOp>(false), {x, positions, freqs}, x.shape());
}

}  // namespace vkt
