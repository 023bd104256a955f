// vkt-bench-cnn: the CNN of vkt-mnist (samples/vkt_mnist/mnist_model.h, Adam,
// batch 64 of 28x28 images) trained on 1, 2 and 4 towers: examples/s; the
// same model trained by PyTorch on the same cores in the same run when
// python3 can import torch (bench/pytorch_cnn.py), with the ratio; and the
// convolutions' share of the step and their GFLOP/s against a plain
// vkt::matmul of the same GEMM shape (cnn_kernels.h), all in one run.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>
#include <vktower/vktower.h>
#include "../samples/vkt_mnist/mnist_model.h"
#include "cnn_kernels.h"
#include "torch_reference.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

struct Flags {
  std::int64_t batch = 64;
  int steps = 10;
  int reps = 9;
  std::vector<int> towers{1, 2, 4};
  int torch_steps = 20;
  std::string torch_device = "auto";
  bool skip_torch = false;
  bool skip_kernels = false;
  bool profile = false;
  mnist::CnnOptions model{};
};

std::string describe(const mnist::CnnOptions& o) {
  return fmt::format("conv {}x{}x{} stride {}{} - conv {}x{}x{} - pool - dense {} - dense {}",
                     o.conv1_kernel, o.conv1_kernel, o.conv1_filters, o.conv1_stride,
                     o.first_pool ? " - pool" : "", o.conv2_kernel, o.conv2_kernel, o.conv2_filters,
                     o.dense_units, o.classes);
}

/// Examples/s of the CNN's training step on `n` towers of device 0 and a
/// step's milliseconds, both by wall clock, on one random batch (after a
/// warm-up step).
std::pair<double, double> train_rate(vkt::Instance& instance, int n, const Flags& flags,
                                     const mnist::CnnOptions& options) {
  const auto model = [options](vkt::ModelContext&, const vkt::TensorDict& f,
                               const vkt::TensorDict& l, vkt::Mode mode, const vkt::Params&) {
    const vkt::Tensor logits = mnist::cnn_logits(f.at("x"), options, mode == vkt::Mode::Train);
    const vkt::Tensor loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits);
    vkt::TowerOptimizer adam(std::make_unique<vkt::Adam>(1e-3f));
    return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = adam.minimize(loss)};
  };
  const std::int64_t b = flags.batch;
  const cnn_bench::RandomDigits data = cnn_bench::random_digits(b, 1);
  const vkt::HostBatch features = {{"x", vkt::HostTensor::floats({b, 28, 28, 1}, data.x)}};
  const vkt::HostBatch labels = {{"y", vkt::HostTensor::ints({b}, data.y)}};
  const auto replicated = vkt::replicate_model_fn(
      model, {.loss_reduction = vkt::LossReduction::Mean,
              .devices = std::vector<std::uint32_t>(static_cast<std::size_t>(n), 0)});
  vkt::ModelContext root(instance, {{"x", {{b, 28, 28, 1}}}}, {{"y", {{b}, vkt::DType::I32}}});
  const vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
  spec.run->train_step(features, labels);  // warm-up
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < flags.steps; ++s) spec.run->train_step(features, labels);
  // train_step returns with its step still queued: the last steps end here.
  (void)spec.run->loss();
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Wall clock, as PyTorch's rate is.
  return {static_cast<double>(b) * flags.steps / wall_s, wall_s * 1e3 / flags.steps};
}

/// bench/pytorch_cnn.py's key=value lines, or nothing when it failed.
std::optional<std::map<std::string, std::string>> run_pytorch(const std::string& python,
                                                              const Flags& flags) {
  const mnist::CnnOptions& m = flags.model;
  const std::string args = fmt::format(
      "--batch {} --steps {} --threads 2 "
      "--filters {},{} --kernels {},{} --dense {} --stride {} --device {} {}",
      flags.batch, flags.torch_steps, m.conv1_filters, m.conv2_filters, m.conv1_kernel,
      m.conv2_kernel, m.dense_units, m.conv1_stride, flags.torch_device,
      m.first_pool ? "--first-pool" : "");
  return vkt::bench::run_torch_script(
      python, vkt::bench::bench_script(VKT_BENCH_DIR, "pytorch_cnn.py"), args);
}

