// vkt-bench-runtime: the runtime's fixed costs and copy speed, each next to a
// reference measured in the same run.
//   - CrossDeviceCopy between two Devices vs std::memcpy of the same bytes
//     (mapped path, and the staged path that a discrete GPU takes);
//   - a dispatch inside a replayed stream vs one submit round trip.
// Prints medians; the machine is noisy, so compare ratios, not times across runs.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include "bench_util.h"

#include <vktower/tower/gradient_reducer.h>
#include <vktower/vktower.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace {

using vkt::bench::median_seconds;

using Clock = std::chrono::steady_clock;

struct SaxpyParams {
  float a;
  std::uint32_t n;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vkt-bench-runtime: copy speed and dispatch cost against same-run references"};
  std::size_t mib = 64;
  int reps = 15;
  std::uint32_t device_index = 0;
  int dispatches = 200;
  app.add_option("--mib", mib, "bytes moved per copy, in MiB")->capture_default_str();
  app.add_option("--reps", reps, "timed repetitions (the median is printed)")
      ->capture_default_str();
  app.add_option("--device", device_index, "device index (vkt-info lists them)")
      ->capture_default_str();
  app.add_option("--dispatches", dispatches, "dispatches in the replayed stream")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    vkt::Instance instance;
    const vkt::DeviceInfo& info = instance.device(device_index);
    const char* threads = std::getenv("LP_NUM_THREADS");
    fmt::print("device {}: {} ({}), LP_NUM_THREADS={}\n", info.index, info.name, info.driver_info,
               threads != nullptr ? threads : "unset");
    const std::size_t bytes = mib << 20;

    // Reference: one host memcpy between two host buffers of the same size.
    std::vector<std::byte> host_a(bytes, std::byte{1}), host_b(bytes);
    const double t_memcpy =
        median_seconds(reps, [&] { std::memcpy(host_b.data(), host_a.data(), bytes); });
    const double gbs = static_cast<double>(bytes) / 1e9;
    fmt::print("\ncopy of {} MiB between two Devices on device {}\n", mib, device_index);
    fmt::print("  {:<44}{:8.2f} GB/s  (reference)\n", "std::memcpy host to host", gbs / t_memcpy);
    for (bool staged : {false, true}) {
      vkt::Device a(instance, device_index, vkt::DeviceOptions{.force_staging = staged});
      vkt::Device b(instance, device_index, vkt::DeviceOptions{.force_staging = staged});
      vkt::Buffer src(a, bytes);
      vkt::Buffer dst(b, bytes);
      // Real pages on both sides: an untouched mapping reads as the shared zero page.
      src.upload(std::span<const std::byte>(host_a));
      dst.upload(std::span<const std::byte>(host_b));
      vkt::CrossDeviceCopy copy(src, dst);
      const double t = median_seconds(reps, [&] { copy.run(); });
      fmt::print("  {:<44}{:8.2f} GB/s  ratio to memcpy {:.2f}\n",
                 staged ? "CrossDeviceCopy, staged (2 copy commands)"
                        : "CrossDeviceCopy, mapped (1 memcpy)",
                 gbs / t, t_memcpy / t);
    }

    // Gradient reduction: N towers' arenas gathered and summed on a consolidation
    // device, against the same sum on the host (reading the N arenas once).
    fmt::print("\ngradient reduction of {} MiB arenas\n", mib);
    for (int towers : {2, 4}) {
      std::vector<std::unique_ptr<vkt::Device>> devices;
      std::vector<vkt::Buffer> arenas;
      std::vector<vkt::BufferRange> ranges;
      for (int t = 0; t < towers; ++t) {
        devices.push_back(std::make_unique<vkt::Device>(instance, device_index));
        arenas.emplace_back(*devices.back(), bytes);
        arenas.back().upload(std::span<const std::byte>(host_a));
      }
      for (const vkt::Buffer& a : arenas) ranges.emplace_back(a);
      vkt::Device master(instance, device_index);
      vkt::GradientReducer reducer(ranges, master);
      std::vector<std::vector<float>> cpu(towers, std::vector<float>(bytes / 4, 1.0f));
      std::vector<float> cpu_sum(bytes / 4);
      const double t_cpu = median_seconds(reps, [&] {
        for (std::size_t i = 0; i < cpu_sum.size(); ++i) {
          float acc = cpu[0][i];
          for (int t = 1; t < towers; ++t) acc += cpu[t][i];
          cpu_sum[i] = acc;
        }
      });
      const double t_gpu = median_seconds(reps, [&] { reducer.run({}).wait(); });
      fmt::print(
          "  {} towers: host sum {:.1f} ms (reference), GradientReducer {:.1f} ms, ratio {:.2f}\n",
          towers, t_cpu * 1e3, t_gpu * 1e3, t_cpu / t_gpu);
    }

    vkt::Device device(instance, device_index);
    const std::uint32_t n = 1024;
    vkt::Buffer x(device, n * sizeof(float));
    vkt::Buffer y(device, n * sizeof(float));
    x.upload(std::vector<float>(n, 1.0f));
    y.upload(std::vector<float>(n, 0.0f));
    const vkt::Kernel& saxpy = device.kernel({.shader = "saxpy", .local_size = {256, 1, 1}});
    vkt::Stream one(device);
    one.dispatch(saxpy, {x, y}, SaxpyParams{1.0f, n}, vkt::Stream::groups_for(saxpy, n));
    vkt::Stream many(device);
    for (int i = 0; i < dispatches; ++i) {
      many.dispatch(saxpy, {x, y}, SaxpyParams{1.0f, n}, vkt::Stream::groups_for(saxpy, n));
    }
    const double t_one = median_seconds(reps, [&] { one.run(); });
    const double t_many = median_seconds(reps, [&] { many.run(); });
    const double per_dispatch = (t_many - t_one) / (dispatches - 1);
    fmt::print("\ndispatch cost (saxpy on {} floats, each dependent on the last)\n", n);
    fmt::print("  {:<44}{:8.1f} us  (reference)\n", "submit + wait of a 1-dispatch stream",
               t_one * 1e6);
    fmt::print("  {:<44}{:8.1f} us  ratio to the round trip {:.2f}\n",
               fmt::format("one more dispatch in a {}-dispatch stream", dispatches),
               per_dispatch * 1e6, per_dispatch / t_one);
    return 0;
  } catch (const vkt::Error& e) {
    fmt::print(stderr, "vkt-bench-runtime: {}\n", e.what());
    return 1;
  }
}
