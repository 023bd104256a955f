#include "matmul_tiles.h"

#include <fmt/format.h>

#include <algorithm>

#include "../../vulkan/detail/log.h"
#include "../../vulkan/device.h"
#include "matmul.h"

namespace vkt {

std::vector<SpecConstant> TiledShape::constants() const {
  return {SpecConstant::u32(2, bm), SpecConstant::u32(3, bn), SpecConstant::u32(4, bk),
          SpecConstant::u32(5, tm), SpecConstant::u32(6, tn), SpecConstant::u32(15, prefetch)};
}

std::vector<SpecConstant> KSplit::constants() const {
  if (!split()) return {};
  return {SpecConstant::u32(16, slices), SpecConstant::u32(17, kslice)};
}

KSplit split_k(std::int64_t m, std::int64_t n, std::int64_t k) {
  constexpr std::int64_t kTargetTiles = 256, kMinSlice = 128, kMaxSlices = 256, kAlign = 64;
  const std::int64_t tiles = ((m + 63) / 64) * ((n + 63) / 64);
  if (tiles >= kTargetTiles || k < 2 * kMinSlice) return {};
  const std::int64_t wanted =
      std::min({(kTargetTiles + tiles - 1) / tiles, k / kMinSlice, kMaxSlices});
  if (wanted < 2) return {};
  const std::int64_t kslice = ((k + wanted - 1) / wanted + kAlign - 1) / kAlign * kAlign;
  const std::int64_t slices = (k + kslice - 1) / kslice;
  if (slices < 2) return {};
  return {static_cast<std::uint32_t>(slices), static_cast<std::uint32_t>(kslice)};
}

KSplit split_k(const Device& device, std::int64_t m, std::int64_t n, std::int64_t k) {
  if (matmul_variant(device) != MatmulVariant::Tiled) return {};
  return split_k(m, n, k);
}

std::optional<TiledShape> TiledShape::from_values(const std::vector<std::uint32_t>& v) {
  if (v.size() != 6 || v[5] > 1) return std::nullopt;
  return TiledShape{v[0], v[1], v[2], v[3], v[4], v[5] == 1};
}

std::string TiledShape::str() const {
  return fmt::format("{}x{}x{} block {}x{}{}", bm, bn, bk, tm, tn, prefetch ? " prefetch" : "");
}

bool tiled_shape_fits(const Device& device, const TiledShape& s) {
  if (s.tm == 0 || s.tn == 0 || s.bk == 0 || s.tm % 4 != 0 || s.tn % 4 != 0 || s.bm % s.tm != 0 ||
      s.bn % s.tn != 0 || s.bm < 16 || s.bm > 1024 || s.bn > 1024 || s.bk > 256 ||
      s.tm * s.tn > 256) {
    return false;
  }
  const DeviceInfo& info = device.info();
  const auto local = s.local_size();
  return s.invocations() <= info.max_workgroup_invocations &&
         local[0] <= info.max_workgroup_size[0] && local[1] <= info.max_workgroup_size[1] &&
         s.shared_bytes() <= info.max_shared_memory_bytes;
}

std::vector<TiledShape> tiled_candidates() {
  return {
      {64, 64, 16, 4, 4},
      {64, 64, 8, 4, 4},
      {64, 64, 32, 4, 4},
      {64, 64, 16, 8, 8},
      {128, 64, 16, 8, 4},
      {64, 128, 16, 4, 8},
      {128, 128, 8, 8, 8},
      {128, 128, 16, 8, 8},
      {128, 128, 32, 8, 8},
      {128, 128, 16, 8, 4},
      {128, 128, 8, 4, 8},
      {256, 128, 8, 8, 8},
      {128, 256, 8, 8, 8},
      {256, 128, 16, 16, 8},
      {128, 64, 8, 8, 8},
      {64, 128, 8, 8, 8},
      // Prefetching twins of the fastest on an H100 without it.
      {128, 128, 8, 8, 8, true},
      {128, 128, 16, 8, 8, true},
      {128, 128, 16, 8, 4, true},
      {64, 128, 16, 4, 8, true},
      {64, 64, 16, 4, 4, true},
      {128, 128, 8, 4, 8, true},
  };
}

TiledShape default_tiled_shape(const Device& device) {
  if (const TiledShape big{128, 128, 8, 8, 8}; tiled_shape_fits(device, big)) return big;
  TiledShape shape;
  if (device.info().max_workgroup_invocations < 256) shape.tm = shape.tn = 8;
  return shape;
}

std::optional<TiledShape> stored_tiled_shape(Device& device) {
  const auto values = device.tuning().find(kTiledShapeKey);
  if (!values) return std::nullopt;
  if (const auto s = TiledShape::from_values(*values); s && tiled_shape_fits(device, *s)) return s;
  detail::log().warn(
      "tuning cache: '{}' holds {} values that are not a tile shape {} can run; "
      "ignored",
      kTiledShapeKey, values->size(), device.info().name);
  return std::nullopt;
}

TiledShape tiled_shape_for(Device& device, std::uint32_t m, std::uint32_t n, std::uint32_t z) {
  constexpr std::uint64_t kFewGroups = 128;
  constexpr TiledShape kSmall{64, 64, 8, 4, 4};
  const TiledShape tuned = tiled_shape(device);
  const Groups g = tuned.groups(m, n, z);
  if (std::uint64_t{g[0]} * g[1] * g[2] >= kFewGroups ||
      tuned.bm * tuned.bn <= kSmall.bm * kSmall.bn || !tiled_shape_fits(device, kSmall)) {
    return tuned;
  }
  return kSmall;
}

TiledShape tiled_shape(Device& device) {
  if (auto s = stored_tiled_shape(device)) return *s;
  if (device.info().is_lavapipe) return default_tiled_shape(device);
  return tune_tiled_shape(device);
}

}  // namespace vkt
