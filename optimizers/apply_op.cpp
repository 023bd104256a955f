#include "apply_op.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "../runtime/graph/graph.h"
#include "../runtime/graph/ops/kernel_util.h"
#include "../runtime/vulkan/device.h"
#include "../runtime/vulkan/error.h"
#include "apply_window.h"

namespace vkt::detail {
namespace {

// lr, h[11], clip_value, clip_norm, segments, total: the Params block of
// shaders/optimizer_params.glsl, whose segment table follows at word 16.
constexpr std::size_t kApplyHeaderWords = 16;
constexpr std::size_t kApplyHeaderBytes = 4 * kApplyHeaderWords;
static_assert(1 + std::tuple_size_v<decltype(StepValues::h)> + 4 == kApplyHeaderWords);
constexpr std::size_t kApplySegmentBytes = 32;  // two uvec4
// Invocations of an update dispatch: one per 64 elements, at most 2^18. Each
// loops over its share, which amortises its loads of the segment table and the
// step's values; one invocation per element made a 50k-parameter Adam update
// 8x slower on lavapipe (vkt-bench-estimator), where invocations are not free.
constexpr std::uint64_t kApplyElementsPerThread = 64;
// The update's workgroup: 64 invocations, not the usual 256. A small arena (a
// tiny model's) fills one workgroup only in part, and lavapipe runs every
// invocation of it, each loading the step's values; at 256 the SGD update of a
// 2,410-parameter MLP cost 2.5 trivial dispatches, at 64 about 1.3
// (vkt-bench-step-overhead --commands). A large arena is the same work either way.
constexpr std::uint32_t kApplyLocalSize = 64;
constexpr std::uint64_t kApplyThreads = 1u << 18;
constexpr std::size_t kSparseSegmentBytes = 48;  // three uvec4
// Inputs per sparse variable before its slots: variable, values, indices, links.
constexpr std::size_t kSparseStride = 4;
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

/// The push constants of shaders/optimizer_common.glsl (dense) and
/// optimizer_sparse_common.glsl: which part of the table one dispatch covers and
/// where its windows start.
struct DenseWindowPush {
  std::uint32_t first_segment, end_segment, first_vector, end_vector;
  std::uint32_t var_base, grad_base;
  std::uint32_t slot_base[3];
};
struct SparseWindowPush {
  std::uint32_t first_segment, end_segment, first_row, end_row;
  std::uint32_t var_base, values_base, ids_base;
  std::uint32_t slot_base[3];
  std::uint32_t links_base;
};

/// A window of `buffer`, kept inside it (a window's end is rounded up to 16
/// bytes, which tensors' padding holds, but never past the buffer).
BufferRange window_range(const Buffer& buffer, const Window& w) {
  return BufferRange(buffer, w.offset, std::min<std::uint64_t>(w.bytes, buffer.size() - w.offset));
}

// The slot windows of one part, from window `first` on, and their bases in
// units of `unit_bytes`; a slot the optimizer lacks is bound to `vars`, unread.
std::array<BufferRange, 3> slot_windows(const Buffer& arena, const WindowPart& part,
                                        std::size_t first, std::size_t slots,
                                        const BufferRange& vars, std::size_t unit_bytes,
                                        std::uint32_t (&base)[3]) {
  std::array<BufferRange, 3> slot{vars, vars, vars};
  for (std::size_t k = 0; k < slots; ++k) slot[k] = window_range(arena, part.windows[first + k]);
  for (std::size_t k = 0; k < 3; ++k)
    base[k] = static_cast<std::uint32_t>(slot[k].offset / unit_bytes);
  return slot;
}

/// Units (vec4s, elements) of the segments one part covers.
std::uint64_t part_units(const WindowPart& part, const std::vector<WindowSegment>& segments) {
  std::uint64_t n = 0;
  for (std::uint32_t s = part.first_segment; s < part.end_segment; ++s) {
    const std::uint64_t from = s == part.first_segment ? part.first_unit : 0;
    const std::uint64_t to = s + 1 == part.end_segment ? part.end_unit : segments[s].units;
    n += to - from;
  }
  return n;
}

/// A plain copy, whatever the dtype (i32 indices included).
class GradientCopyOp final : public Op {
 public:
  std::string type() const override { return "gradient_copy"; }
  // A copy command, not a binding: no range limit.
  bool windows_input(std::size_t) const override { return true; }
  bool windows_output() const override { return true; }
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

}  // namespace

ApplyOp::ApplyOp(std::string shader, std::function<StepValues(std::uint64_t)> values,
                 Clipping clipping, std::size_t variables, std::size_t slots, bool has_norm,
                 bool has_check)
    : shader_(std::move(shader)),
      values_(std::move(values)),
      clipping_(clipping),
      variables_(variables),
      slots_(slots),
      has_norm_(has_norm),
      has_check_(has_check) {}

void ApplyOp::record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const {
  const std::size_t first = first_variable();
  const Buffer& arena = *ctx.buffer(in[first]).buffer;
  const Buffer& grads = *ctx.buffer(in[first + 1]).buffer;
  std::vector<WindowSegment> segments;
  for (std::size_t v = 0; v < variables_; ++v) {
    const std::size_t at = first + v * (2 + slots_);
    if (ctx.buffer(in[at]).buffer != &arena || ctx.buffer(in[at + 1]).buffer != &grads) {
      throw Error(
          fmt::format("{}: variables must live in the variable arena and gradients in the "
                      "gradient arena ('{}')",
                      type(), in[at].name()));
    }
    WindowSegment& seg = segments.emplace_back();
    seg.name = in[at].name();
    seg.units = (static_cast<std::uint64_t>(in[at].shape().elements()) + 3) / 4;  // vec4s
    for (std::size_t k = 0; k < 2 + slots_; ++k) {
      seg.bindings.push_back({ctx.buffer(in[at + k]).offset, 16, 0});
    }
  }
  Device& device = ctx.device();
  const Kernel& kernel = device.kernel({.shader = shader_,
                                        .local_size = {kApplyLocalSize, 1, 1},
                                        .constants = {SpecConstant::u32(1, has_check_ ? 1 : 0)}});
  for (const WindowPart& part : plan_windows(segments, device.max_storage_buffer_range(),
                                             tensor_alignment(device), type())) {
    const BufferRange vars = window_range(arena, part.windows[0]);
    const BufferRange grad = window_range(grads, part.windows[1]);
    // Bases in vec4s.
    DenseWindowPush push{part.first_segment,
                         part.end_segment,
                         static_cast<std::uint32_t>(part.first_unit),
                         static_cast<std::uint32_t>(part.end_unit),
                         static_cast<std::uint32_t>(vars.offset / 16),
                         static_cast<std::uint32_t>(grad.offset / 16),
                         {}};
    const auto slot = slot_windows(arena, part, 2, slots_, vars, 16, push.slot_base);
    const BufferRange norm = has_norm_ ? ctx.buffer(in[0]) : grad;
    const BufferRange check = has_check_ ? ctx.buffer(in[has_norm_ ? 1 : 0]) : grad;
    const std::uint64_t elements = 4 * part_units(part, segments);
    ctx.stream().dispatch(
        kernel,
        {vars, grad, ctx.host_params(), norm, ctx.buffer(out), slot[0], slot[1], slot[2], check},
        push,
        Stream::linear_groups(
            kernel, std::clamp<std::uint64_t>(
                        (elements + kApplyElementsPerThread - 1) / kApplyElementsPerThread, 1,
                        kApplyThreads)));
  }
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
  const std::size_t first = first_variable();
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
                             bool has_norm, bool has_check, bool has_dense)
    : shader_(std::move(shader)),
      values_(std::move(values)),
      clipping_(clipping),
      variables_(variables),
      slots_(slots),
      has_norm_(has_norm),
      has_check_(has_check),
      has_dense_(has_dense) {}

void SparseApplyOp::record(RecordContext& ctx, std::span<const Tensor> in,
                           const Tensor& out) const {
  const std::size_t first = first_variable();
  const Buffer& arena = *ctx.buffer(in[first]).buffer;
  const Buffer& grads = *ctx.buffer(in[first + 1]).buffer;
  const Buffer& links = *ctx.buffer(in[first + 3]).buffer;
  std::vector<WindowSegment> segments;
  std::vector<std::uint64_t> items;  // work items of each segment: occurrences x blocks
  for (std::size_t v = 0; v < variables_; ++v) {
    const std::size_t at = first + v * (kSparseStride + slots_);
    if (ctx.buffer(in[at]).buffer != &arena || ctx.buffer(in[at + 1]).buffer != &grads ||
        ctx.buffer(in[at + 2]).buffer != &grads || ctx.buffer(in[at + 3]).buffer != &links) {
      throw Error(
          fmt::format("{}: variables must live in the variable arena, sparse gradients "
                      "in the gradient arena and their links in one buffer ('{}')",
                      type(), in[at].name()));
    }
    const std::uint64_t row = 4 * std::uint64_t{row_width(in[at])};
    const auto k = static_cast<std::uint64_t>(in[at + 2].shape().elements());
    WindowSegment& seg = segments.emplace_back();
    seg.name = in[at].name();
    seg.units = static_cast<std::uint64_t>(in[at].shape()[0]);  // rows
    seg.bindings.push_back({ctx.buffer(in[at]).offset, row, 0});
    seg.bindings.push_back({ctx.buffer(in[at + 1]).offset, 0, k * row});
    seg.bindings.push_back({ctx.buffer(in[at + 2]).offset, 0, 4 * k});
    for (std::size_t s = 0; s < slots_; ++s) {
      seg.bindings.push_back({ctx.buffer(in[at + kSparseStride + s]).offset, row, 0});
    }
    seg.bindings.push_back({ctx.buffer(in[at + 3]).offset, 0, 8 * k});  // head, next
    items.push_back(k * blocks_per_row(row_width(in[at])));
  }
  Device& device = ctx.device();
  const Kernel& kernel = device.kernel({.shader = shader_ + "_sparse",
                                        .local_size = {kApplyLocalSize, 1, 1},
                                        .constants = {SpecConstant::u32(1, has_check_ ? 1 : 0)}});
  for (const WindowPart& part : plan_windows(segments, device.max_storage_buffer_range(),
                                             tensor_alignment(device), type())) {
    const BufferRange vars = window_range(arena, part.windows[0]);
    const BufferRange values = window_range(grads, part.windows[1]);
    const BufferRange ids = window_range(grads, part.windows[2]);
    // Bases in floats.
    SparseWindowPush push{part.first_segment,
                          part.end_segment,
                          static_cast<std::uint32_t>(part.first_unit),
                          static_cast<std::uint32_t>(part.end_unit),
                          static_cast<std::uint32_t>(vars.offset / 4),
                          static_cast<std::uint32_t>(values.offset / 4),
                          static_cast<std::uint32_t>(ids.offset / 4),
                          {},
                          0};
    const auto slot = slot_windows(arena, part, 3, slots_, vars, 4, push.slot_base);
    const BufferRange chains = window_range(links, part.windows[3 + slots_]);
    push.links_base = static_cast<std::uint32_t>(chains.offset / 4);
    std::uint64_t part_items = 0;  // every occurrence is scanned, whatever rows the part takes
    for (std::uint32_t s = part.first_segment; s < part.end_segment; ++s) part_items += items[s];
    const BufferRange norm = has_norm_ ? ctx.buffer(in[0]) : values;
    const BufferRange check = has_check_ ? ctx.buffer(in[has_norm_ ? 1 : 0]) : values;
    ctx.stream().dispatch(
        kernel,
        {vars, values, ctx.host_params(), norm, ctx.buffer(out), vars, values, ids, slot[0],
         slot[1], slot[2], chains, check},
        push,
        Stream::linear_groups(kernel, std::clamp<std::uint64_t>(part_items, 1, kApplyThreads)));
  }
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
    const std::size_t at = first + v * (kSparseStride + slots_);
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
    words[w + 7] = float_offset(ctx.buffer(in[at + 3]));  // i32s too
    for (std::size_t s = 0; s < slots_; ++s)
      words[w + 8 + s] = float_offset(ctx.buffer(in[at + kSparseStride + s]));
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
