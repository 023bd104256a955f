#pragma once
// Internal to the ops whose lavapipe kernels read operands as RGBA32F texels
// (matmul, batched matmul, conv2d).

#include <optional>

#include "../../vulkan/buffer.h"

namespace vkt {
class Device;
}

namespace vkt::matmul_detail {

/// A texel view of `r`: the range rounded up to whole texels, or nothing when
/// the device cannot bind it that way (offset alignment, size limit), where the
/// tiled kernel reads it instead (matmul.cpp).
std::optional<BufferRange> texel_view(const Device& device, const BufferRange& r);

}  // namespace vkt::matmul_detail
