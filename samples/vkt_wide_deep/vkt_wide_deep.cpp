// vkt-wide-deep: a wide & deep classifier of the breast cancer data
// (samples/data/breast_cancer.csv: 30 measurements, 0 malignant, 1 benign).
// The wide part is linear, trained by FTRL; the deep part is an MLP 30-64-32-1
// with ReLU, trained by Adam; their logits are summed, and the loss is sigmoid
// cross-entropy. One model function, two TowerOptimizers, each with its own
// var_list, replicated on every chosen Vulkan device by a vkt::Estimator.
// Features are standardised with statistics of the training split only.
//
//   vkt-wide-deep --devices 0,0    # ends with test_accuracy=0.97..
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <vktower/tower/device_list.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>
#include <vktower/vktower.h>
#include "../sample_cli.h"
#include "../sample_data.h"
#include "../sample_errors.h"
#include "../sample_throughput.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Fixed, unlike --seed: every run is tested on the same examples.
constexpr std::uint64_t kSplitSeed = 42;
constexpr double kTestFraction = 0.2;

/// The trainable variables whose names start with `prefix`: each optimizer
/// gets its own part of the model (layers name theirs "<layer>/kernel", ...).
std::vector<vkt::Tensor> variables_under(const vkt::Graph& graph, std::string_view prefix) {
  std::vector<vkt::Tensor> found;
  for (const vkt::Tensor& v : graph.trainable_variables()) {
    if (v.name().starts_with(prefix)) found.push_back(v);
  }
  return found;
}

double param(const vkt::Params& params, const char* name) {
  return std::get<double>(params.at(name));
}

vkt::EstimatorSpec wide_deep_model(vkt::ModelContext& ctx, const vkt::TensorDict& features,
                                   const vkt::TensorDict& labels, vkt::Mode mode,
                                   const vkt::Params& params) {
  using vkt::layers::Activation;
  using vkt::layers::dense;
  const vkt::Tensor& x = features.at("x");
  const vkt::Tensor wide = dense(x, 1, Activation::None, "wide");
  vkt::Tensor h = dense(x, 64, Activation::Relu, "deep/hidden1");
  h = dense(h, 32, Activation::Relu, "deep/hidden2");
  const vkt::Tensor deep = dense(h, 1, Activation::None, "deep/logit");
  // [B, 1] -> [B], the labels' shape.
  const vkt::Tensor logits = vkt::reshape(wide + deep, {x.shape()[0]});
  const vkt::Tensor probability = vkt::sigmoid(logits);

  vkt::EstimatorSpec spec{.mode = mode};
  spec.predictions = {{"probability", probability}};
  if (mode == vkt::Mode::Predict) return spec;
  const vkt::Tensor& y = labels.at("y");
  // The weights are 0 on the rows that pad a short evaluation batch, so the
  // eval loss is the mean over real test examples (all ones when training).
  spec.loss = vkt::sigmoid_cross_entropy(y, logits, ctx.example_weights());
  if (mode == vkt::Mode::Train) {
    const auto ftrl_lr = static_cast<float>(param(params, "ftrl_learning_rate"));
    const auto adam_lr = static_cast<float>(param(params, "learning_rate"));
    vkt::TowerOptimizer ftrl([ftrl_lr] { return std::make_unique<vkt::Ftrl>(ftrl_lr); });
    vkt::TowerOptimizer adam([adam_lr] { return std::make_unique<vkt::Adam>(adam_lr); });
    // Two optimizers, two var_lists, one loss. Every TowerOptimizer call is
    // applied each step, in call order: FTRL on the wide part, then Adam.
    ftrl.minimize(spec.loss, variables_under(ctx.graph(), "wide/"));
    spec.train_op = adam.minimize(spec.loss, variables_under(ctx.graph(), "deep/"));
  } else {
    const vkt::Tensor predicted = vkt::greater_equal(probability, ctx.graph().scalar(0.5f));
    spec.eval_metric_ops = {{"accuracy", vkt::metrics::mean(vkt::equal(predicted, y))},
                            {"auc", vkt::metrics::auc(y, probability)},
                            {"precision", vkt::metrics::precision(y, probability)},
                            {"recall", vkt::metrics::recall(y, probability)}};
  }
  return spec;
}

}  // namespace

