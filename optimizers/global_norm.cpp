// global_norm(): the norm that clipping by global norm divides by
// (shaders/global_norm.comp: partial sums over many workgroups, then one);
// finite_check(): the loss scaler's count of inf and NaN gradients by the
// same chunks (shaders/finite_check.comp).

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

/// What a chunked op sums: squares (the norm) or inf and NaN values (the check).
enum class ChunkSum { Squares, NonFinite };

/// Results before the chunks' sums in the output: the norm; or the check's
/// (1 / scale, found in this call, found in the step so far).
std::int64_t results_of(ChunkSum kind) {
  return kind == ChunkSum::Squares ? 1 : 3;
}

/// Inputs: the tensors summed; NonFinite: then the loss scale and, when
/// `has_previous`, the step's previous check.
class ChunkSumOp final : public Op {
 public:
  /// `first_chunk`: per tensor, the chunks of the tensors before it; then the total.
  ChunkSumOp(ChunkSum kind, std::vector<std::uint64_t> first_chunk, bool has_previous)
      : kind_(kind), first_chunk_(std::move(first_chunk)), has_previous_(has_previous) {}
  std::string type() const override {
    return kind_ == ChunkSum::Squares ? "global_norm" : "finite_check";
  }
  bool windows_input(std::size_t) const override { return true; }
  void record(RecordContext& ctx, std::span<const Tensor> inputs,
              const Tensor& out) const override {
    const std::span<const Tensor> in = inputs.first(first_chunk_.size() - 1);
    const Buffer& grads = *ctx.buffer(in[0]).buffer;
    std::vector<WindowSegment> segments;
    for (const Tensor& t : in) {
      const BufferRange r = ctx.buffer(t);
      if (r.buffer != &grads) {
        throw Error(type() + ": its tensors must be gradients (all in the gradient arena)");
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
    const std::string shader = type();
    // The check's constant 2 (HAS_PREVIOUS); the norm has none.
    std::vector<SpecConstant> constants;
    if (kind_ == ChunkSum::NonFinite) constants.push_back(SpecConstant::u32(2, has_previous_));
    const Kernel& kernel =
        device.kernel({.shader = shader, .local_size = {256, 1, 1}, .constants = constants});
    constants.push_back(SpecConstant::u32(1, 1));
    const Kernel& chunks =
        per_invocation
            ? device.kernel(
                  {.shader = shader, .local_size = {kChunkLanes, 1, 1}, .constants = constants})
            : kernel;
    // The check's loss scale and previous check (bound, unread, in pass 0).
    std::vector<BufferRange> extra;
    if (kind_ == ChunkSum::NonFinite) {
      extra.push_back(ctx.buffer(inputs[in.size()]));
      extra.push_back(ctx.buffer(inputs[has_previous_ ? in.size() + 1 : in.size()]));
    }
    const auto bind = [&](const BufferRange& x) {
      std::vector<BufferRange> b{x, table, partials};
      b.insert(b.end(), extra.begin(), extra.end());
      return b;
    };
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
      ctx.stream().dispatch(chunks, bind(x), std::as_bytes(std::span(&push, 1)),
                            Groups{groups, 1, 1});
    }
    // The sum of the partials (of nothing, for empty tensors: 0).
    const BufferRange any(grads, ctx.buffer(in[0]).offset, 16);
    const NormPush sum{0, 0, 0, 0, 0, 1};
    ctx.stream().dispatch(kernel, bind(any), std::as_bytes(std::span(&sum, 1)), Groups{1, 1, 1});
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error(type() + " has no gradient");
  }
  std::size_t host_params_bytes() const override {
    return kNormHeaderBytes + (first_chunk_.size() - 1) * kNormSegmentBytes;
  }
  void write_host_params(std::span<std::byte> out, std::span<const Tensor> inputs,
                         const HostParamsContext& ctx) const override {
    const std::span<const Tensor> in = inputs.first(first_chunk_.size() - 1);
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
  ChunkSum kind_;
  std::vector<std::uint64_t> first_chunk_;
  bool has_previous_;
};

Tensor chunk_sum(ChunkSum kind, const std::vector<Tensor>& tensors, std::vector<Tensor> extra,
                 bool has_previous) {
  if (tensors.empty()) throw Error("global_norm: no tensors given");
  std::vector<std::uint64_t> first_chunk{0};
  for (const Tensor& t : tensors) first_chunk.push_back(first_chunk.back() + chunks_of(t));
  const auto size = static_cast<std::int64_t>(results_of(kind) + first_chunk.back());
  std::vector<Tensor> inputs = tensors;
  inputs.insert(inputs.end(), extra.begin(), extra.end());
  return tensors.front().graph().add_node(
      std::make_unique<ChunkSumOp>(kind, std::move(first_chunk), has_previous), inputs,
      Shape{size});
}

}  // namespace

Tensor global_norm(const std::vector<Tensor>& tensors) {
  // The norm, then each chunk's sum of squares (the first pass's partials).
  return chunk_sum(ChunkSum::Squares, tensors, {}, false);
}

Tensor finite_check(const std::vector<Tensor>& tensors, const Tensor& scale,
                    const Tensor& previous) {
  std::vector<Tensor> extra{scale};
  if (previous.valid()) extra.push_back(previous);
  return chunk_sum(ChunkSum::NonFinite, tensors, std::move(extra), previous.valid());
}

}  // namespace vkt::detail
