#include "apply_op.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "../runtime/graph/graph.h"
#include "../runtime/graph/ops/kernel_util.h"
#include "../runtime/vulkan/error.h"

namespace vkt::detail {
namespace {

// lr, h[11], clip_value, clip_norm, segments, total: the Params block of
// shaders/optimizer_params.glsl, whose segment table follows at word 16.
constexpr std::size_t kApplyHeaderWords = 16;
constexpr std::size_t kApplyHeaderBytes = 4 * kApplyHeaderWords;
static_assert(1 + std::tuple_size_v<decltype(StepValues::h)> + 4 == kApplyHeaderWords);
constexpr std::size_t kApplySegmentBytes = 32;  // two uvec4
constexpr std::size_t kNormHeaderBytes = 16;
// Invocations of an update dispatch: one per 64 elements, at most 2^18. Each
// loops over its share, which amortises its loads of the segment table and the
// step's values; one invocation per element made a 50k-parameter Adam update
// 8x slower on lavapipe (vkt-bench-estimator), where invocations are not free.
constexpr std::uint64_t kApplyElementsPerThread = 64;
constexpr std::uint64_t kApplyThreads = 1u << 18;
constexpr std::size_t kNormSegmentBytes = 16;
constexpr std::size_t kSparseSegmentBytes = 48;  // three uvec4
// Column units (vec4s, or floats for widths not a multiple of 4) per work item
// of a sparse update: BLOCK in shaders/optimizer_sparse_common.glsl.
constexpr std::uint32_t kSparseBlock = 16;

/// The part of the parameter block both update shaders share (the Params block
/// of shaders/optimizer_params.glsl): the step's values, the clipping, and the
/// segment count.
void write_header(std::vector<std::uint32_t>& words, const StepValues& step,
                  const Clipping& clipping, std::size_t segments, std::uint32_t total) {
  const auto put = [&](std::size_t i, float f) { std::memcpy(&words[i], &f, 4); };
  put(0, step.lr);
  for (std::size_t i = 0; i < step.h.size(); ++i) put(1 + i, step.h[i]);
  put(12, clipping.value);
  put(13, clipping.global_norm);
  words[14] = static_cast<std::uint32_t>(segments);
  words[15] = total;
}

/// A sparse variable's row width D (floats per row of the [V, ...] variable),
/// and its work items per occurrence: vec4 units where D allows, else floats.
std::uint32_t row_width(const Tensor& var) {
  return static_cast<std::uint32_t>(var.shape().elements() / var.shape()[0]);
}
std::uint32_t blocks_per_row(std::uint32_t width) {
  const std::uint32_t units = width % 4 == 0 ? width / 4 : width;
  return (units + kSparseBlock - 1) / kSparseBlock;
}

/// A plain copy, whatever the dtype (i32 indices included).
class GradientCopyOp final : public Op {
 public:
  std::string type() const override { return "gradient_copy"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    ctx.stream().copy(ctx.buffer(in[0]), ctx.buffer(out));
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error("gradient_copy has no gradient");
  }
};

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
      Stream::linear_groups(kernel, std::clamp<std::uint64_t>((static_cast<std::uint64_t>(total) +
                                                               kApplyElementsPerThread - 1) /
                                                                  kApplyElementsPerThread,
                                                              1, kApplyThreads)));
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
  std::vector<std::uint32_t> words(out.size() / 4, 0);
  const std::size_t first = has_norm_ ? 1 : 0;
  std::uint32_t start = 0;
  for (std::size_t v = 0; v < variables_; ++v) {
    const std::size_t at = first + v * (2 + slots_);
    const std::size_t w = kApplyHeaderWords + v * 8;
    const auto count = static_cast<std::uint32_t>(in[at].shape().elements());
    words[w] = float_offset(ctx.buffer(in[at]));
    words[w + 1] = float_offset(ctx.buffer(in[at + 1]));
    words[w + 2] = count;
    words[w + 3] = start;
    for (std::size_t s = 0; s < slots_; ++s)
      words[w + 4 + s] = float_offset(ctx.buffer(in[at + 2 + s]));
    start += count;
  }
  write_header(words, values_(ctx.global_step()), clipping_, variables_, start);
  std::memcpy(out.data(), words.data(), out.size());
}

