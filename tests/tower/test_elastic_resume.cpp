// Resuming on another tower count: a checkpoint written by T towers resumes on
// T' towers with the same global batch and data order, and the run goes on as
// an uninterrupted one on T' towers would, up to the float reassociation of the
// gradient sum. The checkpoint holds nothing of the tower count: masters,
// slots (sparse ones too), the loss scale and the global step, from which the
// input resumes.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <vktower/runtime/io/checkpoint.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>

#include "../dropout_mlp_fixture.h"

using Catch::Matchers::Contains;
using vkt::HostTensor;
using vkt::Tensor;
using vkt::test::TempDir;

namespace {

constexpr std::int64_t kRows = 48, kBatch = 12;

/// The fixture's classifier data, and for the sparse model "ids" (few distinct
/// ids: rows repeat within and across every tower's shard).
vkt::Dataset make_data(bool sparse) {
  vkt::Dataset data = vkt::test::classification_data(kRows, 6, 3, 4);
  if (!sparse) return data;
  std::vector<std::int32_t> ids(kRows * 2);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7) % 6);
  vkt::HostBatch columns = data.columns();
  columns.emplace("ids", HostTensor::ints({kRows, 2}, ids));
  return vkt::Dataset(std::move(columns));
}

struct Setup {
  vkt::VariableMode mode = vkt::VariableMode::SharedLocalParameterServer;
  bool sparse = false;  // an embedding table beside the dense features
  int accumulate = 1;
  vkt::Precision precision = vkt::Precision::F32;
  bool loss_scaled = false;
};

/// Trains `setup`'s model on `towers` towers in `dir` for `steps` more steps;
/// returns the global step reached and whether it resumed.
std::pair<std::uint64_t, bool> train(const Setup& setup, int towers, const std::string& dir,
                                     std::uint64_t steps) {
  vkt::ReplicateOptions options{
      .devices = std::vector<std::uint32_t>(static_cast<std::size_t>(towers), 0),
      .variable_mode = setup.mode,
      .precision = setup.precision,
      .loss_scaling = setup.loss_scaled ? vkt::LossScaling::Dynamic : vkt::LossScaling::Off};
  // A small scale (2^16 overflows this model's f16 products) that doubles
  // every 2 good steps, so the scale and its count change during the run.
  options.loss_scale = {.initial_scale = 1024.0f, .growth_interval = 2};
  vkt::RunConfig config = vkt::test::quiet_config(dir, 9);
  config.accumulate_steps = setup.accumulate;
  vkt::Estimator estimator(
      vkt::replicate_model_fn(
          vkt::test::dropout_mlp(
              {.hidden = 16, .dropout = 0.3f, .learning_rate = 0.01f, .embedding = setup.sparse}),
          options),
      config);
  const std::uint64_t reached = estimator.train(
      vkt::dataset_input(make_data(setup.sparse), {.batch_size = kBatch / setup.accumulate,
                                                   .epochs = 0,
                                                   .shuffle_seed = 3,
                                                   .drop_remainder = true}),
      {.steps = steps});
  return {reached, estimator.resumed()};
}

/// Every tensor of two checkpoints (variables, Adam's slots, the loss scale,
/// the global step) within `bound` of each other, the same names in both.
void check_same_state(const std::string& a, const std::string& b, float bound) {
  const std::map<std::string, HostTensor> x = vkt::read_safetensors(a);
  const std::map<std::string, HostTensor> y = vkt::read_safetensors(b);
  REQUIRE(x.size() == y.size());
  REQUIRE(x.size() >= 8);  // variables and slots, not an empty file
  for (const auto& [name, value] : x) {
    INFO(name);
    REQUIRE(y.count(name) == 1);
    const HostTensor& other = y.at(name);
    REQUIRE(value.f32.size() == other.f32.size());
    float worst = 0;
    for (std::size_t i = 0; i < value.f32.size(); ++i) {
      worst = std::max(worst, std::abs(value.f32[i] - other.f32[i]));
    }
    CHECK(worst <= bound);
  }
  CHECK(vkt::checkpoint_global_step(a) == vkt::checkpoint_global_step(b));
}

/// The uninterrupted run: `setup` on 1 tower for 6 steps.
struct Straight {
  explicit Straight(const Setup& setup) { REQUIRE(train(setup, 1, dir.path, 6).first == 6); }
  TempDir dir;
};

