#pragma once
// The tile shape of the tiled (GPU) matmul kernel, shaders/matmul_tiled.glsl,
// which matmul, the batched matmul and conv2d's implicit GEMMs share: chosen
// per device by a short tuning run on first use and remembered in the
// device's TuningCache (Device::tuning()).

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../../vulkan/kernel.h"
#include "../../vulkan/stream.h"

namespace vkt {

class Buffer;
class Device;

/// A workgroup computes a bm x bn tile of C, bk deep per shared-memory slab;
/// each invocation a tm x tn block (multiples of 4), so the workgroup has
/// (bn / tn) x (bm / tm) invocations. `prefetch`: two shared slabs, the next
/// one's loads issued before the current one's arithmetic. The shape changes
/// the speed only: every shape sums each output over k in the same order, so
/// the numbers are the same.
struct TiledShape {
  std::uint32_t bm = 64, bn = 64, bk = 16, tm = 4, tn = 4;
  bool prefetch = false;

  std::array<std::uint32_t, 3> local_size() const { return {bn / tn, bm / tm, 1}; }
  std::uint32_t invocations() const { return (bn / tn) * (bm / tm); }
  std::uint32_t shared_bytes() const { return (prefetch ? 8 : 4) * bk * (bm + bn); }
  /// The workgroups that cover an m x n output (z: the batch or group count).
  Groups groups(std::uint32_t m, std::uint32_t n, std::uint32_t z = 1) const {
    return {(n + bn - 1) / bn, (m + bm - 1) / bm, z};
  }
  /// Specialization constants 2-6 and 15 of the kernel (the tile itself).
  std::vector<SpecConstant> constants() const;
  std::string str() const;
  /// As a TuningCache entry, and back (nullopt for a malformed entry).
  std::vector<std::uint32_t> values() const { return {bm, bn, bk, tm, tn, prefetch ? 1u : 0u}; }
  static std::optional<TiledShape> from_values(const std::vector<std::uint32_t>& v);
  bool operator==(const TiledShape&) const = default;
};

/// How the tiled kernel splits a product's k (split-K, matmul_tiled.glsl's
/// SLICES and KSLICE): `slices` partial products over consecutive slices of k,
/// `kslice` long, summed in slice order afterwards (sum_slices). One slice is
/// the plain product.
struct KSplit {
  std::uint32_t slices = 1, kslice = 0;

  bool split() const { return slices > 1; }
  /// Specialization constants 16 and 17 of the kernel (none unsplit: the
  /// kernel's defaults).
  std::vector<SpecConstant> constants() const;
};

/// The split of an m x n x k product on the tiled kernel: none where its
/// output already covers 256 tiles of 64 x 64 (an H100's 132 multiprocessors
/// twice over), else enough slices to make up that many, each at least 128
/// deep, at most 256 of them. A function of the sizes alone, not of the
/// device's tile shape, so every device that runs the tiled kernel sums in
/// the same order (the split changes the bits, the tile shape does not).
KSplit split_k(std::int64_t m, std::int64_t n, std::int64_t k);
/// split_k() where `device`'s products take the tiled kernel
/// (matmul_variant()); none where they take the texel kernel.
KSplit split_k(const Device& device, std::int64_t m, std::int64_t n, std::int64_t k);

/// The tiled kernel's shader for an m x n x k product: matmul_tiled_vec4
/// (A and B read from global memory a vec4 at a time) where m, n and k are
/// multiples of 4 (a split's slices are multiples of 64), else matmul_tiled.
/// Both sum in the same order: the same bits.
inline const char* tiled_matmul_shader(std::uint32_t m, std::uint32_t n, std::uint32_t k) {
  return m % 4 == 0 && n % 4 == 0 && k % 4 == 0 ? "matmul_tiled_vec4" : "matmul_tiled";
}

/// Whether `device` can run `shape`: the divisibility the kernel needs, at
/// least 16 rows (conv2d splits its dispatches by that), the workgroup's
/// invocations and shared memory within the device's limits.
bool tiled_shape_fits(const Device& device, const TiledShape& shape);

/// The shapes a tuning run tries: 64 to 256 wide tiles, 8 to 32 deep, 4x4 to
/// 16x8 blocks, 64 to 512 invocations, with and without prefetch.
std::vector<TiledShape> tiled_candidates();

/// The shape before any tuning: 128 x 128 tiles, 8 deep, 8 x 8 blocks (the
/// fastest on an H100 by vkt-bench-matmul --sweep-tiles), else 64 x 64 x 16
/// with 4 x 4 (or 8 x 8) blocks where the device's limits are smaller.
TiledShape default_tiled_shape(const Device& device);

/// The TuningCache key of the tiled kernel's shape; names the kernel's layout
/// version, so a shape tuned for an older kernel is not reused.
inline constexpr const char* kTiledShapeKey = "matmul_tiled/v4";

/// The shape in the device's TuningCache, if it holds one the device can run
/// (one it cannot is ignored with a log line).
std::optional<TiledShape> stored_tiled_shape(Device& device);

/// The shape the tiled kernel uses on `device`: the one in its TuningCache
/// when that fits the device, else (first use on a GPU) the result of
/// tune_tiled_shape(), stored there. lavapipe is not tuned (its matmuls take
/// the texel kernel) and gets default_tiled_shape().
TiledShape tiled_shape(Device& device);

/// The shape for one product of m x n outputs (z: batches, groups, slices):
/// tiled_shape(), unless that leaves the product fewer than 128 workgroups,
/// where 64 x 64 tiles (4 x 4 blocks, 8 deep) give it up to 4 times as many.
/// Speed only: every shape sums in the same order.
TiledShape tiled_shape_for(Device& device, std::uint32_t m, std::uint32_t n, std::uint32_t z = 1);

/// Seconds of `dispatches` back-to-back products C[n,n] = A[n,n] * B[n,n]
/// with `shape` (buffers of at least n * n floats), the fastest of `reps`
/// runs after a warm-up (the fastest: other work on the device only ever adds
/// time); device timestamps where the device has them, else wall time.
double time_tiled_shape(Device& device, const TiledShape& shape, const Buffer& a, const Buffer& b,
                        const Buffer& c, std::uint32_t n, int dispatches, int reps = 3);

/// The fastest of `reps` runs of `stream` after a warm-up, in seconds: between
/// its timestamps `t0` and `t1` where `stamps`, else the wall time of run.
double fastest_run_seconds(Stream& stream, bool stamps, std::size_t t0, std::size_t t1, int reps);

/// Times C = A * B at `size`^3 with every candidate that fits `device`
/// (device timestamps where the device has them, else wall time), stores the
/// fastest in the device's TuningCache and returns it (a shape already stored
/// is returned as is). A device on which the default shape takes over 20 ms
/// at `size`^3 tunes on a smaller product, and the run stops after 3 s with
/// the best so far. Takes a fraction of a second on a GPU; the process's
/// tuning runs take turns, so towers on one GPU do not time each other's work.
TiledShape tune_tiled_shape(Device& device, std::uint32_t size = 2048);

}  // namespace vkt
