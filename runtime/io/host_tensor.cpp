#include "host_tensor.h"

#include <fmt/format.h>

#include <algorithm>

#include "../vulkan/error.h"

namespace vkt {

HostTensor HostTensor::floats(Shape shape, std::vector<float> values) {
  if (static_cast<std::int64_t>(values.size()) != shape.elements()) {
    throw Error(fmt::format("host tensor of shape {} needs {} values, {} were given", shape.str(),
                            shape.elements(), values.size()));
  }
  return {std::move(shape), DType::F32, std::move(values), {}};
}

HostTensor HostTensor::ints(Shape shape, std::vector<std::int32_t> values) {
  if (static_cast<std::int64_t>(values.size()) != shape.elements()) {
    throw Error(fmt::format("host tensor of shape {} needs {} values, {} were given", shape.str(),
                            shape.elements(), values.size()));
  }
  return {std::move(shape), DType::I32, {}, std::move(values)};
}

namespace {

std::int64_t row_elements(const HostTensor& t) {
  return t.rows() == 0 ? 0 : t.shape.elements() / t.rows();
}

Shape with_rows(const Shape& shape, std::int64_t rows) {
  std::vector<std::int64_t> dims = shape.dims();
  dims.at(0) = rows;
  return Shape(dims);
}

}  // namespace

HostTensor HostTensor::slice_rows(std::int64_t begin, std::int64_t count) const {
  // count > rows() - begin, not begin + count > rows(): the sum of two
  // caller-given values could overflow.
  if (begin < 0 || count < 0 || begin > rows() || count > rows() - begin) {
    throw Error(fmt::format("rows [{}, {} + {}) lie outside a host tensor of shape {}", begin,
                            begin, count, shape.str()));
  }
  const auto from = static_cast<std::ptrdiff_t>(begin * row_elements(*this));
  const auto to = static_cast<std::ptrdiff_t>((begin + count) * row_elements(*this));
  HostTensor out{with_rows(shape, count), dtype, {}, {}};
  if (dtype == DType::F32) {
    out.f32.assign(f32.begin() + from, f32.begin() + to);
  } else {
    out.i32.assign(i32.begin() + from, i32.begin() + to);
  }
  return out;
}

HostTensor HostTensor::padded_rows(std::int64_t count) const {
  if (rows() == 0 || count < rows()) {
    throw Error(fmt::format("cannot pad a host tensor of shape {} to {} rows", shape.str(), count));
  }
  HostTensor out = *this;
  while (out.rows() < count) out.append_rows(slice_rows(0, std::min(rows(), count - out.rows())));
  return out;
}

void HostTensor::append_rows(const HostTensor& other) {
  if (shape.rank() == 0) {  // empty: takes other's shape
    *this = other;
    return;
  }
  const std::vector<std::int64_t> a = shape.dims(), b = other.shape.dims();
  if (other.dtype != dtype || a.size() != b.size() ||
      !std::equal(a.begin() + 1, a.end(), b.begin() + 1)) {
    throw Error(fmt::format("cannot append rows of shape {} ({}) to {} ({})", other.shape.str(),
                            to_string(other.dtype), shape.str(), to_string(dtype)));
  }
  f32.insert(f32.end(), other.f32.begin(), other.f32.end());
  i32.insert(i32.end(), other.i32.begin(), other.i32.end());
  shape = with_rows(shape, rows() + other.rows());
}

}  // namespace vkt
