#include "shape.h"

#include <fmt/format.h>

#include "../vulkan/error.h"

namespace vkt {

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "f32";
    case DType::I32:
      return "i32";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
  }
  return "?";
}

std::size_t dtype_bytes(DType dtype) {
  return is_half(dtype) ? 2 : 4;
}

Shape::Shape(std::initializer_list<std::int64_t> dims) : Shape(std::vector<std::int64_t>(dims)) {}

Shape::Shape(std::vector<std::int64_t> dims) : dims_(std::move(dims)) {
  if (rank() > kMaxRank) {
    throw Error(
        fmt::format("shape {} has rank {}; vktower tensors have rank 0 to {}: merge adjacent "
                    "axes with a reshape or split the tensor along one first",
                    str(), rank(), kMaxRank));
  }
  std::int64_t elements = 1;
  for (std::int64_t d : dims_) {
    if (d < 1) throw Error(fmt::format("shape {} has a dimension below 1", str()));
    // Division, not multiplication: the test itself must not overflow.
    if (d > kMaxElements / elements) {
      throw Error(fmt::format("shape {} has more than {} elements (2^48)", str(), kMaxElements));
    }
    elements *= d;
  }
}

std::int64_t Shape::elements() const {
  // Cannot overflow: the constructor bounds the product by kMaxElements.
  std::int64_t n = 1;
  for (std::int64_t d : dims_) n *= d;
  return n;
}

std::string Shape::str() const {
  return fmt::format("[{}]", fmt::join(dims_, ", "));
}

int Shape::axis(int axis, const char* what) const {
  const int resolved = axis < 0 ? axis + rank() : axis;
  if (resolved < 0 || resolved >= rank()) {
    throw Error(fmt::format("{}: axis {} is out of range for a tensor of shape {} (rank {})", what,
                            axis, str(), rank()));
  }
  return resolved;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& op) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<std::int64_t> dims(rank);
  for (int i = 0; i < rank; ++i) {
    const int ia = a.rank() - rank + i;
    const int ib = b.rank() - rank + i;
    const std::int64_t da = ia >= 0 ? a[ia] : 1;
    const std::int64_t db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      throw Error(
          fmt::format("{}: shapes {} and {} do not broadcast (dimension {} from the right "
                      "is {} in one and {} in the other; each pair must be equal or 1)",
                      op, a.str(), b.str(), rank - i, da, db));
    }
    dims[i] = std::max(da, db);
  }
  return Shape(std::move(dims));
}

}  // namespace vkt
