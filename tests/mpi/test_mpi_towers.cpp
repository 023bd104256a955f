// Towers across processes (run under mpirun -np 2): 2 processes x 2 towers
// train what 1 process x 4 towers trains, every rank holds the same bits, two
// runs give the same bits; sparse rows, the model check, evaluation,
// prediction and exact resume through the Estimator.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/sgd.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/batch_norm.h>
#include <vktower/runtime/graph/ops/cast.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/embedding.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/matmul.h>
#include <vktower/runtime/graph/ops/shape_ops.h>
#include <vktower/runtime/graph/ops/softmax.h>
#include <vktower/runtime/io/dataset.h>
#include <vktower/runtime/mpi/process_group.h>
#include <vktower/runtime/vulkan/device.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/process_batches.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>

#include "../test_support.h"
#include "../tower_devices.h"

using Catch::Matchers::Contains;
using vkt::HostBatch;
using vkt::HostTensor;
using vkt::Tensor;

namespace {

constexpr std::int64_t kBatch = 16, kIn = 7, kClasses = 5, kSteps = 20;

vkt::ProcessGroup& world() {
  return vkt::mpi_world();
}

vkt::EstimatorSpec mlp(vkt::ModelContext&, const vkt::TensorDict& f, const vkt::TensorDict& l,
                       vkt::Mode mode, const vkt::Params& params) {
  const auto width = params.count("width") ? std::get<std::int64_t>(params.at("width")) : 16;
  const Tensor h = vkt::layers::dense(f.at("x"), width, vkt::layers::Activation::Tanh, "hidden");
  const Tensor logits = vkt::layers::dense(h, kClasses, vkt::layers::Activation::None, "out");
  const Tensor loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits);
  vkt::TowerOptimizer adam([] { return std::make_unique<vkt::Adam>(0.01); });
  return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = adam.minimize(loss)};
}

struct Data {
  std::vector<HostBatch> x, y;
};

Data data() {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Data d;
  for (int s = 0; s < kSteps; ++s) {
    std::vector<float> x(kBatch * kIn);
    for (float& v : x) v = normal(rng);
    std::vector<std::int32_t> y(kBatch);
    for (auto& v : y) v = static_cast<std::int32_t>(rng() % kClasses);
    d.x.push_back({{"x", HostTensor::floats({kBatch, kIn}, x)}});
    d.y.push_back({{"y", HostTensor::ints({kBatch}, y)}});
  }
  return d;
}

using Values = std::vector<std::vector<float>>;

struct Job {
  int towers = 2;                          // per process
  vkt::ProcessGroup* processes = nullptr;  // null: this process alone
  vkt::VariableMode mode = vkt::VariableMode::SharedLocalParameterServer;
  int accumulate = 1;  // micro-batches per step
  std::optional<vkt::DeviceOptions> device_options{};
  std::size_t bucket_bytes = std::size_t{4} << 20;
  vkt::LossScaling loss_scaling = vkt::LossScaling::Off;
  vkt::DType exchange = vkt::DType::F32;  // ReplicateOptions::exchange_dtype
  /// Set to whether the buckets were exchanged with the backward passes, and how many.
  std::pair<bool, int>* overlapped = nullptr;
};

