// permute and transpose (shaders/permute.comp): one gather per 32-bit word.
// The gradient is the inverse permutation applied to dy. A half tensor whose
// last axis stays last and is even is permuted as the words holding its pairs.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "kernel_util.h"
#include "shape_ops.h"

namespace vkt {
namespace {

constexpr int kShaderRank = 6;  // permute.comp's dims

struct PermutePush {
  std::uint32_t n;
};

/// Whether permute moves whole words of a half tensor of shape `s`: two
/// elements of its last axis, which stays last.
bool moves_half_pairs(const Shape& s, const std::vector<int>& perm) {
  return perm.back() == s.rank() - 1 && s[s.rank() - 1] % 2 == 0;
}

/// `s` counted in words: the last axis halved for a half tensor.
Shape in_words(const Shape& s, DType dtype) {
  if (!is_half(dtype)) return s;
  std::vector<std::int64_t> dims = s.dims();
  dims.back() /= 2;
  return Shape(std::move(dims));
}

class PermuteOp final : public Op {
 public:
  explicit PermuteOp(std::vector<int> perm) : perm_(std::move(perm)) {}
  std::string type() const override { return "permute"; }
  /// permute() admits a half tensor only where it moves whole words.
  bool takes_half() const override { return true; }

  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const Shape s = in_words(in[0].shape(), in[0].dtype());
    const Shape out_shape = in_words(out.shape(), out.dtype());
    const int rank = s.rank();
    std::vector<std::uint32_t> strides(static_cast<std::size_t>(rank), 1);
    for (int k = rank - 2; k >= 0; --k) {
      strides[static_cast<std::size_t>(k)] =
          strides[static_cast<std::size_t>(k + 1)] * static_cast<std::uint32_t>(s[k + 1]);
    }
    // The last axis staying last is copied 4 elements an invocation, as one
    // vec4: a quarter of the index arithmetic and of the accesses (the heads'
    // permutes keep Dh last).
    const bool vec4 = perm_.back() == rank - 1 && s[rank - 1] % 4 == 0;
    KernelDesc desc{.shader = vec4 ? "permute_vec4" : "permute",
                    .local_size = {ops_detail::kLocalSize, 1, 1}};
    const int pad = kShaderRank - rank;  // leading axes of size 1
    for (int k = 0; k < kShaderRank; ++k) {
      const bool real = k >= pad;
      const int axis = real ? perm_[static_cast<std::size_t>(k - pad)] : 0;
      desc.constants.push_back(
          SpecConstant::u32(static_cast<std::uint32_t>(1 + k),
                            real ? static_cast<std::uint32_t>(out_shape[k - pad]) : 1u));
      desc.constants.push_back(SpecConstant::u32(
          static_cast<std::uint32_t>(7 + k), real ? strides[static_cast<std::size_t>(axis)] : 0u));
    }
    const PermutePush push{static_cast<std::uint32_t>(out_shape.elements())};
    ops_detail::dispatch_1d(ctx, ctx.device().kernel(desc), {ctx.buffer(in[0]), ctx.buffer(out)},
                            push, push.n / (vec4 ? 4 : 1));
  }

  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor& dy) const override {
    std::vector<int> inverse(perm_.size());
    for (std::size_t k = 0; k < perm_.size(); ++k) {
      inverse[static_cast<std::size_t>(perm_[k])] = static_cast<int>(k);
    }
    return {Gradient{permute(dy, inverse)}};
  }

 private:
  std::vector<int> perm_;
};

}  // namespace

Tensor permute(const Tensor& x, const std::vector<int>& perm) {
  if (!x.valid()) throw Error("permute: the input tensor is empty");
  const Shape& s = x.shape();
  const std::string what = fmt::format("permute('{}' {})", x.name(), s.str());
  if (static_cast<int>(perm.size()) != s.rank()) {
    throw Error(
        fmt::format("{}: {} axes for a rank-{} tensor; give each axis once, in its new order", what,
                    perm.size(), s.rank()));
  }
  std::vector<int> axes(perm.size());
  std::vector<bool> seen(perm.size(), false);
  for (std::size_t k = 0; k < perm.size(); ++k) {
    const int axis = s.axis(perm[k], "permute");
    if (seen[static_cast<std::size_t>(axis)]) {
      throw Error(fmt::format("{}: axis {} appears twice in ({}); give each axis once", what,
                              perm[k], fmt::join(perm, ", ")));
    }
    seen[static_cast<std::size_t>(axis)] = true;
    axes[k] = axis;
  }
  if (is_half(x.dtype()) && !moves_half_pairs(s, axes)) {
    throw Error(fmt::format(
        "{}: a {} tensor permutes only with its last axis kept last and of even size; cast it "
        "to f32 first (vkt::cast(x, vkt::DType::F32))",
        what, to_string(x.dtype())));
  }
  if (s.elements() > std::numeric_limits<std::uint32_t>::max()) {
    throw Error(
        fmt::format("{}: {} elements; permute indexes at most 2^32 - 1", what, s.elements()));
  }
  std::vector<std::int64_t> dims(perm.size());
  for (std::size_t k = 0; k < axes.size(); ++k) dims[k] = s[axes[k]];
  // Moving only axes of size 1 (or none) keeps the order of the elements: a
  // view, and x itself for the identity.
  std::vector<int> moved;
  for (const int axis : axes) {
    if (s[axis] != 1) moved.push_back(axis);
  }
  if (std::is_sorted(moved.begin(), moved.end())) return reshape(x, Shape(dims));
  return x.graph().add_node(std::make_unique<PermuteOp>(axes), {x}, Shape(dims), x.dtype());
}

Tensor transpose(const Tensor& x, int axis_a, int axis_b) {
  if (!x.valid()) throw Error("transpose: the input tensor is empty");
  const int a = x.shape().axis(axis_a, "transpose");
  const int b = x.shape().axis(axis_b, "transpose");
  std::vector<int> perm(static_cast<std::size_t>(x.shape().rank()));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[static_cast<std::size_t>(a)], perm[static_cast<std::size_t>(b)]);
  return permute(x, perm);
}

}  // namespace vkt
