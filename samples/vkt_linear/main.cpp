// vkt-linear: the README's scalar example as the shortest complete use of the API.
// One variable c = 10, predictions = features * c, loss = sum |labels - predictions|,
// SGD with learning rate 1, replicated on the chosen devices and trained by a
// vkt::Estimator. The global batch is features = labels = [[1], [2]], then
// [[1.5], [2.5]], alternating. Run again with the same --model-dir, it resumes.
//
//   vkt-linear --devices 0,0 --reduction sum --steps 2    # ends with c=3
//   vkt-linear --devices 0,0 --reduction mean --steps 1   # ends with c=8.5
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <vktower/tower/device_list.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>
#include <vktower/vktower.h>
#include "../sample_errors.h"
#include "../sample_flags.h"
#include "../sample_throughput.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

vkt::EstimatorSpec linear_model(vkt::ModelContext& ctx, const vkt::TensorDict& features,
                                const vkt::TensorDict& labels, vkt::Mode mode, const vkt::Params&) {
  const vkt::Tensor c = ctx.graph().variable("c", {}, vkt::Initializer::constant(10.0f));
  const vkt::Tensor predictions = features.at("x") * c;
  vkt::EstimatorSpec spec{.mode = mode, .predictions = {{"y", predictions}}};
  if (mode == vkt::Mode::Predict) return spec;
  spec.loss = vkt::reduce_sum(vkt::abs(labels.at("y") - predictions));
  if (mode == vkt::Mode::Train) {
    vkt::TowerOptimizer sgd(std::make_unique<vkt::SGD>(1.0f));
    spec.train_op = sgd.minimize(spec.loss);
  }
  return spec;
}

/// The README's batches: x = y = [[1], [2]] on even global steps and
/// [[1.5], [2.5]] on odd ones, repeated to fill `rows`. It starts at the
/// global step training resumes at, so a resumed run continues the alternation.
class AlternatingInput : public vkt::Input {
 public:
  AlternatingInput(std::int64_t rows, std::uint64_t step) : rows_(rows), step_(step) {}
  std::int64_t batch_size() const override { return rows_; }
  std::optional<vkt::Batch> next() override {
    const float first = step_++ % 2 == 0 ? 1.0f : 1.5f;
    std::vector<float> values(static_cast<std::size_t>(rows_));
    for (std::int64_t r = 0; r < rows_; ++r) values[r] = first + static_cast<float>(r % 2);
    const vkt::HostTensor t = vkt::HostTensor::floats({rows_, 1}, values);
    return vkt::Batch{{{"x", t}}, {{"y", t}}};
  }

 private:
  std::int64_t rows_;
  std::uint64_t step_;
};

/// Prints every step's loss (on rank 0 alone, under mpirun).
class PrintLoss : public vkt::TrainingHook {
 public:
  explicit PrintLoss(bool chief) : chief_(chief) {}
  void after_step(std::uint64_t global_step, float loss) override {
    if (chief_) fmt::print("step {}: loss {}\n", global_step, loss);
  }
  bool takes_late_losses() const override { return true; }

 private:
  bool chief_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "vkt-linear: the scalar model of the README (c = 10, SGD, loss sum |y - x c|) trained on "
      "every chosen Vulkan device"};
  std::string devices = "all";
  std::uint64_t steps = 2;
  std::uint64_t seed = 0;
  std::string reduction = "sum_by_nonzero_weights";
  std::string model_dir;
  app.add_option("--devices", devices,
                 "all|gpu|cpu|list: all = every GPU, the CPU only without one; a list like 0,0 "
                 "runs one tower per entry (VKT_DEVICES overrides)")
      ->capture_default_str();
  app.add_option("--steps", steps, "training steps (more, when resuming)")
      ->capture_default_str()
      ->check(whole_number_from<std::uint64_t>(1));
  app.add_option("--reduction", reduction, "how tower losses combine")
      ->capture_default_str()
      ->check(CLI::IsMember({"sum", "mean", "sum_by_nonzero_weights"}));
  app.add_option("--model-dir", model_dir,
                 "checkpoints; resumes from it (default: a new temporary dir)");
  app.add_option("--seed", seed, "the graph seed (c starts at 10 whatever it is)")
      ->capture_default_str()
      ->check(whole_number_from<std::uint64_t>(0));
  int accumulate = 1;
  add_accumulate_flag(app, accumulate);
  if (const std::optional<int> exit = parse_flags(app, argc, argv, "vkt-linear")) return *exit;

  return run_sample("vkt-linear", [&] {
    const std::map<std::string, vkt::LossReduction> reductions = {
        {"sum", vkt::LossReduction::Sum},
        {"mean", vkt::LossReduction::Mean},
        {"sum_by_nonzero_weights", vkt::LossReduction::SumByNonzeroWeights}};
    std::vector<std::uint32_t> towers;
    std::string device_name;
    {
      vkt::Instance instance;  // only to read the device list; the Estimator opens its own
      towers =
          vkt::device_list_from_environment(instance, vkt::parse_device_list(devices, instance));
      device_name = instance.device(towers.front()).name;
    }
    const auto n = static_cast<std::int64_t>(towers.size());
    // One row per tower; on two towers, the README's two alternating batches.
    const std::int64_t rows = std::max<std::int64_t>(n, 2) / n * n;
    vkt::Estimator estimator(
        vkt::replicate_model_fn(linear_model,
                                {.loss_reduction = reductions.at(reduction), .devices = towers}),
        // Quiet: the steps print themselves (PrintLoss).
        {.model_dir = model_dir,
         .random_seed = seed,
         .log_step_count_steps = 0,
         .progress = false,
         .accumulate_steps = accumulate});
    const bool chief = estimator.rank() == 0;  // under mpirun, rank 0 alone reports
    if (chief) {
      fmt::print("{} tower{} on {}, reduction {}\n", n, n == 1 ? "" : "s", device_name, reduction);
    }
    const vkt::InputFn input = [rows](const vkt::InputContext& context) {
      return std::make_unique<AlternatingInput>(rows, context.start_batch);
    };
    const auto throughput = std::make_shared<Throughput>();  // for the start-up time
    estimator.train(input,
                    {.steps = steps, .hooks = {std::make_shared<PrintLoss>(chief), throughput}});
    if (!chief) return 0;  // rank 0's model_dir holds the checkpoints
    const float c = estimator.variable_value("c").f32.at(0);  // from the newest checkpoint
    if (vkt::InstanceOptions::from_environment().validation) {
      fmt::print("validation messages: {}\n", vkt::Instance::process_validation_messages());
    }
    fmt::print("c={}\n", c);
    print_startup(*throughput);
    return 0;
  });
}
