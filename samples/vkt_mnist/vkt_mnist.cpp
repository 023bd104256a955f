// vkt-mnist: 10,000 MNIST digits (samples/data/mnist10k.csv.gz) classified by
// a small convolutional network (mnist_model.h: conv 5x5 stride 2 - conv 3x3 -
// max pool - dense - dense, optionally with batch normalization), trained with
// Adam (learning rate decaying per epoch) on softmax cross-entropy with label
// smoothing, on training images shifted by up to 2 pixels (mnist_augment.h),
// by a vkt::Estimator on every chosen Vulkan device. Pixels are scaled to [0, 1]; 2,000 digits,
// split off with a fixed seed, are the test set. Run it again with the same --model-dir and it
// resumes from the newest checkpoint there.
//
//   vkt-mnist --devices 0,0    # two towers on device 0; ends with
//                              # test_accuracy=0.97.. examples_per_s=... towers=2
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
#include "mnist_augment.h"
#include "mnist_data.h"
#include "mnist_model.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Fixed, unlike --seed: every run is tested on the same 2,000 digits, and a
// run resumed with another --seed never trains on the test set.
constexpr std::uint64_t kSplitSeed = 42;
constexpr double kTestFraction = 0.2;

vkt::EstimatorSpec mnist_model_fn(vkt::ModelContext& ctx, const vkt::TensorDict& features,
                                  const vkt::TensorDict& labels, vkt::Mode mode,
                                  const vkt::Params& params) {
  const bool training = mode == vkt::Mode::Train;
  const mnist::CnnOptions options{.conv1_filters = std::get<std::int64_t>(params.at("conv1")),
                                  .conv2_filters = std::get<std::int64_t>(params.at("conv2")),
                                  .conv1_kernel = std::get<std::int64_t>(params.at("kernel1")),
                                  .conv2_kernel = std::get<std::int64_t>(params.at("kernel2")),
                                  .dense_units = std::get<std::int64_t>(params.at("dense")),
                                  .batch_norm = std::get<bool>(params.at("batch_norm")),
                                  .sync_batch_norm = std::get<bool>(params.at("sync_bn"))};
  const vkt::Tensor logits = mnist::cnn_logits(features.at("x"), options, training);

  vkt::EstimatorSpec spec{.mode = mode};
  spec.predictions = {{"class", vkt::argmax(logits, -1)}, {"probabilities", vkt::softmax(logits)}};
  if (mode == vkt::Mode::Predict) return spec;
  // The weights are 0 on the rows that pad a short evaluation batch. Evaluation
  // reports the plain loss.
  spec.loss = mnist::smoothed_cross_entropy(
      labels.at("y"), logits, ctx.example_weights(),
      training ? std::get<double>(params.at("label_smoothing")) : 0.0);
  if (training) {
    // lr x decay^(step / steps per epoch): the later epochs refine with smaller steps.
    const vkt::LearningRate lr = vkt::LearningRate::exponential_decay(
        std::get<double>(params.at("learning_rate")),
        static_cast<std::uint64_t>(std::get<std::int64_t>(params.at("epoch_steps"))),
        std::get<double>(params.at("lr_decay")));
    vkt::TowerOptimizer adam([lr] { return std::make_unique<vkt::Adam>(lr); });
    spec.train_op = adam.minimize(spec.loss);
  } else {
    spec.eval_metric_ops = {{"accuracy", vkt::metrics::accuracy(labels.at("y"), logits)}};
  }
  return spec;
}

struct MnistFlags {
  SampleFlags common{.steps = 400, .batch_size = 64};  // 3.2 epochs of the 8,000
  double learning_rate = 0.005;
  double lr_decay = 0.4;
  double label_smoothing = 0.1;
  std::int64_t shift = 2;
  std::vector<std::int64_t> filters{mnist::CnnOptions{}.conv1_filters,
                                    mnist::CnnOptions{}.conv2_filters};
  std::vector<std::int64_t> kernels{mnist::CnnOptions{}.conv1_kernel,
                                    mnist::CnnOptions{}.conv2_kernel};
  std::int64_t dense = mnist::CnnOptions{}.dense_units;
  bool batch_norm = false;
  bool sync_bn = false;
  std::string data;  // sample_data_file, after the flags: --help must not look for it
};

void add_mnist_flags(CLI::App& app, MnistFlags& flags) {
  add_sample_flags(app, flags.common, "initial weights and shuffling of the training digits");
  app.add_option("--learning-rate", flags.learning_rate, "Adam's learning rate")
      ->capture_default_str()
      ->check(positive_number());
  app.add_option("--lr-decay", flags.lr_decay,
                 "the learning rate's factor per epoch (continuous exponential decay; 1: none)")
      ->capture_default_str()
      ->check(real_number(0.01, 1.0));
  app.add_option("--label-smoothing", flags.label_smoothing,
                 "the training loss's label smoothing (0: plain cross-entropy)")
      ->capture_default_str()
      ->check(real_number(0.0, 0.5));
  app.add_option("--shift", flags.shift,
                 "moves each training image by up to this many pixels in each direction, "
                 "drawn anew for every batch (0: none)")
      ->capture_default_str()
      ->check(whole_number(0, 8));
  app.add_option("--filters", flags.filters, "the two convolutions' filters, e.g. 32,32")
      ->delimiter(',')
      ->expected(2)
      ->capture_default_str()
      ->check(whole_number(1, 1024));
  app.add_option("--kernels", flags.kernels, "the two convolutions' filter sizes (odd)")
      ->delimiter(',')
      ->expected(2)
      ->capture_default_str()
      ->check((whole_number(1, 27) & CLI::Validator(
                                         [](std::string& text) -> std::string {
                                           return text.back() % 2 == 1 ? std::string()
                                                                       : "'" + text + "' is even";
                                         },
                                         "ODD"))
                  .description("odd INT in 1..27"));
  app.add_option("--dense", flags.dense, "units of the hidden dense layer")
      ->capture_default_str()
      ->check(whole_number(1, 65536));
  CLI::Option* bn = app.add_flag(
      "--batch-norm", flags.batch_norm,
      "batch normalization after each convolution (each tower normalizes with its own shard)");
  app.add_flag("--sync-bn", flags.sync_bn,
               "with --batch-norm: normalize with the whole global batch's statistics, summed "
               "across the towers inside the step (PyTorch's SyncBatchNorm)")
      ->needs(bn);
  app.add_option("--data", flags.data,
                 "the MNIST CSV (a header line, then the label 0..9 and 784 pixels 0..255); " +
                     sample_data_help("mnist10k.csv.gz"));
}

