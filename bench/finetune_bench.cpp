// vkt-bench-finetune: LoRA fine-tuning of a Llama-shaped decoder (about 20M
// parameters at the defaults), in tokens/s on 1 and 2 towers against PyTorch
// fine-tuning the same model on the same CPU (or GPU) in the same run
// (bench/pytorch_finetune.py), and generation in tokens/s with the
// key/value cache against recomputing the whole sequence for every token.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <vktower/models/causal_lm.h>
#include <vktower/models/generator.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>
#include <vktower/vktower.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "torch_reference.h"

namespace {

struct Flags {
  std::int64_t vocab = 8000, hidden = 384, layers = 6, heads = 6, kv_heads = 2, intermediate = 1024,
               context = 128, batch = 8, lora_rank = 8;
  int steps = 3, rounds = 3, torch_steps = 3;
  std::vector<int> towers{1, 2};
  std::string precision = "fp32";
  std::string torch_device = "auto";  ///< auto: cpu on lavapipe, else cuda
  std::int64_t generate_tokens = 256;
  bool skip_torch = false, skip_generate = false;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

vkt::models::DecoderConfig llama_config(const Flags& f) {
  vkt::models::DecoderConfig c;
  c.architecture = vkt::models::Architecture::Llama;
  c.architecture_name = "LlamaForCausalLM";
  c.vocab_size = f.vocab;
  c.hidden_size = f.hidden;
  c.intermediate_size = f.intermediate;
  c.num_hidden_layers = f.layers;
  c.num_attention_heads = f.heads;
  c.num_key_value_heads = f.kv_heads;
  c.head_dim = f.hidden / f.heads;
  c.norm_eps = 1e-6;
  c.max_position_embeddings = std::max<std::int64_t>(f.context, 8 + f.generate_tokens);
  return c;
}

std::int64_t parameters(const vkt::models::DecoderConfig& c) {
  std::int64_t n = 0;
  for (const auto& e : vkt::models::decoder_weight_entries(c)) n += e.hf_shape.elements();
  return n;
}

/// One tower count's fine-tuning step, built once (fresh weights: the speed
/// does not depend on them) and timed in rounds.
struct TimedTowers {
  int towers;
  vkt::EstimatorSpec spec;
  vkt::HostBatch features, labels;
};

TimedTowers build_towers(vkt::Instance& instance, int n, const Flags& f,
                         const std::shared_ptr<const vkt::models::PretrainedDecoder>& model) {
  const std::int64_t b = f.batch, t = f.context;
  std::mt19937 rng(5);
  std::vector<std::int32_t> tokens, next;
  for (std::int64_t i = 0; i < b * t; ++i) {
    tokens.push_back(static_cast<std::int32_t>(rng() % f.vocab));
    next.push_back(static_cast<std::int32_t>(rng() % f.vocab));
  }
  const vkt::Precision precision = vkt::parse_precision(f.precision, "--precision");
  const vkt::models::CausalLmSettings settings{
      .decoder = {.lora = vkt::layers::LoraOptions{.rank = f.lora_rank,
                                                   .alpha = 2.0f * static_cast<float>(f.lora_rank),
                                                   .base_dtype = precision == vkt::Precision::F32
                                                                     ? vkt::DType::F32
                                                                     : vkt::DType::BF16}}};
  const auto replicated = vkt::replicate_model_fn(
      vkt::models::causal_lm_model_fn(model, settings),
      {.loss_reduction = vkt::LossReduction::Mean,
       .devices = std::vector<std::uint32_t>(static_cast<std::size_t>(n), 0),
       .precision = precision});
  vkt::ModelContext root(instance, {{"tokens", {{b, t}, vkt::DType::I32}}},
                         {{"next", {{b, t}, vkt::DType::I32}}});
  TimedTowers run{n,
                  replicated(root, {}, {}, vkt::Mode::Train, {}),
                  {{"tokens", vkt::HostTensor::ints({b, t}, tokens)}},
                  {{"next", vkt::HostTensor::ints({b, t}, next)}}};
  run.spec.run->train_step(run.features, run.labels);  // warm-up: pipelines compile
  (void)run.spec.run->loss();
  return run;
}

double tokens_per_s(TimedTowers& run, const Flags& f) {
  const auto start = Clock::now();
  for (int s = 0; s < f.steps; ++s) run.spec.run->train_step(run.features, run.labels);
  (void)run.spec.run->loss();  // the last queued step ends here
  return static_cast<double>(f.batch * f.context * f.steps) / seconds_since(start);
}

std::optional<std::map<std::string, std::string>> pytorch(const Flags& f, bool generate) {
  const std::optional<std::string> python = vkt::bench::torch_python();
  if (!python) {
    fmt::print("pytorch: skipped, no python3 here imports torch (apt-get install python3-torch)\n");
    return std::nullopt;
  }
  const std::string args = fmt::format(
      "--vocab {} --hidden {} --layers {} --heads {} --kv-heads {} --intermediate {} --context {} "
      "--batch {} --lora-rank {} --lora-alpha {} --steps {} --threads 2 --precision {} --device {} "
      "{}",
      f.vocab, f.hidden, f.layers, f.heads, f.kv_heads, f.intermediate, f.context, f.batch,
      f.lora_rank, 2 * f.lora_rank, f.torch_steps, f.precision, f.torch_device,
      generate ? fmt::format("--skip-train --generate-tokens {}", f.generate_tokens)
               : std::string("--skip-generate"));
  const std::string script = vkt::bench::bench_script(VKT_BENCH_DIR, "pytorch_finetune.py");
  auto values = vkt::bench::run_torch_script(
      *python, script, args, generate ? "pytorch_generate_tokens_per_s" : "pytorch_tokens_per_s");
  if (!values) fmt::print("pytorch: {} failed (its output is above)\n", script);
  return values;
}

void compare_training(vkt::Instance& instance, const Flags& f,
                      const std::shared_ptr<const vkt::models::PretrainedDecoder>& model) {
  std::vector<TimedTowers> runs;
  for (const int n : f.towers) {
    if (f.batch % n == 0) runs.push_back(build_towers(instance, n, f, model));
  }
  std::vector<double> best(runs.size(), 0.0), ratios;
  double theirs_best = 0;
  std::string theirs_precision;
  for (int round = 0; round < f.rounds; ++round) {
    std::string line = fmt::format("round {}:", round + 1);
    double ours = 0;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const double r = tokens_per_s(runs[i], f);
      best[i] = std::max(best[i], r);
      ours = std::max(ours, r);
      line += fmt::format(" {} tower{} {:.0f} tokens/s;", runs[i].towers,
                          runs[i].towers == 1 ? "" : "s", r);
    }
    if (!f.skip_torch) {
      if (const auto torch = pytorch(f, false)) {
        const double theirs = std::stod(torch->at("pytorch_tokens_per_s"));
        theirs_precision = torch->at("torch_precision");
        theirs_best = std::max(theirs_best, theirs);
        ratios.push_back(ours / theirs);
        line += fmt::format(" pytorch {:.0f} tokens/s; ratio {:.3f}", theirs, ratios.back());
      }
    }
    fmt::print("{}\n", line);
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    fmt::print("finetune_towers_{}_tokens_per_s={:.1f}\n", runs[i].towers, best[i]);
  }
  if (ratios.empty()) return;
  fmt::print("pytorch_finetune_tokens_per_s={:.1f}\n", theirs_best);
  fmt::print("finetune_vs_pytorch_ratio={:.3f}\n", median(ratios));
  fmt::print("finetune_{}_vs_pytorch_{}_ratio={:.3f}\n", f.precision, theirs_precision,
             median(ratios));
}

/// Tokens/s of generating f.generate_tokens after an 8-token prompt: with the
/// cache (one single-token step each), and by recomputation (the whole
/// sequence, padded to its final length, through the full decoder for every
/// token: what sampling without a cache costs).
void compare_generation(vkt::Device& device, const Flags& f,
                        const vkt::models::PretrainedDecoder& model) {
  const std::vector<std::int32_t> prompt{1, 2, 3, 4, 5, 6, 7, 8};
  const std::int64_t length = 8 + f.generate_tokens;
  vkt::models::Generator generator(device, model.config, model.weights, {}, length);
  (void)generator.generate(prompt, {.max_new_tokens = 2});  // warm-up
  auto start = Clock::now();
  const std::vector<std::int32_t> cached =
      generator.generate(prompt, {.max_new_tokens = f.generate_tokens});
  const double cached_rate = static_cast<double>(cached.size()) / seconds_since(start);

  vkt::Graph g(device);
  const vkt::Tensor tokens = g.input("tokens", {1, length}, vkt::DType::I32);
  std::vector<std::int32_t> steps(static_cast<std::size_t>(length));
  std::iota(steps.begin(), steps.end(), 0);
  const vkt::Tensor logits = vkt::models::decoder_logits(
      tokens, g.constant_i32(vkt::Shape{length}, steps), model.config, model.weights);
  vkt::Executor full(g, {logits}, {.training = false});
  std::vector<std::int32_t> sequence = prompt;
  sequence.resize(static_cast<std::size_t>(length), 0);
  const std::int64_t v = model.config.vocab_size;
  // As many tokens as the budget of the cached run's time allows, at least 8.
  const std::int64_t count = std::min<std::int64_t>(f.generate_tokens, 16);
  start = Clock::now();
  for (std::int64_t i = 0; i < count; ++i) {
    full.feed("tokens", sequence);
    full.run();
    const std::vector<float> all = full.read(logits);
    const std::size_t at = static_cast<std::size_t>(7 + i) * static_cast<std::size_t>(v);
    sequence[static_cast<std::size_t>(8 + i)] = vkt::models::pick_token(
        std::span<const float>(all.data() + at, static_cast<std::size_t>(v)), {}, 0.0);
  }
  const double full_rate = static_cast<double>(count) / seconds_since(start);
  const bool same = std::equal(cached.begin(), cached.begin() + count, sequence.begin() + 8);
  fmt::print(
      "generation: {} tokens with the cache at {:.1f} tokens/s; recomputing {} tokens of "
      "{} at {:.2f} tokens/s; the same tokens: {}\n",
      cached.size(), cached_rate, count, length, full_rate, same ? "yes" : "NO");
  fmt::print("generate_cached_tokens_per_s={:.2f}\n", cached_rate);
  fmt::print("generate_recompute_tokens_per_s={:.3f}\n", full_rate);
  fmt::print("generate_cache_speedup={:.2f}\n", cached_rate / full_rate);
  if (!f.skip_torch) {
    if (const auto torch = pytorch(f, true)) {
      const double theirs = std::stod(torch->at("pytorch_generate_tokens_per_s"));
      fmt::print("pytorch_generate_tokens_per_s={:.2f}\n", theirs);
      fmt::print("generate_vs_pytorch_ratio={:.3f}\n", cached_rate / theirs);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "vkt-bench-finetune: LoRA fine-tuning and cached generation of a Llama-shaped "
      "decoder, against PyTorch on the same device in the same run"};
  Flags f;
  app.add_option("--vocab", f.vocab)->capture_default_str();
  app.add_option("--hidden", f.hidden)->capture_default_str();
  app.add_option("--layers", f.layers)->capture_default_str();
  app.add_option("--heads", f.heads)->capture_default_str();
  app.add_option("--kv-heads", f.kv_heads)->capture_default_str();
  app.add_option("--intermediate", f.intermediate)->capture_default_str();
  app.add_option("--context", f.context)->capture_default_str();
  app.add_option("--batch", f.batch)->capture_default_str();
  app.add_option("--lora-rank", f.lora_rank)->capture_default_str();
  app.add_option("--steps", f.steps, "timed steps per round")->capture_default_str();
  app.add_option("--rounds", f.rounds)->capture_default_str();
  app.add_option("--torch-steps", f.torch_steps, "PyTorch's timed steps per round")
      ->capture_default_str();
  app.add_option("--towers", f.towers)->capture_default_str();
  app.add_option("--precision", f.precision)->capture_default_str();
  app.add_option("--generate-tokens", f.generate_tokens)->capture_default_str();
  app.add_option("--torch-device", f.torch_device, "auto|cpu|cuda: where PyTorch runs")
      ->capture_default_str();
  app.add_flag("--no-torch", f.skip_torch, "skip the PyTorch reference");
  app.add_flag("--no-generate", f.skip_generate, "skip the generation part");
  CLI11_PARSE(app, argc, argv);
  try {
    vkt::Instance instance;
    if (f.torch_device == "auto") f.torch_device = instance.device(0).is_lavapipe ? "cpu" : "cuda";
    const char* threads = std::getenv("LP_NUM_THREADS");
    const char* core = std::getenv("OPENBLAS_CORETYPE");
    fmt::print("device 0: {}, LP_NUM_THREADS={}, OPENBLAS_CORETYPE={}\n", instance.device(0).name,
               threads ? threads : "unset", core ? core : "unset");
    auto model = std::make_shared<vkt::models::PretrainedDecoder>();
    model->config = llama_config(f);
    fmt::print(
        "model: Llama-shaped, {} layers, width {}, {} heads over {} key/value heads, "
        "MLP {}, vocabulary {}: {:.1f}M parameters; LoRA rank {} on q, k, v, o; "
        "batch {} x context {}; {}\n",
        f.layers, f.hidden, f.heads, f.kv_heads, f.intermediate, f.vocab,
        static_cast<double>(parameters(model->config)) / 1e6, f.lora_rank, f.batch, f.context,
        f.precision);
    compare_training(instance, f, model);
    if (!f.skip_generate) {
      vkt::Device device(instance, 0);
      compare_generation(device, f, *model);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "vkt-bench-finetune: {}\n", e.what());
    return 1;
  }
  return 0;
}
