#include "matmul_tiles.h"

#include <fmt/format.h>

#include "../../vulkan/device.h"

namespace vkt {

std::vector<SpecConstant> TiledShape::constants() const {
  return {SpecConstant::u32(2, bm), SpecConstant::u32(3, bn), SpecConstant::u32(4, bk),
          SpecConstant::u32(5, tm), SpecConstant::u32(6, tn)};
}

std::string TiledShape::str() const {
  return fmt::format("{}x{}x{} block {}x{}", bm, bn, bk, tm, tn);
}

bool tiled_shape_fits(const Device& device, const TiledShape& s) {
  if (s.tm == 0 || s.tn == 0 || s.bk == 0 || s.tm % 4 != 0 || s.tn % 4 != 0 || s.bm % s.tm != 0 ||
      s.bn % s.tn != 0 || s.bm < 16) {
    return false;
  }
  const DeviceInfo& info = device.info();
  const auto local = s.local_size();
  return s.invocations() <= info.max_workgroup_invocations &&
         local[0] <= info.max_workgroup_size[0] && local[1] <= info.max_workgroup_size[1] &&
         s.shared_bytes() <= info.max_shared_memory_bytes;
}

TiledShape tiled_shape(const Device& device) {
  TiledShape shape;
  if (device.info().max_workgroup_invocations < 256) shape.tm = shape.tn = 8;
  return shape;
}

}  // namespace vkt
