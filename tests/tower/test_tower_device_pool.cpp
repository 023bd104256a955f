// A TowerDevicePool shared by several models, and by several Estimators: they
// run on the same Devices (each kernel built once), except where they ask for
// Devices made otherwise.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_device_pool.h>
#include <vktower/tower/tower_run.h>

#include "../mlp_fixture.h"
#include "../test_support.h"
#include "estimator_models.h"

using vkt::HostBatch;
using vkt::HostTensor;

namespace {

constexpr std::int64_t kBatch = 8, kIn = 5;

std::shared_ptr<vkt::TowerRun> build(vkt::Instance& instance, vkt::TowerDevicePool& pool,
                                     const vkt::ReplicateOptions& options, vkt::Mode mode) {
  vkt::ModelContext root(instance, {{"x", {{kBatch, kIn}}}}, {{"y", {{kBatch}, vkt::DType::I32}}},
                         {.seed = 5});
  root.set_device_pool(&pool);
  return vkt::replicate_model_fn(vkt::test::adam_mlp, options)(root, {}, {}, mode, {}).run;
}

std::uint64_t pipelines(const vkt::TowerDevicePool& pool) {
  std::uint64_t n = 0;
  for (const vkt::Device* d : pool.devices()) n += d->object_counts().pipelines;
  return n;
}

}  // namespace

TEST_CASE("models built from roots sharing a TowerDevicePool run on the same Devices", "[towers]") {
  for (const auto sharing : {vkt::TowerDevices::PerTower, vkt::TowerDevices::Shared}) {
    INFO("shared device " << (sharing == vkt::TowerDevices::Shared));
    vkt::Instance instance;
    vkt::TowerDevicePool pool;
    const vkt::ReplicateOptions options{.devices = {0, 0}, .tower_devices = sharing};
    const auto train = build(instance, pool, options, vkt::Mode::Train);
    const auto eval = build(instance, pool, options, vkt::Mode::Eval);
    for (int i = 0; i < 2; ++i) {
      CHECK(&train->tower_graph(i).device() == &eval->tower_graph(i).device());
    }
    CHECK((&train->tower_graph(0).device() == &train->tower_graph(1).device()) ==
          (sharing == vkt::TowerDevices::Shared));
    // Both work on them, one after the other.
    std::mt19937 rng(3);
    const auto [x, y] = vkt::test::random_mlp_batch(rng, kBatch, kIn);
    train->train_step(x, y);
    eval->evaluate_step(x, y);
    CHECK(std::isfinite(train->loss()));
    CHECK(std::isfinite(eval->metrics().at("loss")));
  }
}

TEST_CASE("a TowerDevicePool gives a model asking for other DeviceOptions Devices made with them",
          "[towers]") {
  vkt::Instance instance;
  vkt::TowerDevicePool pool;
  const vkt::DeviceOptions mapped{};
  vkt::DeviceOptions staged{};
  staged.force_staging = true;
  const auto first =
      build(instance, pool, {.devices = {0}, .device_options = mapped}, vkt::Mode::Train);
  const auto other =
      build(instance, pool, {.devices = {0}, .device_options = staged}, vkt::Mode::Train);
  vkt::Device& a = first->tower_graph(0).device();
  vkt::Device& b = other->tower_graph(0).device();
  CHECK(&a != &b);
  CHECK(b.options().force_staging);
  CHECK_FALSE(b.maps_storage());
  // The first options again: the first Device.
  const auto again =
      build(instance, pool, {.devices = {0}, .device_options = mapped}, vkt::Mode::Eval);
  CHECK(&again->tower_graph(0).device() == &a);
  // Kernels switched on a Device after it was made count as options too.
  a.set_matmul_kernels(vkt::MatmulKernels::Tiled);
  const auto switched =
      build(instance, pool, {.devices = {0}, .device_options = mapped}, vkt::Mode::Eval);
  CHECK(&switched->tower_graph(0).device() != &a);
  CHECK(switched->tower_graph(0).device().options().matmul == vkt::MatmulKernels::Auto);
  CHECK(pool.devices().size() == 3);
}

TEST_CASE(
    "Estimators given one RunConfig::device_pool build each kernel once, and train as "
    "with Devices of their own",
    "[towers]") {
  namespace est = vkt::test::estimator;
  const vkt::Dataset data = est::make_data(48, 4);
  const auto train = [&](vkt::TowerDevicePool* pool) {
    vkt::test::TempDir dir;
    vkt::RunConfig config = est::quiet(dir.path.string());
    config.device_pool = pool;
    vkt::Estimator estimator(vkt::replicate_model_fn(est::mlp, {.devices = est::towers(2)}),
                             config);
    estimator.train(est::training_input(data, 8), {.steps = 3});
    return estimator.variable_value("hidden/kernel").f32;
  };
  const std::vector<float> alone = train(nullptr);
  vkt::TowerDevicePool pool;
  CHECK(train(&pool) == alone);
  const std::size_t devices = pool.devices().size();
  const std::uint64_t built = pipelines(pool);
  CHECK(devices == 2);
  CHECK(built > 0);
  CHECK(train(&pool) == alone);
  CHECK(pool.devices().size() == devices);
  CHECK(pipelines(pool) == built);  // not one kernel more
}