void print_report(const std::map<std::string, double>& result, const Towers& towers, int processes,
                  const Throughput& throughput, double examples_per_s, double wall,
                  const vkt::Estimator& estimator, const SampleFlags& flags) {
  const std::size_t all_towers = towers.devices.size() * static_cast<std::size_t>(processes);
  fmt::print("\n{:<12} {}\n", "metric", "value");
  fmt::print("{:<12} {:.4f}\n", "loss", result.at("loss"));
  fmt::print("{:<12} {:.4f}\n", "accuracy", result.at("accuracy"));
  fmt::print("{:<12} {}\n", "global step", result.at("global_step"));
  if (processes > 1) fmt::print("{:<12} {}\n", "processes", processes);
  fmt::print("{:<12} {}\n", "towers", all_towers);
  fmt::print("{:<12} {}\n", "devices", towers.description);
  fmt::print("{:<12} {:.0f}\n", "examples/s", examples_per_s);
  fmt::print("{:<12} {:.1f} s\n", "wall time", wall);
  print_model_dir(estimator, flags);
  print_startup(throughput);
  fmt::print("test_accuracy={:.4f} examples_per_s={:.0f} towers={}\n", result.at("accuracy"),
             examples_per_s, all_towers);
}

int run(MnistFlags& flags, Clock::time_point started) {
  const SampleFlags& common = flags.common;
  if (flags.data.empty()) flags.data = sample_data_file("mnist10k.csv.gz");
  const vkt::Dataset all = mnist::load_images(flags.data, mnist::CnnOptions{}.classes);
  const auto [train, test] = all.split(kTestFraction, kSplitSeed);
  const Towers towers = resolve_devices(common.devices);
  const std::int64_t epoch_steps =
      std::max<std::int64_t>(1, train.size() / (common.batch_size * common.accumulate));
  vkt::Estimator estimator(
      vkt::replicate_model_fn(mnist_model_fn, replicate_options(flags.common, towers.devices)),
      {.model_dir = common.model_dir,
       .random_seed = common.seed,
       .accumulate_steps = common.accumulate,
       .mpi = mpi_setting(common),
       .on_device_loss = device_loss_action(common)},
      {{"learning_rate", flags.learning_rate},
       {"lr_decay", flags.lr_decay},
       {"label_smoothing", flags.label_smoothing},
       {"epoch_steps", epoch_steps},
       {"conv1", flags.filters[0]},
       {"conv2", flags.filters[1]},
       {"kernel1", flags.kernels[0]},
       {"kernel2", flags.kernels[1]},
       {"dense", flags.dense},
       {"batch_norm", flags.batch_norm},
       {"sync_bn", flags.sync_bn}});
  // Under MPI every rank trains; rank 0 alone reports.
  const bool chief = estimator.rank() == 0;
  const int processes = processes_of(estimator);
  if (chief) {
    fmt::print(
        "{} train and {} test digits; {} tower{} on devices {}{}{}\n", train.size(), test.size(),
        towers.devices.size(), towers.devices.size() == 1 ? "" : "s", towers.description,
        processes > 1 ? fmt::format(" in each of {} processes", processes) : "",
        flags.batch_norm ? (flags.sync_bn ? "; synchronized batch norm" : "; batch norm") : "");
  }
  const auto throughput = std::make_shared<Throughput>();
  const vkt::InputFn train_input = vkt::dataset_input(train, {.batch_size = common.batch_size,
                                                              .epochs = 0,
                                                              .shuffle_seed = common.seed,
                                                              .drop_remainder = true});
  estimator.train(mnist::shifted_input(train_input, common.seed, flags.shift),
                  {.steps = common.steps, .hooks = {throughput}});
  const std::map<std::string, double> result =
      estimator.evaluate(vkt::dataset_input(test, {.batch_size = common.batch_size}));
  const double examples_per_s =
      throughput->steps_per_s() * static_cast<double>(common.batch_size) * common.accumulate;
  const double wall = std::chrono::duration<double>(Clock::now() - started).count();
  if (chief)
    print_report(result, towers, processes, *throughput, examples_per_s, wall, estimator, common);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Clock::time_point started = Clock::now();
  CLI::App app{
      "vkt-mnist: a CNN (conv 5x5x16 stride 2 - conv 3x3x32 - max pool - dense 128 - dense 10) "
      "trained with Adam on 8,000 MNIST digits, shifted by up to 2 pixels, and tested on 2,000 "
      "others, replicated on every "
      "chosen Vulkan device; resumes from --model-dir"};
  MnistFlags flags;
  add_mnist_flags(app, flags);
  if (const std::optional<int> exit = parse_flags(app, argc, argv, "vkt-mnist")) return *exit;
  return run_sample("vkt-mnist", [&] { return run(flags, started); });
}
