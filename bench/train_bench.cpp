// vkt-bench-train: one training step of the MLP 784-1024-1024-10 (ReLU,
// sparse softmax cross-entropy, batch 256) on one tower, with SGD and Adam,
// all in one run: examples/s through replicate_model_fn and TowerRun (what a
// user runs); the fraction of the device's arithmetic roof (device_roof.h) the
// whole step reaches; where the step's device time goes, per kernel, from a
// timestamp after every command (ExecutorOptions::profile), with the share
// outside the matmul kernels and the dispatches per step; and, when python3
// imports torch, the same model trained by PyTorch on the same cores (on the
// GPU with --torch-device cuda, the default where the Vulkan device is not
// lavapipe) with the ratio.
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include "bench_util.h"

#include <vktower/vktower.h>
#include "device_roof.h"
#include "torch_reference.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr std::int64_t kBatch = 256;
const std::vector<std::int64_t> kWidths{784, 1024, 1024, 10};

struct Flags {
  int steps = 10;
  int reps = 5;
  std::uint32_t device = 0;
  std::string optimizer = "both";
  int torch_steps = 20;
  std::string torch_device = "auto";
  bool skip_torch = false;
};

/// 2 * B * sum(in * out): the forward pass's matmul FLOPs.
double forward_flops() {
  double sum = 0;
  for (std::size_t l = 0; l + 1 < kWidths.size(); ++l)
    sum += static_cast<double>(kWidths[l] * kWidths[l + 1]);
  return 2.0 * kBatch * sum;
}

/// The matmul FLOPs a step runs: forward, every weight gradient, and the input
/// gradients of every layer but the first (nothing needs the input's).
double executed_flops() {
  const double first = 2.0 * kBatch * static_cast<double>(kWidths[0] * kWidths[1]);
  return 3 * forward_flops() - first;
}

std::unique_ptr<vkt::Optimizer> make_optimizer(const std::string& name) {
  if (name == "adam") return std::make_unique<vkt::Adam>(1e-3);
  return std::make_unique<vkt::SGD>(0.01);
}

vkt::Tensor mlp_loss(const vkt::Tensor& x, const vkt::Tensor& y) {
  using vkt::layers::Activation;
  vkt::Tensor h = x;
  for (std::size_t l = 1; l + 1 < kWidths.size(); ++l) {
    h = vkt::layers::dense(h, kWidths[l], Activation::Relu, fmt::format("h{}", l));
  }
  const vkt::Tensor logits = vkt::layers::dense(h, kWidths.back(), Activation::None, "logits");
  return vkt::sparse_softmax_cross_entropy(y, logits);
}

struct Batch {
  std::vector<float> x;
  std::vector<std::int32_t> y;
};

Batch random_batch() {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Batch b{std::vector<float>(static_cast<std::size_t>(kBatch * kWidths.front())),
          std::vector<std::int32_t>(static_cast<std::size_t>(kBatch))};
  for (float& v : b.x) v = normal(rng);
  for (auto& v : b.y) v = static_cast<std::int32_t>(rng() % kWidths.back());
  return b;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Rate {
  double examples_per_s = 0;
  double step_ms = 0;    // host wall clock over the timed steps, per step
  double device_ms = 0;  // the last step as its tower's device timed it
  /// Examples per second of this process's CPU time (lavapipe's threads
  /// included): less sensitive than examples/s to other work on the machine.
  double examples_per_cpu_s = 0;
};

/// The step as a user trains it: replicate_model_fn on one tower, TowerRun.
Rate train_rate(vkt::Instance& instance, const Flags& flags, const std::string& optimizer) {
  const auto model = [optimizer](vkt::ModelContext&, const vkt::TensorDict& f,
                                 const vkt::TensorDict& l, vkt::Mode mode, const vkt::Params&) {
    const vkt::Tensor loss = mlp_loss(f.at("x"), l.at("y"));
    vkt::TowerOptimizer opt(make_optimizer(optimizer));
    return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = opt.minimize(loss)};
  };
  const Batch batch = random_batch();
  const vkt::HostBatch features = {{"x", vkt::HostTensor::floats({kBatch, kWidths[0]}, batch.x)}};
  const vkt::HostBatch labels = {{"y", vkt::HostTensor::ints({kBatch}, batch.y)}};
  const auto replicated = vkt::replicate_model_fn(
      model, {.loss_reduction = vkt::LossReduction::Mean, .devices = {flags.device}});
  vkt::ModelContext root(instance, {{"x", {{kBatch, kWidths[0]}}}},
                         {{"y", {{kBatch}, vkt::DType::I32}}});
  const vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
  spec.run->train_step(features, labels);  // warm-up
  const double cpu_before = vkt::bench::process_cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  // No reads in the loop: a device time read waits for its step.
  for (int s = 0; s < flags.steps; ++s) spec.run->train_step(features, labels);
  // train_step returns with its step still queued (one host wait a step, for
  // the step two back): the wall clock ends when the last step has.
  (void)spec.run->loss();
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = vkt::bench::process_cpu_seconds() - cpu_before;
  Rate r{.step_ms = wall_s * 1e3 / flags.steps,
         .device_ms = spec.run->last_step_times().slowest_tower};
  r.examples_per_cpu_s = static_cast<double>(kBatch) * flags.steps / cpu;
  r.examples_per_s = static_cast<double>(kBatch) * flags.steps / wall_s;
  return r;
}

