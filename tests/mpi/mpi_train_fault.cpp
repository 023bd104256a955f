// vkt-mpi-train-fault MODE: two ranks train a small MLP with the Estimator
// (2 towers each, process_timeout_s = 2) and rank 1 misbehaves after step 3,
// for the fault tests in tests/mpi/CMakeLists.txt. Every rank prints the
// vkt::Error it gets ("rank R: ...") and exits 1; the job must then end.
//   hang  rank 1 stops answering (sleeps for five minutes)
//   kill  rank 1 is killed (SIGKILL)
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string_view>
#include <thread>

#include <vktower/optimizers/sgd.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/io/dataset.h>
#include <vktower/runtime/mpi/process_group.h>
#include <vktower/runtime/vulkan/error.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>

namespace {

vkt::EstimatorSpec model(vkt::ModelContext&, const vkt::TensorDict& f, const vkt::TensorDict& l,
                         vkt::Mode mode, const vkt::Params&) {
  const vkt::Tensor logits = vkt::layers::dense(f.at("x"), 3, vkt::layers::Activation::None, "out");
  const vkt::Tensor loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits);
  vkt::TowerOptimizer sgd(std::make_unique<vkt::SGD>(0.1));
  return {.mode = mode, .loss = loss, .train_op = sgd.minimize(loss)};
}

class Misbehave : public vkt::TrainingHook {
 public:
  Misbehave(std::string_view mode, int rank) : mode_(mode), rank_(rank) {}
  void after_step(std::uint64_t step, float) override {
    if (step != 3 || rank_ != 1) return;
    if (mode_ == "hang") std::this_thread::sleep_for(std::chrono::minutes(5));
    if (mode_ == "kill") std::raise(SIGKILL);
  }

 private:
  std::string_view mode_;
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string_view mode = argc == 2 ? argv[1] : "";
  if (mode != "hang" && mode != "kill") {
    std::fprintf(stderr, "usage: vkt-mpi-train-fault hang|kill (under mpirun -np 2)\n");
    return 2;
  }
  int rank = -1;
  try {
    vkt::Estimator estimator(vkt::replicate_model_fn(model, {.devices = {0, 0}}),
                             {.log_step_count_steps = 0,
                              .progress = false,
                              .plot_loss = false,
                              .mpi = true,
                              .process_timeout_s = 2});
    rank = estimator.rank();
    std::vector<float> x(64 * 4);
    std::vector<std::int32_t> y(64);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) / 7.0f;
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<std::int32_t>(i % 3);
    const vkt::Dataset data(
        {{"x", vkt::HostTensor::floats({64, 4}, x)}, {"y", vkt::HostTensor::ints({64}, y)}});
    estimator.train(vkt::dataset_input(data, {.batch_size = 8, .epochs = 0}),
                    {.steps = 20, .hooks = {std::make_shared<Misbehave>(mode, rank)}});
    std::printf("rank %d: trained 20 steps, which it should not have\n", rank);
    return 0;
  } catch (const vkt::Error& e) {
    std::printf("rank %d: %s\n", rank, e.what());
    std::fflush(stdout);
    return 1;
  }
}