/// Trains `model` on every global batch of `d` (each rank its slice); returns
/// the loss after every step and the values of `names`.
Values train(const Job& job, const vkt::ModelFn& model, const Data& d,
             const std::vector<std::string>& names) {
  vkt::Instance instance;
  const auto replicated = vkt::replicate_model_fn(
      model, {.devices = std::vector<std::uint32_t>(static_cast<std::size_t>(job.towers), 0),
              .variable_mode = job.mode,
              .bucket_bytes = job.bucket_bytes,
              .loss_scaling = job.loss_scaling,
              .exchange_dtype = job.exchange,
              .device_options = job.device_options});
  const int ranks = job.processes ? job.processes->size() : 1;
  const int rank = job.processes ? job.processes->rank() : 0;
  const auto spec_of = [&](const HostBatch& batch) {
    std::map<std::string, vkt::InputSpec> specs;
    for (const auto& [name, t] : batch) {
      std::vector<std::int64_t> dims = t.shape.dims();
      dims[0] /= ranks;
      specs[name] = {vkt::Shape(dims), t.dtype};
    }
    return specs;
  };
  vkt::ModelContext root(instance, spec_of(d.x.front()), spec_of(d.y.front()),
                         {.seed = static_cast<std::uint64_t>(9 + rank)});  // rank 0's must win
  root.set_distribution({.processes = job.processes, .accumulate_steps = job.accumulate});
  root.set_device_pool(&vkt::test::tower_devices());
  vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
  if (job.overlapped) *job.overlapped = {spec.run->overlaps_processes(), spec.run->buckets()};
  Values out;
  for (std::size_t s = 0; s < d.x.size(); ++s) {
    spec.run->train_step(vkt::rank_rows(d.x[s], rank, ranks), vkt::rank_rows(d.y[s], rank, ranks));
    if (spec.run->step_completed()) out.push_back({spec.run->loss()});
  }
  for (const std::string& name : names) out.push_back(spec.run->variable(name));
  CHECK(spec.run->global_step() == d.x.size() / static_cast<std::size_t>(job.accumulate));
  return out;
}

const std::vector<std::string> kMlpValues{"hidden/kernel",        "hidden/bias",
                                          "out/kernel",           "out/bias",
                                          "hidden/kernel/Adam/m", "out/bias/Adam/v"};

Values train(int towers, vkt::ProcessGroup* processes, vkt::VariableMode mode,
             std::optional<vkt::DeviceOptions> device_options = std::nullopt) {
  return train(
      {.towers = towers, .processes = processes, .mode = mode, .device_options = device_options},
      mlp, data(), kMlpValues);
}

/// Every `k` consecutive batches of `d` as one.
Data joined(const Data& d, std::size_t k) {
  Data out;
  for (std::size_t s = 0; s + k <= d.x.size(); s += k) {
    HostBatch x = d.x[s], y = d.y[s];
    for (std::size_t j = 1; j < k; ++j) {
      for (auto& [name, t] : x) t.append_rows(d.x[s + j].at(name));
      for (auto& [name, t] : y) t.append_rows(d.y[s + j].at(name));
    }
    out.x.push_back(x);
    out.y.push_back(y);
  }
  return out;
}

constexpr std::int64_t kIds = 3, kRows = 20, kDim = 6;

/// An embedding model: its table's gradient is sparse (rows, not a sum).
vkt::EstimatorSpec embedding(vkt::ModelContext& ctx, const vkt::TensorDict& f,
                             const vkt::TensorDict& l, vkt::Mode mode, const vkt::Params&) {
  const Tensor table =
      ctx.graph().variable("emb", {kRows, kDim}, vkt::Initializer::normal(0.0f, 0.5f));
  const Tensor ids = f.at("ids");
  const Tensor e = vkt::embedding_lookup(table, ids);  // [b, kIds, kDim]
  const Tensor flat = vkt::reshape(e, {ids.shape()[0], kIds * kDim});
  const Tensor logits = vkt::layers::dense(flat, kClasses, vkt::layers::Activation::None, "out");
  const Tensor loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits);
  vkt::TowerOptimizer adam([] { return std::make_unique<vkt::Adam>(0.05); });
  return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = adam.minimize(loss)};
}

/// Ids with repeats within every shard and across the ranks' slices.
Data ids_data() {
  std::mt19937 rng(17);
  Data d;
  for (int s = 0; s < 8; ++s) {
    std::vector<std::int32_t> ids(kBatch * kIds), y(kBatch);
    for (auto& id : ids) id = static_cast<std::int32_t>(rng() % 6);
    ids[1] = ids[0];
    ids[kBatch * kIds - 1] = static_cast<std::int32_t>(6 + s % 9);
    for (auto& v : y) v = static_cast<std::int32_t>(rng() % kClasses);
    d.x.push_back({{"ids", HostTensor::ints({kBatch, kIds}, ids)}});
    d.y.push_back({{"y", HostTensor::ints({kBatch}, y)}});
  }
  return d;
}

