// concat and pad_axis: one op that places pieces into blocks of an output along
// an axis (shaders/concat.comp), zero-filling what no piece covers. The
// gradients of slices are such pads, which merge_padded joins for autodiff.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "kernel_util.h"
#include "shape_ops.h"

namespace vkt {
namespace {

constexpr std::size_t kPiecesPerDispatch = 4;  // source bindings of concat.comp

struct ConcatPush {
  std::uint32_t n, out_inner, pad0, pad1;
  std::array<std::uint32_t, 4> ends, inner, offset;
};

std::int64_t product(const Shape& s, int from, int to) {
  std::int64_t p = 1;
  for (int i = from; i < to; ++i) p *= s[i];
  return p;
}

/// Output = zeros of its shape with input p placed at begins[p] along axis.
class PlaceOp final : public Op {
 public:
  PlaceOp(int axis, std::vector<std::int64_t> begins, bool covers)
      : axis_(axis), begins_(std::move(begins)), covers_(covers) {}

  std::string type() const override { return covers_ ? "concat" : "pad"; }
  int axis() const { return axis_; }
  const std::vector<std::int64_t>& begins() const { return begins_; }

  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const Shape& shape = out.shape();
    const std::int64_t trailing = product(shape, axis_ + 1, shape.rank());
    // Gaps must read as zeros; where the pieces cover everything the fill would
    // only cost a pass over memory.
    if (!covers_) ctx.stream().fill(ctx.buffer(out), 0);
    if (product(shape, 0, axis_) == 1) {
      // One block per piece (concat along the first axis that is not 1: a
      // split's gradient): copies, no index arithmetic.
      const BufferRange whole = ctx.buffer(out);
      for (std::size_t p = 0; p < in.size(); ++p) {
        const std::size_t offset = static_cast<std::size_t>(begins_[p] * trailing) * 4;
        const std::size_t bytes = static_cast<std::size_t>(in[p].shape().elements()) * 4;
        ctx.stream().copy(ctx.buffer(in[p]),
                          BufferRange(*whole.buffer, whole.offset + offset, bytes));
      }
      return;
    }
    const Kernel& kernel =
        ctx.device().kernel({.shader = "concat", .local_size = {ops_detail::kLocalSize, 1, 1}});
    for (std::size_t first = 0; first < in.size(); first += kPiecesPerDispatch) {
      const std::size_t count = std::min(kPiecesPerDispatch, in.size() - first);
      ConcatPush push{};
      push.out_inner = static_cast<std::uint32_t>(shape[axis_] * trailing);
      std::uint32_t end = 0;
      for (std::size_t p = 0; p < kPiecesPerDispatch; ++p) {
        push.inner[p] = 1;
        if (p < count) {
          const Tensor& piece = in[first + p];
          end += static_cast<std::uint32_t>(piece.shape().elements());
          push.inner[p] = static_cast<std::uint32_t>(piece.shape()[axis_] * trailing);
          push.offset[p] = static_cast<std::uint32_t>(begins_[first + p] * trailing);
        }
        push.ends[p] = end;
      }
      push.n = end;
      // Unused source bindings get the first piece again; nothing reads them.
      const auto source = [&](std::size_t p) {
        return ctx.buffer(in[first + (p < count ? p : 0)]);
      };
      ops_detail::dispatch_1d(
          ctx, kernel, {source(0), source(1), source(2), source(3), ctx.buffer(out)}, push, end);
    }
  }

  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    std::vector<Gradient> grads;
    for (std::size_t p = 0; p < in.size(); ++p) {
      if (in[p].dtype() != DType::F32) {
        grads.push_back(Gradient{});
        continue;
      }
      grads.push_back(Gradient{slice_axis(dy, axis_, begins_[p], in[p].shape()[axis_])});
    }
    return grads;
  }

 private:
  int axis_;
  std::vector<std::int64_t> begins_;
  bool covers_;
};

// `shape` by value: callers pass shapes of graph tensors, and those live in a
// vector that adding nodes may move.
Tensor place(std::vector<Tensor> pieces, std::vector<std::int64_t> begins, Shape shape, int axis) {
  std::int64_t covered = 0;
  for (const Tensor& p : pieces) covered += p.shape()[axis];
  const bool covers = covered == shape[axis];  // pieces never overlap
  Graph& g = pieces.front().graph();
  const DType dtype = pieces.front().dtype();
  return g.add_node(std::make_unique<PlaceOp>(axis, std::move(begins), covers), std::move(pieces),
                    shape, dtype);
}

}  // namespace

