// The Estimator across processes (mpirun -np 2): each rank trains on its slice
// of every global batch, evaluation counts every example once (the last
// batch's padding may fill a whole rank's slice), predictions come back on
// rank 0 in input order, only rank 0 writes checkpoints, and a resumed run is
// bit-exact. Each rank has a model_dir of its own (as on hosts without a
// shared filesystem): rank 0's checkpoints reach the others through MPI.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <variant>

#include <vktower/runtime/io/dataset.h>
#include <vktower/runtime/mpi/process_group.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>

#include "../estimator_support.h"
#include "../gpt_fixture.h"
#include "../test_support.h"
#include "../tower/estimator_models.h"

using Catch::Matchers::Contains;

using vkt::HostTensor;
using vkt::Tensor;
using vkt::test::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kRows = 70;

/// The 70 examples every rank regenerates.
vkt::Dataset make_data() {
  return vkt::test::estimator::make_data(kRows, 4);
}

using vkt::test::estimator::mlp;  // Adam at 0.05; Params "dropout" drops from its hidden layer

struct Result {
  std::map<std::string, double> metrics;
  HostTensor logits;
};

/// Trains to `steps` (from whatever model_dir holds), evaluates and predicts.
Result run(const std::string& dir, bool mpi, int towers, std::uint64_t steps) {
  vkt::Estimator estimator(
      vkt::replicate_model_fn(mlp, {.devices = std::vector<std::uint32_t>(towers, 0)}),
      {.model_dir = dir,
       .random_seed = 5,
       .save_checkpoints_steps = 0,
       .log_step_count_steps = 0,
       .progress = false,
       .plot_loss = false,
       .mpi = mpi});
  const vkt::Dataset data = make_data();
  estimator.train(
      vkt::dataset_input(
          data, {.batch_size = 8, .epochs = 0, .shuffle_seed = 11, .drop_remainder = true}),
      {.max_steps = steps});
  Result r;
  r.metrics = estimator.evaluate(vkt::dataset_input(data, {.batch_size = 16}));
  const vkt::HostBatch predictions =
      estimator.predict(vkt::dataset_input(data, {.batch_size = 16}));
  if (predictions.count("logits")) r.logits = predictions.at("logits");
  return r;
}

}  // namespace

TEST_CASE("an Estimator on 2 processes trains, evaluates and predicts as 1 process with 4 towers",
          "[mpi]") {
  const bool chief = vkt::mpi_world().rank() == 0;
  TempDir mine, alone;  // each rank its own directories
  const Result many = run(mine.path.string(), true, 2, 10);
  const Result one = run(alone.path.string(), false, 4, 10);
  CHECK(many.metrics.at("examples") == kRows);
  CHECK(many.metrics.at("global_step") == 10);
  CHECK(std::abs(many.metrics.at("loss") - one.metrics.at("loss")) <= 1e-5);
  CHECK(std::abs(many.metrics.at("accuracy") - one.metrics.at("accuracy")) <= 1e-9);
  if (chief) {  // rank 0 has every prediction, in input order
    REQUIRE(many.logits.rows() == kRows);
    for (std::size_t i = 0; i < one.logits.f32.size(); ++i) {
      CHECK(std::abs(many.logits.f32[i] - one.logits.f32[i]) <= 1e-5);
    }
  } else {  // the others have none, and no checkpoint of their own
    CHECK(many.logits.rows() == 0);
    CHECK(!fs::exists(mine.path / "checkpoint"));
  }
}

TEST_CASE("a 2-process Estimator resumed from its checkpoint is bit-exact", "[mpi]") {
  TempDir resumed, straight;
  run(resumed.path.string(), true, 2, 4);
  const Result second = run(resumed.path.string(), true, 2, 9);
  const Result whole = run(straight.path.string(), true, 2, 9);
  CHECK(second.metrics == whole.metrics);
  CHECK(second.logits.f32 == whole.logits.f32);
}