using vkt::test::norm_relative;

/// True when every rank's `values` are rank 0's, bit for bit.
bool same_on_every_rank(const Values& values) {
  std::string bytes;
  for (const auto& v : values) bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  const std::vector<std::string> all = world().allgather(bytes, "test: the ranks' values");
  for (const std::string& other : all) {
    if (other != all.front()) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("2 processes x 2 towers train the MLP as 1 process x 4 towers, the same bits everywhere",
          "[mpi]") {
  REQUIRE(world().size() == 2);
  for (const auto mode : {vkt::VariableMode::SharedLocalParameterServer,
                          vkt::VariableMode::Mirrored, vkt::VariableMode::RoundRobin}) {
    INFO("variable mode " << static_cast<int>(mode));
    const Values many = train(2, &world(), mode);
    const Values one = train(4, nullptr, mode);
    for (std::size_t v = 0; v < one.size(); ++v) {
      INFO("value " << v);
      CHECK(norm_relative(many[v], one[v]) <= 1e-6);
    }
    CHECK(same_on_every_rank(many));
    CHECK(train(2, &world(), mode) == many);  // a second run: the same bits
  }
}

TEST_CASE(
    "gradients exchanged in half between processes: half their bytes travel, the same bits on "
    "every rank and run to run, within 2u of the f32 exchange",
    "[mpi]") {
  // The MLP's dense gradients, hidden 7 x 16 + 16 and out 16 x 5 + 5, each
  // at a 16-byte slot of one bucket, whose whole stretch is summed.
  constexpr auto slot = [](std::int64_t n) { return static_cast<std::uint64_t>((n + 3) / 4 * 4); };
  constexpr std::uint64_t kGradients =
      slot(kIn * 16) + slot(16) + slot(16 * kClasses) + slot(kClasses);
  const auto trained = [](vkt::DType exchange, std::uint64_t& sent) {
    const std::uint64_t before = world().bytes_sent();
    const Values values =
        train({.processes = &world(), .exchange = exchange}, mlp, data(), kMlpValues);
    sent = world().bytes_sent() - before;
    return values;
  };
  std::uint64_t f32_bytes = 0, half_bytes = 0;
  const Values f32 = trained(vkt::DType::F32, f32_bytes);
  for (const vkt::DType half : {vkt::DType::F16, vkt::DType::BF16}) {
    INFO(vkt::to_string(half));
    const Values halves = trained(half, half_bytes);
    // With 2 ranks each sends every element once a step (half its slice to
    // be summed, its summed half to the other): 2 bytes each fewer.
    CHECK(f32_bytes - half_bytes == kSteps * kGradients * 2);
    CHECK(same_on_every_rank(halves));
    CHECK(trained(half, half_bytes) == halves);
    // Each rank's sum is rounded before the ranks' sums cancel, and Adam's
    // moments carry it on: after 20 steps measured 0.65 u (f16) and 0.9 u
    // (bf16) on the biases. A rank's sum lost or counted twice is off by O(1).
    const double u = half == vkt::DType::F16 ? 0x1p-11 : 0x1p-8;
    for (std::size_t v = 0; v < f32.size(); ++v) {
      INFO("value " << v << ": " << norm_relative(halves[v], f32[v]));
      CHECK(norm_relative(halves[v], f32[v]) <= 2 * u);
    }
    CHECK(halves != f32);
  }
}

TEST_CASE(
    "each bucket summed over the processes as soon as it is ready: the same bits as one bucket",
    "[mpi]") {
  for (const auto mode :
       {vkt::VariableMode::SharedLocalParameterServer, vkt::VariableMode::Mirrored}) {
    for (const bool staged : {false, true}) {
      for (const int accumulate : {1, 2}) {
        INFO("variable mode " << static_cast<int>(mode) << ", staged " << staged << ", "
                              << accumulate << " micro-batches a step");
        Job job{.processes = &world(),
                .mode = mode,
                .accumulate = accumulate,
                .device_options = vkt::DeviceOptions{.force_staging = staged},
                .bucket_bytes = std::size_t{1} << 30};
        const Values whole = train(job, mlp, data(), kMlpValues);
        job.bucket_bytes = 16;  // every gradient a bucket of its own
        std::pair<bool, int> overlapped{false, 0};
        job.overlapped = &overlapped;
        const Values buckets = train(job, mlp, data(), kMlpValues);
        CHECK(overlapped == std::pair<bool, int>{true, 4});
        CHECK(buckets == whole);
        CHECK(same_on_every_rank(buckets));
      }
    }
  }
}

TEST_CASE("buckets of sparse rows alone, exchanged as they are ready: the same bits as one bucket",
          "[mpi]") {
  // The embedding's rows travel in buckets of their own with 16-byte buckets:
  // nothing of them is summed, so those buckets' stretches are empty.
  const std::vector<std::string> names{"emb", "out/kernel", "emb/Adam/m", "emb/Adam/v"};
  for (const bool staged : {false, true}) {
    INFO("staged " << staged);
    Job job{.processes = &world(),
            .device_options = vkt::DeviceOptions{.force_staging = staged},
            .bucket_bytes = std::size_t{1} << 30};
    const Values whole = train(job, embedding, ids_data(), names);
    job.bucket_bytes = 16;
    const Values buckets = train(job, embedding, ids_data(), names);
    CHECK(buckets == whole);
    CHECK(same_on_every_rank(buckets));
  }
}

TEST_CASE("2 processes x 1 tower train the MLP as 1 process x 2 towers", "[mpi]") {
  const Values many = train(1, &world(), vkt::VariableMode::SharedLocalParameterServer);
  const Values one = train(2, nullptr, vkt::VariableMode::SharedLocalParameterServer);
  for (std::size_t v = 0; v < one.size(); ++v) {
    INFO("value " << v);
    CHECK(norm_relative(many[v], one[v]) <= 1e-6);
  }
  CHECK(same_on_every_rank(many));
}

/// The MLP with a synchronized batch norm on its hidden layer (no bias
/// before it: batch norm takes the mean out).
vkt::EstimatorSpec bn_mlp(vkt::ModelContext& ctx, const vkt::TensorDict& f,
                          const vkt::TensorDict& l, vkt::Mode mode, const vkt::Params&) {
  const Tensor w =
      ctx.graph().variable("hidden/kernel", {kIn, 16}, vkt::Initializer::glorot_uniform());
  const Tensor h =
      vkt::relu(vkt::layers::batch_norm(vkt::matmul(f.at("x"), w), mode == vkt::Mode::Train,
                                        {.momentum = 0.8f, .sync = true, .name = "bn"}));
  const Tensor logits = vkt::layers::dense(h, kClasses, vkt::layers::Activation::None, "out");
  const Tensor loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits);
  vkt::TowerOptimizer adam([] { return std::make_unique<vkt::Adam>(0.01); });
  return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = adam.minimize(loss)};
}