/// PyTorch's rate for the same model and the ratio, or why there is none.
void report_pytorch(const Flags& flags, double best) {
  const std::optional<std::string> python = vkt::bench::torch_python();
  if (!python) {
    fmt::print(
        "pytorch: skipped, no python3 here imports torch (apt-get install python3-torch, or set "
        "VKT_PYTHON)\n");
  } else if (const auto torch = run_pytorch(*python, flags)) {
    for (const auto& [key, value] : *torch) fmt::print("  {}={}\n", key, value);
    const double theirs = std::stod(torch->at("pytorch_examples_per_s"));
    fmt::print("pytorch ({}): {:.1f} examples/s; vktower's best above: {:.1f}\n", *python, theirs,
               best);
    fmt::print("cnn_vs_pytorch_ratio={:.3f}\n", best / theirs);
    fmt::print("cnn_vs_pytorch_{}_ratio={:.3f}\n", flags.torch_device, best / theirs);
  } else {
    fmt::print("pytorch: {} failed (its output is above)\n",
               vkt::bench::bench_script(VKT_BENCH_DIR, "pytorch_cnn.py"));
  }
}

void report_kernels(vkt::Instance& instance, const Flags& flags, const mnist::CnnOptions& options,
                    double step_ms) {
  vkt::Device device(instance, 0);
  const std::vector<cnn_bench::ConvGemmCase> cases = cnn_bench::step_gemms(flags.batch, options);
  fmt::print("conv GEMMs of one 1-tower step (batch {}), device time, median of {}:\n", flags.batch,
             flags.reps);
  double conv_flops = 0, conv_ms_sum = 0, matmul_ms_sum = 0;
  for (const cnn_bench::ConvGemmCase& c : cases) {
    const cnn_bench::KernelTimes t = cnn_bench::time_case(device, c, flags.reps);
    fmt::print(
        "  {:<22} [{} x {}] x [{} x {}]: conv {:7.2f} ms {:6.1f} GFLOP/s, matmul {:7.2f} ms "
        "{:6.1f} GFLOP/s, conv/matmul {:.2f}\n",
        c.name, c.m, c.k, c.k, c.n, t.conv_ms, c.flops() / t.conv_ms / 1e6, t.matmul_ms,
        c.flops() / t.matmul_ms / 1e6, t.matmul_ms / t.conv_ms);
    conv_flops += c.flops();
    conv_ms_sum += t.conv_ms;
    matmul_ms_sum += t.matmul_ms;
  }
  const double together = cnn_bench::all_convs_ms(device, cases, flags.reps);
  fmt::print(
      "  all conv GEMMs in one graph: {:.2f} ms ({:.1f} GFLOP/s; one by one {:.2f} ms, their "
      "matmuls {:.2f} ms = {:.1f} GFLOP/s)\n",
      together, conv_flops / together / 1e6, conv_ms_sum, matmul_ms_sum,
      conv_flops / matmul_ms_sum / 1e6);
  fmt::print("conv_share_of_step={:.3f}\n", together / step_ms);
  fmt::print("conv_vs_matmul_gflops_ratio={:.2f}\n", matmul_ms_sum / conv_ms_sum);
}

