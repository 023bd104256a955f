// vkt-linear: the README's scalar example as the shortest complete use of the API.
// One variable c = 10, predictions = features * c, loss = sum |labels - predictions|,
// SGD with learning rate 1, replicated on the chosen devices. The global batch is
// features = labels = [[1], [2]], then [[1.5], [2.5]], alternating.
//
//   vkt-linear --devices 0,0 --reduction sum --steps 2    # ends with c=3
//   vkt-linear --devices 0,0 --reduction mean --steps 1   # ends with c=8.5
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <vktower/tower/device_list.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>
#include <vktower/vktower.h>
#include <cstdlib>
#include <map>

namespace {

vkt::EstimatorSpec linear_model(vkt::ModelContext& ctx, const vkt::TensorDict& features,
                                const vkt::TensorDict& labels, vkt::Mode mode, const vkt::Params&) {
  const vkt::Tensor c = ctx.graph().variable("c", {}, vkt::Initializer::constant(10.0f));
  const vkt::Tensor predictions = features.at("x") * c;
  const vkt::Tensor loss = vkt::reduce_sum(vkt::abs(labels.at("y") - predictions));
  vkt::TowerOptimizer sgd(std::make_unique<vkt::SGD>(1.0f));
  return {.mode = mode, .loss = loss, .train_op = sgd.minimize(loss)};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "vkt-linear: the scalar model of the README (c = 10, SGD, loss sum |y - x c|) trained on "
      "every chosen Vulkan device"};
  std::string devices = "all";
  int steps = 2;
  std::string reduction = "sum_by_nonzero_weights";
  std::string model_dir;
  app.add_option("--devices", devices, "devices, e.g. 0,0 or all (VKT_DEVICES overrides)")
      ->capture_default_str();
  app.add_option("--steps", steps, "training steps")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--reduction", reduction, "how tower losses combine")
      ->capture_default_str()
      ->check(CLI::IsMember({"sum", "mean", "sum_by_nonzero_weights"}));
  app.add_option("--model-dir", model_dir, "accepted; used once checkpoints exist");
  CLI11_PARSE(app, argc, argv);

  try {
    vkt::Instance instance;
    const std::map<std::string, vkt::LossReduction> reductions = {
        {"sum", vkt::LossReduction::Sum},
        {"mean", vkt::LossReduction::Mean},
        {"sum_by_nonzero_weights", vkt::LossReduction::SumByNonzeroWeights}};
    const std::vector<std::uint32_t> towers =
        vkt::device_list_from_environment(instance, vkt::parse_device_list(devices, instance));
    const auto n = static_cast<std::int64_t>(towers.size());
    // One row per tower; on two towers, the README's two alternating batches.
    const std::int64_t rows = std::max<std::int64_t>(n, 2) / n * n;
    const auto replicated = vkt::replicate_model_fn(
        linear_model, {.loss_reduction = reductions.at(reduction), .devices = towers});
    vkt::ModelContext root(instance, {{"x", {{rows, 1}}}}, {{"y", {{rows, 1}}}});
    const vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
    fmt::print("{} tower{} on {}, reduction {}\n", n, n == 1 ? "" : "s",
               instance.device(towers.front()).name, reduction);
    for (int step = 0; step < steps; ++step) {
      const float first = step % 2 == 0 ? 1.0f : 1.5f;
      std::vector<float> values(static_cast<std::size_t>(rows));
      for (std::int64_t r = 0; r < rows; ++r) values[r] = first + static_cast<float>(r % 2);
      const vkt::HostBatch batch = {{"x", vkt::HostTensor::floats({rows, 1}, values)}};
      const vkt::HostBatch labels = {{"y", vkt::HostTensor::floats({rows, 1}, values)}};
      spec.run->train_step(batch, labels);
      fmt::print("step {}: loss {} c {}\n", step + 1, spec.run->loss(), spec.run->variable("c")[0]);
    }
    fmt::print("c={}\n", spec.run->variable("c")[0]);
    return 0;
  } catch (const vkt::Error& e) {
    fmt::print(stderr, "vkt-linear: {}\n", e.what());
    return 1;
  }
}