TEST_CASE("synchronized batch norm: 2 processes x 1 and x 2 towers train as 1 process x 2 and x 4",
          "[mpi]") {
  const std::vector<std::string> names{"hidden/kernel",  "bn/gamma",           "bn/beta",
                                       "bn/moving_mean", "bn/moving_variance", "out/kernel"};
  for (const int towers : {1, 2}) {
    INFO(towers << " tower(s) per process");
    const Values many = train({.towers = towers, .processes = &world()}, bn_mlp, data(), names);
    const Values one = train({.towers = 2 * towers}, bn_mlp, data(), names);
    for (std::size_t v = 0; v < one.size(); ++v) {
      INFO("value " << v);
      CHECK(norm_relative(many[v], one[v]) <= 1e-5);
    }
    CHECK(same_on_every_rank(many));
  }
}

TEST_CASE("4 micro-batches of 16 on 2 processes equal one batch of 64 on 1", "[mpi]") {
  const Data micro = data();
  const Data big = joined(micro, 4);
  for (const int towers : {1, 2}) {
    INFO(towers << " tower(s) per process");
    const Values many =
        train({.towers = towers, .processes = &world(), .accumulate = 4}, mlp, micro, kMlpValues);
    const Values one = train({.towers = 1}, mlp, big, kMlpValues);
    REQUIRE(many.size() == one.size());
    for (std::size_t v = 0; v < one.size(); ++v) {
      INFO("value " << v);
      CHECK(norm_relative(many[v], one[v]) <= 1e-6);
    }
    CHECK(same_on_every_rank(many));
  }
}

