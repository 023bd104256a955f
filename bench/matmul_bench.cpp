// vkt-bench-matmul: GFLOP/s of vktower's matmul on each device, with each
// kernel variant, next to OpenBLAS sgemm measured in the same run on the same
// shapes with as many threads as lavapipe uses. The device time is one replay
// of a recorded step (Executor::run + wait: submit, kernel, fence), median of
// the repetitions; on a discrete GPU the step's device time without the copy
// of its feeds from the host (kernel_seconds). Pipeline creation happens
// before, when the step is recorded.
// Each figure is also a fraction of the device's arithmetic roof
// (bench/device_roof.h), measured in the same run. Besides square shapes, the
// products of an MLP step and the implicit GEMMs of the vkt-mnist CNN's step
// (bench/cnn_kernels.h: forward and both gradients, each as the plain matmul at
// its im2col shape and as the convolution kernel itself). Ends with
// `matmul_1024_ratio_vs_openblas=R`, `matmul_1024_fraction_of_peak=F` and, when
// --sizes holds 4096, `matmul_4096_fraction_of_peak=F` (the default variant of
// the first device). Then f16 products (--f16-sizes: f16 operands and result,
// f32 sums) on the kernel the device's half matmuls take: cooperative
// matrices where it has them, against its tensor-core roof, printed as
// `matmul_f16_S_fraction_of_peak=F` (of the FMA roof on a device without
// tensor cores, which the line says), and bf16 products at the same sizes
// (the tiled half kernel on GPUs: no bf16 cooperative matrices here) against
// f32's, `matmul_bf16_S_vs_f32_ratio=R`.
#include <cblas.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include "bench_util.h"
#include "cnn_kernels.h"
#include "device_roof.h"
#include "tiled_sweep.h"

#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/matmul.h>
#include <vktower/runtime/graph/ops/matmul_coopmat.h>
#include <vktower/vktower.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using vkt::bench::median_seconds;

using Clock = std::chrono::steady_clock;

struct Case {
  std::string label;
  int m, k, n;
  bool ta = false, tb = false;
  /// A convolution GEMM of the CNN's step: also timed as the conv kernel itself.
  std::optional<cnn_bench::ConvGemmCase> conv{};
  double flops() const { return 2.0 * m * k * n; }
};

/// The implicit GEMMs of one training step of the vkt-mnist CNN (default
/// options, batch 64 on one tower, as vkt-bench-cnn), at their im2col shapes.
std::vector<Case> cnn_cases() {
  std::vector<Case> cases;
  for (const cnn_bench::ConvGemmCase& c : cnn_bench::step_gemms(64, mnist::CnnOptions{})) {
    const auto m = static_cast<int>(c.m), k = static_cast<int>(c.k), n = static_cast<int>(c.n);
    const std::string a =
        c.transpose_a ? fmt::format("({}x{})^T", k, m) : fmt::format("{}x{}", m, k);
    cases.push_back(
        {fmt::format("{:<22}{} * {}x{}", c.name, a, k, n), m, k, n, c.transpose_a, false, c});
  }
  return cases;
}

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

double openblas_seconds(const Case& c, int reps) {
  const std::vector<float> a = random_values(std::size_t(c.m) * c.k, 1);
  const std::vector<float> b = random_values(std::size_t(c.k) * c.n, 2);
  std::vector<float> out(std::size_t(c.m) * c.n);
  const int lda = c.ta ? c.m : c.k, ldb = c.tb ? c.k : c.n;
  return median_seconds(reps, [&] {
    cblas_sgemm(CblasRowMajor, c.ta ? CblasTrans : CblasNoTrans, c.tb ? CblasTrans : CblasNoTrans,
                c.m, c.n, c.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, out.data(), c.n);
  });
}

