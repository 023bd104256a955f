// embedding_lookup (shaders/embedding.comp) with its sparse gradient, and
// scatter_add_dense (shaders/scatter_add.comp).
#include "embedding.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <numeric>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "cast.h"
#include "kernel_util.h"
#include "shape_ops.h"

namespace vkt {
namespace {

// Columns per invocation of scatter_add.comp (its COLS): each invocation scans
// all k indices once, so wider blocks mean fewer scans; a power of two, so a
// handful of pipeline variants serve every D.
std::uint32_t scatter_cols(std::uint32_t dim) {
  return std::min<std::uint32_t>(32, std::bit_ceil(dim));
}

struct GatherPush {
  std::uint32_t n, dim, rows, first_row, end_row, pad[3];
};

struct ScatterPush {
  std::uint32_t rows, dim, k, blocks;
};

/// A plain copy. The indices of a sparse gradient get one so that they are an
/// op's own output: autodiff moves a gradient into the gradient arena, and
/// would otherwise mark (or try to copy as f32) the user's ids tensor.
class CopyOp final : public Op {
 public:
  std::string type() const override { return "embedding_indices"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    ctx.stream().copy(ctx.buffer(in[0]), ctx.buffer(out));
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    return {Gradient{}};
  }
};

class EmbeddingOp final : public Op {
 public:
  std::string type() const override { return "embedding_lookup"; }
  bool takes_half() const override { return true; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const auto rows = static_cast<std::uint32_t>(in[0].shape()[0]);
    const auto dim = static_cast<std::uint32_t>(in[0].shape()[1]);
    const DType type = in[0].dtype();
    const Kernel& kernel = ctx.device().kernel(
        {.shader = "embedding",
         .local_size = {ops_detail::kLocalSize, 1, 1},
         .constants = {SpecConstant::u32(1, ops_detail::float_type_code(type))}});
    // The table in windows of whole rows, each within the device's storage-buffer
    // range and starting at its storage offset alignment (a whole word, so a
    // half window's element 0 is a word's low half): one dispatch per window.
    const BufferRange table = ctx.buffer(in[0]);
    const std::uint64_t row_bytes = std::uint64_t{dim} * (is_half(type) ? 2 : 4);
    // Whole words: a half window is bound to the end of its last word.
    const std::uint64_t limit = ctx.device().max_storage_buffer_range() / 4 * 4;
    const std::uint64_t alignment = std::max<std::uint64_t>(tensor_alignment(ctx.device()), 4);
    // Rows per window: a multiple of the rows that span a whole alignment.
    const std::uint64_t align_rows = alignment / std::gcd(row_bytes, alignment);
    const std::uint64_t per_window = limit / row_bytes / align_rows * align_rows;
    if (rows > 0 && table.size() > limit && per_window == 0) {
      throw Error(fmt::format(
          "embedding_lookup: the rows of '{}' ({} bytes) are too wide for windows of the "
          "device's max storage buffer range of {} bytes",
          in[0].name(), row_bytes, limit));
    }
    const std::uint64_t step = table.size() > limit ? per_window : rows;
    std::uint32_t first = 0;
    do {
      const auto end = static_cast<std::uint32_t>(std::min<std::uint64_t>(rows, first + step));
      const std::uint64_t offset = first * row_bytes;
      const BufferRange window =
          table.size() > limit
              ? BufferRange(*table.buffer, table.offset + offset,
                            std::min((end * row_bytes + 3) / 4 * 4, table.size()) - offset)
              : table;
      const GatherPush push{
          static_cast<std::uint32_t>(out.shape().elements()), dim, rows, first, end, {}};
      ops_detail::dispatch_1d(ctx, kernel, {window, ctx.buffer(in[1]), ctx.buffer(out)}, push,
                              out.shape().elements());
      first = end;
    } while (first < rows);
  }
  bool windows_input(std::size_t i) const override { return i == 0; }
  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    const Tensor& params = in[0];
    const Tensor& ids = in[1];
    Graph& g = params.graph();
    const std::int64_t k = ids.shape().elements();
    const Tensor values = reshape(dy, Shape{k, params.shape()[1]});
    const Tensor flat_ids = reshape(ids, Shape{k});
    // Only a leaf can take rows: an op producing params differentiates densely.
    if (g.info(params).kind == TensorKind::Op) {
      return {Gradient{scatter_add_dense(values, flat_ids, params.shape()[0])}, Gradient{}};
    }
    const Tensor indices = g.add_node(std::make_unique<CopyOp>(), {flat_ids}, Shape{k}, DType::I32);
    return {Gradient{.values = values, .indices = indices}, Gradient{}};
  }
};

class ScatterAddOp final : public Op {
 public:
  std::string type() const override { return "scatter_add_dense"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const auto rows = static_cast<std::uint32_t>(out.shape()[0]);
    const auto dim = static_cast<std::uint32_t>(out.shape()[1]);
    const std::uint32_t cols = scatter_cols(dim);
    const std::uint32_t blocks = (dim + cols - 1) / cols;
    const ScatterPush push{rows, dim, static_cast<std::uint32_t>(in[1].shape().elements()), blocks};
    const Kernel& kernel = ctx.device().kernel({.shader = "scatter_add",
                                                .local_size = {ops_detail::kLocalSize, 1, 1},
                                                .constants = {SpecConstant::u32(1, cols)}});
    ops_detail::dispatch_1d(ctx, kernel, {ctx.buffer(in[0]), ctx.buffer(in[1]), ctx.buffer(out)},
                            push, static_cast<std::int64_t>(rows) * blocks);
  }
  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    // Each values row went to one output row (or nowhere): gather it back.
    return {Gradient{embedding_lookup(dy, in[1])}, Gradient{}};
  }
};

