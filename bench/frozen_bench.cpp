// vkt-bench-frozen: a LoRA fine-tune (`layers` square lora_dense layers: a
// frozen base, each with a trainable rank-r adapter) trained on 2 towers in
// SharedLocalParameterServer mode, with the base held as f32 frozen
// variables (which the weights' copy-back carries to the towers every step)
// and as bf16 frozen variables (half the bytes, never copied), and the same
// layers all trained (full fine-tuning): examples/s of each, their ratios,
// and the variable arena's bytes, all in one run.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <optional>
#include <random>

#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>
#include <vktower/vktower.h>

namespace {

struct Shape {
  std::int64_t batch, width, rank;
  int layers;
  vkt::Precision precision;
};

/// h <- lora_dense(h, tanh) for each layer (a frozen base in `base_dtype`
/// with a rank-r adapter), then a dense head; all but the bases trained by Adam.
/// Without a base dtype: the same layers as plain dense ones, all trained
/// (full fine-tuning, the reference LoRA saves on).
vkt::ModelFn lora(const Shape& s, std::optional<vkt::DType> base_dtype) {
  return [s, base_dtype](vkt::ModelContext&, const vkt::TensorDict& f, const vkt::TensorDict& l,
                         vkt::Mode mode, const vkt::Params&) {
    vkt::Tensor h = f.at("x");
    for (int i = 0; i < s.layers; ++i) {
      const std::string name = fmt::format("layer{}", i);
      const vkt::layers::Activation tanh = vkt::layers::Activation::Tanh;
      h = base_dtype ? vkt::layers::lora_dense(h, s.width,
                                               {.rank = s.rank,
                                                .alpha = 2.0f * static_cast<float>(s.rank),
                                                .base_dtype = *base_dtype},
                                               tanh, name)
                     : vkt::layers::dense(h, s.width, tanh, name);
    }
    const vkt::Tensor logits = vkt::layers::dense(h, 10, vkt::layers::Activation::None, "head");
    const vkt::Tensor loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits);
    vkt::TowerOptimizer adam([] { return std::make_unique<vkt::Adam>(1e-3f); });
    return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = adam.minimize(loss)};
  };
}

struct Result {
  double examples_per_s = 0, copy_back_ms = 0;
  std::size_t arena_bytes = 0;
};

Result measure(vkt::Instance& instance, const Shape& s, std::optional<vkt::DType> base_dtype,
               int towers, int steps) {
  const auto replicated = vkt::replicate_model_fn(
      lora(s, base_dtype),
      {.devices = std::vector<std::uint32_t>(static_cast<std::size_t>(towers), 0),
       .variable_mode = vkt::VariableMode::SharedLocalParameterServer,
       .precision = s.precision});
  vkt::ModelContext root(instance, {{"x", {{s.batch, s.width}}}},
                         {{"y", {{s.batch}, vkt::DType::I32}}});
  const vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<std::size_t>(s.batch * s.width));
  for (float& v : x) v = normal(rng);
  std::vector<std::int32_t> y(static_cast<std::size_t>(s.batch));
  for (auto& v : y) v = static_cast<std::int32_t>(rng() % 10);
  const vkt::HostBatch features{{"x", vkt::HostTensor::floats({s.batch, s.width}, x)}};
  const vkt::HostBatch labels{{"y", vkt::HostTensor::ints({s.batch}, y)}};
  vkt::TowerRun& run = *spec.run;
  run.train_step(features, labels);  // warm-up
  static_cast<void>(run.take_losses());
  double copy_back = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) {
    run.train_step(features, labels);
    copy_back += run.last_step_times().copy_back;
    static_cast<void>(run.take_losses(2));
  }
  static_cast<void>(run.take_losses());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {static_cast<double>(s.batch) * steps / seconds, copy_back / steps,
          run.tower_graph(0).variable_arena().size()};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vkt-bench-frozen: a frozen base in f32 against bf16 (LoRA's shape) on towers"};
  Shape s{64, 1024, 8, 4, vkt::Precision::F32};
  int steps = 10, towers = 2;
  std::string precision = "fp32";
  app.add_option("--batch", s.batch, "global batch")->capture_default_str();
  app.add_option("--width", s.width, "width of each square base layer")->capture_default_str();
  app.add_option("--rank", s.rank, "rank of each adapter")->capture_default_str();
  app.add_option("--layers", s.layers, "base layers")->capture_default_str();
  app.add_option("--steps", steps, "timed steps (after one warm-up)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--towers", towers, "towers, all on device 0")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--precision", precision, "fp32, fp16 or bf16 (ReplicateOptions::precision)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    s.precision = vkt::parse_precision(precision, "--precision");
    vkt::Instance instance;
    fmt::print("device: {}\n", instance.device(0).name);
    fmt::print(
        "{} base layers of {} x {}, rank-{} adapters, batch {}, {} towers (shared local "
        "parameter server), {}\n",
        s.layers, s.width, s.width, s.rank, s.batch, towers, precision);
    const Result f32 = measure(instance, s, vkt::DType::F32, towers, steps);
    const Result bf16 = measure(instance, s, vkt::DType::BF16, towers, steps);
    const Result full = measure(instance, s, std::nullopt, towers, steps);
    for (const auto& [name, r] : {std::pair{"f32 base ", f32}, std::pair{"bf16 base", bf16},
                                  std::pair{"all train", full}}) {
      fmt::print("  {}: {:8.0f} examples/s, copy-back {:7.2f} ms/step, variable arena {:.1f} MiB\n",
                 name, r.examples_per_s, r.copy_back_ms,
                 static_cast<double>(r.arena_bytes) / (1 << 20));
    }
    fmt::print("frozen_bf16_vs_f32_ratio={:.2f}\n", bf16.examples_per_s / f32.examples_per_s);
    fmt::print("lora_bf16_vs_full_training_ratio={:.2f}\n",
               bf16.examples_per_s / full.examples_per_s);
    fmt::print("frozen_bf16_vs_f32_arena_ratio={:.2f}\n",
               static_cast<double>(bf16.arena_bytes) / static_cast<double>(f32.arena_bytes));
  } catch (const std::exception& e) {
    fmt::print(stderr, "vkt-bench-frozen: {}\n", e.what());
    return 1;
  }
  return 0;
}