TEST_CASE(
    "with dropout, 2 processes x 1 tower train what 1 process x 2 towers does, and every rank "
    "reads the variables after train()",
    "[mpi]") {
  const auto train = [](const std::string& dir, bool mpi, int towers) {
    vkt::Estimator estimator(
        vkt::replicate_model_fn(mlp, {.devices = std::vector<std::uint32_t>(towers, 0)}),
        {.model_dir = dir,
         .random_seed = 5,
         .log_step_count_steps = 0,
         .progress = false,
         .plot_loss = false,
         .mpi = mpi},
        {{"dropout", 0.3}});
    estimator.train(vkt::dataset_input(
                        make_data(),
                        {.batch_size = 8, .epochs = 0, .shuffle_seed = 11, .drop_remainder = true}),
                    {.steps = 6});
    // Rank 1's model_dir holds no checkpoint: it answers from its trained model.
    return vkt::test::variables_of(estimator,
                                   std::vector<const char*>{"hidden/kernel", "out/kernel"});
  };
  TempDir mine, alone;
  const std::vector<float> many = train(mine.path.string(), true, 1);
  const std::vector<float> one = train(alone.path.string(), false, 2);
  // The same masks (each example's by its row of the global batch), the
  // gradients summed in another order: float reassociation only; masks drawn
  // by rank or tower move the weights by ~1e-2 (Adam's steps of 0.05).
  const float worst = vkt::test::worst_difference(many, one);
  CHECK(worst < 1e-4f);
}

TEST_CASE("2 processes x 2 towers refuse a global batch of 18 naming 18 and the 4 towers",
          "[mpi]") {
  TempDir dir;
  vkt::Estimator estimator(vkt::replicate_model_fn(mlp, {.devices = {0, 0}}),
                           {.model_dir = dir.path.string(), .progress = false, .mpi = true});
  CHECK_THAT(vkt::test::error_of([&] {
               estimator.train(
                   vkt::dataset_input(make_data(),
                                      {.batch_size = 18, .epochs = 0, .drop_remainder = true}),
                   {.steps = 1});
             }),
             Contains("the global batch of 18 examples") &&
                 Contains("does not divide among 4 towers (2 processes x 2); use a batch size "
                          "that is a multiple of 4"));
}

