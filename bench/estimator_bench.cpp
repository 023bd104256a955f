// vkt-bench-estimator: the UCI-digits-sized training step (MLP 64-256-128-10,
// ReLU, sparse softmax cross-entropy, Adam 1e-3, global batch 64) measured
// three ways in one run, for each tower count: vkt::Estimator::train over
// dataset_input; the same replicated model driven by TowerRun::train_step on
// pre-made batches (the engine alone); and the same step written plainly on
// the host with OpenBLAS sgemm (the CPU reference). Prints examples/s and the
// ratios, and where the Estimator's extra time goes (from a training hook).
#include <cblas.h>
#include <fmt/format.h>
#include <unistd.h>

#include <vktower/vktower.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::int64_t kIn = 64, kClasses = 10, kExamples = 1437;  // UCI digits' training split
const std::vector<int> kWidths{64, 256, 128, 10};

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

vkt::EstimatorSpec mlp(vkt::ModelContext&, const vkt::TensorDict& f, const vkt::TensorDict& l,
                       vkt::Mode mode, const vkt::Params&) {
  using vkt::layers::Activation;
  const vkt::Tensor h1 = vkt::layers::dense(f.at("x"), 256, Activation::Relu, "h1");
  const vkt::Tensor h2 = vkt::layers::dense(h1, 128, Activation::Relu, "h2");
  const vkt::Tensor logits = vkt::layers::dense(h2, kClasses, Activation::None, "logits");
  const vkt::Tensor loss =
      vkt::sparse_softmax_cross_entropy(l.at("y"), logits, {}, vkt::Reduction::Mean);
  vkt::TowerOptimizer adam(std::make_unique<vkt::Adam>(1e-3f));
  return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = adam.minimize(loss)};
}

// Labels from a fixed random linear "teacher" rather than at random, so that
// the loss visibly falls within a few hundred steps: that is what tells a
// wrong backward pass in the CPU reference from a right one.
vkt::Dataset make_data(std::int64_t rows, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> teacher(kIn * kClasses), x(static_cast<std::size_t>(rows * kIn));
  for (float& v : teacher) v = normal(rng);
  for (float& v : x) v = uniform(rng);
  std::vector<std::int32_t> y(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<float> score(kClasses, 0.0f);
    for (std::int64_t c = 0; c < kClasses; ++c) {
      for (std::int64_t i = 0; i < kIn; ++i)
        score[c] += (x[r * kIn + i] - 0.5f) * teacher[i * kClasses + c];
    }
    y[r] = static_cast<std::int32_t>(std::max_element(score.begin(), score.end()) - score.begin());
  }
  return vkt::Dataset(
      {{"x", vkt::HostTensor::floats({rows, kIn}, x)}, {"y", vkt::HostTensor::ints({rows}, y)}});
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
}

/// The training step written plainly: forward, backward and torch.optim.Adam.
class CpuMlp {
 public:
  explicit CpuMlp(std::uint32_t seed) {
    std::mt19937 rng(seed);
    for (std::size_t l = 0; l + 1 < kWidths.size(); ++l) {
      const int in = kWidths[l], out = kWidths[l + 1];
      const float limit = std::sqrt(6.0f / static_cast<float>(in + out));  // glorot_uniform
      std::uniform_real_distribution<float> glorot(-limit, limit);
      Layer& L = layers_.emplace_back(Layer{in, out, Param(in * out), Param(out)});
      for (float& w : L.w.value) w = glorot(rng);
    }
  }

