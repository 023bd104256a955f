// vkt-bench-gpt: vkt-gpt's model (samples/vkt_gpt/gpt_model.h: GPT-2 blocks,
// AdamW and Adam with clipping) trained on random tokens on 1 and 2 towers:
// tokens/s against the same model trained by PyTorch on the same cores (or
// CUDA on a GPU) in the same run (bench/pytorch_gpt.py); the step's device
// time by op and kernel; and the fused attention kernels' FLOP rate against
// the device's own roof (device_roof.h), all in one run.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>
#include <vktower/vktower.h>
#include "../samples/vkt_gpt/gpt_model.h"
#include "bench_util.h"
#include "device_roof.h"
#include "torch_reference.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

struct Flags {
  std::int64_t batch = 32;
  GptSettings model{.vocab = 96, .context = 64, .width = 128, .layers = 4, .heads = 4};
  int steps = 5;
  int reps = 5;
  std::vector<int> towers{1, 2};
  int rounds = 3;
  std::string precision = "fp32";
  int torch_steps = 5;
  std::string torch_device = "auto";
  bool skip_torch = false;
  bool skip_profile = false;
};

struct RandomTokens {
  std::vector<std::int32_t> tokens, next;
};

RandomTokens random_tokens(const Flags& f) {
  std::mt19937 rng(5);
  RandomTokens r;
  for (std::int64_t i = 0; i < f.batch * f.model.context; ++i) {
    r.tokens.push_back(static_cast<std::int32_t>(rng() % f.model.vocab));
    r.next.push_back(static_cast<std::int32_t>(rng() % f.model.vocab));
  }
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// One tower count's training step, built once and timed in several rounds.
struct TimedTowers {
  int towers;
  vkt::EstimatorSpec spec;
  vkt::HostBatch features, labels;
};

TimedTowers build_towers(vkt::Instance& instance, int n, const Flags& f) {
  const std::int64_t b = f.batch, t = f.model.context;
  const RandomTokens data = random_tokens(f);
  const auto replicated = vkt::replicate_model_fn(
      gpt_model, {.loss_reduction = vkt::LossReduction::Mean,
                  .devices = std::vector<std::uint32_t>(static_cast<std::size_t>(n), 0),
                  .precision = vkt::parse_precision(f.precision, "--precision")});
  vkt::ModelContext root(instance, {{"tokens", {{b, t}, vkt::DType::I32}}},
                         {{"next", {{b, t}, vkt::DType::I32}}});
  TimedTowers run{n,
                  replicated(root, {}, {}, vkt::Mode::Train, to_params(f.model)),
                  {{"tokens", vkt::HostTensor::ints({b, t}, data.tokens)}},
                  {{"next", vkt::HostTensor::ints({b, t}, data.next)}}};
  run.spec.run->train_step(run.features, run.labels);  // warm-up: pipelines compile
  (void)run.spec.run->loss();                          // and its step ends before any clock starts
  return run;
}

/// A timed loop's rates: tokens per wall-clock second and per CPU second of
/// this process (lavapipe's threads included; PyTorch's side counts its own).
struct Rate {
  double tokens_per_s = 0, tokens_per_cpu_s = 0;
  /// The precision the rate was measured at (PyTorch's CPU reference runs fp32
  /// for --precision fp16: its CPU autocast has no fp16).
  std::string precision;
};

/// `f.steps` steps as a training loop runs them: queued behind each other,
/// nothing read back until the end (last_step_times() reads the towers' device
/// times, a wait for each step, so it is left to step_parts()).
Rate time_steps(TimedTowers& run, const Flags& f) {
  const auto start = std::chrono::steady_clock::now();
  const double cpu_before = vkt::bench::process_cpu_seconds();
  for (int s = 0; s < f.steps; ++s) run.spec.run->train_step(run.features, run.labels);
  (void)run.spec.run->loss();  // train_step returns with its step queued: the last ends here
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu_s = vkt::bench::process_cpu_seconds() - cpu_before;
  const double tokens = static_cast<double>(f.batch * f.model.context) * f.steps;
  return {tokens / wall_s, tokens / cpu_s};
}

/// The host's share of a step by part, and the median time a train_step call
/// took in ms (the step runs on after it returns).
double step_parts(TimedTowers& run, const Flags& f) {
  std::vector<double> step_ms, towers_ms, reduce_ms, apply_ms, copy_ms;
  for (int s = 0; s < std::min(f.steps, 3); ++s) {
    run.spec.run->train_step(run.features, run.labels);
    const vkt::TowerRun::StepTimes& t = run.spec.run->last_step_times();
    step_ms.push_back(t.step);
    towers_ms.push_back(t.towers);
    reduce_ms.push_back(t.reduce);
    apply_ms.push_back(t.apply);
    copy_ms.push_back(t.copy_back);
  }
  fmt::print(
      "  {} tower{}: step parts (host), medians of {}: towers {:.1f} ms, reduce {:.1f} ms, "
      "apply {:.1f} ms, copy back {:.1f} ms, train_step call {:.2f} ms\n",
      run.towers, run.towers == 1 ? "" : "s", step_ms.size(), median(towers_ms), median(reduce_ms),
      median(apply_ms), median(copy_ms), median(step_ms));
  return median(step_ms);
}

/// PyTorch's rates on the same model and batch, or nothing (no torch here, or
/// the script failed; the reason is printed). `print_facts` prints the run's
/// facts (threads, BLAS core, device) once.
std::optional<Rate> pytorch_rate(const Flags& f, bool print_facts) {
  const std::optional<std::string> python = vkt::bench::torch_python();
  const std::string script = vkt::bench::bench_script(VKT_BENCH_DIR, "pytorch_gpt.py");
  if (!python) {
    fmt::print(
        "pytorch: skipped, no python3 here imports torch (apt-get install python3-torch, or set "
        "VKT_PYTHON)\n");
    return std::nullopt;
  }
  const GptSettings& m = f.model;
  const std::string args = fmt::format(
      "--batch {} --context {} --width {} --layers {} --heads {} --vocab {} --dropout {} "
      "--steps {} --threads 2 --device {} --precision {}",
      f.batch, m.context, m.width, m.layers, m.heads, m.vocab, m.dropout, f.torch_steps,
      f.torch_device, f.precision);
  const auto torch = vkt::bench::run_torch_script(*python, script, args);
  if (!torch) {
    fmt::print("pytorch: {} failed (its output is above)\n", script);
    return std::nullopt;
  }
  if (print_facts) {
    fmt::print("pytorch ({}):\n", *python);
    for (const auto& [key, value] : *torch) {
      if (key.find("per_") == std::string::npos) fmt::print("  {}={}\n", key, value);
    }
  }
  return Rate{std::stod(torch->at("pytorch_tokens_per_s")),
              std::stod(torch->at("pytorch_tokens_per_cpu_s")), torch->at("torch_precision")};
}

/// Interleaved rounds: each round times every tower count, then PyTorch.
/// Another tenant's load on the machine slows whichever side it happens to
/// overlap, so one run of each makes the ratio a coin toss. The headline ratio
/// is the median over rounds of each round's ratio (both sides timed within
/// seconds of each other: a paired comparison); the best rounds' ratio and the
/// per-CPU-second ratio (which load disturbs least) are printed beside it.
void compare_rates(vkt::Instance& instance, const Flags& f) {
  std::vector<TimedTowers> runs;
  for (const int n : f.towers) {
    if (f.batch % n != 0) {
      fmt::print("{} towers: skipped, the batch does not divide by {}\n", n, n);
      continue;
    }
    runs.push_back(build_towers(instance, n, f));
    (void)step_parts(runs.back(), f);
  }
  std::vector<Rate> best(runs.size());
  Rate theirs_best;
  std::vector<double> round_ratios;
  for (int round = 0; round < f.rounds; ++round) {
    std::string line = fmt::format("round {}:", round + 1);
    Rate ours;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const Rate r = time_steps(runs[i], f);
      best[i].tokens_per_s = std::max(best[i].tokens_per_s, r.tokens_per_s);
      best[i].tokens_per_cpu_s = std::max(best[i].tokens_per_cpu_s, r.tokens_per_cpu_s);
      ours.tokens_per_s = std::max(ours.tokens_per_s, r.tokens_per_s);
      line += fmt::format(" {} tower{} {:.0f} tokens/s ({:.0f} per CPU s);", runs[i].towers,
                          runs[i].towers == 1 ? "" : "s", r.tokens_per_s, r.tokens_per_cpu_s);
    }
    if (!f.skip_torch) {
      const std::optional<Rate> theirs = pytorch_rate(f, round == 0);
      if (theirs) {
        round_ratios.push_back(ours.tokens_per_s / theirs->tokens_per_s);
        theirs_best.tokens_per_s = std::max(theirs_best.tokens_per_s, theirs->tokens_per_s);
        theirs_best.tokens_per_cpu_s =
            std::max(theirs_best.tokens_per_cpu_s, theirs->tokens_per_cpu_s);
        theirs_best.precision = theirs->precision;
        line += fmt::format(" pytorch {:.0f} tokens/s ({:.0f} per CPU s); ratio {:.3f}",
                            theirs->tokens_per_s, theirs->tokens_per_cpu_s, round_ratios.back());
      }
    }
    fmt::print("{}\n", line);
  }
  Rate ours;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    fmt::print("gpt_towers_{}_tokens_per_s={:.1f}\n", runs[i].towers, best[i].tokens_per_s);
    ours.tokens_per_s = std::max(ours.tokens_per_s, best[i].tokens_per_s);
    ours.tokens_per_cpu_s = std::max(ours.tokens_per_cpu_s, best[i].tokens_per_cpu_s);
  }
  if (round_ratios.empty()) return;
  fmt::print("pytorch_tokens_per_s={:.1f}\n", theirs_best.tokens_per_s);
  fmt::print("gpt_vs_pytorch_ratio={:.3f}\n", median(round_ratios));
  fmt::print("gpt_vs_pytorch_{}_ratio={:.3f}\n", f.torch_device, median(round_ratios));
  // Both precisions in the name: PyTorch's CPU reference for fp16 is fp32.
  fmt::print("gpt_{}_vs_pytorch_{}_ratio={:.3f}\n", f.precision, theirs_best.precision,
             median(round_ratios));
  fmt::print("gpt_vs_pytorch_best_rounds_ratio={:.3f}\n",
             ours.tokens_per_s / theirs_best.tokens_per_s);
  fmt::print("gpt_vs_pytorch_per_cpu_second_ratio={:.3f}\n",
             ours.tokens_per_cpu_s / theirs_best.tokens_per_cpu_s);
}

