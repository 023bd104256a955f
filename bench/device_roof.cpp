// measure_device_roof(): the FMA and copy kernels, sized by doubling until one
// timed submission is long enough that its fixed cost does not count.
#include "device_roof.h"

#include <fmt/format.h>

#include <vktower/runtime/vulkan/buffer.h>
#include <vktower/runtime/vulkan/error.h>
#include <vktower/runtime/vulkan/kernel.h>
#include <vktower/runtime/vulkan/stream.h>

#include <algorithm>
#include <chrono>
#include <functional>

#include "bench_util.h"

namespace vkt::bench {
namespace {

struct FmaParams {
  float mul;
  float add;
  std::uint32_t iterations;
};

struct CopyParams {
  std::uint32_t n;
};

bool is_cpu(const Device& device) {
  return device.info().type == DeviceType::Cpu;
}

/// Times streams recorded by a callback: between two timestamps on the device
/// where it has them, else the wall clock of submit + wait.
class StreamTimer {
 public:
  explicit StreamTimer(Device& device) : device_(device), on_device_(device.info().timestamps) {}

  bool on_device() const { return on_device_; }

  /// The fastest of `reps` submissions (after one untimed, when `warm_up`), in
  /// milliseconds: a roof is the best the device does, and on a shared
  /// machine the slower runs measure the other load.
  double ms(const std::function<void(Stream&)>& record, int reps, bool warm_up) const {
    Stream stream(device_);
    if (on_device_) stream.timestamp();
    record(stream);
    if (on_device_) stream.timestamp();
    if (warm_up) stream.run();
    std::vector<double> times;
    for (int r = 0; r < reps; ++r) {
      const auto start = std::chrono::steady_clock::now();
      stream.run();
      const double wall =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      times.push_back(on_device_ ? stream.elapsed_ns(0, 1) / 1e6 : wall);
    }
    return *std::min_element(times.begin(), times.end());
  }

  /// The smallest `n` (doubling from `start`, at most `cap`) whose stream takes
  /// at least `min_ms`, as `record(stream, n)` records it.
  std::uint32_t calibrate(const std::function<void(Stream&, std::uint32_t)>& record,
                          std::uint32_t start, std::uint32_t cap, double min_ms) const {
    std::uint32_t n = start;
    // The fastest of two runs: one disturbed run must not stop the doubling early.
    while (n < cap && ms([&](Stream& s) { record(s, n); }, 2, false) < min_ms) n *= 2;
    return std::min(n, cap);
  }