void report_profile(vkt::Instance& instance, const Flags& flags, const mnist::CnnOptions& options) {
  vkt::Device device(instance, 0);
  const std::vector<cnn_bench::StepKernel> kernels =
      cnn_bench::step_profile(device, flags.batch, options, flags.reps);
  double total = 0;
  for (const cnn_bench::StepKernel& k : kernels) total += k.ms;
  fmt::print(
      "1-tower step without the optimizer (batch {}), device time by op and kernel, "
      "fastest of {}: {:.2f} ms\n",
      flags.batch, flags.reps, total);
  for (const cnn_bench::StepKernel& k : kernels) {
    fmt::print("  {:7.2f} ms {:5.1f}%  {:<24} {:<22} x{}\n", k.ms, 100.0 * k.ms / total, k.op,
               k.kernel, k.commands);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "vkt-bench-cnn: the vkt-mnist CNN's training throughput on 1, 2 and 4 towers, "
      "against PyTorch on the same cores, and its convolutions against matmul"};
  Flags flags;
  app.add_option("--batch", flags.batch, "global batch")
      ->capture_default_str()
      ->check(CLI::Range(4, 4096));
  app.add_option("--steps", flags.steps, "timed steps per tower count (after one warm-up)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--reps", flags.reps, "device-timed runs per kernel graph")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--towers", flags.towers, "tower counts, e.g. 1,2,4")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--torch-steps", flags.torch_steps, "PyTorch's timed steps")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  std::vector<std::int64_t> filters{flags.model.conv1_filters, flags.model.conv2_filters};
  app.add_option("--filters", filters, "the two convolutions' filters (vkt-mnist's --filters)")
      ->delimiter(',')
      ->expected(2)
      ->capture_default_str();
  std::vector<std::int64_t> kernels{flags.model.conv1_kernel, flags.model.conv2_kernel};
  app.add_option("--kernels", kernels, "the two convolutions' filter sizes (odd)")
      ->delimiter(',')
      ->expected(2)
      ->capture_default_str();
  app.add_option("--stride", flags.model.conv1_stride, "the first convolution's stride")
      ->capture_default_str();
  app.add_flag("--first-pool,!--no-first-pool", flags.model.first_pool,
               "a max pool after the first convolution");
  app.add_option("--dense", flags.model.dense_units, "hidden dense units")->capture_default_str();
  app.add_option("--torch-device", flags.torch_device,
                 "PyTorch's device: auto (cpu on lavapipe, else cuda), cpu or cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_flag("--no-torch", flags.skip_torch, "skip the PyTorch reference");
  app.add_flag("--no-kernels", flags.skip_kernels, "skip the conv vs matmul kernel figures");
  app.add_flag("--profile", flags.profile,
               "only the 1-tower step's device time by op and kernel (no towers, no PyTorch)");
  CLI11_PARSE(app, argc, argv);
  flags.model.conv1_filters = filters[0];
  flags.model.conv2_filters = filters[1];
  flags.model.conv1_kernel = kernels[0];
  flags.model.conv2_kernel = kernels[1];

  try {
    vkt::Instance instance;
    const mnist::CnnOptions& options = flags.model;
    if (flags.torch_device == "auto") {
      flags.torch_device = instance.device(0).is_lavapipe ? "cpu" : "cuda";
    }
    const char* threads = std::getenv("LP_NUM_THREADS");
    const char* core = std::getenv("OPENBLAS_CORETYPE");
    fmt::print(
        "device 0: {}, LP_NUM_THREADS={}, OPENBLAS_CORETYPE={}; CNN {} ({:.1f} MFLOP forward per "
        "example), Adam, batch {}\n",
        instance.device(0).name, threads ? threads : "unset", core ? core : "unset",
        describe(options), mnist::forward_flops(options) / 1e6, flags.batch);
    if (flags.profile) {
      report_profile(instance, flags, options);
      return 0;
    }
    double best = 0, one_tower_ms = 0;
    for (const int n : flags.towers) {
      if (flags.batch % n != 0) {
        fmt::print("{} towers: skipped, the batch does not divide by {}\n", n, n);
        continue;
      }
      const auto [rate, ms] = train_rate(instance, n, flags, options);
      fmt::print(
          "{} tower{}: {:8.1f} examples/s (wall clock), step {:.2f} ms (wall clock over {})\n", n,
          n == 1 ? " " : "s", rate, ms, flags.steps);
      if (n == 1) one_tower_ms = ms;
      best = std::max(best, rate);
    }
    if (!flags.skip_torch) report_pytorch(flags, best);
    if (!flags.skip_kernels && one_tower_ms > 0) {
      report_kernels(instance, flags, options, one_tower_ms);
    }
    return 0;
  } catch (const vkt::Error& e) {
    fmt::print(stderr, "vkt-bench-cnn: {}\n", e.what());
    return 1;
  }
}