/// One tower's training step on `g` (whole batch): the loss, then both
/// optimizers' updates, as a tower's step runs them.
std::vector<vkt::Tensor> training_step(vkt::Graph& g, const Flags& f) {
  const std::int64_t b = f.batch, t = f.model.context;
  const vkt::Tensor tokens = g.input("tokens", {b, t}, vkt::DType::I32);
  const vkt::Tensor next = g.input("next", {b, t}, vkt::DType::I32);
  const vkt::Tensor loss = vkt::sparse_softmax_cross_entropy(
      next, gpt_logits(g, tokens, to_params(f.model)), vkt::Tensor{}, vkt::Reduction::Mean);
  (void)gpt_train_op(g, loss, to_params(f.model));
  std::vector<vkt::Tensor> fetches{loss};
  for (const vkt::Node& node : g.nodes()) {
    if (node.op->updates_variables()) fetches.push_back(node.output);
  }
  return fetches;
}

/// The step's activation arena (what it keeps between its ops) against the
/// same model's in fp32, under a half precision.
void report_activation_bytes(vkt::Device& device, const Flags& f, const vkt::Executor& exec) {
  const double mib = static_cast<double>(exec.activation_bytes()) / (1 << 20);
  if (f.precision == "fp32") {
    fmt::print("activation arena: {:.2f} MiB\n", mib);
    return;
  }
  vkt::Graph g32(device, {.precision = vkt::Precision::F32});
  const vkt::Executor exec32(g32, training_step(g32, f), {.training = true});
  const double mib32 = static_cast<double>(exec32.activation_bytes()) / (1 << 20);
  fmt::print("activation arena: {:.2f} MiB {} against {:.2f} MiB fp32\n", mib, f.precision, mib32);
  fmt::print("gpt_{}_activation_bytes_vs_fp32_ratio={:.3f}\n", f.precision, mib / mib32);
}

