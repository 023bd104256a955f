// vkt-bench-towers: one MLP (784-1024-1024-10, batch 256 by default) trained on
// 1, 2 and 4 towers at the same global batch, on the mapped path and on the
// staged path a discrete GPU takes (VKT_FORCE_STAGING's copies): examples/s,
// the exchange time the overlap leaves exposed (the step minus the slowest
// tower's forward and backward pass, timed on the device with timestamp
// queries), the host waits per step, and the ratio of N-tower to 1-tower
// throughput, all measured in one run; towers on a VkDevice each or on one
// shared VkDevice (--tower-devices).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>
#include <vktower/vktower.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <random>

namespace {

struct Result {
  double examples_per_s = 0;
  double step_ms = 0, slowest_tower_ms = 0, exposed_ms = 0;
  double step_thread_waits = 0, tower_thread_waits = 0;
  double all_waits = 0;  // every wait on the run's Devices, a step and its loss read
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Trains `steps` steps as the Estimator does (each step, then the losses of
/// the steps two back) for the rate and every host wait, then as many again
/// asking each step's device times, for the slowest tower's share.
Result measure(vkt::TowerRun& run, const vkt::HostBatch& features, const vkt::HostBatch& labels,
               int steps, std::int64_t batch) {
  using Clock = std::chrono::steady_clock;
  run.train_step(features, labels);  // warm-up
  static_cast<void>(run.take_losses());
  const vkt::TowerRun::HostWaits before = run.host_waits();
  const Clock::time_point start = Clock::now();
  for (int s = 0; s < steps; ++s) {
    run.train_step(features, labels);
    static_cast<void>(run.take_losses(2));
  }
  const vkt::TowerRun::HostWaits after = run.host_waits();
  static_cast<void>(run.take_losses());  // the last steps done
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  Result r;
  r.step_ms = 1e3 * seconds / steps;
  r.examples_per_s = static_cast<double>(batch) * steps / seconds;
  r.step_thread_waits = static_cast<double>(after.step_thread - before.step_thread) / steps;
  r.tower_thread_waits = static_cast<double>(after.tower_threads - before.tower_threads) / steps;
  r.all_waits = static_cast<double>(after.devices - before.devices) / steps;
  std::vector<double> tower_ms;
  for (int s = 0; s < steps; ++s) {
    run.train_step(features, labels);
    tower_ms.push_back(run.last_step_times().slowest_tower);
  }
  r.slowest_tower_ms = median(tower_ms);
  r.exposed_ms = std::max(0.0, r.step_ms - r.slowest_tower_ms);
  return r;
}

/// --shard-weights measured on `pair` (two device indices, e.g. a GPU and
/// lavapipe): each device alone, the pair on equal shards, then the pair on
/// the shards its own measurement (ShardSplit::Measured, as the Estimator
/// does) gives, against the sum of the two alone.
template <class Model>
void measured_pair(vkt::Instance& instance, const Model& model,
                   const std::vector<std::uint32_t>& pair, const vkt::HostBatch& features,
                   const vkt::HostBatch& labels, int steps, std::int64_t batch, std::int64_t in) {
  const auto run_on = [&](std::vector<std::uint32_t> devices, vkt::ShardSplit split,
                          std::vector<double> weights) {
    const auto replicated =
        vkt::replicate_model_fn(model, {.loss_reduction = vkt::LossReduction::Mean,
                                        .devices = std::move(devices),
                                        .shard_weights = std::move(weights),
                                        .shard_split = split,
                                        .measure_steps = static_cast<std::uint32_t>(steps)});
    vkt::ModelContext root(instance, {{"x", {{batch, in}}}}, {{"y", {{batch}, vkt::DType::I32}}});
    return replicated(root, {}, {}, vkt::Mode::Train, {}).run;
  };
  double sum = 0;
  for (const std::uint32_t d : pair) {
    const auto run = run_on({d}, vkt::ShardSplit::Equal, {});
    const double rate = measure(*run, features, labels, steps, batch).examples_per_s;
    fmt::print("  device {} ({}) alone: {:8.0f} examples/s\n", d, instance.device(d).name, rate);
    sum += rate;
  }
  const auto equal = run_on(pair, vkt::ShardSplit::Equal, {});
  const double equal_rate = measure(*equal, features, labels, steps, batch).examples_per_s;
  const auto timed = run_on(pair, vkt::ShardSplit::Measured, {});
  std::optional<std::vector<double>> weights;
  while (!weights) {
    timed->train_step(features, labels);
    weights = timed->measured_shard_weights();
  }
  const auto shared = run_on(pair, vkt::ShardSplit::Equal, *weights);
  const double measured_rate = measure(*shared, features, labels, steps, batch).examples_per_s;
  fmt::print(
      "  the pair, equal shards: {:8.0f} examples/s; measured shards (weights {:.3g}, "
      "{:.3g}): {:8.0f} examples/s\n",
      equal_rate, (*weights)[0], (*weights)[1], measured_rate);
  fmt::print("equal_pair_vs_sum_ratio={:.2f}\n", equal_rate / sum);
  fmt::print("measured_pair_vs_sum_ratio={:.2f}\n", measured_rate / sum);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vkt-bench-towers: N-tower vs 1-tower training throughput of an MLP"};
  std::int64_t batch = 256, hidden = 1024;
  int steps = 8;
  std::vector<int> tower_counts{1, 2, 4};
  std::uint32_t device = 0;
  double bucket_mib = 4;
  std::string placement = "auto", paths = "both", tower_devices = "auto";
  app.add_option("--batch", batch, "global batch")->capture_default_str();
  app.add_option("--hidden", hidden, "width of the two hidden layers")->capture_default_str();
  app.add_option("--steps", steps, "timed steps per tower count (after one warm-up)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--towers", tower_counts, "tower counts to run, e.g. 1,2,4")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--device", device, "device every tower runs on")->capture_default_str();
  app.add_option("--bucket-mib", bucket_mib, "gradient bucket size in MiB")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 4096.0));
  app.add_option("--placement", placement, "consolidation work: auto, tower or separate")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "tower", "separate"}));
  app.add_option("--paths", paths, "mapped, staged or both")
      ->capture_default_str()
      ->check(CLI::IsMember({"mapped", "staged", "both"}));
  app.add_option("--tower-devices", tower_devices,
                 "towers repeated on one device: auto, per-tower (a VkDevice each), shared (one "
                 "VkDevice) or both")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "per-tower", "shared", "both"}));
  std::string shard_weights = "equal";
  std::vector<std::uint32_t> pair;
  app.add_option("--shard-weights", shard_weights,
                 "equal, or measured: the --pair of devices each alone, together on equal "
                 "shards and on measured ones, against the sum of the two alone")
      ->capture_default_str()
      ->check(CLI::IsMember({"equal", "measured"}));
  app.add_option("--pair", pair, "two device indices for --shard-weights measured, e.g. 0,1")
      ->delimiter(',')
      ->expected(2);
  CLI11_PARSE(app, argc, argv);
  if (shard_weights == "measured" && pair.size() != 2) {
    fmt::print(stderr, "vkt-bench-towers: --shard-weights measured needs --pair A,B\n");
    return 2;
  }

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

    if (shard_weights == "measured") {
      fmt::print("measured shards on devices {} and {}:\n", pair[0], pair[1]);
      measured_pair(instance, model, pair, features, labels, steps, batch, in);
      return 0;
    }
    const vkt::ConsolidationPlacement where =
        placement == "tower"      ? vkt::ConsolidationPlacement::OnTowerDevice
        : placement == "separate" ? vkt::ConsolidationPlacement::SeparateDevice
                                  : vkt::ConsolidationPlacement::Auto;
    fmt::print("buckets of {} MiB, consolidation placement {}\n", bucket_mib, placement);
    std::vector<std::pair<vkt::TowerDevices, std::string>> sharings;  // with each figure's suffix
    if (tower_devices == "auto") sharings.emplace_back(vkt::TowerDevices::Auto, "");
    if (tower_devices == "per-tower" || tower_devices == "both") {
      sharings.emplace_back(vkt::TowerDevices::PerTower, "_per_tower");
    }
    if (tower_devices == "shared" || tower_devices == "both") {
      sharings.emplace_back(vkt::TowerDevices::Shared, "_shared");
    }
    for (const auto& [sharing, sharing_suffix] : sharings) {
      for (const bool staged : {false, true}) {
        if ((staged && paths == "mapped") || (!staged && paths == "staged")) continue;
        const std::string suffix = (staged ? "_staged" : "") + sharing_suffix;
        fmt::print("{} path, towers on {}:\n", staged ? "staged (VKT_FORCE_STAGING)" : "mapped",
                   sharing == vkt::TowerDevices::Auto       ? "the default devices"
                   : sharing == vkt::TowerDevices::PerTower ? "a VkDevice each"
                                                            : "one shared VkDevice");
        std::vector<std::pair<int, Result>> results;
        for (const int n : tower_counts) {
          if (batch % n != 0) {
            fmt::print("  {} towers: skipped, the batch of {} does not divide by {}\n", n, batch,
                       n);
            continue;
          }
          const auto replicated = vkt::replicate_model_fn(
              model, {.loss_reduction = vkt::LossReduction::Mean,
                      .devices = std::vector<std::uint32_t>(static_cast<std::size_t>(n), device),
                      .consolidation_placement = where,
                      .bucket_bytes = static_cast<std::size_t>(bucket_mib * (1 << 20)),
                      .tower_devices = sharing,
                      .device_options = vkt::DeviceOptions{.force_staging = staged}});
          vkt::ModelContext root(instance, {{"x", {{batch, in}}}},
                                 {{"y", {{batch}, vkt::DType::I32}}});
          const vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
          const Result r = measure(*spec.run, features, labels, steps, batch);
          const double ratio = results.empty() || results.front().first != 1
                                   ? 0.0
                                   : r.examples_per_s / results.front().second.examples_per_s;
          fmt::print(
              "  {} tower{}: {:8.0f} examples/s, step {:.1f} ms (median), slowest tower's "
              "forward+backward {:.1f} ms, exposed exchange {:.1f} ms = {:.0f}% of the step, "
              "{} buckets, host waits per step {:.1f} (step thread) + {:.1f} (tower threads), "
              "{:.1f} in all{}\n",
              n, n == 1 ? " " : "s", r.examples_per_s, r.step_ms, r.slowest_tower_ms, r.exposed_ms,
              100 * r.exposed_ms / r.step_ms, spec.run->buckets(), r.step_thread_waits,
              r.tower_thread_waits, r.all_waits,
              ratio > 0 ? fmt::format(", ratio to 1 tower {:.2f}", ratio) : "");
          results.emplace_back(n, r);
        }
        for (const auto& [n, r] : results) {
          if (n != 2 || results.front().first != 1) continue;
          fmt::print("towers_2_vs_1_ratio{}={:.2f}\n", suffix,
                     r.examples_per_s / results.front().second.examples_per_s);
          fmt::print("exposed_exchange_share_2_towers{}={:.3f}\n", suffix,
                     r.exposed_ms / r.step_ms);
          fmt::print("host_waits_per_step_2_towers{}={:.1f}\n", suffix, r.all_waits);
        }
      }
    }
    return 0;
  } catch (const vkt::Error& e) {
    fmt::print(stderr, "vkt-bench-towers: {}\n", e.what());
    return 1;
  }
}