 private:
  Device& device_;
  bool on_device_;
};

void check_options(const Device& device, const RoofOptions& o) {
  if (o.min_ms <= 0 || o.reps < 1) {
    throw Error(fmt::format("measure_device_roof: min_ms {} and reps {} must be positive", o.min_ms,
                            o.reps));
  }
  if (o.local_sizes.empty() || o.chains.empty()) {
    throw Error("measure_device_roof: give at least one local size and one chain count");
  }
  for (const std::uint32_t c : o.chains) {
    if (c < 1 || c > 16) {
      throw Error(fmt::format("measure_device_roof: {} chains; peak_fma.comp holds 1 to 16", c));
    }
  }
  for (const std::uint32_t l : o.local_sizes) {
    if (l < 1 || l > device.info().max_workgroup_invocations) {
      throw Error(fmt::format("measure_device_roof: local size {} is not in 1..{} on {}", l,
                              device.info().max_workgroup_invocations, device.info().name));
    }
  }
}

/// Invocations per FMA dispatch: enough workgroups to keep every core of a
/// CPU busy, or many waves of a GPU's multiprocessors (so the last, partial
/// wave costs little).
std::uint64_t fma_threads(const Device& device, std::uint32_t local_size) {
  return is_cpu(device) ? std::uint64_t{64} * local_size : std::uint64_t{1} << 22;
}

FmaShape measure_fma(Device& device, const StreamTimer& timer, const RoofOptions& o,
                     std::uint32_t local_size, std::uint32_t chains) {
  const Kernel& kernel = device.kernel({.shader = "peak_fma",
                                        .local_size = {local_size, 1, 1},
                                        .constants = {SpecConstant::u32(1, chains)}});
  const Groups groups = Stream::linear_groups(kernel, fma_threads(device, local_size));
  const std::uint64_t threads = std::uint64_t{groups[0]} * groups[1] * local_size;
  Buffer out(device, threads * 4 * sizeof(float));
  // Converges to add / (1 - mul) = 1: no overflow, no denormals.
  const auto record = [&](Stream& s, std::uint32_t iterations) {
    s.dispatch(kernel, {out}, FmaParams{0.999f, 0.001f, iterations}, groups);
  };
  FmaShape shape{.local_size = local_size, .chains = chains};
  shape.iterations = timer.calibrate(record, 4, 1u << 24, o.min_ms);
  const double cpu_before = process_cpu_seconds();
  shape.ms = timer.ms([&](Stream& s) { record(s, shape.iterations); }, o.reps, true);
  const double cpu = process_cpu_seconds() - cpu_before;
  const double flops = static_cast<double>(threads) * shape.iterations * 8.0 * chains * 4.0 * 2.0;
  shape.gflops = flops / (shape.ms * 1e6);
  if (is_cpu(device) && cpu > 0) shape.gflops_per_cpu_second = flops * (o.reps + 1) / cpu / 1e9;
  return shape;
}

struct TensorParams {
  std::uint32_t iterations;
};

/// The cooperative-matrix multiply-add loop at each of the device's f16
/// units and 2, 4 and 8 chains: the best FLOP rate, an LM x LN x LK product
/// counting 2 LM LN LK FLOPs.
void measure_tensor(Device& device, const StreamTimer& timer, const RoofOptions& o,
                    DeviceRoof& roof) {
  const DeviceInfo& info = device.info();
  constexpr std::uint32_t kSubgroups = 4, kGroups = 8192;
  const std::uint32_t local = kSubgroups * info.subgroup_size;
  if (local == 0 || local > info.max_workgroup_invocations) return;
  Buffer out(device, 64 * 64 * 64 * sizeof(float));
  for (const CooperativeShape& unit : info.cooperative_f16) {
    for (const std::uint32_t chains : {2u, 4u, 8u}) {
      const Kernel& kernel = device.kernel(
          {.shader = "peak_coopmat",
           .local_size = {local, 1, 1},
           .constants = {SpecConstant::u32(3, unit.m), SpecConstant::u32(4, unit.n),
                         SpecConstant::u32(5, unit.k), SpecConstant::u32(6, chains)}});
      const auto record = [&](Stream& s, std::uint32_t iterations) {
        s.dispatch(kernel, {out}, TensorParams{iterations}, Groups{kGroups, 1, 1});
      };
      const std::uint32_t iterations = timer.calibrate(record, 4, 1u << 20, o.min_ms);
      const double ms = timer.ms([&](Stream& s) { record(s, iterations); }, o.reps, true);
      const double flops =
          double(kGroups) * kSubgroups * iterations * chains * 2.0 * unit.m * unit.n * unit.k;
      const double gflops = flops / (ms * 1e6);
      if (gflops > roof.tensor_gflops) {
        roof.tensor_gflops = gflops;
        roof.tensor_shape =
            fmt::format("{}x{}x{} units, {} chains", unit.m, unit.n, unit.k, chains);
      }
    }
  }
}

std::uint64_t copy_size(const Device& device, const RoofOptions& o) {
  const std::uint64_t mib = std::uint64_t{1} << 20;
  std::uint64_t bytes = o.copy_bytes != 0 ? o.copy_bytes : (is_cpu(device) ? 64 : 256) * mib;
  bytes = std::min(bytes, device.max_storage_buffer_range());
  if (device.info().max_allocation_bytes != 0) {
    bytes = std::min(bytes, device.info().max_allocation_bytes);
  }
  if (device.info().device_local_bytes != 0) {
    bytes = std::min(bytes, device.info().device_local_bytes / 8);
  }
  bytes -= bytes % 16;  // whole vec4s
  if (bytes < 16 || bytes / 16 > UINT32_MAX) {
    throw Error(fmt::format("measure_device_roof: a copy of {} bytes; give 16 B to 64 GiB", bytes));
  }
  return bytes;
}

void measure_copies(Device& device, const StreamTimer& timer, const RoofOptions& o,
                    DeviceRoof& roof) {
  roof.copy_bytes = copy_size(device, o);
  Buffer a(device, roof.copy_bytes);
  Buffer b(device, roof.copy_bytes);
  {
    // Real pages before timing: an untouched mapping reads as the shared zero page.
    Stream fill(device);
    fill.fill(a, 0x3f800000u);
    fill.fill(b, 0);
    fill.run();
  }
  const double bytes_moved = 2.0 * static_cast<double>(roof.copy_bytes);  // read + written
  const auto command = [&](Stream& s, std::uint32_t count) {
    for (std::uint32_t i = 0; i < count; ++i) s.copy(a, b);
  };
  std::uint32_t count = timer.calibrate(command, 1, 256, o.min_ms);
  double ms = timer.ms([&](Stream& s) { command(s, count); }, o.reps, true);
  roof.copy_command_gbps = bytes_moved * count / (ms * 1e6);

  const std::uint32_t local = std::min<std::uint32_t>(256, device.info().max_workgroup_invocations);
  const Kernel& kernel = device.kernel({.shader = "copy_vec4", .local_size = {local, 1, 1}});
  const auto n = static_cast<std::uint32_t>(roof.copy_bytes / 16);
  const std::uint32_t max_groups = is_cpu(device) ? 64 : 16384;
  const Groups groups{std::clamp<std::uint32_t>((n + local - 1) / local, 1, max_groups), 1, 1};
  const auto shader = [&](Stream& s, std::uint32_t count) {
    for (std::uint32_t i = 0; i < count; ++i) s.dispatch(kernel, {a, b}, CopyParams{n}, groups);
  };
  count = timer.calibrate(shader, 1, 256, o.min_ms);
  ms = timer.ms([&](Stream& s) { shader(s, count); }, o.reps, true);
  roof.copy_shader_gbps = bytes_moved * count / (ms * 1e6);
  roof.copy_gbps = std::max(roof.copy_command_gbps, roof.copy_shader_gbps);
}

}  // namespace

DeviceRoof measure_device_roof(Device& device, const RoofOptions& options) {
  check_options(device, options);
  const StreamTimer timer(device);
  DeviceRoof roof;
  roof.timing = timer.on_device() ? "device timestamps" : "wall clock (submit + wait)";
  for (const std::uint32_t local : options.local_sizes) {
    for (const std::uint32_t chains : options.chains) {
      roof.tried.push_back(measure_fma(device, timer, options, local, chains));
      const FmaShape& s = roof.tried.back();
      if (s.gflops > roof.fma_gflops) {
        roof.fma_gflops = s.gflops;
        roof.shape = fmt::format("local {}, {} chains", s.local_size, s.chains);
      }
    }
  }
  if (options.measure_tensor && !device.info().cooperative_f16.empty()) {
    measure_tensor(device, timer, options, roof);
  }
  if (options.measure_copy) measure_copies(device, timer, options, roof);
  return roof;
}

}  // namespace vkt::bench
