#include "apply_op.h"

#include <fmt/format.h>

#include <cstring>

#include "../runtime/graph/graph.h"
#include "../runtime/graph/ops/kernel_util.h"
#include "../runtime/vulkan/error.h"

namespace vkt::detail {
namespace {

constexpr std::size_t kApplyHeaderBytes = 48;   // lr, h[7], clip_value, clip_norm, segments, total
constexpr std::size_t kApplySegmentBytes = 32;  // two uvec4
constexpr std::size_t kNormHeaderBytes = 16;
// Invocations of an update dispatch, at most: each loops over its share of the
// elements (64 per invocation for 16M parameters), which amortises the loads of
// the segment table and the step's values.
constexpr std::uint64_t kApplyThreads = 1u << 18;
constexpr std::size_t kNormSegmentBytes = 16;

std::uint32_t float_offset(const BufferRange& r) {
  return static_cast<std::uint32_t>(r.offset / 4);
}

class GlobalNormOp final : public Op {
 public:
  explicit GlobalNormOp(std::size_t tensors) : tensors_(tensors) {}
  std::string type() const override { return "global_norm"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const Buffer& grads = *ctx.buffer(in[0]).buffer;
    for (const Tensor& t : in) {
      if (ctx.buffer(t).buffer != &grads) {
        throw Error("global_norm: its tensors must be gradients (all in the gradient arena)");
      }
    }
    const Kernel& kernel = ctx.device().kernel({.shader = "global_norm"});
    ctx.stream().dispatch(kernel, {grads, ctx.host_params(), ctx.buffer(out)}, Groups{1, 1, 1});
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error("global_norm has no gradient");
  }
  std::size_t host_params_bytes() const override {
    return kNormHeaderBytes + tensors_ * kNormSegmentBytes;
  }
  void write_host_params(std::span<std::byte> out, std::span<const Tensor> in,
                         const HostParamsContext& ctx) const override {
    std::vector<std::uint32_t> words(out.size() / 4, 0);
    words[0] = static_cast<std::uint32_t>(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      words[4 + 4 * i] = float_offset(ctx.buffer(in[i]));
      words[4 + 4 * i + 1] = static_cast<std::uint32_t>(in[i].shape().elements());
    }
    std::memcpy(out.data(), words.data(), out.size());
  }

 private:
  std::size_t tensors_;
};

}  // namespace

Tensor global_norm(const std::vector<Tensor>& tensors) {
  if (tensors.empty()) throw Error("global_norm: no tensors given");
  return tensors.front().graph().add_node(std::make_unique<GlobalNormOp>(tensors.size()), tensors,
                                          Shape{});
}

ApplyOp::ApplyOp(std::string shader, std::function<StepValues(std::uint64_t)> values,
                 Clipping clipping, std::size_t variables, std::size_t slots, bool has_norm)
    : shader_(std::move(shader)),
      values_(std::move(values)),
      clipping_(clipping),
      variables_(variables),
      slots_(slots),
      has_norm_(has_norm) {}

void ApplyOp::record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const {
  const std::size_t first = has_norm_ ? 1 : 0;
  const Buffer& arena = *ctx.buffer(in[first]).buffer;
  const Buffer& grads = *ctx.buffer(in[first + 1]).buffer;
  std::int64_t total = 0;
  for (std::size_t v = 0; v < variables_; ++v) {
    const std::size_t at = first + v * (2 + slots_);
    if (ctx.buffer(in[at]).buffer != &arena || ctx.buffer(in[at + 1]).buffer != &grads) {
      throw Error(
          fmt::format("{}: variables must live in the variable arena and gradients in the "
                      "gradient arena ('{}')",
                      type(), in[at].name()));
    }
    total += in[at].shape().elements();
  }
  const Kernel& kernel =
      ctx.device().kernel({.shader = shader_, .local_size = {ops_detail::kLocalSize, 1, 1}});
  const BufferRange norm = has_norm_ ? ctx.buffer(in[0]) : BufferRange(grads);
  ctx.stream().dispatch(
      kernel, {arena, grads, ctx.host_params(), norm, ctx.buffer(out)},
      Stream::linear_groups(
          kernel, std::min<std::uint64_t>(static_cast<std::uint64_t>(total), kApplyThreads)));
}

std::vector<Gradient> ApplyOp::gradient(std::span<const Tensor>, const Tensor&,
                                        const Tensor&) const {
  throw Error(fmt::format("{} is an update and has no gradient", type()));
}

std::size_t ApplyOp::host_params_bytes() const {
  return kApplyHeaderBytes + variables_ * kApplySegmentBytes;
}

void ApplyOp::write_host_params(std::span<std::byte> out, std::span<const Tensor> in,
                                const HostParamsContext& ctx) const {
  const StepValues step = values_(ctx.global_step());
  std::vector<std::uint32_t> words(out.size() / 4, 0);
  const auto put = [&](std::size_t i, float f) { std::memcpy(&words[i], &f, 4); };
  put(0, step.lr);
  for (std::size_t i = 0; i < 7; ++i) put(1 + i, step.h[i]);
  put(8, clipping_.value);
  put(9, clipping_.global_norm);
  words[10] = static_cast<std::uint32_t>(variables_);
  const std::size_t first = has_norm_ ? 1 : 0;
  std::uint32_t start = 0;
  for (std::size_t v = 0; v < variables_; ++v) {
    const std::size_t at = first + v * (2 + slots_);
    const std::size_t w = 12 + v * 8;
    const auto count = static_cast<std::uint32_t>(in[at].shape().elements());
    words[w] = float_offset(ctx.buffer(in[at]));
    words[w + 1] = float_offset(ctx.buffer(in[at + 1]));
    words[w + 2] = count;
    words[w + 3] = start;
    for (std::size_t s = 0; s < slots_; ++s)
      words[w + 4 + s] = float_offset(ctx.buffer(in[at + 2 + s]));
    start += count;
  }
  words[11] = start;
  std::memcpy(out.data(), words.data(), out.size());
}

}  // namespace vkt::detail
