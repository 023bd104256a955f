// Towers across processes (run under mpirun -np 2): 2 processes x 2 towers
// train what 1 process x 4 towers trains, every rank holds the same bits, two
// runs give the same bits; sparse rows, the model check, evaluation,
// prediction and exact resume through the Estimator.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <random>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/sgd.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/embedding.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/shape_ops.h>
#include <vktower/runtime/graph/ops/softmax.h>
#include <vktower/runtime/io/dataset.h>
#include <vktower/runtime/mpi/process_group.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/process_batches.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>

#include "../test_support.h"

using Catch::Matchers::Contains;
using vkt::HostBatch;
using vkt::HostTensor;
using vkt::Tensor;

namespace {

constexpr std::int64_t kBatch = 16, kIn = 7, kClasses = 5, kSteps = 20;

vkt::ProcessGroup& world() { return vkt::mpi_world(); }

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

/// `towers` per process; with `processes`, this rank's slice of every batch.
Values train(int towers, vkt::ProcessGroup* processes, vkt::VariableMode mode,
             std::optional<vkt::DeviceOptions> device_options = std::nullopt) {
  const Data d = data();
  vkt::Instance instance;
  const auto replicated = vkt::replicate_model_fn(
      mlp, {.devices = std::vector<std::uint32_t>(static_cast<std::size_t>(towers), 0),
            .variable_mode = mode,
            .device_options = device_options});
  const int ranks = processes ? processes->size() : 1;
  const int rank = processes ? processes->rank() : 0;
  vkt::ModelContext root(instance, {{"x", {{kBatch / ranks, kIn}}}},
                         {{"y", {{kBatch / ranks}, vkt::DType::I32}}},
                         {.seed = static_cast<std::uint64_t>(9 + rank)});  // rank 0's must win
  root.set_distribution({.processes = processes});
  vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
  Values out;
  for (int s = 0; s < kSteps; ++s) {
    spec.run->train_step(vkt::rank_rows(d.x[s], rank, ranks), vkt::rank_rows(d.y[s], rank, ranks));
    out.push_back({spec.run->loss()});
  }
  for (const char* name : {"hidden/kernel", "hidden/bias", "out/kernel", "out/bias",
                           "hidden/kernel/Adam/m", "out/bias/Adam/v"}) {
    out.push_back(spec.run->variable(name));
  }
  CHECK(spec.run->global_step() == kSteps);
  return out;
}

/// max |a - b| / max |b|, per variable.
double relative(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max<double>(diff, std::abs(a[i] - b[i]));
    scale = std::max<double>(scale, std::abs(b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

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
      CHECK(relative(many[v], one[v]) <= 1e-6);
    }
    CHECK(same_on_every_rank(many));
    CHECK(train(2, &world(), mode) == many);  // a second run: the same bits
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
  root.set_distribution({.processes = &world()});
  const vkt::Params params{{"width", std::int64_t{16 + world().rank()}}};
  const std::string error =
      vkt::test::error_of([&] { replicated(root, {}, {}, vkt::Mode::Train, params); });
  CHECK_THAT(error, Contains("rank 1 built a different model than rank 0"));
  CHECK_THAT(error, Contains("variable 'hidden/kernel' [7, 16]"));
  CHECK_THAT(error, Contains("variable 'hidden/kernel' [7, 17]"));
  CHECK(same_on_every_rank({{static_cast<float>(error.size())}}));  // every rank says it
}
