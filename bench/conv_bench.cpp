// vkt-bench-conv: GFLOP/s of conv2d's forward kernel (an implicit GEMM) against
// the plain matmul at the same GEMM shape [N*OH*OW, KH*KW*C] x [KH*KW*C, O],
// measured in the same run on the same device, for the two convolutions of the
// small MNIST CNN (docs/PERFORMANCE.md). Times are one replay of a recorded step
// (Executor::run + wait), median of the repetitions. Ends with
// `conv_vs_matmul_ratio=R`: the matmuls' total time over the convolutions'
// (above 1: the convolution is faster than multiplying an im2col matrix that
// would first have to be written). A second table does the same for a training
// step's GEMMs: the forward and the gradients of conv2d (the filter's, and the
// input's but for the first layer, whose input is data; dy from the gradient of
// a sum, one fill) against matmul's forward, dB = A^T dC (and dA = dC B^T) at
// the same shapes.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <random>
#include <string>
#include <vector>

#include <vktower/vktower.h>

#include "bench_util.h"

namespace {

using vkt::bench::median_seconds;

struct Layer {
  std::string label;
  std::int64_t batch, h, w, c, k, o;  // same padding, stride 1
  bool input_gradient;                // false for a first layer: its input is data
  std::int64_t m() const { return batch * h * w; }
  std::int64_t depth() const { return k * k * c; }
  double flops() const { return 2.0 * double(m()) * double(depth()) * double(o); }
};

std::vector<float> random_values(std::int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

double conv_seconds(vkt::Device& device, const Layer& l, int reps, bool backward) {
  vkt::Graph g(device);
  const vkt::Tensor x = g.input("x", {l.batch, l.h, l.w, l.c});
  const vkt::Tensor f = g.input("f", {l.k, l.k, l.c, l.o});
  const vkt::Tensor y = vkt::conv2d(x, f, {.padding = vkt::Padding::Same});
  std::vector<vkt::Tensor> fetches{y};
  if (backward) {
    const std::vector<vkt::Tensor> wrt =
        l.input_gradient ? std::vector<vkt::Tensor>{x, f} : std::vector<vkt::Tensor>{f};
    for (const vkt::Gradient& d : vkt::gradients(vkt::reduce_sum(y), wrt))
      fetches.push_back(d.dense);
  }
  vkt::Executor step(g, fetches);
  step.feed("x", random_values(l.batch * l.h * l.w * l.c, 1));
  step.feed("f", random_values(l.depth() * l.o, 2));
  return median_seconds(reps, [&] {
    step.run();
    step.wait();
  });
}

double matmul_seconds(vkt::Device& device, const Layer& l, int reps, bool backward) {
  vkt::Graph g(device);
  const vkt::Tensor a = g.input("a", {l.m(), l.depth()});
  const vkt::Tensor b = g.input("b", {l.depth(), l.o});
  const vkt::Tensor c = vkt::matmul(a, b);
  std::vector<vkt::Tensor> fetches{c};
  if (backward) {
    const std::vector<vkt::Tensor> wrt =
        l.input_gradient ? std::vector<vkt::Tensor>{a, b} : std::vector<vkt::Tensor>{b};
    for (const vkt::Gradient& d : vkt::gradients(vkt::reduce_sum(c), wrt))
      fetches.push_back(d.dense);
  }
  vkt::Executor step(g, fetches);
  step.feed("a", random_values(l.m() * l.depth(), 1));
  step.feed("b", random_values(l.depth() * l.o, 2));
  return median_seconds(reps, [&] {
    step.run();
    step.wait();
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vkt-bench-conv: conv2d forward GFLOP/s against matmul at the same GEMM shape"};
  int reps = 7;
  std::uint32_t device_index = 0;
  std::int64_t batch = 64;
  app.add_option("--reps", reps, "timed repetitions (the median is printed)")
      ->capture_default_str();
  app.add_option("--device", device_index, "device index")->capture_default_str();
  app.add_option("--batch", batch, "batch size")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const std::vector<Layer> layers = {
      {"28x28x1 -> 5x5x32 same", batch, 28, 28, 1, 5, 32, false},
      {"14x14x32 -> 5x5x64 same", batch, 14, 14, 32, 5, 64, true},
  };
  try {
    vkt::Instance instance;
    vkt::Device device(instance, device_index);
    fmt::print("device {}: {} ({}), variant {}\n", device_index, device.info().name,
               device.info().driver_info,
               vkt::matmul_variant(device) == vkt::MatmulVariant::Texel ? "texel" : "tiled");
    double ratio = 0;
    for (const bool backward : {false, true}) {
      fmt::print("\n{}\n{:<26}{:>24}{:>12}{:>12}{:>8}\n",
                 backward ? "forward + gradients (the filter's; the input's too but in layer 1)"
                          : "forward",
                 "layer (batch " + std::to_string(batch) + ")", "GEMM M x K x N", "conv GF/s",
                 "matmul GF/s", "ratio");
      double conv_total = 0, matmul_total = 0;
      for (const Layer& l : layers) {
        const double flops = l.flops() * (!backward ? 1 : l.input_gradient ? 3 : 2);
        const double tc = conv_seconds(device, l, reps, backward);
        const double tm = matmul_seconds(device, l, reps, backward);
        conv_total += tc;
        matmul_total += tm;
        fmt::print("{:<26}{:>24}{:>12.1f}{:>12.1f}{:>8.2f}\n", l.label,
                   fmt::format("{} x {} x {}", l.m(), l.depth(), l.o), flops / tc * 1e-9,
                   flops / tm * 1e-9, tm / tc);
      }
      if (backward) {
        fmt::print("conv_train_vs_matmul_ratio={:.3f}\n", matmul_total / conv_total);
      } else {
        ratio = matmul_total / conv_total;
      }
    }
    fmt::print("conv_vs_matmul_ratio={:.3f}\n", ratio);
  } catch (const std::exception& e) {
    fmt::print(stderr, "vkt-bench-conv: {}\n", e.what());
    return 1;
  }
  return 0;
}
