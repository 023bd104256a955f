// pad (shaders/pad.comp): x placed in a larger tensor filled with a value. Its
// gradient cuts the block back out with the same kernel and negated offsets,
// and that cut's gradient is a zero pad again.
#include <fmt/format.h>

#include <limits>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "kernel_util.h"
#include "shape_ops.h"

namespace vkt {
namespace {

/// pad.comp's push constants; the shapes and offsets are its specialization constants.
struct PadPush {
  std::uint32_t n;
  float value;
};

// pad.comp turns coordinates and offsets into signed ints.
constexpr std::int64_t kMaxExtent = std::int64_t{1} << 30;

/// Output = `value` everywhere but the block at `offset` (4 dims, right-aligned),
/// which holds the input; a negative offset cuts the output out of the input.
class PadOp final : public Op {
 public:
  PadOp(std::array<std::int32_t, 4> offset, float value, bool cut)
      : offset_(offset), value_(value), cut_(cut) {}
  std::string type() const override { return cut_ ? "pad_grad" : "pad"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const PadPush push{static_cast<std::uint32_t>(out.shape().elements()), value_};
    KernelDesc desc{.shader = "pad", .local_size = {ops_detail::kLocalSize, 1, 1}};
    const auto out_dims = ops_detail::dims4(out.shape());
    const auto in_dims = ops_detail::dims4(in[0].shape());
    for (std::uint32_t k = 0; k < 4; ++k) {
      desc.constants.push_back(SpecConstant::u32(1 + k, out_dims[k]));
      desc.constants.push_back(SpecConstant::u32(5 + k, in_dims[k]));
      desc.constants.push_back(SpecConstant::i32(9 + k, offset_[k]));
    }
    ops_detail::dispatch_1d(ctx, ctx.device().kernel(desc), {ctx.buffer(in[0]), ctx.buffer(out)},
                            push, push.n);
  }
  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    std::array<std::int32_t, 4> back{};
    for (int k = 0; k < 4; ++k) back[k] = -offset_[k];
    return {Gradient{
        dy.graph().add_node(std::make_unique<PadOp>(back, 0.0f, !cut_), {dy}, in[0].shape())}};
  }

 private:
  std::array<std::int32_t, 4> offset_;
  float value_;
  bool cut_;
};

}  // namespace

Tensor pad(const Tensor& x, const std::vector<std::pair<std::int64_t, std::int64_t>>& paddings,
           float value) {
  if (!x.valid()) throw Error("pad: the input tensor is empty");
  const Shape& s = x.shape();
  const std::string what = fmt::format("pad('{}' {})", x.name(), s.str());
  if (x.dtype() != DType::F32) throw Error(what + ": x holds i32 values; pad takes f32");
  if (static_cast<int>(paddings.size()) != s.rank()) {
    throw Error(
        fmt::format("{}: {} (before, after) pairs for a rank-{} tensor; give one pair per "
                    "dimension, {{0, 0}} where nothing is added",
                    what, paddings.size(), s.rank()));
  }
  std::vector<std::int64_t> dims(s.dims());
  std::array<std::int32_t, 4> offset{};
  for (int k = 0; k < s.rank(); ++k) {
    const auto [before, after] = paddings[static_cast<std::size_t>(k)];
    if (before < 0 || after < 0 || before > kMaxExtent || after > kMaxExtent) {
      throw Error(
          fmt::format("{}: dimension {} has padding ({}, {}); each must be between 0 and "
                      "2^30 (cut with slice_axis instead of padding negatively)",
                      what, k, before, after));
    }
    dims[static_cast<std::size_t>(k)] += before + after;
    if (dims[static_cast<std::size_t>(k)] > kMaxExtent) {
      throw Error(fmt::format("{}: dimension {} would grow to {}, past 2^30", what, k,
                              dims[static_cast<std::size_t>(k)]));
    }
    offset[static_cast<std::size_t>(4 - s.rank() + k)] = static_cast<std::int32_t>(before);
  }
  const Shape out(dims);
  if (out.elements() > std::numeric_limits<std::uint32_t>::max()) {
    throw Error(fmt::format("{}: the result {} has {} elements; pad indexes at most 2^32 - 1", what,
                            out.str(), out.elements()));
  }
  if (out == s) return x;
  return x.graph().add_node(std::make_unique<PadOp>(offset, value, false), {x}, out);
}

}  // namespace vkt
