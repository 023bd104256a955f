// vkt-bench-towers: one MLP (784-1024-1024-10, batch 256 by default) trained on
// 1, 2, 3 and 4 towers at the same global batch: examples/s for each, the share
// of the step spent reducing gradients and copying weights back, and the ratio
// of N-tower to 1-tower throughput, measured in one run.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>
#include <vktower/vktower.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>

namespace {

struct Result {
  double examples_per_s = 0;
  double share_reduce_copy = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vkt-bench-towers: N-tower vs 1-tower training throughput of an MLP"};
  std::int64_t batch = 256, hidden = 1024;
  int steps = 8, max_towers = 4;
  std::uint32_t device = 0;
  app.add_option("--batch", batch, "global batch")->capture_default_str();
  app.add_option("--hidden", hidden, "width of the two hidden layers")->capture_default_str();
  app.add_option("--steps", steps, "timed steps per tower count (after one warm-up)")
      ->capture_default_str();
  app.add_option("--max-towers", max_towers, "largest tower count")->capture_default_str();
  app.add_option("--device", device, "device every tower runs on")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const std::int64_t in = 784, classes = 10;
  const auto model = [hidden](vkt::ModelContext&, const vkt::TensorDict& f,
                              const vkt::TensorDict& l, vkt::Mode mode, const vkt::Params&) {
    using vkt::layers::Activation;
    const vkt::Tensor h1 = vkt::layers::dense(f.at("x"), hidden, Activation::Relu, "h1");
    const vkt::Tensor h2 = vkt::layers::dense(h1, hidden, Activation::Relu, "h2");
    const vkt::Tensor logits = vkt::layers::dense(h2, classes, Activation::None, "logits");
    const vkt::Tensor loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits);
    vkt::TowerOptimizer sgd(std::make_unique<vkt::SGD>(0.01f));
    return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = sgd.minimize(loss)};
  };
  try {
    vkt::Instance instance;
    const char* threads = std::getenv("LP_NUM_THREADS");
    fmt::print("device {}: {}, LP_NUM_THREADS={}, MLP {}-{}-{}-{}, global batch {}, SGD\n", device,
               instance.device(device).name, threads ? threads : "unset", in, hidden, hidden,
               classes, batch);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(batch * in));
    for (float& v : x) v = normal(rng);
    std::vector<std::int32_t> y(static_cast<std::size_t>(batch));
    for (auto& v : y) v = static_cast<std::int32_t>(rng() % classes);
    const vkt::HostBatch features = {{"x", vkt::HostTensor::floats({batch, in}, x)}};
    const vkt::HostBatch labels = {{"y", vkt::HostTensor::ints({batch}, y)}};

    std::vector<Result> results;
    for (int n = 1; n <= max_towers; ++n) {
      if (batch % n != 0) {
        fmt::print("  {} towers: skipped, the batch of {} does not divide by {}\n", n, batch, n);
        continue;
      }
      const auto replicated = vkt::replicate_model_fn(
          model, {.loss_reduction = vkt::LossReduction::Mean,
                  .devices = std::vector<std::uint32_t>(static_cast<std::size_t>(n), device)});
      vkt::ModelContext root(instance, {{"x", {{batch, in}}}}, {{"y", {{batch}, vkt::DType::I32}}});
      const vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
      spec.run->train_step(features, labels);  // warm-up
      double total = 0, reduce_copy = 0;
      std::vector<double> step_times;
      for (int s = 0; s < steps; ++s) {
        const auto start = std::chrono::steady_clock::now();
        spec.run->train_step(features, labels);
        const double t =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        step_times.push_back(t);
        total += t;
        const auto& times = spec.run->last_step_times();
        reduce_copy += (times.reduce + times.copy_back) / 1e3;
      }
      std::sort(step_times.begin(), step_times.end());
      const double median = step_times[step_times.size() / 2];
      results.push_back({static_cast<double>(batch) / median, reduce_copy / total});
      fmt::print(
          "  {} tower{}: {:8.0f} examples/s (median step {:.1f} ms), reduction + copy-back "
          "{:.0f}% of the step, ratio to 1 tower {:.2f}\n",
          n, n == 1 ? " " : "s", results.back().examples_per_s, median * 1e3,
          100 * results.back().share_reduce_copy,
          results.back().examples_per_s / results.front().examples_per_s);
    }
    if (results.size() >= 2) {
      fmt::print("towers_2_vs_1_ratio={:.2f}\n",
                 results[1].examples_per_s / results[0].examples_per_s);
    }
    return 0;
  } catch (const vkt::Error& e) {
    fmt::print(stderr, "vkt-bench-towers: {}\n", e.what());
    return 1;
  }
}
