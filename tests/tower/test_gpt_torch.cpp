// vkt-gpt's model (samples/vkt_gpt/gpt_model.h: token and position
// embeddings, two pre-LayerNorm blocks, attention fused and composed, AdamW with
// decay on the matrices and Adam on the rest, a cosine rate after a warm-up,
// each optimizer clipping its gradients to a global norm of 1) trained 10
// steps on 1 tower, against PyTorch in float64 from the same initial weights
// on the same batches (tests/torch_gpt_reference.py): every step's loss and
// every variable within 1e-4 (norm-wise relative). Dropout is off (the masks
// are drawn differently). The token table's update is lazy (optimizer.h: the
// batch's rows only), which the PyTorch side does by hand; one case draws
// batches from a few ids only, so most rows sit out most steps; tied, the
// table's gradient is the lookup's rows and the logits' product summed, dense.
// Skipped, with a warning, where no python3 imports torch.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <vktower/runtime/io/npy.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>

#include "../../samples/vkt_gpt/gpt_model.h"
#include "../test_support.h"
#include "../torch_support.h"
#include "../tower_devices.h"

using vkt::HostTensor;

namespace {

constexpr std::int64_t kVocab = 11, kBatch = 4, kTime = 6;
constexpr int kSteps = 10;

const GptSettings kBase{.vocab = kVocab,
                        .context = kTime,
                        .width = 16,
                        .layers = 2,
                        .heads = 2,
                        .dropout = 0.0,
                        .learning_rate = 0.01,
                        .weight_decay = 0.1,
                        .steps = kSteps};

/// A batch of tokens [kBatch, kTime] and the next tokens: with `every_token`
/// holding every id at least once; else ids 0..6 only, mostly 0..2, so most
/// rows of the table sit out most steps (the lazy update's case).
std::pair<std::vector<std::int32_t>, std::vector<std::int32_t>> batch_of_step(int step,
                                                                              bool every_token) {
  std::mt19937 rng(900 + step);
  std::vector<std::int32_t> tokens(kBatch * kTime);
  const auto first = every_token ? tokens.begin() + kVocab : tokens.begin();
  if (every_token) std::iota(tokens.begin(), first, 0);
  for (auto it = first; it != tokens.end(); ++it) {
    const std::uint32_t r = rng();
    *it = static_cast<std::int32_t>(every_token ? r % kVocab : (r % 8 == 0 ? r % 7 : r % 3));
  }
  std::shuffle(tokens.begin(), tokens.end(), rng);
  std::vector<std::int32_t> next(tokens.size());
  for (auto& v : next) v = static_cast<std::int32_t>(rng() % kVocab);
  return {tokens, next};
}

std::string npy_name(const std::string& prefix, std::string name) {
  std::replace(name.begin(), name.end(), '/', '.');
  return prefix + "." + name + ".npy";
}

}  // namespace

TEST_CASE(
    "vkt-gpt's model trained 10 steps on 1 tower matches PyTorch in float64: fused attention, "
    "composed, tied weights, and a table most of whose rows sit out",
    "[torch][gpt][towers]") {
  const std::optional<std::string> python = vkt::test::torch_python();
  if (!python) {
    WARN(vkt::test::kNoTorch);
    return;
  }
  GptSettings settings = kBase;
  struct Case {
    std::string attention;
    bool tied, every_token;
  };
  const Case c = GENERATE(Case{"fused", false, true}, Case{"composed", false, true},
                          Case{"fused", true, true}, Case{"composed", false, false});
  settings.attention = c.attention;
  settings.tie_weights = c.tied;
  INFO("attention " << c.attention << ", tied weights " << c.tied << ", every token in every batch "
                    << c.every_token);
  const vkt::test::TempDir dir;
  vkt::Instance instance;
  const auto replicated = vkt::replicate_model_fn(gpt_model, {.devices = {0}});
  vkt::ModelContext root(instance, {{"tokens", {{kBatch, kTime}, vkt::DType::I32}}},
                         {{"next", {{kBatch, kTime}, vkt::DType::I32}}}, {.seed = 3});
  root.set_device_pool(&vkt::test::tower_devices());
  const vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, to_params(settings));

  std::vector<std::string> names;
  for (const vkt::Tensor& v : spec.run->tower_graph(0).trainable_variables()) {
    names.push_back(v.name());
    vkt::write_npy((dir.path / npy_name("init", v.name())).string(), v.shape().dims(),
                   spec.run->variable(v.name()));
  }
  // wte, wpe; 12 per block; ln_f; lm_head's kernel (unless tied) and bias
  REQUIRE(names.size() == (settings.tie_weights ? 29u : 30u));
  std::vector<float> losses;
  for (int step = 0; step < kSteps; ++step) {
    const auto [tokens, next] = batch_of_step(step, c.every_token);
    vkt::write_npy((dir.path / ("tokens." + std::to_string(step) + ".npy")).string(),
                   {kBatch, kTime}, tokens);
    vkt::write_npy((dir.path / ("next." + std::to_string(step) + ".npy")).string(), {kBatch, kTime},
                   next);
    spec.run->train_step({{"tokens", HostTensor::ints({kBatch, kTime}, tokens)}},
                         {{"next", HostTensor::ints({kBatch, kTime}, next)}});
    losses.push_back(spec.run->loss());
  }

  const std::string command =
      vkt::test::torch_reference_command(*python, "torch_gpt_reference.py", dir.path, kSteps);
  INFO(command);
  REQUIRE(std::system(command.c_str()) == 0);

  CHECK(vkt::test::norm_relative(losses, vkt::read_npy((dir.path / "loss.npy").string()).f32) <
        1e-4);
  for (const std::string& name : names) {
    INFO(name);
    const vkt::NpyArray torch = vkt::read_npy((dir.path / npy_name("final", name)).string());
    std::vector<float> initial = vkt::read_npy((dir.path / npy_name("init", name)).string()).f32;
    std::vector<float> got = spec.run->variable(name), want = torch.f32;
    if (name.ends_with("qkv/bias")) {
      // The key bias adds q.b to every score of a row, which softmax ignores:
      // its gradient is 0 but for rounding noise, which Adam scales to whole
      // steps (float32 and float64 noise differ). It changes no output; the
      // query and value biases are compared.
      const auto d = static_cast<std::ptrdiff_t>(settings.width);
      got.erase(got.begin() + d, got.begin() + 2 * d);
      want.erase(want.begin() + d, want.begin() + 2 * d);
      initial.erase(initial.begin() + d, initial.begin() + 2 * d);
    }
    CHECK(vkt::test::norm_relative(got, want) < 1e-4);
    if (c.every_token || name != "wte") {
      CHECK(vkt::test::norm_relative(got, initial) > 1e-3);  // it trained
    }
  }
}
