// vkt-bench-peak: each device's roof, which the other benchmarks divide by:
// its arithmetic roof (independent multiply-add chains in registers, the best
// of several workgroup sizes and chain counts), its tensor-core roof where it
// has cooperative matrices, and its copy bandwidth (a copy command and a vec4
// shader copy; bytes read + written). Ends with `peak_gflops=F`,
// `copy_gbps=B` and, with cooperative matrices, `tensor_peak_gflops=T` for
// device 0 or the --device chosen.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include "device_roof.h"

#include <vktower/vktower.h>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

namespace {

/// The host CPU as /proc/cpuinfo names it (lavapipe runs on it).
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

void report(const vkt::DeviceInfo& info, const vkt::bench::DeviceRoof& roof) {
  for (const vkt::bench::FmaShape& s : roof.tried) {
    fmt::print(
        "  fma local {:4} x {:2} vec4 chains: {:9.1f} GFLOP/s ({} iterations, {:.2f} ms){}\n",
        s.local_size, s.chains, s.gflops, s.iterations, s.ms,
        s.gflops_per_cpu_second > 0
            ? fmt::format("; {:.1f} GFLOP per CPU-second", s.gflops_per_cpu_second)
            : "");
  }
  fmt::print("  arithmetic roof: {:.1f} GFLOP/s ({})\n", roof.fma_gflops, roof.shape);
  if (roof.tensor_gflops > 0) {
    fmt::print("  tensor-core roof (f16 x f16 -> f32 cooperative matrices): {:.1f} GFLOP/s ({})\n",
               roof.tensor_gflops, roof.tensor_shape);
  } else {
    fmt::print("  tensor-core roof: none (the device has no f16 cooperative matrices)\n");
  }
  fmt::print("  copy of {} MiB, bytes read + written: vkCmdCopyBuffer {:.1f} GB/s, ",
             roof.copy_bytes >> 20, roof.copy_command_gbps);
  fmt::print("vec4 shader {:.1f} GB/s; roof {:.1f} GB/s\n", roof.copy_shader_gbps, roof.copy_gbps);
  fmt::print("  timed with {}{}\n", roof.timing,
             info.timestamps ? "" : " (the device has no timestamp queries)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vkt-bench-peak: each device's arithmetic roof and copy bandwidth"};
  std::optional<std::uint32_t> device_index;
  vkt::bench::RoofOptions options;
  std::uint64_t copy_mib = 0;
  app.add_option("--device", device_index, "measure only this device (vkt-info lists them)");
  app.add_option("--min-ms", options.min_ms, "grow the work until one submission takes this long")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 10000.0));
  app.add_option("--reps", options.reps, "timed repetitions per shape (the fastest counts)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--local-sizes", options.local_sizes, "workgroup sizes to try")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--chains", options.chains, "vec4 chains per invocation to try (1..16)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  app.add_option("--copy-mib", copy_mib, "bytes per copy in MiB (0: 64 on a CPU, 256 on a GPU)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  options.copy_bytes = copy_mib << 20;

  try {
    vkt::Instance instance;
    const char* threads = std::getenv("LP_NUM_THREADS");
    fmt::print("host CPU: {}; LP_NUM_THREADS={}; no OpenBLAS in this benchmark\n", cpu_model(),
               threads != nullptr ? threads : "unset");
    const std::uint32_t count = static_cast<std::uint32_t>(instance.devices().size());
    if (device_index && *device_index >= count) {
      throw vkt::Error(fmt::format("--device {}: there are {} devices (vkt-info lists them)",
                                   *device_index, count));
    }
    std::optional<vkt::bench::DeviceRoof> chosen;
    for (std::uint32_t i = 0; i < count; ++i) {
      if (device_index && i != *device_index) continue;
      const vkt::DeviceInfo& info = instance.device(i);
      fmt::print("\ndevice {}: {} ({}, {})\n", i, info.name, to_string(info.type),
                 info.driver_info);
      if (!info.unusable_reason.empty()) {
        fmt::print("  skipped: {}\n", info.unusable_reason);
        continue;
      }
      vkt::Device device(instance, i);
      const vkt::bench::DeviceRoof roof = vkt::bench::measure_device_roof(device, options);
      report(info, roof);
      if (!chosen) chosen = roof;
    }
    if (!chosen) throw vkt::Error("no usable device was measured");
    fmt::print("peak_gflops={:.1f}\ncopy_gbps={:.1f}\n", chosen->fma_gflops, chosen->copy_gbps);
    if (chosen->tensor_gflops > 0) fmt::print("tensor_peak_gflops={:.1f}\n", chosen->tensor_gflops);
    return 0;
  } catch (const vkt::Error& e) {
    fmt::print(stderr, "vkt-bench-peak: {}\n", e.what());
    return 1;
  }
}