struct Profile {
  std::vector<vkt::Executor::CommandProfile> commands;  // each command's median ms
  std::size_t dispatches = 0, commands_recorded = 0, barriers = 0;
  double plain_device_ms = 0;  // the same step unprofiled, device time, median
};

/// The same step built on the Graph and run by an Executor (the program the
/// one-tower TowerRun runs), profiled: each command's median over `reps` runs.
Profile profile_step(vkt::Device& device, const Flags& flags, const std::string& optimizer) {
  vkt::Graph graph(device, {.seed = 1});
  const vkt::Tensor x = graph.input("x", {kBatch, kWidths[0]});
  const vkt::Tensor y = graph.input("y", {kBatch}, vkt::DType::I32);
  const vkt::Tensor loss = mlp_loss(x, y);
  const vkt::Tensor train = make_optimizer(optimizer)->minimize(loss);
  const Batch batch = random_batch();
  // Both programs alive, run in turns, so that the machine's other load
  // weighs on each alike.
  vkt::Executor plain(graph, {loss, train}, {.timestamps = true});
  vkt::Executor profiled(graph, {loss, train}, {.timestamps = true, .profile = true});
  for (vkt::Executor* step : {&plain, &profiled}) {
    step->feed("x", batch.x);
    step->feed("y", batch.y);
    step->run();  // warm-up
  }
  Profile p;
  std::vector<std::vector<double>> ms;
  std::vector<double> plain_ms;
  for (int r = 0; r < flags.reps; ++r) {
    plain.run();
    plain_ms.push_back(plain.device_ms().value_or(0));
    profiled.run();
    const auto commands = profiled.profile();
    ms.resize(commands.size());
    for (std::size_t k = 0; k < commands.size(); ++k) ms[k].push_back(commands[k].ms);
    if (p.commands.empty()) p.commands = commands;
  }
  p.plain_device_ms = median(plain_ms);
  p.dispatches = profiled.stream().dispatch_count();
  p.commands_recorded = profiled.stream().command_count();
  p.barriers = profiled.stream().barrier_count();
  for (std::size_t k = 0; k < p.commands.size(); ++k) p.commands[k].ms = median(ms[k]);
  return p;
}

bool is_matmul(const vkt::Executor::CommandProfile& c) {
  return c.op.find("matmul") != std::string::npos;
}

/// Prints the per-kernel table and what the matmul ops reach against `roof`
/// (GFLOP/s); returns the share of the step outside matmul ops.
double report_profile(const Profile& p, double roof) {
  struct Row {
    int count = 0;
    double ms = 0;
    std::string ops;
  };
  std::map<std::string, Row> rows;
  double total = 0, matmul = 0;
  for (const auto& c : p.commands) {
    Row& row = rows[c.kernel];
    ++row.count;
    row.ms += c.ms;
    if (row.ops.find(c.op) == std::string::npos) row.ops += (row.ops.empty() ? "" : ",") + c.op;
    total += c.ms;
    if (is_matmul(c)) matmul += c.ms;
  }
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  fmt::print("  {:<26} {:>5} {:>9} {:>6}  ops\n", "kernel", "count", "total ms", "share");
  for (const auto& [kernel, row] : sorted) {
    fmt::print("  {:<26} {:>5} {:>9.3f} {:>6.3f}  {}\n", kernel, row.count, row.ms,
               total > 0 ? row.ms / total : 0.0, row.ops);
  }
  fmt::print(
      "  profiled step: {:.2f} ms summed over {} commands ({} dispatches, {} barriers); the "
      "same step unprofiled: {:.2f} ms (device)\n",
      total, p.commands_recorded, p.dispatches, p.barriers, p.plain_device_ms);
  if (matmul > 0) {
    const double gflops = executed_flops() / (matmul / 1e3) / 1e9;
    fmt::print(
        "  matmul ops: {:.2f} ms for the step's {:.3f} GFLOP of matmuls = {:.1f} GFLOP/s = {:.3f} "
        "of the roof; everything else {:.2f} ms\n",
        matmul, executed_flops() / 1e9, gflops, gflops / roof, total - matmul);
  }
  return total > 0 ? 1.0 - matmul / total : 0.0;
}

