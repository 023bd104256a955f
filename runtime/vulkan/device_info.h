#pragma once
// What a compute user needs to know about one Vulkan physical device.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vkt {

enum class DeviceType { Other, IntegratedGpu, DiscreteGpu, VirtualGpu, Cpu };

/// "discrete GPU", "integrated GPU", "virtual GPU", "CPU", "other".
std::string_view to_string(DeviceType type);

/// One matrix product a device's cooperative matrices (tensor cores) do in one
/// subgroup operation: an m x k f16 matrix times a k x n one, added to an
/// m x n f32 accumulator.
struct CooperativeShape {
  std::uint32_t m = 0, n = 0, k = 0;
  bool operator==(const CooperativeShape&) const = default;
};

/// One physical device as Instance::devices() lists it. Plain data, safe to copy.
struct DeviceInfo {
  std::uint32_t index = 0;  ///< position in Instance::devices(), the index Device takes
  std::string name;         ///< e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
  DeviceType type = DeviceType::Other;
  std::uint32_t vendor_id = 0;
  std::string vendor;  ///< "NVIDIA", "AMD", "Intel", "Mesa", ... or the id in hex
  std::uint32_t device_id = 0;
  std::string driver_name;  ///< e.g. "llvmpipe"
  std::string driver_info;  ///< e.g. "Mesa 22.3.6 (LLVM 15.0.6)"
  std::string driver_version;
  std::string api_version;  ///< e.g. "1.3.230"
  std::uint32_t api_version_raw = 0;

  std::uint64_t device_local_bytes = 0;  ///< sum of the DEVICE_LOCAL heaps
  std::uint64_t host_visible_bytes = 0;  ///< sum of the heaps with a HOST_VISIBLE type
  /// Every device-local memory type is also host-visible and coherent (lavapipe,
  /// integrated GPUs): buffers are mapped directly and staging copies are skipped.
  bool unified_memory = false;
  std::uint64_t max_allocation_bytes = 0;
  std::uint64_t max_storage_buffer_range = 0;

  std::array<std::uint32_t, 3> max_workgroup_size{};
  std::uint32_t max_workgroup_invocations = 0;
  std::uint32_t max_shared_memory_bytes = 0;
  std::uint32_t subgroup_size = 0;
  bool subgroup_compute_ops = false;  ///< basic, broadcast, arithmetic in compute shaders
  bool timestamps = false;            ///< compute queue supports timestamp queries
  float timestamp_period_ns = 0;
  bool dedicated_transfer_queue = false;
  bool timeline_semaphores = false;
  /// storageBuffer16BitAccess: kernels read and write 16-bit elements of
  /// storage buffers (the half types' ops need it; enabled where offered).
  bool storage_16bit = false;
  /// The f16 x f16 -> f32 products of the device's cooperative matrices
  /// (VK_NV_cooperative_matrix, as vkGetPhysicalDeviceCooperativeMatrixPropertiesNV
  /// lists them, subgroup scope), where the device also offers shaderFloat16,
  /// 16-bit storage and the Vulkan memory model the kernels need; empty
  /// elsewhere (lavapipe, most GPUs before 2018). Half matmuls run on them.
  std::vector<CooperativeShape> cooperative_f16;
  bool is_lavapipe = false;  ///< Mesa's llvmpipe CPU device: kernels pick variants for it

  /// Empty when a Device can be created on it; otherwise why not.
  std::string unusable_reason;
};

}  // namespace vkt