void check_ids(const Tensor& ids, const std::string& what) {
  if (ids.dtype() != DType::I32) {
    throw Error(fmt::format("{}: the ids '{}' hold {} values; they must be i32", what, ids.name(),
                            to_string(ids.dtype())));
  }
}

}  // namespace

Tensor embedding_lookup(const Tensor& params, const Tensor& ids) {
  if (!params.valid() || !ids.valid()) throw Error("embedding_lookup: an input tensor is empty");
  const std::string what = fmt::format("embedding_lookup('{}', '{}')", params.name(), ids.name());
  if (&params.graph() != &ids.graph()) {
    throw Error(what + ": params and ids belong to different graphs (devices)");
  }
  if (params.dtype() == DType::I32 || params.shape().rank() != 2) {
    throw Error(fmt::format("{}: params must be an f32, f16 or bf16 table [V, D], not {} {}", what,
                            to_string(params.dtype()), params.shape().str()));
  }
  check_ids(ids, what);
  if (ids.shape().rank() > Shape::kMaxRank - 1) {
    throw Error(
        fmt::format("{}: ids of shape {} would give a rank-{} result; tensors have rank "
                    "4 at most, so reshape the ids first",
                    what, ids.shape().str(), ids.shape().rank() + 1));
  }
  std::vector<std::int64_t> dims = ids.shape().dims();
  dims.push_back(params.shape()[1]);
  // A frozen half table widened whole (layer_weight) is gathered as stored:
  // the same values, and only the rows asked for are widened. It takes no
  // gradient, so none is lost.
  Tensor table = params;
  if (const std::optional<Tensor> h = widened_from(params);
      h && params.graph().info(*h).kind == TensorKind::Variable) {
    table = *h;
  }
  return params.graph().add_node(std::make_unique<EmbeddingOp>(), {table, ids}, Shape(dims));
}

Tensor scatter_add_dense(const Tensor& values, const Tensor& indices, std::int64_t rows) {
  if (!values.valid() || !indices.valid()) {
    throw Error("scatter_add_dense: an input tensor is empty");
  }
  const std::string what =
      fmt::format("scatter_add_dense('{}', '{}', rows {})", values.name(), indices.name(), rows);
  if (&values.graph() != &indices.graph()) {
    throw Error(what + ": values and indices belong to different graphs (devices)");
  }
  check_ids(indices, what);
  if (values.dtype() != DType::F32 || values.shape().rank() != 2 ||
      indices.shape() != Shape{values.shape()[0]} || rows < 1) {
    throw Error(
        fmt::format("{}: needs f32 values [k, D], i32 indices [k] and rows >= 1; got "
                    "values {} {} and indices {}",
                    what, to_string(values.dtype()), values.shape().str(), indices.shape().str()));
  }
  return values.graph().add_node(std::make_unique<ScatterAddOp>(), {values, indices},
                                 Shape{rows, values.shape()[1]});
}

}  // namespace vkt
