// global_norm(): the norm that clipping by global norm divides by
// (shaders/global_norm.comp: partial sums over many workgroups, then one).

#include <fmt/format.h>

#include <cstring>

#include "../runtime/graph/graph.h"
#include "../runtime/graph/ops/kernel_util.h"
#include "../runtime/vulkan/device.h"
#include "../runtime/vulkan/error.h"
#include "apply_op.h"
#include "apply_window.h"

namespace vkt::detail {
namespace {

// The host block: a count, the total chunks, then per tensor (first float,
// count, first chunk, -).
constexpr std::size_t kNormHeaderBytes = 16;
constexpr std::size_t kNormSegmentBytes = 16;
constexpr std::uint64_t kChunk = 256;  // floats per partial sum (kChunk in the shader)
// Pass-0 workgroups at most: enough for any device, each takes chunks in turn.
constexpr std::uint64_t kMaxGroups = 4096;
constexpr std::uint32_t kChunkLanes = 64;  // chunks a workgroup sums, one an invocation

std::uint64_t chunks_of(const Tensor& t) {
  return (static_cast<std::uint64_t>(t.shape().elements()) + kChunk - 1) / kChunk;
}

/// The push constants of shaders/global_norm.comp.
struct NormPush {
  std::uint32_t first_segment, end_segment, first_chunk, end_chunk;
  std::uint32_t base;
  std::uint32_t pass;
};

class GlobalNormOp final : public Op {
 public:
  /// `first_chunk`: per tensor, the chunks of the tensors before it; then the total.
  explicit GlobalNormOp(std::vector<std::uint64_t> first_chunk)
      : first_chunk_(std::move(first_chunk)) {}
  std::string type() const override { return "global_norm"; }
  bool windows_input(std::size_t) const override { return true; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const Buffer& grads = *ctx.buffer(in[0]).buffer;
    std::vector<WindowSegment> segments;
    for (const Tensor& t : in) {
      const BufferRange r = ctx.buffer(t);
      if (r.buffer != &grads) {
        throw Error("global_norm: its tensors must be gradients (all in the gradient arena)");
      }
      // Whole chunks per window: each chunk's sum is the same bits however
      // the windows fall.
      segments.push_back({chunks_of(t), {{r.offset, 4 * kChunk, 0}}, t.name()});
    }
    Device& device = ctx.device();
    const BufferRange table = ctx.host_params();
    const BufferRange partials = ctx.buffer(out);
    // Pass 0 a chunk an invocation where rows go by invocation (CPU devices):
    // the same tree, the same bits.
    const bool per_invocation = !ops_detail::row_workgroups(device, kChunk);
    const Kernel& kernel = device.kernel({.shader = "global_norm", .local_size = {256, 1, 1}});
    const Kernel& chunks = per_invocation ? device.kernel({.shader = "global_norm",
                                                           .local_size = {kChunkLanes, 1, 1},
                                                           .constants = {SpecConstant::u32(1, 1)}})
                                          : kernel;
    for (const WindowPart& part : plan_windows(segments, device.max_storage_buffer_range(),
                                               tensor_alignment(device), type())) {
      const Window& w = part.windows[0];
      const BufferRange x(grads, w.offset,
                          std::min<std::uint64_t>(w.bytes, grads.size() - w.offset));
      const std::uint64_t begin = first_chunk_[part.first_segment] + part.first_unit;
      const std::uint64_t end = first_chunk_[part.end_segment - 1] + part.end_unit;
      if (end == begin) continue;
      const NormPush push{part.first_segment,
                          part.end_segment,
                          static_cast<std::uint32_t>(begin),
                          static_cast<std::uint32_t>(end),
                          static_cast<std::uint32_t>(x.offset / 4),
                          0};
      const std::uint64_t per_group = per_invocation ? kChunkLanes : 1;
      const auto groups = static_cast<std::uint32_t>(
          std::min((end - begin + per_group - 1) / per_group, kMaxGroups));
      ctx.stream().dispatch(chunks, {x, table, partials}, push, Groups{groups, 1, 1});
    }
    // The sum of the partials (of nothing, for empty tensors: 0).
    const BufferRange any(grads, ctx.buffer(in[0]).offset, 16);
    ctx.stream().dispatch(kernel, {any, table, partials}, NormPush{0, 0, 0, 0, 0, 1},
                          Groups{1, 1, 1});
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error("global_norm has no gradient");
  }
  std::size_t host_params_bytes() const override {
    return kNormHeaderBytes + (first_chunk_.size() - 1) * kNormSegmentBytes;
  }
  void write_host_params(std::span<std::byte> out, std::span<const Tensor> in,
                         const HostParamsContext& ctx) const override {
    std::vector<std::uint32_t> words(out.size() / 4, 0);
    for (std::size_t i = 0; i < in.size(); ++i) {
      words[4 + 4 * i] = static_cast<std::uint32_t>(ctx.buffer(in[i]).offset / 4);
      words[4 + 4 * i + 1] = static_cast<std::uint32_t>(in[i].shape().elements());
      words[4 + 4 * i + 2] = static_cast<std::uint32_t>(first_chunk_[i]);
    }
    words[0] = static_cast<std::uint32_t>(in.size());
    words[1] = static_cast<std::uint32_t>(first_chunk_.back());
    std::memcpy(out.data(), words.data(), out.size());
  }

 private:
  std::vector<std::uint64_t> first_chunk_;
};

}  // namespace

Tensor global_norm(const std::vector<Tensor>& tensors) {
  if (tensors.empty()) throw Error("global_norm: no tensors given");
  std::vector<std::uint64_t> first_chunk{0};
  for (const Tensor& t : tensors) first_chunk.push_back(first_chunk.back() + chunks_of(t));
  const std::uint64_t chunks = first_chunk.back();
  // The norm, then each chunk's sum of squares (the first pass's partials).
  return tensors.front().graph().add_node(std::make_unique<GlobalNormOp>(std::move(first_chunk)),
                                          tensors, Shape{static_cast<std::int64_t>(1 + chunks)});
}

}  // namespace vkt::detail