  /// One step on `x` [batch, 64] and `y`; returns the loss before the update.
  float step(const std::vector<float>& x, const std::vector<std::int32_t>& y) {
    const int batch = static_cast<int>(y.size());
    acts_.resize(layers_.size() + 1);
    acts_[0] = x;
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const Layer& L = layers_[l];
      std::vector<float>& out = acts_[l + 1];
      out.resize(std::size_t(batch) * L.out);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, L.out, L.in, 1.0f,
                  acts_[l].data(), L.in, L.w.value.data(), L.out, 0.0f, out.data(), L.out);
      for (std::size_t i = 0; i < out.size(); ++i) {
        out[i] += L.b.value[i % L.out];
        if (l + 1 < layers_.size() && out[i] < 0) out[i] = 0;
      }
    }
    // Softmax cross-entropy, mean over the batch; dz = (softmax - one_hot) / batch.
    std::vector<float> dz = acts_.back();
    double loss = 0;
    for (int r = 0; r < batch; ++r) {
      float* z = &dz[std::size_t(r) * kClasses];
      const float top = *std::max_element(z, z + kClasses);
      float sum = 0;
      for (int c = 0; c < kClasses; ++c) sum += std::exp(z[c] - top);
      loss += std::log(sum) + top - z[y[r]];
      for (int c = 0; c < kClasses; ++c) z[c] = std::exp(z[c] - top) / sum / batch;
      z[y[r]] -= 1.0f / batch;
    }
    for (std::size_t l = layers_.size(); l-- > 0;) {
      Layer& L = layers_[l];
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, L.in, L.out, batch, 1.0f,
                  acts_[l].data(), L.in, dz.data(), L.out, 0.0f, L.w.grad.data(), L.out);
      std::fill(L.b.grad.begin(), L.b.grad.end(), 0.0f);
      for (std::size_t i = 0; i < dz.size(); ++i) L.b.grad[i % L.out] += dz[i];
      if (l == 0) break;
      std::vector<float> da(std::size_t(batch) * L.in);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, L.in, L.out, 1.0f, dz.data(),
                  L.out, L.w.value.data(), L.out, 0.0f, da.data(), L.in);
      // ReLU's gradient, from its output: 0 where the output is 0.
      for (std::size_t i = 0; i < da.size(); ++i) {
        if (acts_[l][i] <= 0) da[i] = 0;
      }
      dz = std::move(da);
    }
    ++t_;
    for (Layer& L : layers_) adam(L.w), adam(L.b);
    return static_cast<float>(loss / batch);
  }

 private:
  struct Param {
    explicit Param(int n) : value(n), grad(n), m(n), v(n) {}
    std::vector<float> value, grad, m, v;
  };
  struct Layer {
    int in, out;
    Param w, b;
  };
  void adam(Param& p) const {
    const float b1 = 0.9f, b2 = 0.999f, lr = 1e-3f, eps = 1e-8f;
    const float c1 = lr / (1 - std::pow(b1, float(t_))),
                c2 = std::sqrt(1 - std::pow(b2, float(t_)));
    for (std::size_t i = 0; i < p.value.size(); ++i) {
      p.m[i] = b1 * p.m[i] + (1 - b1) * p.grad[i];
      p.v[i] = b2 * p.v[i] + (1 - b2) * p.grad[i] * p.grad[i];
      p.value[i] -= c1 * p.m[i] / (std::sqrt(p.v[i]) / c2 + eps);
    }
  }
  std::vector<Layer> layers_;
  std::vector<std::vector<float>> acts_;
  int t_ = 0;
};

