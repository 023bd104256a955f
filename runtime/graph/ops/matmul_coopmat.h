#pragma once
// The cooperative-matrix (tensor-core) matmul of f16 matrices,
// shaders/matmul_coopmat.comp: its tile, the tiles a device can run, and the
// tile a device uses, chosen on first use by checking and timing candidates
// on the device itself and remembered in its TuningCache.
//
// Only the f16 products of VK_NV_cooperative_matrix are used: Debian 12's
// glslang (12.0) compiles GL_NV_cooperative_matrix but not
// GL_KHR_cooperative_matrix, and that extension's f16 x f16 -> f32 is what
// NVIDIA GPUs since Turing offer. bf16 products, and devices with only the
// KHR extension, take the tiled half kernel (matmul_half_tiled.comp).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../../vulkan/buffer.h"
#include "../../vulkan/device_info.h"
#include "../../vulkan/kernel.h"
#include "../shape.h"

namespace vkt {

class Device;
class Stream;

/// A workgroup of wm x wn subgroups computes a bm() x bn() tile of C, each
/// subgroup a tm x tn grid of the device's `unit` products, bk deep per
/// shared-memory slab (a multiple of unit.k).
struct CooperativeTile {
  CooperativeShape unit{16, 8, 16};
  std::uint32_t wm = 2, wn = 2, tm = 2, tn = 4, bk = 32;

  std::uint32_t bm() const { return wm * tm * unit.m; }
  std::uint32_t bn() const { return wn * tn * unit.n; }
  std::uint32_t invocations(std::uint32_t subgroup_size) const { return wm * wn * subgroup_size; }
  /// The kernel's shared arrays: A and B slabs of f16, one f32 unit per subgroup.
  std::uint32_t shared_bytes() const {
    return 2 * (bm() * (bk + 8) + bk * (bn() + 8)) + 4 * wm * wn * unit.m * unit.n;
  }
  /// Specialization constants 3-10 of the kernel.
  std::vector<SpecConstant> constants() const;
  std::string str() const;
  /// As a TuningCache entry, and back (nullopt for a malformed entry).
  std::vector<std::uint32_t> values() const { return {unit.m, unit.n, unit.k, wm, wn, tm, tn, bk}; }
  static std::optional<CooperativeTile> from_values(const std::vector<std::uint32_t>& v);
  bool operator==(const CooperativeTile&) const = default;
};

/// Whether a device described by `info` can run `tile`: its unit is one of
/// info.cooperative_f16, bk a multiple of unit.k, and the workgroup's
/// invocations and shared memory within the device's limits.
bool cooperative_tile_fits(const DeviceInfo& info, const CooperativeTile& tile);

/// The tiles a device's tuning run tries, likeliest first: for each of its
/// f16 units (largest first), grids of 4 and 8 subgroups holding 4 to 32
/// accumulators each, 16 to 64 deep; only those that fit.
std::vector<CooperativeTile> cooperative_candidates(const DeviceInfo& info);

/// The TuningCache key; names the kernel's layout version. An entry of one
/// value 0 records that no candidate passed the check on this device.
inline constexpr const char* kCooperativeTileKey = "matmul_coopmat/v1";

/// The tile half matmuls of `dtype` use on `device`, or nullopt where they
/// take the tiled half kernel: no cooperative matrices (lavapipe, or
/// DeviceOptions::disable_cooperative_matrix), bf16, or no candidate's
/// products passed the check. On first use, each candidate's products (every
/// transpose, a batch of 2, sizes that are not multiples of any tile) are
/// compared with double products computed on the host, and the ones that pass
/// are timed; the fastest is stored. A candidate that fails is logged and
/// never used: a driver's or the kernel's fault costs speed, not results.
std::optional<CooperativeTile> cooperative_tile(Device& device, DType dtype);

/// Records C = op(A) op(B) (batch matrices; A, B and C f16) with `tile`.
void record_cooperative_matmul(Stream& stream, const CooperativeTile& tile, BufferRange a,
                               BufferRange b, BufferRange c, std::uint32_t m, std::uint32_t n,
                               std::uint32_t k, std::uint32_t batch, bool transpose_a,
                               bool transpose_b);

/// How many of the elements of C = op(A) op(B) computed by `tile` on
/// `device` lie outside f16's rounding of the double product (plus f32
/// summation error): 0 for a correct kernel. Random operands; `m`, `n`, `k`
/// and `batch` set the product.
std::int64_t check_cooperative_tile(Device& device, const CooperativeTile& tile, std::uint32_t m,
                                    std::uint32_t n, std::uint32_t k, std::uint32_t batch,
                                    bool transpose_a, bool transpose_b);

}  // namespace vkt
