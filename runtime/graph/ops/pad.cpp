// pad (shaders/pad.comp): x placed in a larger tensor filled with a value. Its
// gradient cuts the block back out with the same kernel and negated offsets,
// and that cut's gradient is a zero pad again.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "fold_axes.h"
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

/// Output = `value` everywhere but the block at `offset` (one per axis),
/// which holds the input; a negative offset cuts the output out of the input.
class PadOp final : public Op {
 public:
  PadOp(std::vector<std::int64_t> offset, float value, bool cut)
      : offset_(std::move(offset)), value_(value), cut_(cut) {}
  std::string type() const override { return cut_ ? "pad_grad" : "pad"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const PadPush push{static_cast<std::uint32_t>(out.shape().elements()), value_};
    KernelDesc desc{.shader = "pad", .local_size = {ops_detail::kLocalSize, 1, 1}};
    const auto fold = ops_detail::fold_pad(out.shape(), in[0].shape(), offset_);
    if (!fold) throw Error("internal: a pad past the kernel's 4 dims");
    for (std::uint32_t k = 0; k < 4; ++k) {
      desc.constants.push_back(SpecConstant::u32(1 + k, fold->out_dims[k]));
      desc.constants.push_back(SpecConstant::u32(5 + k, fold->in_dims[k]));
      desc.constants.push_back(SpecConstant::i32(9 + k, fold->offset[k]));
    }
    ops_detail::dispatch_1d(ctx, ctx.device().kernel(desc), {ctx.buffer(in[0]), ctx.buffer(out)},
                            push, push.n);
  }
  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    std::vector<std::int64_t> back;
    for (const std::int64_t o : offset_) back.push_back(-o);
    return {Gradient{
        dy.graph().add_node(std::make_unique<PadOp>(back, 0.0f, !cut_), {dy}, in[0].shape())}};
  }

 private:
  std::vector<std::int64_t> offset_;
  float value_;
  bool cut_;
};

}  // namespace

Tensor pad(const Tensor& x, const std::vector<std::pair<std::int64_t, std::int64_t>>& paddings,
           float value) {
  if (!x.valid()) throw Error("pad: the input tensor is empty");
  const Shape& s = x.shape();
  const std::string what = fmt::format("pad('{}' {})", x.name(), s.str());
  if (x.dtype() != DType::F32)
    throw Error(what + ": x " + ops_detail::not_f32(x) + "; pad takes f32");
  if (static_cast<int>(paddings.size()) != s.rank()) {
    throw Error(
        fmt::format("{}: {} (before, after) pairs for a rank-{} tensor; give one pair per "
                    "dimension, {{0, 0}} where nothing is added",
                    what, paddings.size(), s.rank()));
  }
  std::vector<std::int64_t> dims(s.dims());
  std::vector<std::int64_t> offset(dims.size());
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
    offset[static_cast<std::size_t>(k)] = before;
  }
  const Shape out(dims);
  if (out.elements() > std::numeric_limits<std::uint32_t>::max()) {
    throw Error(fmt::format("{}: the result {} has {} elements; pad indexes at most 2^32 - 1", what,
                            out.str(), out.elements()));
  }
  if (out == s) return x;
  if (!ops_detail::fold_pad(out, s, offset)) {
    throw Error(
        fmt::format("{}: pads {} axes apart from the first; the kernel takes up to 3 (or 4 "
                    "with the first): pad in two steps",
                    what, std::count_if(paddings.begin() + 1, paddings.end(), [](const auto& p) {
                      return p.first != 0 || p.second != 0;
                    })));
  }
  return x.graph().add_node(std::make_unique<PadOp>(offset, value, false), {x}, out);
}

}  // namespace vkt
