#include "host_tensor.h"

#include <fmt/format.h>

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

}  // namespace vkt
