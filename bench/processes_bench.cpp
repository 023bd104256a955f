// vkt-bench-processes (under mpirun -np 2): one MLP trained on 2 processes x 1
// tower (the gradients summed between processes by MPI) and, in the same run,
// on 1 process x 2 towers (rank 0 alone, the other rank idle) at the same global
// batch: examples/s of each and their ratio. The ratio is what going through
// MPI costs against towers that share one process. With --exchange-dtype fp16
// or bf16 the 2 x 1 run also trains with the gradients summed between the
// processes in that type (half the bytes), against the f32 exchange.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <vktower/runtime/mpi/process_group.h>
#include <vktower/tower/process_batches.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>
#include <vktower/vktower.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>

namespace {

using Clock = std::chrono::steady_clock;

struct Setup {
  std::int64_t batch = 256, hidden = 1024;
  int steps = 8;
  std::string exchange = "fp32";
};

constexpr std::int64_t kIn = 784, kClasses = 10;

vkt::ModelFn mlp(std::int64_t hidden) {
  return [hidden](vkt::ModelContext&, const vkt::TensorDict& f, const vkt::TensorDict& l,
                  vkt::Mode mode, const vkt::Params&) {
    using vkt::layers::Activation;
    const vkt::Tensor h1 = vkt::layers::dense(f.at("x"), hidden, Activation::Relu, "h1");
    const vkt::Tensor h2 = vkt::layers::dense(h1, hidden, Activation::Relu, "h2");
    const vkt::Tensor logits = vkt::layers::dense(h2, kClasses, Activation::None, "logits");
    const vkt::Tensor loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits);
    vkt::TowerOptimizer sgd(std::make_unique<vkt::SGD>(0.01));
    return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = sgd.minimize(loss)};
  };
}

struct Result {
  double examples_per_s = 0;
  double exchange_ms = 0, step_ms = 0;  // the last step's: across processes, and whole
};

/// `towers` towers per process on this rank's slice of the batch.
Result train(const Setup& s, int towers, vkt::ProcessGroup* processes,
             vkt::DType exchange = vkt::DType::F32) {
  const int ranks = processes ? processes->size() : 1;
  const int rank = processes ? processes->rank() : 0;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(s.batch * kIn));
  for (float& v : x) v = normal(rng);
  std::vector<std::int32_t> y(static_cast<std::size_t>(s.batch));
  for (auto& v : y) v = static_cast<std::int32_t>(rng() % kClasses);
  const vkt::HostBatch features =
      vkt::rank_rows({{"x", vkt::HostTensor::floats({s.batch, kIn}, x)}}, rank, ranks);
  const vkt::HostBatch labels =
      vkt::rank_rows({{"y", vkt::HostTensor::ints({s.batch}, y)}}, rank, ranks);
  vkt::Instance instance;
  const auto replicated = vkt::replicate_model_fn(
      mlp(s.hidden), {.devices = std::vector<std::uint32_t>(static_cast<std::size_t>(towers), 0),
                      .exchange_dtype = exchange});
  vkt::ModelContext root(instance, {{"x", {{s.batch / ranks, kIn}}}},
                         {{"y", {{s.batch / ranks}, vkt::DType::I32}}});
  root.set_distribution({.processes = processes});
  vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
  spec.run->train_step(features, labels);  // warm-up: first uploads, pipelines
  (void)spec.run->loss();
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < s.steps; ++i) spec.run->train_step(features, labels);
  (void)spec.run->loss();  // the last step done (and, across processes, every rank's)
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const vkt::TowerRun::StepTimes& times = spec.run->last_step_times();
  return {static_cast<double>(s.batch) * s.steps / seconds, times.processes, times.step};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vkt-bench-processes: 2 processes x 1 tower vs 1 process x 2 towers (mpirun -np 2)"};
  Setup s;
  app.add_option("--batch", s.batch, "global batch")->capture_default_str();
  app.add_option("--hidden", s.hidden, "width of the two hidden layers")->capture_default_str();
  app.add_option("--steps", s.steps, "timed steps (after one warm-up)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--exchange-dtype", s.exchange,
                 "fp32|fp16|bf16: also train 2 x 1 with the sums between the processes in this "
                 "type, against f32")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  CLI11_PARSE(app, argc, argv);
  try {
    vkt::ProcessGroup& world = vkt::mpi_world();
    world.set_timeout(std::chrono::minutes(30));  // rank 1 waits out rank 0's solo run
    if (world.size() != 2 || s.batch % 2 != 0) {
      fmt::print(stderr, "vkt-bench-processes: run it as mpirun -np 2, with an even --batch\n");
      return 2;
    }
    const bool chief = world.rank() == 0;
    const char* threads = std::getenv("LP_NUM_THREADS");
    if (chief) {
      vkt::Instance instance;
      fmt::print(
          "device 0: {}, LP_NUM_THREADS={}, MLP {}-{}-{}-{}, global batch {}, SGD, {} steps\n",
          instance.device(0).name, threads ? threads : "unset", kIn, s.hidden, s.hidden, kClasses,
          s.batch, s.steps);
    }
    const Result processes = train(s, 1, &world);
    const vkt::DType half =
        vkt::compute_dtype(vkt::parse_precision(s.exchange, "--exchange-dtype"));
    Result halves;
    if (half != vkt::DType::F32) halves = train(s, 1, &world, half);
    Result towers;
    if (chief) towers = train(s, 2, nullptr);
    world.broadcast(std::string("done"), 0, "the end of rank 0's solo run");
    if (chief) {
      fmt::print("exchange between processes: {:.2f} ms of a {:.1f} ms step (the last)\n",
                 processes.exchange_ms, processes.step_ms);
      fmt::print("processes_2x1_examples_per_s={:.0f}\n", processes.examples_per_s);
      fmt::print("towers_1x2_examples_per_s={:.0f}\n", towers.examples_per_s);
      fmt::print("processes_vs_towers_ratio={:.2f}\n",
                 processes.examples_per_s / towers.examples_per_s);
      if (half != vkt::DType::F32) {
        fmt::print("{} exchange between processes: {:.2f} ms of a {:.1f} ms step (the last)\n",
                   s.exchange, halves.exchange_ms, halves.step_ms);
        fmt::print("processes_2x1_{}_exchange_examples_per_s={:.0f}\n", s.exchange,
                   halves.examples_per_s);
        fmt::print("processes_{}_vs_fp32_exchange_ratio={:.2f}\n", s.exchange,
                   halves.examples_per_s / processes.examples_per_s);
      }
    }
    return 0;
  } catch (const vkt::Error& e) {
    fmt::print(stderr, "vkt-bench-processes: {}\n", e.what());
    return 1;
  }
}
