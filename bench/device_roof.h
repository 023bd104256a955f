#pragma once
// The device's own limits, which the other benchmarks divide their figures
// by, measured in the same run: the arithmetic roof (independent multiply-add
// chains in registers, shaders/peak_fma.comp), the tensor-core roof where
// the device has cooperative matrices (chains of f16 multiply-adds into f32
// accumulators, shaders/peak_coopmat.comp) and the copy bandwidth (a copy
// command and a vec4 shader copy, shaders/copy_vec4.comp).
//
//   vkt::Device device(instance, 0);
//   const vkt::bench::DeviceRoof roof = vkt::bench::measure_device_roof(device);
//   fmt::print("{:.2f} of the roof\n", achieved_gflops / roof.fma_gflops);

#include <vktower/runtime/vulkan/device.h>

#include <cstdint>
#include <string>
#include <vector>

namespace vkt::bench {

/// One shape of the FMA kernel that measure_device_roof() tried.
struct FmaShape {
  std::uint32_t local_size = 0;  ///< invocations per workgroup
  std::uint32_t chains = 0;      ///< independent vec4 chains per invocation
  std::uint32_t iterations = 0;  ///< loop iterations (8 steps of every chain each)
  double ms = 0;                 ///< fastest time of one dispatch
  double gflops = 0;
  /// On a CPU device: FLOPs per second of the process's CPU time (every
  /// thread), the rate of one core whatever else the machine runs; 0 elsewhere.
  double gflops_per_cpu_second = 0;
};

/// What a device can do at best, in the units the benchmarks report.
struct DeviceRoof {
  double fma_gflops = 0;         ///< the best FMA shape; an FMA counts 2 FLOPs
  double copy_gbps = 0;          ///< the better of the two copies; bytes read + written
  double copy_command_gbps = 0;  ///< vkCmdCopyBuffer (Stream::copy) of one large buffer
  double copy_shader_gbps = 0;   ///< a compute shader moving vec4s
  std::uint64_t copy_bytes = 0;  ///< size of the copied buffer
  std::string shape;             ///< the best FMA shape, e.g. "local 256, 8 chains"
  /// The best cooperative-matrix f16 x f16 -> f32 multiply-add loop; 0 where
  /// the device has no cooperative matrices (DeviceInfo::cooperative_f16).
  double tensor_gflops = 0;
  std::string tensor_shape;     ///< e.g. "16x8x16 units, 4 chains"
  std::string timing;           ///< "device timestamps" or "wall clock (submit + wait)"
  std::vector<FmaShape> tried;  ///< every FMA shape, in the order tried
};

/// How hard measure_device_roof() looks. The defaults keep the whole
/// measurement to a few seconds on lavapipe and still time a GPU properly.
struct RoofOptions {
  /// The work per timed submission grows (doubling) until it takes this long,
  /// so that the submission's fixed cost is negligible.
  double min_ms = 20;
  int reps = 5;  ///< timed repetitions per shape (the fastest counts)
  /// Bytes per copy; 0 picks 64 MiB on a CPU device and 256 MiB on a GPU
  /// (never past the device's storage-buffer range or an eighth of its memory).
  std::uint64_t copy_bytes = 0;
  std::vector<std::uint32_t> local_sizes{64, 256};
  std::vector<std::uint32_t> chains{4, 8, 16};  ///< each 1..16
  bool measure_copy = true;
  bool measure_tensor = true;  ///< the tensor-core roof, where the device has one
};

/// Measures `device`'s arithmetic roof and copy bandwidth. Times with the
/// device's timestamp queries where it has them, else with the wall clock of
/// submit + wait. Throws vkt::Error for options out of range.
DeviceRoof measure_device_roof(vkt::Device& device, const RoofOptions& options = {});

}  // namespace vkt::bench
