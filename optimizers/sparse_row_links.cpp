// sparse_row_links(): five passes of shaders/sparse_row_links.comp.
#include "sparse_row_links.h"

#include <fmt/format.h>

#include <bit>

#include "../runtime/graph/graph.h"
#include "../runtime/graph/ops/kernel_util.h"
#include "../runtime/vulkan/device.h"
#include "../runtime/vulkan/error.h"

namespace vkt::detail {
namespace {

struct LinksPush {
  std::uint32_t k, rows, slots, pass;
};

/// Words of the links of k occurrences with H hash slots.
std::uint64_t links_words(std::uint64_t k, std::uint64_t slots) {
  return 3 * k + 3 * slots + 1;
}

/// Hash slots for k occurrences: a power of two >= 2k, so that the table is
/// at most half full and a probe ends within a few slots; where the links
/// would then pass the device's binding range, the least power of two above
/// k (probes grow long only when most of the k ids are distinct).
std::uint64_t hash_slots(std::uint64_t k, std::uint64_t range_bytes) {
  const std::uint64_t roomy = std::bit_ceil(std::max<std::uint64_t>(2 * k, 2));
  if (4 * links_words(k, roomy) <= range_bytes) return roomy;
  return std::bit_ceil(k + 1);
}

class SparseRowLinksOp final : public Op {
 public:
  SparseRowLinksOp(std::int64_t rows, std::uint64_t slots) : rows_(rows), slots_(slots) {}
  std::string type() const override { return "sparse_row_links"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const std::int64_t k = in[0].shape().elements();
    const Kernel& kernel = ctx.device().kernel(
        {.shader = "sparse_row_links", .local_size = {ops_detail::kLocalSize, 1, 1}});
    for (std::uint32_t pass = 0; pass < 5; ++pass) {
      const std::uint64_t threads =
          pass == 0 || pass == 2 || pass == 4 ? slots_ : static_cast<std::uint64_t>(k);
      ctx.stream().dispatch(
          kernel, {ctx.buffer(in[0]), ctx.buffer(out)},
          LinksPush{static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(rows_),
                    static_cast<std::uint32_t>(slots_), pass},
          Stream::linear_groups(kernel, std::max<std::uint64_t>(threads, 1)));
    }
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    return {Gradient{}};  // indices take no gradient
  }

 private:
  std::int64_t rows_;
  std::uint64_t slots_;
};

}  // namespace

Tensor sparse_row_links(const Tensor& indices, std::int64_t rows) {
  const std::int64_t k = indices.shape().elements();
  // The shader's word offsets and the table's keys are 32-bit.
  if (k > (std::int64_t{1} << 26) || rows > std::int64_t{0x7fffffff}) {
    throw Error(fmt::format(
        "a sparse gradient of {} rows into a table of {} rows is past what a lazy update "
        "handles (at most 2^26 rows of gradient, 2^31 - 1 table rows); use a dense gradient",
        k, rows));
  }
  const auto n = static_cast<std::uint64_t>(k);
  const std::uint64_t range = indices.graph().device().max_storage_buffer_range();
  const std::uint64_t slots = hash_slots(n, range);
  const std::uint64_t bytes = 4 * links_words(n, slots);
  if (bytes > range) {
    throw Error(fmt::format(
        "a sparse gradient of {} rows needs {} bytes to link its rows, more than the device's "
        "max storage buffer range of {} bytes; use a dense gradient or fewer ids per step",
        k, bytes, range));
  }
  return indices.graph().add_node(std::make_unique<SparseRowLinksOp>(rows, slots), {indices},
                                  Shape{static_cast<std::int64_t>(links_words(n, slots))},
                                  DType::I32);
}

}  // namespace vkt::detail