TEST_CASE("sparse (embedding) rows gathered from 2 processes train as 1 process with every tower",
          "[mpi]") {
  const Data d = ids_data();
  const std::vector<std::string> names{"emb", "out/kernel", "emb/Adam/m", "emb/Adam/v"};
  struct Case {
    int towers, accumulate;
  };
  for (const Case c : {Case{1, 1}, Case{2, 1}, Case{1, 2}}) {
    INFO(c.towers << " tower(s) per process, " << c.accumulate << " micro-batch(es)");
    const Data global = joined(d, static_cast<std::size_t>(c.accumulate));
    const Values many =
        train({.towers = c.towers, .processes = &world(), .accumulate = c.accumulate}, embedding, d,
              names);
    const Values one = train({.towers = 2 * c.towers}, embedding, global, names);
    REQUIRE(many.size() == one.size());
    for (std::size_t v = 0; v < one.size(); ++v) {
      INFO("value " << v);
      CHECK(norm_relative(many[v], one[v]) <= 1e-6);
    }
    CHECK(same_on_every_rank(many));
  }
}

TEST_CASE("the staged exchange (a discrete GPU's), in chunks of 256 bytes, gives the mapped bits",
          "[mpi]") {
  const vkt::DeviceOptions staged{.force_staging = true, .staging_chunk_bytes = 256};
  for (const auto mode : {vkt::VariableMode::SharedLocalParameterServer,
                          vkt::VariableMode::Mirrored, vkt::VariableMode::RoundRobin}) {
    INFO("variable mode " << static_cast<int>(mode));
    CHECK(train(2, &world(), mode, staged) == train(2, &world(), mode, vkt::DeviceOptions{}));
  }
}

TEST_CASE("processes that built different models stop at start-up, naming the difference",
          "[mpi]") {
  vkt::Instance instance;
  const auto replicated = vkt::replicate_model_fn(mlp, {.devices = {0, 0}});
  vkt::ModelContext root(instance, {{"x", {{kBatch / 2, kIn}}}},
                         {{"y", {{kBatch / 2}, vkt::DType::I32}}});
  root.set_device_pool(&vkt::test::tower_devices());
  root.set_distribution({.processes = &world()});
  const vkt::Params params{{"width", std::int64_t{16 + world().rank()}}};
  const std::string error =
      vkt::test::error_of([&] { replicated(root, {}, {}, vkt::Mode::Train, params); });
  CHECK_THAT(error, Contains("rank 1 built a different model than rank 0"));
  CHECK_THAT(error, Contains("variable 'hidden/kernel' [7, 16]"));
  CHECK_THAT(error, Contains("variable 'hidden/kernel' [7, 17]"));
  CHECK(same_on_every_rank({{static_cast<float>(error.size())}}));  // every rank says it
}

/// The MLP's logits plus x times a frozen half base [kIn, kClasses] of
/// `base_dtype` (param "base": 0 bf16, 1 f16), which each rank's seed
/// initializes differently unless rank 0's values reach every tower.
vkt::EstimatorSpec frozen_base(vkt::ModelContext& ctx, const vkt::TensorDict& f,
                               const vkt::TensorDict& l, vkt::Mode mode, const vkt::Params& p) {
  const bool f16 = p.count("base") && std::get<std::int64_t>(p.at("base")) == 1;
  const Tensor base =
      ctx.graph().variable("base/kernel", {kIn, kClasses}, vkt::Initializer::glorot_uniform(),
                           false, f16 ? vkt::DType::F16 : vkt::DType::BF16);
  const Tensor h = vkt::layers::dense(f.at("x"), 16, vkt::layers::Activation::Tanh, "hidden");
  const Tensor logits = vkt::layers::dense(h, kClasses, vkt::layers::Activation::None, "out") +
                        vkt::matmul(f.at("x"), vkt::cast(base, vkt::DType::F32));
  const Tensor loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits);
  vkt::TowerOptimizer adam([] { return std::make_unique<vkt::Adam>(0.01); });
  return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = adam.minimize(loss)};
}

