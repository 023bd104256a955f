// global_norm(): the norm that clipping by global norm divides by
// (shaders/global_norm.comp).

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

// The host block: the invocations' running sums handed from one dispatch to
// the next (written by the device; 1024 bytes keep the table after it aligned
// to any storage offset alignment), then the table: a count, then per tensor
// (first float, count, -, -).
constexpr std::size_t kCarryBytes = 256 * 4;
constexpr std::size_t kNormHeaderBytes = 16;
constexpr std::size_t kNormSegmentBytes = 16;

/// The push constants of shaders/global_norm.comp.
struct NormWindowPush {
  std::uint32_t first_segment, end_segment, first_element, end_element;
  std::uint32_t base;
  std::uint32_t first_dispatch, last_dispatch;
};

class GlobalNormOp final : public Op {
 public:
  explicit GlobalNormOp(std::size_t tensors) : tensors_(tensors) {}
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
      segments.push_back(
          {static_cast<std::uint64_t>(t.shape().elements()), {{r.offset, 4, 0}}, t.name()});
    }
    // Bound as windows of at most the device's range: several dispatches when
    // the gradients span more, summing in the same order as one.
    Device& device = ctx.device();
    std::vector<WindowPart> parts =
        plan_windows(segments, device.max_storage_buffer_range(), tensor_alignment(device), type());
    // Only empty tensors: one dispatch over nothing still writes the norm (0).
    if (parts.empty()) parts.push_back({0, 0, 0, 0, {{ctx.buffer(in[0]).offset, 16}}});
    const BufferRange block = ctx.host_params();
    const BufferRange carry(*block.buffer, block.offset, kCarryBytes);
    const BufferRange table(*block.buffer, block.offset + kCarryBytes, block.size() - kCarryBytes);
    const Kernel& kernel = device.kernel({.shader = "global_norm"});
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const WindowPart& part = parts[i];
      const Window& w = part.windows[0];
      const BufferRange x(grads, w.offset,
                          std::min<std::uint64_t>(w.bytes, grads.size() - w.offset));
      const NormWindowPush push{part.first_segment,
                                part.end_segment,
                                static_cast<std::uint32_t>(part.first_unit),
                                static_cast<std::uint32_t>(part.end_unit),
                                static_cast<std::uint32_t>(x.offset / 4),
                                i == 0 ? 1u : 0u,
                                i + 1 == parts.size() ? 1u : 0u};
      ctx.stream().dispatch(kernel, {x, table, ctx.buffer(out), carry}, push, Groups{1, 1, 1});
    }
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error("global_norm has no gradient");
  }
  std::size_t host_params_bytes() const override {
    return kCarryBytes + kNormHeaderBytes + tensors_ * kNormSegmentBytes;
  }
  void write_host_params(std::span<std::byte> out, std::span<const Tensor> in,
                         const HostParamsContext& ctx) const override {
    std::vector<std::uint32_t> words(out.size() / 4, 0);
    std::uint32_t* table = words.data() + kCarryBytes / 4;
    table[0] = static_cast<std::uint32_t>(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      table[4 + 4 * i] = static_cast<std::uint32_t>(ctx.buffer(in[i]).offset / 4);
      table[4 + 4 * i + 1] = static_cast<std::uint32_t>(in[i].shape().elements());
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

}  // namespace vkt::detail