/// Times from inside train(): begin() comes after the input's first batch and
/// the model lookup (~1 ms), end() after the final checkpoint.
class PhaseClock : public vkt::TrainingHook {
 public:
  void begin() override { begun = Clock::now(), steps = 0; }
  void after_step(std::uint64_t, float loss) override {
    last_step = Clock::now();
    if (steps++ == 0) first_loss = loss;
    last_loss = loss;
  }
  void end() override { ended = Clock::now(); }
  Clock::time_point begun, last_step, ended;
  float first_loss = 0, last_loss = 0;
  int steps = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vkt-bench-estimator: Estimator::train vs TowerRun::train_step vs OpenBLAS"};
  std::int64_t batch = 64;
  int steps = 300, warmup = 5, reps = 4, blas_threads = 0;
  std::vector<int> tower_counts{1, 2};
  app.add_option("--batch", batch, "global batch")
      ->check(CLI::Range(std::int64_t{1}, kExamples))
      ->capture_default_str();
  app.add_option("--steps", steps, "timed steps per repetition")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps first")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--reps", reps, "repetitions of the timed steps (medians are printed)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--towers", tower_counts, "tower counts")->delimiter(',')->capture_default_str();
  app.add_option("--blas-threads", blas_threads, "OpenBLAS threads (0: as many as lavapipe)");
  CLI11_PARSE(app, argc, argv);

  try {
    const char* lp = std::getenv("LP_NUM_THREADS");
    const int lp_workers =
        lp ? std::max(1, std::atoi(lp)) : int(std::thread::hardware_concurrency());
    openblas_set_num_threads(blas_threads > 0 ? blas_threads : lp_workers);
    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    vkt::Instance instance;
    fmt::print("device 0: {}, LP_NUM_THREADS={}\n", instance.device(0).name, lp ? lp : "unset");
    fmt::print("OpenBLAS {} core \"{}\" (OPENBLAS_CORETYPE={}), {} threads\n",
               openblas_get_config(), openblas_get_corename(), coretype ? coretype : "unset",
               openblas_get_num_threads());
    fmt::print("MLP 64-256-128-10, Adam 1e-3, global batch {}, {} examples, {} x {} timed steps\n",
               batch, kExamples, reps, steps);

    const vkt::Dataset data = make_data(kExamples, 1);
    // The batches dataset_input gives the Estimator (reshuffled every epoch
    // with seed 7 + epoch), so that all three train on the same data in step.
    const std::int64_t per_epoch = kExamples / batch;
    const int total_steps = warmup + reps * steps;
    std::vector<std::pair<vkt::HostBatch, vkt::HostBatch>> batches;
    for (std::int64_t epoch = 0; std::ssize(batches) < total_steps; ++epoch) {
      const vkt::Dataset order = data.shuffled(7 + static_cast<std::uint64_t>(epoch));
      for (std::int64_t b = 0; b < per_epoch; ++b) {
        vkt::HostBatch rows = order.rows(b * batch, batch);
        batches.push_back({{{"x", rows.at("x")}}, {{"y", rows.at("y")}}});
      }
    }
    const double timed_examples = static_cast<double>(steps) * static_cast<double>(batch);

    for (int n : tower_counts) {
      if (n < 1 || batch % n != 0) {
        fmt::print("towers={}: skipped, the batch of {} does not divide by it\n", n, batch);
        continue;
      }
      CpuMlp ref(1);
      const auto cpu_step = [&](int s) {
        return ref.step(batches[s].first.at("x").f32, batches[s].second.at("y").i32);
      };
      const vkt::ReplicateOptions options{
          .loss_reduction = vkt::LossReduction::Mean,
          .devices = std::vector<std::uint32_t>(static_cast<std::size_t>(n), 0)};
      vkt::ModelContext root(instance, {{"x", {{batch, kIn}}}}, {{"y", {{batch}, vkt::DType::I32}}},
                             vkt::GraphOptions{.seed = 1});
      const vkt::EstimatorSpec spec =
          vkt::replicate_model_fn(mlp, options)(root, {}, {}, vkt::Mode::Train, {});
      vkt::TowerRun& engine = *spec.run;
      const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                        fmt::format("vkt-bench-estimator-{}-{}", ::getpid(), n);
      auto estimator = std::make_unique<vkt::Estimator>(vkt::replicate_model_fn(mlp, options),
                                                        vkt::RunConfig{.model_dir = dir.string(),
                                                                       .random_seed = 1,
                                                                       .save_checkpoints_steps = 0,
                                                                       .log_step_count_steps = 0,
                                                                       .progress = false});
      const vkt::InputFn input = vkt::dataset_input(
          data, {.batch_size = batch, .epochs = 0, .shuffle_seed = 7, .drop_remainder = true});
      auto clock = std::make_shared<PhaseClock>();

      // Repetitions interleave the three, so that all see the same load on the
      // shared machine: the CPU reference first, then a pause (OpenBLAS's
      // threads spin for ~0.1 s after a call and would slow what follows), then
      // the engine and the Estimator, in turns first. Each continues training;
      // repetition -1 is the untimed warm-up.
      struct {
        float first = 0, last = 0;
      } cpu, eng, est;
      std::vector<double> t_cpu, t_eng, t_est, loop, checkpoint, finish;
      vkt::TowerRun::StepTimes split;  // summed over the engine's timed steps
      for (int r = -1; r < reps; ++r) {
        const int first = r < 0 ? 0 : warmup + r * steps, last = r < 0 ? warmup : first + steps;
        auto start = Clock::now();
        for (int s = first; s < last; ++s) (s == 0 ? cpu.first : cpu.last) = cpu_step(s);
        if (r >= 0) t_cpu.push_back(seconds(start, Clock::now()));
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        for (int k = 0; k < 2; ++k) {
          start = Clock::now();
          if ((r + 2 + k) % 2 == 0) {
            for (int s = first; s < last; ++s) {
              engine.train_step(batches[s].first, batches[s].second);
              if (s == 0) eng.first = engine.loss();
              const vkt::TowerRun::StepTimes& t = engine.last_step_times();
              if (r < 0) continue;
              split.towers += t.towers, split.reduce += t.reduce;
              split.apply += t.apply, split.copy_back += t.copy_back;
            }
            if (r >= 0) t_eng.push_back(seconds(start, Clock::now()));
            eng.last = engine.loss();
          } else {
            estimator->train(input, {.steps = std::uint64_t(last - first), .hooks = {clock}});
            const auto done = Clock::now();
            if (r < 0) est.first = clock->first_loss;
            if (r < 0) continue;
            t_est.push_back(seconds(start, done));
            est.last = clock->last_loss;
            loop.push_back(seconds(clock->begun, clock->last_step));
            checkpoint.push_back(seconds(clock->last_step, clock->ended));
            finish.push_back(seconds(clock->ended, done));
          }
        }
      }
      estimator.reset();
      std::filesystem::remove_all(dir);

      std::vector<double> ratios;
      for (int r = 0; r < reps; ++r) ratios.push_back(t_eng[r] / t_est[r]);
      const double cpu_rate = timed_examples / median(t_cpu);
      const double eng_rate = timed_examples / median(t_eng);
      const double est_rate = timed_examples / median(t_est);
      fmt::print(
          "towers={} estimator_examples_per_s={:.0f} engine_examples_per_s={:.0f} "
          "estimator_vs_engine_ratio={:.3f} vs_cpu_reference_ratio={:.3f}\n",
          n, est_rate, eng_rate, est_rate / eng_rate, est_rate / cpu_rate);
      fmt::print("  cpu_reference_examples_per_s={:.0f} (engine vs it {:.3f})\n", cpu_rate,
                 eng_rate / cpu_rate);
      fmt::print(
          "  train() {:.1f} ms: step loop {:.1f} ({:.0f} examples/s), final "
          "checkpoint {:.1f}, end (metrics.csv, loss.png, input) {:.1f}; engine {:.1f} ms; "
          "estimator_vs_engine per repetition {:.3f}-{:.3f}\n",
          1e3 * median(t_est), 1e3 * median(loop), timed_examples / median(loop),
          1e3 * median(checkpoint), 1e3 * median(finish), 1e3 * median(t_eng),
          *std::min_element(ratios.begin(), ratios.end()),
          *std::max_element(ratios.begin(), ratios.end()));
      const double per_step = 1.0 / (reps * steps);
      fmt::print(
          "  engine step {:.2f} ms: towers {:.2f} (forward + backward{}), reduce {:.2f}, apply "
          "{:.2f}, copy back {:.2f}\n",
          1e3 * median(t_eng) / steps, split.towers * per_step, n == 1 ? " + Adam" : "",
          split.reduce * per_step, split.apply * per_step, split.copy_back * per_step);
      fmt::print(
          "  loss first -> last: estimator {:.4f} -> {:.4f}, engine {:.4f} -> {:.4f}{}, "
          "cpu reference {:.4f} -> {:.4f} (ln 10 = {:.4f})\n",
          est.first, est.last, eng.first, eng.last,
          eng.last == est.last ? " (the same bits)" : " (differs)", cpu.first, cpu.last,
          std::log(10.0));
      if (std::abs(cpu.first - std::log(10.0f)) > 0.5f || !(cpu.last < cpu.first)) {
        fmt::print(stderr, "vkt-bench-estimator: the CPU reference's loss is wrong\n");
        return 1;
      }
    }
    return 0;
  } catch (const vkt::Error& e) {
    fmt::print(stderr, "vkt-bench-estimator: {}\n", e.what());
    return 1;
  }
}
