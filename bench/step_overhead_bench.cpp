// vkt-bench-step-overhead: what a training step costs when its kernels cost
// almost nothing. A tiny MLP (64-32-10, batch 32, SGD, one tower) trained
// through replicate_model_fn and TowerRun::train_step, as a user drives it;
// its median step time is divided by one bare submit-and-wait round trip (a
// stream of one tiny dispatch) measured in the same run, interleaved with the
// steps. Also prints the step's commands and the time of a stream of as many
// tiny dependent dispatches, which says how much of the step the dispatch
// count alone explains, and the same step on a Graph with the Executor's
// fusion on and off (`fusion_speedup=R`). Ends with `step_overhead_ratio=R`.
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>
#include <vktower/vktower.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::int64_t kIn = 64, kHidden = 32, kClasses = 10;

struct SaxpyParams {
  float a;
  std::uint32_t n;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Microseconds of `fn`, wall clock.
template <typename Fn>
double micros(Fn&& fn) {
  const auto start = Clock::now();
  fn();
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

vkt::Tensor tiny_mlp_loss(const vkt::Tensor& x, const vkt::Tensor& y) {
  using vkt::layers::Activation;
  const vkt::Tensor h = vkt::layers::dense(x, kHidden, Activation::Relu, "h");
  const vkt::Tensor logits = vkt::layers::dense(h, kClasses, Activation::None, "logits");
  return vkt::sparse_softmax_cross_entropy(y, logits);
}

vkt::EstimatorSpec tiny_mlp(vkt::ModelContext&, const vkt::TensorDict& f, const vkt::TensorDict& l,
                            vkt::Mode mode, const vkt::Params&) {
  const vkt::Tensor loss = tiny_mlp_loss(f.at("x"), l.at("y"));
  vkt::TowerOptimizer sgd(std::make_unique<vkt::SGD>(0.01f));
  return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = sgd.minimize(loss)};
}

/// The step's commands, in order, each with its op and device time: the same
/// program the one-tower TowerRun runs, built on a Graph and profiled.
void print_commands(vkt::Device& device, const vkt::HostBatch& features,
                    const vkt::HostBatch& labels, std::int64_t batch) {
  vkt::Graph graph(device, {.seed = 1});
  const vkt::Tensor x = graph.input("x", {batch, kIn});
  const vkt::Tensor y = graph.input("y", {batch}, vkt::DType::I32);
  const vkt::Tensor loss = tiny_mlp_loss(x, y);
  const vkt::Tensor train = vkt::SGD(0.01f).minimize(loss);
  vkt::Executor step(graph, {loss, train}, {.timestamps = true, .profile = true});
  step.feed("x", features.at("x").f32);
  step.feed("y", labels.at("y").i32);
  for (int i = 0; i < 5; ++i) step.run();
  const auto commands = step.profile();
  if (commands.empty()) return;  // no timestamp queries on this device
  fmt::print("  the step's commands (one profiled run):\n");
  for (const auto& c : commands) {
    fmt::print("    {:<28} {:<24} {:<20} {:8.1f} us\n", c.kernel, c.op, c.tensor, c.ms * 1e3);
  }
}

/// The same step on a Graph with the Executor fusing (a loss with its
/// gradient, dpre with the bias gradient) and not, runs alternating: the
/// speed-up of fusion, measured in one process.
double fusion_speedup(vkt::Device& device, const vkt::HostBatch& features,
                      const vkt::HostBatch& labels, std::int64_t batch, int steps) {
  vkt::Graph graph(device, {.seed = 1});
  const vkt::Tensor x = graph.input("x", {batch, kIn});
  const vkt::Tensor y = graph.input("y", {batch}, vkt::DType::I32);
  const vkt::Tensor loss = tiny_mlp_loss(x, y);
  const vkt::Tensor train = vkt::SGD(0.01f).minimize(loss);
  vkt::Executor fused(graph, {loss, train}, {.fuse = true});
  vkt::Executor unfused(graph, {loss, train}, {.fuse = false});
  for (vkt::Executor* e : {&fused, &unfused}) {
    e->feed("x", features.at("x").f32);
    e->feed("y", labels.at("y").i32);
    for (int i = 0; i < 5; ++i) e->run().wait();
  }
  std::vector<double> fused_us, unfused_us;
  for (int s = 0; s < steps; ++s) {
    fused_us.push_back(micros([&] { fused.run().wait(); }));
    unfused_us.push_back(micros([&] { unfused.run().wait(); }));
  }
  const double with = median(fused_us), without = median(unfused_us);
  fmt::print("  {:<58}{:9.1f} us  {} commands\n", "Executor step on a Graph, fused (median)", with,
             fused.dispatch_count());
  fmt::print("  {:<58}{:9.1f} us  {} commands\n", "the same, ExecutorOptions::fuse off", without,
             unfused.dispatch_count());
  return without / with;
}

/// A stream of `count` tiny saxpy dispatches, each reading what the one
/// before wrote (so each waits behind a barrier, as a step's ops do).
vkt::Stream saxpy_chain(vkt::Device& device, vkt::Buffer& x, vkt::Buffer& y, std::size_t count) {
  const std::uint32_t n = 1024;
  const vkt::Kernel& saxpy = device.kernel({.shader = "saxpy", .local_size = {256, 1, 1}});
  vkt::Stream stream(device);
  for (std::size_t i = 0; i < count; ++i) {
    stream.dispatch(saxpy, {x, y}, SaxpyParams{1.0f, n}, vkt::Stream::groups_for(saxpy, n));
  }
  return stream;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vkt-bench-step-overhead: a tiny model's step against one submit round trip"};
  int steps = 300;
  std::int64_t batch = 32;
  std::uint32_t device_index = 0;
  app.add_option("--steps", steps, "timed steps (each followed by one timed round trip)")
      ->capture_default_str()
      ->check(CLI::Range(5, 1000000));
  app.add_option("--batch", batch, "batch size")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  app.add_option("--device", device_index, "device (vkt-info lists them)")->capture_default_str();
  bool list_commands = false;
  app.add_flag("--commands", list_commands, "also list the step's commands with their device time");
  CLI11_PARSE(app, argc, argv);

  try {
    vkt::Instance instance;
    const char* threads = std::getenv("LP_NUM_THREADS");
    fmt::print("device {}: {}, LP_NUM_THREADS={}; MLP {}-{}-{}, batch {}, SGD, 1 tower\n",
               device_index, instance.device(device_index).name, threads ? threads : "unset", kIn,
               kHidden, kClasses, batch);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(batch * kIn));
    for (float& v : x) v = normal(rng);
    std::vector<std::int32_t> y(static_cast<std::size_t>(batch));
    for (auto& v : y) v = static_cast<std::int32_t>(rng() % kClasses);
    const vkt::HostBatch features = {{"x", vkt::HostTensor::floats({batch, kIn}, x)}};
    const vkt::HostBatch labels = {{"y", vkt::HostTensor::ints({batch}, y)}};

    const auto replicated =
        vkt::replicate_model_fn(tiny_mlp, {.loss_reduction = vkt::LossReduction::Mean,
                                           .devices = std::vector<std::uint32_t>{device_index}});
    vkt::ModelContext root(instance, {{"x", {{batch, kIn}}}}, {{"y", {{batch}, vkt::DType::I32}}});
    const vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
    vkt::TowerRun& run = *spec.run;
    const std::size_t commands = run.tower_command_count(0);

    // The references on a Device of their own on the same physical device.
    vkt::Device device(instance, device_index);
    vkt::Buffer bx(device, 1024 * sizeof(float)), by(device, 1024 * sizeof(float));
    bx.upload(std::vector<float>(1024, 1.0f));
    by.upload(std::vector<float>(1024, 0.0f));
    vkt::Stream one = saxpy_chain(device, bx, by, 1);
    vkt::Stream chain = saxpy_chain(device, bx, by, std::max<std::size_t>(commands, 1));

    for (int i = 0; i < 5; ++i) {  // warm-up: first touches, lazily made objects
      run.train_step(features, labels);
      one.run();
      chain.run();
    }
    std::vector<double> step_us, device_us, trip_us, chain_us;
    for (int s = 0; s < steps; ++s) {
      step_us.push_back(micros([&] { run.train_step(features, labels); }));
      device_us.push_back(run.last_step_times().slowest_tower * 1e3);
      trip_us.push_back(micros([&] { one.run(); }));
      if (s % 4 == 0) chain_us.push_back(micros([&] { chain.run(); }));
    }
    const double step = median(step_us), trip = median(trip_us), chain_time = median(chain_us);
    const double on_device = median(device_us);
    fmt::print("  {:<58}{:9.1f} us  (reference)\n", "submit + wait of a 1-dispatch stream", trip);
    fmt::print("  {:<58}{:9.1f} us  ratio {:.2f}\n", "train_step (median)", step, step / trip);
    if (on_device > 0) {
      fmt::print("  {:<58}{:9.1f} us  ratio {:.2f}\n",
                 "  of which the device's (first to last command)", on_device, on_device / trip);
    }
    fmt::print("  commands (dispatches, copies, fills) per step: {}\n", commands);
    fmt::print("  {:<58}{:9.1f} us  ratio {:.2f}; the step is {:.2f} of it\n",
               fmt::format("a stream of {} dependent tiny dispatches", commands), chain_time,
               chain_time / trip, step / chain_time);
    if (list_commands) print_commands(device, features, labels, batch);
    fmt::print("fusion_speedup={:.2f}\n", fusion_speedup(device, features, labels, batch, steps));
    fmt::print("step_overhead_ratio={:.2f}\n", step / trip);
    return 0;
  } catch (const vkt::Error& e) {
    fmt::print(stderr, "vkt-bench-step-overhead: {}\n", e.what());
    return 1;
  }
}