Tensor concat(const std::vector<Tensor>& xs, int axis) {
  if (xs.empty()) throw Error("concat: no tensors to join");
  for (const Tensor& x : xs) {
    if (!x.valid()) throw Error("concat: an input tensor is empty");
    if (&x.graph() != &xs.front().graph()) {
      throw Error(fmt::format("concat: '{}' and '{}' belong to different graphs (devices)",
                              xs.front().name(), x.name()));
    }
  }
  const Tensor& first = xs.front();
  if (first.shape().rank() == 0) {
    throw Error(fmt::format("concat: '{}' is a scalar; reshape it to [1] first", first.name()));
  }
  const std::string what = fmt::format("concat(axis {})", axis);
  const int a = first.shape().axis(axis, what.c_str());
  std::vector<std::int64_t> dims = first.shape().dims();
  std::vector<std::int64_t> begins;
  std::int64_t total = 0;
  for (const Tensor& x : xs) {
    if (x.dtype() != first.dtype()) {
      throw Error(fmt::format("{}: '{}' holds {} values and '{}' {}", what, first.name(),
                              to_string(first.dtype()), x.name(), to_string(x.dtype())));
    }
    bool same = x.shape().rank() == first.shape().rank();
    for (int i = 0; same && i < x.shape().rank(); ++i) same = i == a || x.shape()[i] == dims[i];
    if (!same) {
      throw Error(fmt::format(
          "{}: '{}' has shape {} and '{}' has shape {}; they must agree except along axis {}", what,
          first.name(), first.shape().str(), x.name(), x.shape().str(), a));
    }
    begins.push_back(total);
    total += x.shape()[a];
  }
  if (xs.size() == 1) return first;
  dims[a] = total;
  return place(xs, std::move(begins), Shape(dims), a);
}

Tensor pad_axis(const Tensor& x, const Shape& shape, int axis, std::int64_t begin) {
  if (!x.valid()) throw Error("pad_axis: the input tensor is empty");
  const std::string what =
      fmt::format("pad_axis('{}', {}, axis {}, begin {})", x.name(), shape.str(), axis, begin);
  const int a = shape.axis(axis, what.c_str());
  bool fits = x.shape().rank() == shape.rank() && begin >= 0 && begin + x.shape()[a] <= shape[a];
  for (int i = 0; fits && i < shape.rank(); ++i) fits = i == a || x.shape()[i] == shape[i];
  if (!fits) {
    throw Error(fmt::format("{}: a tensor of shape {} does not fit there", what, x.shape().str()));
  }
  if (x.shape() == shape) return x;
  return place({x}, {begin}, shape, a);
}

std::vector<Tensor> merge_padded(const std::vector<Tensor>& parts) {
  struct Group {
    const Tensor* first;
    int axis;
    std::vector<Tensor> pieces;
    std::vector<std::int64_t> begins;
    int members = 0;
  };
  std::vector<Group> groups;
  std::vector<int> slot(parts.size(), -1);  // group of each part, -1 = kept as is
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const Tensor& t = parts[i];
    Graph& g = t.graph();
    const int node = g.info(t).node;
    if (node < 0) continue;
    const auto* op = dynamic_cast<const PlaceOp*>(g.nodes()[node].op.get());
    if (!op) continue;
    const std::vector<Tensor>& pieces = g.nodes()[node].inputs;
    const auto disjoint = [&](const Group& grp) {
      for (std::size_t p = 0; p < pieces.size(); ++p) {
        const std::int64_t b = op->begins()[p], e = b + pieces[p].shape()[op->axis()];
        for (std::size_t q = 0; q < grp.pieces.size(); ++q) {
          const std::int64_t gb = grp.begins[q], ge = gb + grp.pieces[q].shape()[grp.axis];
          if (b < ge && gb < e) return false;
        }
      }
      return true;
    };
    int joined = -1;
    for (std::size_t k = 0; k < groups.size() && joined < 0; ++k) {
      const Group& grp = groups[k];
      if (grp.axis == op->axis() && grp.first->shape() == t.shape() &&
          grp.first->dtype() == t.dtype() && disjoint(grp)) {
        joined = static_cast<int>(k);
      }
    }
    if (joined < 0) {
      groups.push_back(Group{&t, op->axis(), {}, {}});
      joined = static_cast<int>(groups.size()) - 1;
    }
    Group& grp = groups[static_cast<std::size_t>(joined)];
    grp.pieces.insert(grp.pieces.end(), pieces.begin(), pieces.end());
    grp.begins.insert(grp.begins.end(), op->begins().begin(), op->begins().end());
    ++grp.members;
    slot[i] = joined;
  }
  std::vector<Tensor> merged;
  std::vector<bool> emitted(groups.size(), false);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (slot[i] < 0 || groups[static_cast<std::size_t>(slot[i])].members == 1) {
      merged.push_back(parts[i]);
      continue;
    }
    const auto k = static_cast<std::size_t>(slot[i]);
    if (emitted[k]) continue;
    emitted[k] = true;
    Group& grp = groups[k];
    merged.push_back(place(grp.pieces, grp.begins, grp.first->shape(), grp.axis));
  }
  return merged;
}

}  // namespace vkt
