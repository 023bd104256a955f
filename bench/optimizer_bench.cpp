// vkt-bench-optimizers: update throughput of each optimizer over a parameter
// arena, in GB/s of optimizer state touched, next to a plain device buffer copy
// of the same arena measured in the same run.
//
// The apply step alone is timed: a program that only produces the gradients is
// timed too and subtracted from the program that also applies them.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "bench_util.h"

#include <vktower/optimizers/adagrad.h>
#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/ftrl.h>
#include <vktower/optimizers/rmsprop.h>
#include <vktower/optimizers/sgd.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/vktower.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <vector>

namespace {

using vkt::bench::median_seconds;

struct Entry {
  const char* label;
  std::function<std::unique_ptr<vkt::Optimizer>()> make;
  int floats_touched;  // per parameter element: reads + writes of parameter, gradient, slots
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vkt-bench-optimizers: optimizer update throughput vs a buffer copy"};
  std::size_t mib = 64;
  int reps = 9, variables = 8;
  std::uint32_t device_index = 0;
  app.add_option("--mib", mib, "parameter arena size in MiB")->capture_default_str();
  app.add_option("--variables", variables, "variables the arena is split into")
      ->capture_default_str();
  app.add_option("--reps", reps, "timed repetitions (median printed)")->capture_default_str();
  app.add_option("--device", device_index, "device index")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const std::vector<Entry> entries = {
      {"SGD", [] { return std::make_unique<vkt::SGD>(0.01f); }, 3},
      {"SGD momentum",
       [] { return std::make_unique<vkt::SGD>(0.01f, vkt::SGDOptions{.momentum = 0.9f}); }, 5},
      {"Adam", [] { return std::make_unique<vkt::Adam>(0.001f); }, 7},
      {"AdamW", [] { return std::make_unique<vkt::AdamW>(0.001f); }, 7},
      {"Adagrad", [] { return std::make_unique<vkt::Adagrad>(0.01f); }, 5},
      {"RMSprop", [] { return std::make_unique<vkt::RMSprop>(0.01f); }, 5},
      {"Ftrl", [] { return std::make_unique<vkt::Ftrl>(0.01f); }, 7},
  };
  try {
    vkt::Instance instance;
    vkt::Device device(instance, device_index);
    const char* threads = std::getenv("LP_NUM_THREADS");
    const std::size_t bytes = mib << 20;
    const std::int64_t per_variable = static_cast<std::int64_t>(bytes / 4 / variables);
    fmt::print("device {}: {}, LP_NUM_THREADS={}, {} MiB of parameters in {} variables\n",
               device_index, device.info().name, threads ? threads : "unset", mib, variables);

    vkt::Buffer src(device, bytes), dst(device, bytes);
    src.upload(std::vector<float>(bytes / 4, 1.0f));
    dst.upload(std::vector<float>(bytes / 4, 0.0f));
    vkt::Stream copy(device);
    copy.copy(src, dst);
    const double t_copy = median_seconds(reps, [&] { copy.run(); });
    const double copy_gbs = 2.0 * static_cast<double>(bytes) / t_copy / 1e9;  // read + write
    fmt::print("  {:<14}{:8.2f} GB/s  (reference: vkCmdCopyBuffer of the arena, read + write)\n",
               "buffer copy", copy_gbs);

    for (const Entry& e : entries) {
      vkt::Graph g(device);
      std::vector<vkt::GradVar> gvs;
      std::vector<vkt::Tensor> grads;
      for (int v = 0; v < variables; ++v) {
        const vkt::Tensor w =
            g.variable(fmt::format("w{}", v), {per_variable}, vkt::Initializer::constant(0.5f));
        const vkt::Tensor grad = vkt::identity(g.input(fmt::format("g{}", v), {per_variable}));
        grads.push_back(grad);
        gvs.push_back({vkt::Gradient{grad}, w});
      }
      std::unique_ptr<vkt::Optimizer> opt = e.make();
      const vkt::Tensor train = opt->apply_gradients(gvs);
      vkt::Executor with_update(g, {train});
      vkt::Executor gradients_only(g, grads);
      const std::vector<float> host(static_cast<std::size_t>(per_variable), 0.001f);
      for (int v = 0; v < variables; ++v) {
        with_update.feed(fmt::format("g{}", v), host);
        gradients_only.feed(fmt::format("g{}", v), host);
      }
      const double t_all = median_seconds(reps, [&] {
        with_update.run();
        with_update.wait();
      });
      const double t_grads = median_seconds(reps, [&] {
        gradients_only.run();
        gradients_only.wait();
      });
      const double t_update = std::max(t_all - t_grads, 1e-9);
      const double touched = static_cast<double>(e.floats_touched) * 4.0 *
                             static_cast<double>(per_variable) * variables;
      const double gbs = touched / t_update / 1e9;
      fmt::print("  {:<14}{:8.2f} GB/s  ({} B per parameter, {:.2f} ms)  ratio to copy {:.2f}\n",
                 e.label, gbs, e.floats_touched * 4, t_update * 1e3, gbs / copy_gbs);
    }
    return 0;
  } catch (const vkt::Error& e) {
    fmt::print(stderr, "vkt-bench-optimizers: {}\n", e.what());
    return 1;
  }
}