int main(int argc, char** argv) {
  const Clock::time_point started = Clock::now();
  CLI::App app{
      "vkt-wide-deep: a wide (FTRL) & deep (Adam) classifier of the breast cancer data, "
      "replicated on every chosen Vulkan device; resumes from --model-dir"};
  SampleFlags flags{.steps = 200, .batch_size = 48};
  double learning_rate = 0.001;
  double ftrl_learning_rate = 0.1;
  std::string data;  // sample_data_file, after the flags: --help must not look for it
  add_sample_flags(app, flags, "initial weights and shuffling");
  app.add_option("--learning-rate", learning_rate, "Adam's learning rate (the deep part)")
      ->capture_default_str()
      ->check(positive_number());
  app.add_option("--ftrl-learning-rate", ftrl_learning_rate, "FTRL's learning rate (the wide part)")
      ->capture_default_str()
      ->check(positive_number());
  app.add_option("--data", data,
                 "the breast cancer CSV (a header line, 30 features, the label); " +
                     sample_data_help("breast_cancer.csv"));
  if (const std::optional<int> exit = parse_flags(app, argc, argv, "vkt-wide-deep")) return *exit;

  return run_sample("vkt-wide-deep", [&] {
    if (data.empty()) data = sample_data_file("breast_cancer.csv");
    // Sigmoid cross-entropy and the 0.5 threshold: binary labels, 0 or 1.
    const vkt::Dataset all = vkt::Dataset::from_csv(vkt::read_csv(data, {.skip_lines = 1}),
                                                    {.classes = 2, .source = data});
    const auto [raw_train, raw_test] = all.split(kTestFraction, kSplitSeed);
    const vkt::Standardizer standardize = vkt::Standardizer::fit(raw_train, "x");
    const vkt::Dataset train = raw_train.map("x", standardize);
    const vkt::Dataset test = raw_test.map("x", standardize);
    const Towers towers = resolve_devices(flags.devices);
    vkt::Estimator estimator(
        vkt::replicate_model_fn(wide_deep_model, replicate_options(flags, towers.devices)),
        {.model_dir = flags.model_dir,
         .random_seed = flags.seed,
         .accumulate_steps = flags.accumulate,
         .mpi = mpi_setting(flags),
         .on_device_loss = device_loss_action(flags)},
        {{"learning_rate", learning_rate}, {"ftrl_learning_rate", ftrl_learning_rate}});
    // Under MPI every rank trains; rank 0 alone reports.
    const bool chief = estimator.rank() == 0;
    const int processes = processes_of(estimator);
    if (chief) {
      fmt::print("{} train and {} test examples; {} tower{} on devices {}{}\n", train.size(),
                 test.size(), towers.devices.size(), towers.devices.size() == 1 ? "" : "s",
                 towers.description,
                 processes > 1 ? fmt::format(" in each of {} processes", processes) : "");
    }
    const auto throughput = std::make_shared<Throughput>();  // for the start-up time
    estimator.train(vkt::dataset_input(train, {.batch_size = flags.batch_size,
                                               .epochs = 0,
                                               .shuffle_seed = flags.seed,
                                               .drop_remainder = true}),
                    {.steps = flags.steps, .hooks = {throughput}});
    const std::map<std::string, double> result =
        estimator.evaluate(vkt::dataset_input(test, {.batch_size = flags.batch_size}));
    const double wall = std::chrono::duration<double>(Clock::now() - started).count();

    if (!chief) return 0;
    fmt::print("\n{:<12} {}\n", "metric", "value");
    for (const char* name : {"loss", "accuracy", "auc", "precision", "recall"}) {
      fmt::print("{:<12} {:.4f}\n", name, result.at(name));
    }
    fmt::print("{:<12} {}\n", "global step", result.at("global_step"));
    if (processes > 1) fmt::print("{:<12} {}\n", "processes", processes);
    fmt::print("{:<12} {}\n", "towers",
               towers.devices.size() * static_cast<std::size_t>(processes));
    fmt::print("{:<12} {}\n", "devices", towers.description);
    fmt::print("{:<12} {:.1f} s\n", "wall time", wall);
    print_model_dir(estimator, flags);
    print_startup(*throughput);
    fmt::print("test_accuracy={:.4f}\n", result.at("accuracy"));
    return 0;
  });
}
