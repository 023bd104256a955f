// A 2-layer GPT (token and position embeddings, pre-LayerNorm transformer
// blocks with causal attention, dropout) trained by the Estimator: 2 and 4
// towers in every variable mode train what 1 tower does on the global batch,
// and a run resumed mid-way ends with the bits of one that ran straight.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/embedding.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>

#include "../estimator_support.h"
#include "../gpt_fixture.h"
#include "../test_support.h"
#include "../tower_devices.h"

using vkt::HostTensor;
using vkt::Tensor;
using vkt::test::gpt;
using vkt::test::kGptVariables;
using vkt::test::TempDir;
using vkt::test::token_windows;

namespace {

vkt::RunConfig quiet(const std::string& dir) {
  return vkt::test::quiet_config(dir, 4);
}

vkt::ModelFn on_towers(int towers, vkt::VariableMode mode) {
  return vkt::replicate_model_fn(
      gpt(mode != vkt::VariableMode::SharedLocalParameterServer),
      {.devices = std::vector<std::uint32_t>(static_cast<std::size_t>(towers), 0),
       .variable_mode = mode});
}

vkt::InputFn windows_of(const vkt::Dataset& data) {
  return vkt::dataset_input(data, {.batch_size = 8,
                                   .epochs = 0,
                                   .shuffle_seed = 2,
                                   .drop_remainder = true,
                                   .label_columns = {"next"}});
}

}  // namespace

TEST_CASE(
    "a 2-layer GPT with dropout on 2 and 4 towers, every variable mode, trains what 1 tower "
    "does on the global batch",
    "[estimator][transformer][dropout]") {
  const vkt::Dataset data = token_windows(40);
  const auto train = [&](int towers, vkt::VariableMode mode) {
    TempDir dir;
    vkt::Estimator estimator(on_towers(towers, mode), quiet(dir.path));
    REQUIRE(estimator.train(windows_of(data), {.steps = 3}) == 3);
    return vkt::test::variables_of(estimator, kGptVariables);
  };
  for (const vkt::VariableMode mode :
       {vkt::VariableMode::SharedLocalParameterServer, vkt::VariableMode::Mirrored,
        vkt::VariableMode::RoundRobin}) {
    // One tower with the same kind of token-table gradient.
    const std::vector<float> one = train(1, mode);
    for (const int towers : {2, 4}) {
      INFO(towers << " towers, variable mode " << static_cast<int>(mode));
      const std::vector<float> n = train(towers, mode);
      // Float reassociation of the towers' sums only (a mask drawn by tower
      // moves weights by Adam's steps of 0.01).
      const float worst = vkt::test::worst_difference(n, one);
      CHECK(worst < 5e-5f);
    }
  }
}

TEST_CASE("a GPT with dropout resumed mid-run ends with the bits of an uninterrupted run",
          "[estimator][transformer][resume]") {
  const vkt::Dataset data = token_windows(40);
  TempDir straight, resumed;
  {
    vkt::Estimator whole(on_towers(2, vkt::VariableMode::SharedLocalParameterServer),
                         quiet(straight.path));
    REQUIRE(whole.train(windows_of(data), {.steps = 4}) == 4);
  }
  {
    vkt::Estimator first(on_towers(2, vkt::VariableMode::SharedLocalParameterServer),
                         quiet(resumed.path));
    REQUIRE(first.train(windows_of(data), {.steps = 2}) == 2);
  }
  vkt::Estimator second(on_towers(2, vkt::VariableMode::SharedLocalParameterServer),
                        quiet(resumed.path));
  REQUIRE(second.train(windows_of(data), {.steps = 2}) == 4);
  const std::string a = vkt::test::read_file(straight / "ckpt-4.safetensors");
  REQUIRE(a.size() > 1000);
  const bool same = a == vkt::test::read_file(resumed / "ckpt-4.safetensors");  // not printed
  CHECK(same);
  // It learns: the loss after training is below the uniform guess, log 13.
  const double loss =
      second.evaluate(vkt::dataset_input(data, {.batch_size = 8, .label_columns = {"next"}}))
          .at("loss");
  CHECK(loss < std::log(13.0));
}