SparseApplyOp::SparseApplyOp(std::string shader, std::function<StepValues(std::uint64_t)> values,
                             Clipping clipping, std::size_t variables, std::size_t slots,
                             bool has_norm, bool has_dense)
    : shader_(std::move(shader)),
      values_(std::move(values)),
      clipping_(clipping),
      variables_(variables),
      slots_(slots),
      has_norm_(has_norm),
      has_dense_(has_dense) {}

void SparseApplyOp::record(RecordContext& ctx, std::span<const Tensor> in,
                           const Tensor& out) const {
  const std::size_t first = first_variable();
  const Buffer& arena = *ctx.buffer(in[first]).buffer;
  const Buffer& grads = *ctx.buffer(in[first + 1]).buffer;
  std::uint64_t items = 0;
  for (std::size_t v = 0; v < variables_; ++v) {
    const std::size_t at = first + v * (3 + slots_);
    if (ctx.buffer(in[at]).buffer != &arena || ctx.buffer(in[at + 1]).buffer != &grads ||
        ctx.buffer(in[at + 2]).buffer != &grads) {
      throw Error(
          fmt::format("{}: variables must live in the variable arena and sparse gradients "
                      "in the gradient arena ('{}')",
                      type(), in[at].name()));
    }
    items += static_cast<std::uint64_t>(in[at + 2].shape().elements()) *
             blocks_per_row(row_width(in[at]));
  }
  const Kernel& kernel = ctx.device().kernel(
      {.shader = shader_ + "_sparse", .local_size = {ops_detail::kLocalSize, 1, 1}});
  const BufferRange norm = has_norm_ ? ctx.buffer(in[0]) : BufferRange(grads);
  // The arenas are bound whole, as vec4, float and (indices) ivec4 arrays.
  ctx.stream().dispatch(
      kernel, {arena, grads, ctx.host_params(), norm, ctx.buffer(out), arena, grads, grads},
      Stream::linear_groups(kernel, std::clamp<std::uint64_t>(items, 1, kApplyThreads)));
}

std::vector<Gradient> SparseApplyOp::gradient(std::span<const Tensor>, const Tensor&,
                                              const Tensor&) const {
  throw Error(fmt::format("{} is an update and has no gradient", type()));
}

std::size_t SparseApplyOp::host_params_bytes() const {
  return kApplyHeaderBytes + variables_ * kSparseSegmentBytes;
}

void SparseApplyOp::write_host_params(std::span<std::byte> out, std::span<const Tensor> in,
                                      const HostParamsContext& ctx) const {
  std::vector<std::uint32_t> words(out.size() / 4, 0);
  const std::size_t first = first_variable();
  std::uint32_t items = 0;
  for (std::size_t v = 0; v < variables_; ++v) {
    const std::size_t at = first + v * (3 + slots_);
    const std::size_t w = kApplyHeaderWords + v * 12;
    const std::uint32_t width = row_width(in[at]);
    const auto k = static_cast<std::uint32_t>(in[at + 2].shape().elements());
    words[w] = float_offset(ctx.buffer(in[at]));
    words[w + 1] = float_offset(ctx.buffer(in[at + 1]));
    words[w + 2] = float_offset(ctx.buffer(in[at + 2]));  // i32s: 4 bytes each too
    words[w + 3] = k;
    words[w + 4] = static_cast<std::uint32_t>(in[at].shape()[0]);
    words[w + 5] = width;
    words[w + 6] = blocks_per_row(width);
    for (std::size_t s = 0; s < slots_; ++s)
      words[w + 8 + s] = float_offset(ctx.buffer(in[at + 3 + s]));
    items += k * blocks_per_row(width);
  }
  write_header(words, values_(ctx.global_step()), clipping_, variables_, items);
  std::memcpy(out.data(), words.data(), out.size());
}

Tensor gradient_copy(const Tensor& t, const Tensor& var) {
  Graph& g = t.graph();
  const Shape shape = t.shape();  // a copy: add_node may move the graph's records
  const Tensor copy = g.add_node(std::make_unique<GradientCopyOp>(), {t}, shape, t.dtype());
  g.info_mutable(copy).gradient_of = var.id();
  return copy;
}

}  // namespace vkt::detail