/// Wall time of run + wait where the device's storage is host memory (lavapipe:
/// feeds are written in place). Elsewhere (a discrete GPU) each run first
/// copies its feeds from host memory (at 4096^3, 128 MiB), which is not the
/// kernel's speed: there the step's device time outside that copy.
double kernel_seconds(vkt::Device& device, vkt::Executor& step, int reps) {
  if (!device.info().timestamps || device.maps_storage()) {
    return median_seconds(reps, [&] {
      step.run();
      step.wait();
    });
  }
  std::vector<double> times;
  step.run();
  for (int i = 0; i < reps; ++i) {
    step.run();
    double ms = 0;
    for (const auto& command : step.profile()) {
      if (command.op != "feed") ms += command.ms;
    }
    times.push_back(ms * 1e-3);
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  // Where a slow step's device time goes, command by command (the last run's).
  if (median > 2e-3) {
    for (const auto& command : step.profile()) {
      fmt::print("    command {:<18} op {:<16} {:8.3f} ms\n", command.kernel, command.op,
                 command.ms);
    }
  }
  return median;
}

double vktower_seconds(vkt::Device& device, const Case& c, int reps,
                       vkt::DType dtype = vkt::DType::F32) {
  vkt::Graph g(device);
  const vkt::Tensor a = g.input("a", c.ta ? vkt::Shape{c.k, c.m} : vkt::Shape{c.m, c.k}, dtype);
  const vkt::Tensor b = g.input("b", c.tb ? vkt::Shape{c.n, c.k} : vkt::Shape{c.k, c.n}, dtype);
  vkt::Executor step(g, {vkt::matmul(a, b, c.ta, c.tb)}, {.profile = true});
  step.feed("a", random_values(std::size_t(c.m) * c.k, 1));
  step.feed("b", random_values(std::size_t(c.k) * c.n, 2));
  return kernel_seconds(device, step, reps);
}

/// The convolution kernel of `c` alone in a step, timed as vktower_seconds times a matmul.
double conv_seconds(vkt::Device& device, const cnn_bench::ConvGemmCase& c, int reps) {
  cnn_bench::InputGraph g(device);
  const vkt::Tensor y = cnn_bench::add_conv_gemm(g, c, "");
  vkt::Executor step(g.graph, {y}, {.profile = true});
  unsigned seed = 1;
  for (const vkt::Tensor& input : g.inputs) {
    step.feed(input.name(),
              random_values(static_cast<std::size_t>(input.shape().elements()), seed++));
  }
  return kernel_seconds(device, step, reps);
}

const char* name_of(vkt::MatmulVariant v) {
  return v == vkt::MatmulVariant::Texel ? "texel" : "tiled";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vkt-bench-matmul: matmul GFLOP/s against OpenBLAS sgemm in the same run"};
  std::vector<int> sizes{256, 512, 1024, 2048};
  int reps = 5;
  int slow_max = 1024;
  std::vector<std::uint32_t> devices;
  bool sweep_tiles = false;
  std::vector<int> sweep_sizes{1024, 4096};
  std::vector<int> f16_sizes{1024};
  app.add_option("--sizes", sizes, "square sizes")->delimiter(',')->capture_default_str();
  app.add_option("--reps", reps, "timed repetitions (the median is printed)")
      ->capture_default_str();
  app.add_option("--slow-max", slow_max,
                 "largest square size for a variant that is not the device's default "
                 "(the tiled kernel on lavapipe runs at a few GFLOP/s)")
      ->capture_default_str();
  app.add_option("--device", devices, "device indices (default: all)")->delimiter(',');
  app.add_flag(
      "--sweep-tiles", sweep_tiles,
      "also time the tiled (GPU) kernel at every candidate tile shape (bench/tiled_sweep.h)");
  app.add_option("--sweep-sizes", sweep_sizes, "square sizes of the tile sweep")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--f16-sizes", f16_sizes, "square sizes of the f16 products (none: 0)")
      ->delimiter(',')
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::erase(f16_sizes, 0);

  std::vector<Case> cases;
  for (int s : sizes) cases.push_back({fmt::format("{}^3", s), s, s, s});
  // A 784-1024-1024-10 MLP at batch 256: forward, and the two backward products.
  cases.push_back({"x W     256x784 * 784x1024", 256, 784, 1024});
  cases.push_back({"x W     256x1024 * 1024x1024", 256, 1024, 1024});
  cases.push_back({"x W     256x1024 * 1024x10", 256, 1024, 10});
  cases.push_back({"dy W^T  256x1024 * (784x1024)^T", 256, 1024, 784, false, true});
  cases.push_back({"x^T dy  (256x784)^T * 256x1024", 784, 256, 1024, true, false});
  for (Case& c : cnn_cases()) cases.push_back(std::move(c));

  try {
    vkt::Instance instance;
    const char* lp = std::getenv("LP_NUM_THREADS");
    const int threads = lp != nullptr ? std::max(1, std::atoi(lp))
                                      : static_cast<int>(std::thread::hardware_concurrency());
    openblas_set_num_threads(threads);
    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    fmt::print("OpenBLAS {} core \"{}\" (OPENBLAS_CORETYPE={}), {} threads\n",
               openblas_get_config(), openblas_get_corename(),
               coretype != nullptr ? coretype : "unset", threads);
    fmt::print("lavapipe threads: LP_NUM_THREADS={} ({} workers)\n", lp != nullptr ? lp : "unset",
               lp != nullptr ? std::atoi(lp) : threads);
    if (devices.empty()) {
      for (const vkt::DeviceInfo& d : instance.devices()) {
        if (d.unusable_reason.empty()) devices.push_back(d.index);
      }
    }
    std::optional<double> ratio_1024;
    std::map<int, std::pair<double, bool>> f16_fraction;  // size -> (fraction, of tensor cores)
    std::map<int, double> bf16_ratio;                     // size -> bf16 over f32, GFLOP/s
    std::map<int, double> fraction_of_peak;  // square size -> the first device's default variant's
    for (std::uint32_t index : devices) {
      vkt::Device device(instance, index);
      const vkt::MatmulVariant preferred = vkt::matmul_variant(device);
      fmt::print("\ndevice {}: {} ({}), default variant {}\n", index, device.info().name,
                 device.info().driver_info, name_of(preferred));
      const vkt::bench::DeviceRoof roof =
          vkt::bench::measure_device_roof(device, {.measure_copy = false});
      fmt::print("  arithmetic roof (vkt-bench-peak's FMA kernel, this run): {:.1f} GFLOP/s ({})\n",
                 roof.fma_gflops, roof.shape);
      fmt::print("  {:<50}{:>8}{:>12}{:>12}{:>9}{:>9}\n", "shape (M x K * K x N)", "variant",
                 "vktower", "OpenBLAS", "ratio", "of peak");
      const auto row = [&](const std::string& label, const char* variant, double gflops,
                           double ref) {
        fmt::print("  {:<50}{:>8}{:>8.1f} GF/s{:>7.1f} GF/s{:>9.3f}{:>9.3f}\n", label, variant,
                   gflops, ref, gflops / ref, gflops / roof.fma_gflops);
      };
      const vkt::MatmulKernels chosen = device.options().matmul;
      for (const char* variant : {"texel", "tiled"}) {
        device.set_matmul_kernels(vkt::parse_matmul_kernels(variant, "the bench's variant"));
        const vkt::MatmulVariant v = vkt::matmul_variant(device);
        for (std::size_t i = 0; i < cases.size(); ++i) {
          const Case& c = cases[i];
          if (v != preferred && std::max({c.m, c.k, c.n}) > slow_max) continue;
          // Back to back, so that both see the same load on the shared machine.
          const double blas = openblas_seconds(c, reps);
          const double t = vktower_seconds(device, c, v == preferred ? reps : 1);
          const double gflops = c.flops() / t / 1e9, ref = c.flops() / blas / 1e9;
          row(c.label, variant, gflops, ref);
          if (c.conv) {
            const double tc = conv_seconds(device, *c.conv, v == preferred ? reps : 1);
            row("  the same as conv2d's implicit GEMM", variant, c.flops() / tc / 1e9, ref);
          }
          const bool square = c.m == c.k && c.k == c.n && !c.conv && !c.ta && !c.tb;
          if (v == preferred && square && index == devices.front() &&
              !fraction_of_peak.contains(c.m)) {
            fraction_of_peak[c.m] = gflops / roof.fma_gflops;
            if (c.m == 1024) ratio_1024 = gflops / ref;
          }
        }
      }
      device.set_matmul_kernels(chosen);
      const double half_roof = roof.tensor_gflops > 0 ? roof.tensor_gflops : roof.fma_gflops;
      if (!f16_sizes.empty()) {
        const auto tile = vkt::cooperative_tile(device, vkt::DType::F16);
        fmt::print("  f16 products on {}; roof {:.1f} GFLOP/s ({})\n",
                   tile ? "cooperative matrices, tile " + tile->str()
                   : preferred == vkt::MatmulVariant::Texel
                       ? "the f32 texel kernel, operands widened from f16 (as lavapipe runs them)"
                       : "the tiled kernel on half operands",
                   half_roof, roof.tensor_gflops > 0 ? "tensor cores" : "FMA, no tensor cores");
      }
      for (const int size : f16_sizes) {
        const Case c{fmt::format("f16 {}^3", size), size, size, size};
        const double f32 = c.flops() / vktower_seconds(device, c, reps) / 1e9;
        const double f16 = c.flops() / vktower_seconds(device, c, reps, vkt::DType::F16) / 1e9;
        fmt::print("  {:<50}{:8.1f} GF/s, {:.2f}x f32's {:.1f} GF/s, {:.3f} of the roof\n", c.label,
                   f16, f16 / f32, f32, f16 / half_roof);
        const Case b{fmt::format("bf16 {}^3", size), size, size, size};
        const double bf16 = b.flops() / vktower_seconds(device, b, reps, vkt::DType::BF16) / 1e9;
        fmt::print("  {:<50}{:8.1f} GF/s, {:.2f}x f32's\n", b.label, bf16, bf16 / f32);
        if (index == devices.front() && !f16_fraction.contains(size)) {
          f16_fraction[size] = {f16 / half_roof, roof.tensor_gflops > 0};
          bf16_ratio[size] = bf16 / f32;
        }
      }
      if (sweep_tiles) vkt::bench::sweep_tiled_shapes(device, sweep_sizes, reps, roof.fma_gflops);
    }
    if (ratio_1024) fmt::print("\nmatmul_1024_ratio_vs_openblas={:.3f}\n", *ratio_1024);
    for (const auto& [size, fraction] : fraction_of_peak) {
      fmt::print("matmul_{}_fraction_of_peak={:.3f}\n", size, fraction);
    }
    for (const auto& [size, fraction] : f16_fraction) {
      if (!fraction.second) fmt::print("(the device has no tensor cores: of the FMA roof)\n");
      fmt::print("matmul_f16_{}_fraction_of_peak={:.3f}\n", size, fraction.first);
    }
    for (const auto& [size, ratio] : bf16_ratio) {
      fmt::print("matmul_bf16_{}_vs_f32_ratio={:.3f}\n", size, ratio);
    }
    return 0;
  } catch (const vkt::Error& e) {
    fmt::print(stderr, "vkt-bench-matmul: {}\n", e.what());
    return 1;
  }
}
