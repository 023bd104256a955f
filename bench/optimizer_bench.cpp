// vkt-bench-optimizers: update throughput of each optimizer over a parameter
// arena, in GB/s of optimizer state touched, next to a plain device buffer copy
// of the same arena measured in the same run.
//
// The apply step alone is timed: a program that only produces the gradients is
// timed too and subtracted from the program that also applies them.
//
// Then the lazy sparse update (an embedding's rows): Adam on a [rows, width]
// table for k text-like ids (most among a few rows), against the same lazy
// update on the host (one thread, duplicates summed in a hash map) in the
// same run.
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
#include <vktower/runtime/graph/ops/embedding.h>
#include <vktower/runtime/graph/ops/reduce.h>
#include <vktower/vktower.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using vkt::bench::median_seconds;

struct Entry {
  const char* label;
  std::function<std::unique_ptr<vkt::Optimizer>()> make;
  int floats_touched;  // per parameter element: reads + writes of parameter, gradient, slots
};

/// The update's seconds: a step with it minus the same step without it
/// (medians of `reps` runs each).
double update_seconds(vkt::Executor& with_update, vkt::Executor& gradients_only, int reps) {
  const auto seconds = [reps](vkt::Executor& e) {
    return median_seconds(reps, [&] {
      e.run();
      e.wait();
    });
  };
  return std::max(seconds(with_update) - seconds(gradients_only), 1e-9);
}

/// k ids as text gives them: three in four among 20 rows, the rest anywhere.
std::vector<std::int32_t> text_like_ids(std::size_t k, int rows, std::mt19937& rng) {
  std::vector<std::int32_t> ids(k);
  for (auto& i : ids) {
    const std::uint32_t r = rng();
    i = static_cast<std::int32_t>(r % 4 == 0 ? r % static_cast<std::uint32_t>(rows) : r % 20);
  }
  return ids;
}

/// The host's lazy Adam step (lr 1e-3, betas 0.9/0.999, eps 1e-8) on the rows
/// `ids` names, each with the sum of its values rows.
void host_lazy_adam(std::vector<float>& p, std::vector<float>& m, std::vector<float>& v,
                    std::span<const std::int32_t> ids, std::span<const float> values, int width,
                    int t) {
  std::unordered_map<std::int32_t, std::vector<float>> sums;
  for (std::size_t j = 0; j < ids.size(); ++j) {
    std::vector<float>& acc = sums[ids[j]];
    acc.resize(static_cast<std::size_t>(width), 0.0f);
    for (int c = 0; c < width; ++c) acc[c] += values[j * width + c];
  }
  const float c1 = 1.0f - std::pow(0.9f, static_cast<float>(t));
  const float c2 = 1.0f - std::pow(0.999f, static_cast<float>(t));
  for (const auto& [row, g] : sums) {
    for (int c = 0; c < width; ++c) {
      const std::size_t e = static_cast<std::size_t>(row) * width + c;
      m[e] = 0.9f * m[e] + 0.1f * g[c];
      v[e] = 0.999f * v[e] + 0.001f * g[c] * g[c];
      p[e] -= 1e-3f * (m[e] / c1) / (std::sqrt(v[e] / c2) + 1e-8f);
    }
  }
}

/// The sparse section: device lazy Adam vs the host's, per k.
void bench_sparse(vkt::Device& device, int rows, int width, const std::vector<std::size_t>& ks,
                  int reps) {
  fmt::print("lazy sparse Adam on a [{}, {}] table (text-like ids):\n", rows, width);
  std::mt19937 rng(1);
  for (const std::size_t k : ks) {
    vkt::Graph g(device);
    const vkt::Tensor table =
        g.variable("table", {rows, width}, vkt::Initializer::uniform(-1.0f, 1.0f));
    const auto k64 = static_cast<std::int64_t>(k);
    const vkt::Tensor ids = g.input("ids", {k64}, vkt::DType::I32);
    const vkt::Tensor dy = g.input("dy", {k64, width});
    vkt::Adam adam(1e-3f);
    const std::vector<vkt::GradVar> grads =
        adam.compute_gradients(vkt::reduce_sum(vkt::embedding_lookup(table, ids) * dy));
    vkt::Executor with_update(g, {adam.apply_gradients(grads)});
    vkt::Executor gradients_only(g, {grads[0].grad.values, grads[0].grad.indices});
    const std::vector<std::int32_t> id = text_like_ids(k, rows, rng);
    std::vector<float> d(k * static_cast<std::size_t>(width));
    std::normal_distribution<float> normal(0.0f, 0.1f);
    for (float& x : d) x = normal(rng);
    for (vkt::Executor* e : {&with_update, &gradients_only}) {
      e->feed("ids", id);
      e->feed("dy", d);
    }
    const double t_update = update_seconds(with_update, gradients_only, reps);
    std::vector<float> p(static_cast<std::size_t>(rows) * width, 0.5f), m(p.size(), 0.0f),
        v(p.size(), 0.0f);
    int t = 0;
    const double t_host = median_seconds(reps, [&] { host_lazy_adam(p, m, v, id, d, width, ++t); });
    fmt::print("  k={:<6} device {:8.3f} ms   host {:8.3f} ms   sparse_update_k{}_vs_host={:.2f}\n",
               k, t_update * 1e3, t_host * 1e3, k, t_host / t_update);
  }
}

/// "256,1024" as numbers.
std::vector<std::size_t> parse_list(const std::string& text) {
  std::vector<std::size_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoul(item));
  return out;
}

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
  std::string sparse_ids = "256,1024,4096,16384";
  int sparse_rows = 10000, sparse_width = 64;
  bool sparse_only = false;
  app.add_option("--sparse-ids", sparse_ids, "ids per step of the sparse section, comma-separated")
      ->capture_default_str();
  app.add_option("--sparse-rows", sparse_rows, "rows of the sparse section's table")
      ->capture_default_str();
  app.add_option("--sparse-width", sparse_width, "floats per row of that table")
      ->capture_default_str();
  app.add_flag("--sparse-only", sparse_only, "only the sparse section");
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
      if (sparse_only) break;
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
      const double t_update = update_seconds(with_update, gradients_only, reps);
      const double touched = static_cast<double>(e.floats_touched) * 4.0 *
                             static_cast<double>(per_variable) * variables;
      const double gbs = touched / t_update / 1e9;
      fmt::print("  {:<14}{:8.2f} GB/s  ({} B per parameter, {:.2f} ms)  ratio to copy {:.2f}\n",
                 e.label, gbs, e.floats_touched * 4, t_update * 1e3, gbs / copy_gbs);
    }
    bench_sparse(device, sparse_rows, sparse_width, parse_list(sparse_ids), reps);
    return 0;
  } catch (const vkt::Error& e) {
    fmt::print(stderr, "vkt-bench-optimizers: {}\n", e.what());
    return 1;
  }
}