TEST_CASE(
    "a frozen half base on 2 processes x 2 towers: rank 0's values on every rank and "
    "tower, trained as 1 process x 4 towers",
    "[mpi]") {
  std::vector<std::string> names = kMlpValues;
  names.push_back("base/kernel");
  for (const auto mode : {vkt::VariableMode::SharedLocalParameterServer,
                          vkt::VariableMode::Mirrored, vkt::VariableMode::RoundRobin}) {
    INFO("variable mode " << static_cast<int>(mode));
    const Values many = train({.processes = &world(), .mode = mode}, frozen_base, data(), names);
    const Values one = train({.towers = 4, .mode = mode}, frozen_base, data(), names);
    CHECK(same_on_every_rank(many));
    CHECK(many.back() == one.back());  // the base: rank 0's seed, unchanged
    for (std::size_t v = 0; v < one.size(); ++v) {
      INFO("value " << v);
      CHECK(norm_relative(many[v], one[v]) <= 1e-6);
    }
  }
  // A rank whose base is of another type built another model.
  vkt::Instance instance;
  const auto replicated = vkt::replicate_model_fn(frozen_base, {.devices = {0, 0}});
  vkt::ModelContext root(instance, {{"x", {{kBatch / 2, kIn}}}},
                         {{"y", {{kBatch / 2}, vkt::DType::I32}}});
  root.set_device_pool(&vkt::test::tower_devices());
  root.set_distribution({.processes = &world()});
  const std::string error = vkt::test::error_of([&] {
    replicated(root, {}, {}, vkt::Mode::Train, {{"base", std::int64_t{world().rank()}}});
  });
  CHECK_THAT(error, Contains("rank 0 has 'variable 'base/kernel' [7, 5] bf16"));
  CHECK_THAT(error, Contains("rank 1 has 'variable 'base/kernel' [7, 5] f16"));
}

TEST_CASE(
    "under dynamic loss scaling a NaN in one rank's slice skips that step on every rank, as on "
    "one process",
    "[mpi]") {
  Data d = data();
  // The last row of step 5's batch: rank 1's slice, its second tower's shard.
  d.x[5].at("x").f32[kBatch * kIn - 1] = std::nanf("");
  std::vector<std::string> names = kMlpValues;
  names.push_back("loss_scale/scale");
  names.push_back("loss_scale/good_steps");
  for (const auto mode :
       {vkt::VariableMode::SharedLocalParameterServer, vkt::VariableMode::Mirrored}) {
    INFO("variable mode " << static_cast<int>(mode));
    Job job{.processes = &world(), .mode = mode, .loss_scaling = vkt::LossScaling::Dynamic};
    const Values many = train(job, mlp, d, names);
    job.processes = nullptr;
    job.towers = 4;
    const Values one = train(job, mlp, d, names);
    CHECK(std::isnan(many[5][0]));  // step 5's loss
    CHECK(same_on_every_rank(many));
    // Every rank skipped step 5: no NaN reached a weight; the scale halved
    // once, and 14 good steps followed.
    const std::size_t at = many.size() - names.size();
    for (std::size_t v = at; v < many.size(); ++v) {
      INFO("value " << names[v - at]);
      for (const float x : many[v]) CHECK(std::isfinite(x));
      CHECK(norm_relative(many[v], one[v]) <= 1e-6);
    }
    CHECK(many[many.size() - 2] == std::vector<float>{32768.0f});
    CHECK(many.back() == std::vector<float>{14.0f});
  }
}