/// One tower's training step by op and kernel,
/// and the fused attention kernels' GFLOP/s against the device's roof.
void report_profile(vkt::Instance& instance, const Flags& f) {
  vkt::Device device(instance, 0);
  vkt::Graph g(device, {.precision = vkt::parse_precision(f.precision, "--precision")});
  const std::int64_t b = f.batch, t = f.model.context;
  const std::vector<vkt::Tensor> fetches = training_step(g, f);
  vkt::Executor exec(g, fetches, {.training = true, .profile = true});
  report_activation_bytes(device, f, exec);
  const RandomTokens data = random_tokens(f);
  exec.feed("tokens", data.tokens);
  exec.feed("next", data.next);
  exec.run();
  exec.wait();
  std::map<std::pair<std::string, std::string>, std::vector<double>> runs;
  std::map<std::pair<std::string, std::string>, int> commands;
  for (int r = 0; r < f.reps; ++r) {
    exec.run();
    std::map<std::pair<std::string, std::string>, double> sum;
    for (const vkt::Executor::CommandProfile& c : exec.profile()) {
      sum[{c.op, c.kernel}] += c.ms;
      if (r == 0) commands[{c.op, c.kernel}] += 1;
    }
    for (const auto& [key, ms] : sum) runs[key].push_back(ms);
  }
  if (runs.empty()) {
    fmt::print("profile: skipped, the device has no timestamp queries\n");
    return;
  }
  vkt::Executor plain(g, fetches, {.training = true});
  plain.feed("tokens", data.tokens);
  plain.feed("next", data.next);
  plain.run();
  plain.wait();
  std::vector<double> wall;
  for (int r = 0; r < f.reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    plain.run();
    plain.wait();
    wall.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  fmt::print("the same step unprofiled, submit to done: {:.2f} ms (median of {})\n", median(wall),
             f.reps);
  std::vector<std::pair<double, std::pair<std::string, std::string>>> rows;
  double total = 0;
  for (const auto& [key, ms] : runs) {
    rows.push_back({*std::min_element(ms.begin(), ms.end()), key});
    total += rows.back().first;
  }
  std::sort(rows.rbegin(), rows.rend());
  fmt::print(
      "1-tower training step (batch {}), device time by op and kernel, "
      "fastest of {}: {:.2f} ms\n",
      b, f.reps, total);
  double fwd_ms = 0, bwd_ms = 0;
  for (const auto& [ms, key] : rows) {
    fmt::print("  {:7.2f} ms {:5.1f}%  {:<26} {:<26} x{}\n", ms, 100.0 * ms / total, key.first,
               key.second, commands[key]);
    if (key.first == "fused_attention") fwd_ms += ms;
    if (key.first == "attention_grad_q" || key.first == "attention_grad_kv") bwd_ms += ms;
  }
  if (fwd_ms == 0) {
    fmt::print("attention: the composed path ran (no fused kernel on this device or flag)\n");
    return;
  }
  // FlashAttention's count: 4 B H T^2 Dh forward (q k^T and p v), 2.5x that
  // backward, halved by the causal mask; every layer.
  const double dh = static_cast<double>(f.model.width) / f.model.heads;
  const double fwd_flops = 4.0 * static_cast<double>(b) * f.model.heads * static_cast<double>(t) *
                           static_cast<double>(t) * dh / 2 * f.model.layers;
  const vkt::bench::DeviceRoof roof =
      vkt::bench::measure_device_roof(device, {.measure_copy = false});
  const double fwd_gflops = fwd_flops / fwd_ms / 1e6, bwd_gflops = 2.5 * fwd_flops / bwd_ms / 1e6;
  fmt::print("device roof: {:.1f} GFLOP/s ({}, {})\n", roof.fma_gflops, roof.shape, roof.timing);
  fmt::print("attention forward: {:.2f} ms, {:.2f} GFLOP/s; backward: {:.2f} ms, {:.2f} GFLOP/s\n",
             fwd_ms, fwd_gflops, bwd_ms, bwd_gflops);
  fmt::print("attention_fwd_fraction_of_roof={:.3f}\n", fwd_gflops / roof.fma_gflops);
  fmt::print("attention_bwd_fraction_of_roof={:.3f}\n", bwd_gflops / roof.fma_gflops);
  fmt::print("attention_share_of_step={:.3f}\n", (fwd_ms + bwd_ms) / total);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "vkt-bench-gpt: vkt-gpt's model trained on 1 and 2 towers, tokens/s against PyTorch on "
      "the same cores or GPU, the step's kernels and the fused attention against the roof"};
  Flags f;
  app.add_option("--batch", f.batch, "global batch (sequences)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--context", f.model.context, "tokens per sequence")
      ->capture_default_str()
      ->check(CLI::Range(2, 4096));
  app.add_option("--width", f.model.width, "the model's width")->capture_default_str();
  app.add_option("--layers", f.model.layers, "transformer blocks")->capture_default_str();
  app.add_option("--heads", f.model.heads, "attention heads")->capture_default_str();
  app.add_option("--vocab", f.model.vocab, "vocabulary size")->capture_default_str();
  app.add_option("--attention", f.model.attention, "auto, fused or composed")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "fused", "composed"}));
  app.add_option("--steps", f.steps, "timed steps per tower count (after one warm-up)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--reps", f.reps, "profiled runs (the fastest counts)")->capture_default_str();
  app.add_option("--towers", f.towers, "tower counts, e.g. 1,2")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--precision", f.precision,
                 "fp32|fp16|bf16: the matrix products' type (ReplicateOptions::precision; "
                 "PyTorch runs under autocast to the same type)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  app.add_option("--rounds", f.rounds,
                 "interleaved timing rounds of vktower and PyTorch (each side's best counts)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--torch-steps", f.torch_steps, "PyTorch's timed steps")->capture_default_str();
  app.add_option("--torch-device", f.torch_device,
                 "PyTorch's device: auto (cpu on lavapipe, else cuda), cpu or cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_flag("--no-torch", f.skip_torch, "skip the PyTorch reference");
  app.add_flag("--no-profile", f.skip_profile, "skip the kernel profile and the roof");
  CLI11_PARSE(app, argc, argv);
  if (f.model.width % f.model.heads != 0) {
    fmt::print(stderr, "vkt-bench-gpt: --heads {} does not divide --width {}\n", f.model.heads,
               f.model.width);
    return 2;
  }
  try {
    vkt::Instance instance;
    if (f.torch_device == "auto") f.torch_device = instance.device(0).is_lavapipe ? "cpu" : "cuda";
    const char* threads = std::getenv("LP_NUM_THREADS");
    const char* core = std::getenv("OPENBLAS_CORETYPE");
    fmt::print(
        "device 0: {}, LP_NUM_THREADS={}, OPENBLAS_CORETYPE={}; GPT {} layers, width {}, {} "
        "heads, context {}, vocab {}, batch {}, attention {}\n",
        instance.device(0).name, threads ? threads : "unset", core ? core : "unset", f.model.layers,
        f.model.width, f.model.heads, f.model.context, f.model.vocab, f.batch, f.model.attention);
    compare_rates(instance, f);
    if (!f.skip_profile) report_profile(instance, f);
    return 0;
  } catch (const vkt::Error& e) {
    fmt::print(stderr, "vkt-bench-gpt: {}\n", e.what());
    return 1;
  }
}
