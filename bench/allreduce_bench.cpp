// vkt-bench-allreduce: the process group's allreduce_sum on the mapped memory
// of a Vulkan buffer (what the cross-process exchange runs on) next to a plain
// MPI_Allreduce(MPI_SUM) of a host buffer of the same size, in the same run,
// and the half exchange of the same floats (--exchange-dtype bf16 between
// processes: rounded to bf16 on the host, half the bytes summed, widened back).
//   mpirun -np 2 build/bench/vkt-bench-allreduce
// Bus bandwidth (NCCL's convention): 2 (P-1)/P * bytes / time, the bytes each
// rank must send and receive in any allreduce. Rank 0 prints medians.
#include <fmt/format.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include "bench_util.h"

#include <vktower/runtime/graph/half.h>
#include <vktower/runtime/mpi/process_group.h>
#include <vktower/vktower.h>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

namespace {

using vkt::bench::median_seconds;

// Rank 0's median: the ranks start together and a collective ends together.
template <typename Fn>
double timed(int reps, Fn&& fn) {
  MPI_Barrier(MPI_COMM_WORLD);
  return median_seconds(reps, fn);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "vkt-bench-allreduce: the process group's allreduce vs MPI_Allreduce (mpirun -np 2)"};
  std::vector<std::size_t> sizes_mib{1, 16, 64};
  int reps = 11;
  std::uint32_t device_index = 0;
  app.add_option("--mib", sizes_mib, "buffer sizes, in MiB (e.g. 1,16)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--reps", reps, "timed repetitions (the median is printed)")
      ->capture_default_str();
  app.add_option("--device", device_index, "device index (vkt-info lists them)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    vkt::ProcessGroup& world = vkt::mpi_world();
    const int ranks = world.size();
    const bool print = world.rank() == 0;
    vkt::Instance instance;
    vkt::Device device(instance, device_index);
    const vkt::DeviceInfo& info = instance.device(device_index);
    if (print) {
      const char* coretype = std::getenv("OPENBLAS_CORETYPE");
      fmt::print("{} ranks; device {}: {} (storage {}mapped); OPENBLAS_CORETYPE={}\n", ranks,
                 info.index, info.name, device.maps_storage() ? "" : "not ",
                 coretype != nullptr ? coretype : "unset");
      fmt::print("bus bandwidth = 2 (P-1)/P * bytes / time; median of {} after a warm-up\n", reps);
    }
    for (std::size_t mib : sizes_mib) {
      const std::size_t bytes = mib << 20;
      const std::size_t n = bytes / sizeof(float);
      // The exchange's buffer: mapped device memory where the device has it.
      vkt::Buffer buffer(
          device, bytes,
          device.maps_storage() ? vkt::BufferKind::Storage : vkt::BufferKind::Staging);
      const std::span<float> mapped(reinterpret_cast<float*>(buffer.host().data()), n);
      std::vector<float> host(n), host_sum(n);
      // Small integers: the in-place sums stay exact over the repetitions.
      for (std::size_t i = 0; i < n; ++i) mapped[i] = host[i] = static_cast<float>(i % 7);

      const double t_mpi = timed(reps, [&] {
        MPI_Allreduce(host.data(), host_sum.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      });
      const double t_vkt = timed(reps, [&] { world.allreduce_sum(mapped, "bench"); });
      // What ProcessExchange does for a half exchange, rounding and widening included.
      const vkt::HalfFormat bf16{"bf16", vkt::widen_bf16, vkt::round_to_bf16};
      std::vector<std::uint16_t> packed(n);
      const double t_half = timed(reps, [&] {
        bf16.round(mapped, packed);
        world.allreduce_sum(std::span<std::uint16_t>(packed), bf16, "bench half");
        bf16.widen(packed, mapped);
      });
      const double bus = 2.0 * (ranks - 1) / ranks * static_cast<double>(bytes) / 1e9;
      if (print) {
        fmt::print(
            "{:>3} MiB  MPI_Allreduce {:7.2f} GB/s ({:7.2f} ms)  vkt allreduce_sum {:7.2f} GB/s "
            "({:7.2f} ms)\n",
            mib, bus / t_mpi, t_mpi * 1e3, bus / t_vkt, t_vkt * 1e3);
        fmt::print("allreduce_vs_mpi_ratio_{}mib={:.2f}\n", mib, t_mpi / t_vkt);
        fmt::print(
            "{:>3} MiB of floats exchanged as bf16: {:7.2f} ms (rounding and widening "
            "included)\n",
            mib, t_half * 1e3);
        fmt::print("allreduce_bf16_vs_f32_speed_ratio_{}mib={:.2f}\n", mib, t_vkt / t_half);
      }
    }
    return 0;
  } catch (const vkt::Error& e) {
    fmt::print(stderr, "vkt-bench-allreduce: {}\n", e.what());
    return 1;
  }
}