TEST_CASE("rank 0's failed save stops every rank at that step with its message, not a timeout",
          "[mpi]") {
  vkt::ProcessGroup& world = vkt::mpi_world();
  TempDir dir;
  // Rank 0's checkpoint of step 4 cannot take its name: a directory holds it.
  if (world.rank() == 0) fs::create_directory(dir.path / "ckpt-4.safetensors");
  vkt::Estimator estimator(vkt::replicate_model_fn(mlp, {.devices = {0}}),
                           {.model_dir = dir.path.string(),
                            .random_seed = 5,
                            .save_checkpoints_steps = 2,
                            .log_step_count_steps = 0,
                            .progress = false,
                            .plot_loss = false,
                            .mpi = true,
                            .process_timeout_s = 30});
  const auto started = std::chrono::steady_clock::now();
  const std::string error = vkt::test::error_of([&] {
    estimator.train(vkt::dataset_input(
                        make_data(),
                        {.batch_size = 8, .epochs = 0, .shuffle_seed = 11, .drop_remainder = true}),
                    {.max_steps = 8});
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  CHECK_THAT(error,
             Contains("training stopped at global step 4, its checkpoint could not be saved") &&
                 Contains("ckpt-4.safetensors") && Contains("ckpt-2.safetensors"));
  // Every rank says the same, and none waited for the exchange to time out.
  const std::vector<std::string> all = world.allgather(error, "the failed save's messages");
  CHECK(std::all_of(all.begin(), all.end(), [&](const std::string& e) { return e == error; }));
  CHECK(seconds < 30);
}

TEST_CASE(
    "a 2-layer GPT with dropout on 2 processes x 1 tower trains what 1 process x 2 towers does",
    "[mpi]") {
  const auto train = [](const std::string& dir, bool mpi, int towers) {
    vkt::Estimator estimator(
        vkt::replicate_model_fn(vkt::test::gpt(false),
                                {.devices = std::vector<std::uint32_t>(towers, 0)}),
        {.model_dir = dir,
         .random_seed = 4,
         .log_step_count_steps = 0,
         .progress = false,
         .plot_loss = false,
         .mpi = mpi});
    estimator.train(vkt::dataset_input(vkt::test::token_windows(40), {.batch_size = 8,
                                                                      .epochs = 0,
                                                                      .shuffle_seed = 2,
                                                                      .drop_remainder = true,
                                                                      .label_columns = {"next"}}),
                    {.steps = 3});
    return vkt::test::variables_of(estimator, vkt::test::kGptVariables);
  };
  TempDir mine, alone;
  const std::vector<float> many = train(mine.path.string(), true, 1);
  const std::vector<float> one = train(alone.path.string(), false, 2);
  const float worst = vkt::test::worst_difference(many, one);
  CHECK(worst < 5e-5f);
}

TEST_CASE(
    "a checkpoint of 2 processes x 1 tower resumes on 1 process x 4 towers, and one of 1 x 4 on "
    "2 x 1, as the uninterrupted run goes on",
    "[mpi][elastic]") {
  const auto train = [](const std::string& dir, bool mpi, int towers, std::uint64_t to_step) {
    vkt::Estimator estimator(
        vkt::replicate_model_fn(mlp, {.devices = std::vector<std::uint32_t>(towers, 0)}),
        {.model_dir = dir,
         .random_seed = 5,
         .save_checkpoints_steps = 0,
         .log_step_count_steps = 0,
         .progress = false,
         .plot_loss = false,
         .mpi = mpi},
        {{"dropout", 0.3}});
    const std::uint64_t reached = estimator.train(
        vkt::dataset_input(
            make_data(),
            {.batch_size = 8, .epochs = 0, .shuffle_seed = 11, .drop_remainder = true}),
        {.max_steps = to_step});
    CHECK(reached == to_step);
    return vkt::test::variables_of(estimator,
                                   std::vector<const char*>{"hidden/kernel", "out/kernel"});
  };
  const bool chief = vkt::mpi_world().rank() == 0;
  TempDir straight, there, back;  // each rank its own directories
  // The uninterrupted run, on each rank alone.
  const std::vector<float> whole = train(straight.path.string(), false, 1, 6);
  // 2 x 1 -> 1 x 4: rank 0 alone resumes from the checkpoint it wrote.
  train(there.path.string(), true, 1, 3);
  if (chief) {
    const float worst = vkt::test::worst_difference(train(there.path.string(), false, 4, 6), whole);
    CHECK(worst < 2e-5f);
  }
  // 1 x 4 -> 2 x 1: every rank writes its own checkpoint; rank 0's is read and
  // reaches rank 1 through MPI.
  train(back.path.string(), false, 4, 3);
  const float worst = vkt::test::worst_difference(train(back.path.string(), true, 1, 6), whole);
  CHECK(worst < 2e-5f);
}

TEST_CASE("2 processes x 2 towers with shards of 3:1 train what 1 process x 1 tower does",
          "[mpi][unequal_shards]") {
  const auto train = [](const std::string& dir, bool mpi, std::vector<std::uint32_t> devices,
                        std::vector<double> weights) {
    vkt::Estimator estimator(vkt::replicate_model_fn(mlp, {.devices = std::move(devices),
                                                           .shard_weights = std::move(weights)}),
                             {.model_dir = dir,
                              .random_seed = 5,
                              .log_step_count_steps = 0,
                              .progress = false,
                              .plot_loss = false,
                              .mpi = mpi},
                             {{"dropout", 0.3}});
    estimator.train(
        vkt::dataset_input(
            make_data(),
            {.batch_size = 16, .epochs = 0, .shuffle_seed = 11, .drop_remainder = true}),
        {.steps = 4});
    return vkt::test::variables_of(estimator,
                                   std::vector<const char*>{"hidden/kernel", "out/kernel"});
  };
  TempDir mine, alone;
  const std::vector<float> many = train(mine.path.string(), true, {0, 0}, {3, 1});
  const std::vector<float> one = train(alone.path.string(), false, {0}, {});
  CHECK(vkt::test::worst_difference(many, one) < 1e-4f);
}
