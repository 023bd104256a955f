#pragma once
// Internal to the ops whose lavapipe kernels read operands as RGBA32F texels
// (matmul, the fused dense layer, batched matmul, conv2d).

#include <cstdint>
#include <optional>
#include <string>

#include "../../vulkan/buffer.h"
#include "../../vulkan/kernel.h"
#include "../../vulkan/stream.h"

namespace vkt {
class Device;
}

namespace vkt::matmul_detail {

/// A texel view of `r`: the range rounded up to whole texels, or nothing when
/// the device cannot bind it that way (offset alignment, size limit), where the
/// tiled kernel reads it instead (matmul.cpp).
std::optional<BufferRange> texel_view(const Device& device, const BufferRange& r);

/// Invocations of a texel-kernel workgroup: lavapipe's SIMD width (8 x 32 bits).
inline constexpr std::uint32_t kTexelLanes = 8;

/// The register block and workgroup grid of the texel kernels
/// (shaders/matmul_texel.glsl) for an M x N output. Each lane keeps RM rows x
/// RN4 texels (4 columns each); blocks of 16 rows x (8 lanes x 16 columns) run
/// fastest (docs/PERFORMANCE.md), short or narrow outputs get smaller ones so
/// that lanes do not compute what is then discarded. An output of at most 16
/// columns puts 4 lanes side by side along N and the other 4 on the next RM
/// rows (8 lanes on 16 columns would leave half of them idle), where that
/// still leaves enough workgroups to keep the device's threads busy.
struct TexelBlock {
  std::uint32_t rm = 16, rn4 = 4;
  std::uint32_t lanes_n = kTexelLanes;  ///< lanes side by side along N
  std::uint32_t groups_x = 1, groups_y = 1;

  /// The shaders' suffix for this block: "r16c4".
  std::string suffix() const;
  /// LANES_N, the specialization constant (id 1) every texel kernel takes.
  SpecConstant lanes_constant() const { return SpecConstant::u32(1, lanes_n); }
  Groups groups(std::uint32_t z = 1) const { return {groups_x, groups_y, z}; }
};

/// `rm`: a fixed row count (conv2d's kernels are built for 16 rows only).
TexelBlock texel_block(std::uint32_t m, std::uint32_t n, std::optional<std::uint32_t> rm = {});

}  // namespace vkt::matmul_detail