/// bench/pytorch_mlp.py's key=value lines, or nothing when it failed.
std::optional<std::map<std::string, std::string>> run_pytorch(const std::string& python,
                                                              const Flags& flags,
                                                              const std::string& optimizer,
                                                              const std::string& device) {
  const std::string args = fmt::format(
      "--batch {} --optimizer {} --steps {} "
      "--threads 2 --device {}",
      kBatch, optimizer, flags.torch_steps, device);
  return vkt::bench::run_torch_script(
      python, vkt::bench::bench_script(VKT_BENCH_DIR, "pytorch_mlp.py"), args);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

/// PyTorch's key=value lines for `optimizer`, or nothing (with the reason printed).
std::optional<std::map<std::string, std::string>> pytorch_rate(const Flags& flags,
                                                               const std::string& optimizer,
                                                               const std::string& device) {
  static const std::optional<std::string> python = vkt::bench::torch_python();
  if (!python) {
    fmt::print(
        "  pytorch: skipped, no python3 here imports torch (VKT_DEPS_TORCH=1 scripts/deps.sh, "
        "or set VKT_PYTHON)\n");
    return std::nullopt;
  }
  const auto torch = run_pytorch(*python, flags, optimizer, device);
  if (!torch) {
    fmt::print("  pytorch: {} failed (its output is above)\n",
               vkt::bench::bench_script(VKT_BENCH_DIR, "pytorch_mlp.py"));
    return std::nullopt;
  }
  std::string line;
  for (const auto& [key, value] : *torch) {
    if (key.rfind("pytorch_examples", 0) != 0) line += fmt::format(" {}={}", key, value);
  }
  fmt::print("  pytorch ({}):{}\n", *python, line);
  if (torch->contains("openblas_core") && torch->at("openblas_core") == "Prescott") {
    fmt::print(
        "  pytorch: OpenBLAS fell back to its Prescott (SSE3) kernels, not knowing this CPU; "
        "OPENBLAS_CORETYPE=Haswell or SkylakeX gives it AVX2 or AVX-512\n");
  }
  return torch;
}

/// The figures that end the report.
struct Summary {
  std::map<std::string, std::string> values;
  double fraction = 1e9;        // the lowest train_fraction_of_peak
  std::optional<double> ratio;  // the lowest train_vs_pytorch_ratio
};

/// One optimizer's rate, profile and PyTorch comparison, added to `summary`.
void bench_optimizer(vkt::Instance& instance, vkt::Device& device, const Flags& flags,
                     const std::string& name, double roof, const std::string& torch_device,
                     Summary& summary) {
  const Rate rate = train_rate(instance, flags, name);
  const double gflops = 3 * forward_flops() / (rate.step_ms / 1e3) / 1e9;
  fmt::print(
      "{}: {:.1f} examples/s, step {:.2f} ms (wall clock over {}; the last on the device {:.2f} "
      "ms), {:.1f} GFLOP/s = "
      "{:.3f} of the roof; {:.1f} examples per CPU second\n",
      name, rate.examples_per_s, rate.step_ms, flags.steps, rate.device_ms, gflops, gflops / roof,
      rate.examples_per_cpu_s);
  summary.fraction = std::min(summary.fraction, gflops / roof);
  summary.values[fmt::format("train_examples_per_s_{}", name)] =
      fmt::format("{:.1f}", rate.examples_per_s);

  const Profile profile = profile_step(device, flags, name);
  fmt::print("{} step per kernel, device time (median of {} profiled steps):\n", name, flags.reps);
  const double outside = report_profile(profile, roof);
  summary.values[fmt::format("outside_matmul_share_{}", name)] = fmt::format("{:.3f}", outside);
  summary.values[fmt::format("dispatches_per_step_{}", name)] = std::to_string(profile.dispatches);

  if (flags.skip_torch) return;
  const auto torch = pytorch_rate(flags, name, torch_device);
  if (!torch) return;
  const double theirs = std::stod(torch->at("pytorch_examples_per_s"));
  const double ratio = rate.examples_per_s / theirs;
  fmt::print("  pytorch {} on {}: {:.1f} examples/s; vktower/pytorch {:.3f}\n", name, torch_device,
             theirs, ratio);
  summary.values[fmt::format("train_vs_pytorch_ratio_{}", name)] = fmt::format("{:.3f}", ratio);
  summary.ratio = std::min(summary.ratio.value_or(ratio), ratio);
  if (torch->contains("pytorch_examples_per_cpu_s")) {
    // Per CPU second both sides pay only for their own work: a load-robust check.
    const double per_cpu = std::stod(torch->at("pytorch_examples_per_cpu_s"));
    fmt::print("  per CPU second: pytorch {:.1f} examples, vktower/pytorch {:.3f}\n", per_cpu,
               rate.examples_per_cpu_s / per_cpu);
    summary.values[fmt::format("train_vs_pytorch_cpu_ratio_{}", name)] =
        fmt::format("{:.3f}", rate.examples_per_cpu_s / per_cpu);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "vkt-bench-train: the MLP 784-1024-1024-10 training step (batch 256, SGD and Adam, one "
      "tower): examples/s, fraction of the device roof, per-kernel profile, against PyTorch"};
  Flags flags;
  app.add_option("--steps", flags.steps, "timed training steps per optimizer (after a warm-up)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--reps", flags.reps, "profiled steps per optimizer (each command's median)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--device", flags.device, "Vulkan device index")->capture_default_str();
  app.add_option("--optimizer", flags.optimizer, "sgd, adam or both")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgd", "adam", "both"}));
  app.add_option("--torch-steps", flags.torch_steps, "PyTorch's timed steps")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--torch-device", flags.torch_device,
                 "PyTorch's device: auto (cpu on lavapipe, else cuda), cpu or cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_flag("--no-torch", flags.skip_torch, "skip the PyTorch reference");
  CLI11_PARSE(app, argc, argv);

  try {
    vkt::Instance instance;
    if (flags.device >= instance.devices().size()) {
      throw vkt::Error(fmt::format("--device {}: there are {} devices (vkt-info lists them)",
                                   flags.device, instance.devices().size()));
    }
    const vkt::DeviceInfo& info = instance.device(flags.device);
    const std::string torch_device = flags.torch_device != "auto" ? flags.torch_device
                                     : info.is_lavapipe           ? "cpu"
                                                                  : "cuda";
    const char* threads = std::getenv("LP_NUM_THREADS");
    const char* core = std::getenv("OPENBLAS_CORETYPE");
    fmt::print(
        "device {}: {}; CPU {}; LP_NUM_THREADS={}, OPENBLAS_CORETYPE={}; timestamp period {} "
        "ns\n",
        flags.device, info.name, cpu_model(), threads ? threads : "unset", core ? core : "unset",
        info.timestamp_period_ns);
    fmt::print(
        "MLP 784-1024-1024-10 ReLU, batch {}, 1 tower; step FLOPs counted as 3 x forward "
        "matmuls = {:.3f} GFLOP (the step runs {:.3f}: no input gradient of the first layer; "
        "bias, ReLU, loss and update not counted)\n",
        kBatch, 3 * forward_flops() / 1e9, executed_flops() / 1e9);

    vkt::Device device(instance, flags.device);
    const vkt::bench::DeviceRoof roof =
        vkt::bench::measure_device_roof(device, {.measure_copy = false});
    fmt::print("device roof: {:.1f} GFLOP/s ({}, {})\n", roof.fma_gflops, roof.shape, roof.timing);

    const std::vector<std::string> optimizers = flags.optimizer == "both"
                                                    ? std::vector<std::string>{"sgd", "adam"}
                                                    : std::vector<std::string>{flags.optimizer};
    Summary summary;
    for (const std::string& name : optimizers) {
      bench_optimizer(instance, device, flags, name, roof.fma_gflops, torch_device, summary);
    }
    for (const auto& [key, value] : summary.values) fmt::print("{}={}\n", key, value);
    // The lower of the optimizers' figures: a goal holds only if both meet it.
    if (summary.ratio) fmt::print("train_vs_pytorch_ratio={:.3f}\n", *summary.ratio);
    fmt::print("train_fraction_of_peak={:.3f}\n", summary.fraction);
    return 0;
  } catch (const vkt::Error& e) {
    fmt::print(stderr, "vkt-bench-train: {}\n", e.what());
    return 1;
  }
}
