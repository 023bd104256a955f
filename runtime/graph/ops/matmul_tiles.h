#pragma once
// The tile shape of the tiled (GPU) matmul kernel, shaders/matmul_tiled.glsl,
// which matmul, the batched matmul and conv2d's implicit GEMMs share.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "../../vulkan/kernel.h"

namespace vkt {

class Device;

/// A workgroup computes a bm x bn tile of C, bk deep per shared-memory slab;
/// each invocation a tm x tn block (multiples of 4), so the workgroup has
/// (bn / tn) x (bm / tm) invocations.
struct TiledShape {
  std::uint32_t bm = 64, bn = 64, bk = 16, tm = 4, tn = 4;

  std::array<std::uint32_t, 3> local_size() const { return {bn / tn, bm / tm, 1}; }
  std::uint32_t invocations() const { return (bn / tn) * (bm / tm); }
  std::uint32_t shared_bytes() const { return 4 * bk * (bm + bn); }
  /// Specialization constants 2-6 of the kernel (the tile itself).
  std::vector<SpecConstant> constants() const;
  std::string str() const;
};

/// Whether `device` can run `shape`: the divisibility the kernel needs, at
/// least 16 rows (conv2d splits its dispatches by that), the
/// workgroup's invocations and shared memory within the device's limits.
bool tiled_shape_fits(const Device& device, const TiledShape& shape);

/// The shape the tiled kernel uses on `device`: 64 x 64 tiles, 16 deep, with
/// 4 x 4 blocks (256 invocations), or 8 x 8 where a device allows fewer.
TiledShape tiled_shape(const Device& device);

}  // namespace vkt