/// T towers for 3 steps, then T' towers for 3 more, against `straight`.
void check_resume(const Setup& setup, const Straight& straight, int from, int to, float bound) {
  INFO(from << " towers -> " << to << ", variable mode " << static_cast<int>(setup.mode)
            << (setup.sparse ? ", sparse" : "") << ", accumulate " << setup.accumulate << ", "
            << vkt::to_string(setup.precision) << (setup.loss_scaled ? " loss-scaled" : ""));
  TempDir resumed;
  REQUIRE(train(setup, from, resumed.path, 3) == std::pair<std::uint64_t, bool>{3, false});
  REQUIRE(train(setup, to, resumed.path, 3) == std::pair<std::uint64_t, bool>{6, true});
  check_same_state(resumed / "ckpt-6.safetensors", straight.dir / "ckpt-6.safetensors", bound);
}

// The towers' gradients are summed in another order than one tower's rows:
// ~1e-7 relative per step. A state tied to the tower count (a mask drawn by
// tower, a slot per tower, the input restarted) moves the values by ~1e-2.
constexpr float kReassociation = 2e-5f;

}  // namespace

TEST_CASE(
    "a checkpoint of 2 towers resumes on 1, of 1 on 3, of 3 on 2, and goes on as the "
    "uninterrupted run does, in every variable mode, with dropout",
    "[estimator][elastic]") {
  const Straight straight(Setup{});  // 1 tower: every variable mode trains alike
  for (const vkt::VariableMode mode :
       {vkt::VariableMode::SharedLocalParameterServer, vkt::VariableMode::Mirrored,
        vkt::VariableMode::RoundRobin}) {
    for (const auto& [from, to] : {std::pair{2, 1}, std::pair{1, 3}}) {
      check_resume({.mode = mode}, straight, from, to, kReassociation);
    }
  }
  check_resume({}, straight, 3, 2, kReassociation);
}

TEST_CASE(
    "resuming on another tower count carries sparse slots, accumulation and the loss scale "
    "over",
    "[estimator][elastic]") {
  // Sparse (embedding) gradients take the shared parameter server.
  const Setup sparse{.sparse = true};
  const Straight sparse_straight(sparse);
  check_resume(sparse, sparse_straight, 2, 1, kReassociation);
  check_resume(sparse, sparse_straight, 1, 4, kReassociation);
  // Micro-batches of 6: a global batch of 12 as before.
  const Setup accumulated{.mode = vkt::VariableMode::Mirrored, .accumulate = 2};
  check_resume(accumulated, Straight(accumulated), 3, 1, kReassociation);
  // fp16 with the scale doubling every 2 good steps; each tower rounds its
  // shard's products to f16, so the weights move within f16's unit roundoff.
  const Setup scaled{.precision = vkt::Precision::F16, .loss_scaled = true};
  const Straight scaled_straight(scaled);
  TempDir resumed;
  train(scaled, 2, resumed.path, 3);
  train(scaled, 1, resumed.path, 3);
  check_same_state(resumed / "ckpt-6.safetensors", scaled_straight.dir / "ckpt-6.safetensors",
                   std::ldexp(1.0f, -11));
  // The scale and its counts exactly (a power of two, integers).
  const auto scale_of = [](const TempDir& dir) {
    const auto state = vkt::read_safetensors((dir / "ckpt-6.safetensors"));
    return std::vector<float>{state.at("loss_scale/scale").f32.at(0),
                              state.at("loss_scale/good_steps").f32.at(0),
                              state.at("loss_scale/skipped_steps").f32.at(0)};
  };
  // 6 good steps: doubled at steps 2, 4 and 6, the count back at 0.
  CHECK(scale_of(resumed) == std::vector<float>{8192.0f, 0.0f, 0.0f});
  CHECK(scale_of(scaled_straight.dir) == scale_of(resumed));
}

TEST_CASE(
    "resuming on a tower count the global batch does not divide among is refused naming "
    "both numbers, and the checkpoint stays usable",
    "[estimator][elastic][errors]") {
  TempDir dir;
  const Setup setup{};
  train(setup, 2, dir.path, 2);
  CHECK_THAT(vkt::test::error_of([&] { train(setup, 5, dir.path, 1); }),
             Contains("batch of 12 examples") && Contains("does not divide among 5 towers"));
  CHECK(train(setup, 4, dir.path, 1) == std::pair<std::uint64_t, bool>{3, true});
}
