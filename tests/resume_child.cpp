// vkt-resume-child: a small training program that the kill-and-resume test
// (tests/tower/test_kill_resume.cpp) runs, SIGKILLs at random moments and runs
// again. It trains an MLP with dropout on two towers to a fixed global step,
// saving a checkpoint every step, resuming from the model directory's newest
// checkpoint when there is one.
//
//   vkt-resume-child MODEL_DIR MAX_STEPS
//
// Exit status: 0 when training reached MAX_STEPS with no validation message, 1 otherwise.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/dropout.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/vulkan/error.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>

namespace {

constexpr std::int64_t kFeatures = 8, kClasses = 4, kRows = 64;

vkt::EstimatorSpec model(vkt::ModelContext& ctx, const vkt::TensorDict& f, const vkt::TensorDict& l,
                         vkt::Mode mode, const vkt::Params&) {
  using vkt::layers::Activation;
  vkt::Tensor h = vkt::layers::dense(f.at("x"), 32, Activation::Relu, "hidden");
  h = vkt::dropout(h, 0.3f);
  const vkt::Tensor logits = vkt::layers::dense(h, kClasses, Activation::None, "out");
  vkt::EstimatorSpec spec{.mode = mode};
  spec.predictions = {{"logits", logits}};
  if (mode == vkt::Mode::Predict) return spec;
  spec.loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits, ctx.example_weights(),
                                                vkt::Reduction::Mean);
  vkt::TowerOptimizer adam([] { return std::make_unique<vkt::Adam>(0.01f); });
  spec.train_op = adam.minimize(spec.loss);
  return spec;
}

/// Deterministic data: the same in every process.
vkt::Dataset data() {
  std::vector<float> x(static_cast<std::size_t>(kRows * kFeatures));
  std::vector<std::int32_t> y(static_cast<std::size_t>(kRows));
  std::uint32_t state = 12345;
  for (float& v : x) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / 16777216.0f * 4.0f - 2.0f;
  }
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<std::int32_t>((i * 7) % kClasses);
  return vkt::Dataset({{"x", vkt::HostTensor::floats({kRows, kFeatures}, x)},
                       {"y", vkt::HostTensor::ints({kRows}, y)}});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: vkt-resume-child MODEL_DIR MAX_STEPS\n");
    return 1;
  }
  try {
    const vkt::ModelFn replicated = vkt::replicate_model_fn(model, {.devices = {0, 0}});
    vkt::Estimator estimator(replicated, {.model_dir = argv[1],
                                          .random_seed = 17,
                                          .save_checkpoints_steps = 1,
                                          .keep_checkpoint_max = 3,
                                          .log_step_count_steps = 0,
                                          .save_summary_steps = 0,
                                          .progress = false,
                                          .plot_loss = false});
    const std::uint64_t max_steps = std::strtoull(argv[2], nullptr, 10);
    const std::uint64_t reached = estimator.train(
        vkt::dataset_input(
            data(), {.batch_size = 16, .epochs = 0, .shuffle_seed = 5, .drop_remainder = true}),
        {.max_steps = max_steps});
    const std::uint64_t messages = vkt::Instance::process_validation_messages();
    std::printf("global step %llu, validation messages: %llu\n",
                static_cast<unsigned long long>(reached),
                static_cast<unsigned long long>(messages));
    return reached == max_steps && messages == 0 ? 0 : 1;
  } catch (const vkt::Error& e) {
    std::fprintf(stderr, "vkt-resume-child: %s\n", e.what());
    return 1;
  }
}
