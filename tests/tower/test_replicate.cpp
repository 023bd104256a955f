// replicate_model_fn: the scalar example's numbers (README), N towers against 1, and the errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <random>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/sgd.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/reduce.h>

#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>
#include <cstdio>

#include "../env_scope.h"
#include "../mlp_fixture.h"
#include "../test_support.h"
#include "../tower_devices.h"

using Catch::Matchers::Contains;
using vkt::HostBatch;
using vkt::HostTensor;
using vkt::Tensor;

namespace {

// The README's scalar model: predictions = features * c, loss = sum |labels - predictions|.
vkt::EstimatorSpec scalar_model(vkt::ModelContext& ctx, const vkt::TensorDict& features,
                                const vkt::TensorDict& labels, vkt::Mode mode, const vkt::Params&) {
  const Tensor c = ctx.graph().variable("c", {}, vkt::Initializer::constant(10.0f));
  const Tensor loss = vkt::reduce_sum(vkt::abs(labels.at("y") - features.at("x") * c));
  vkt::TowerOptimizer sgd(std::make_unique<vkt::SGD>(1.0f));
  return {.mode = mode, .loss = loss, .train_op = sgd.minimize(loss)};
}

struct Run {
  vkt::Instance instance;
  vkt::EstimatorSpec spec;
  Run(const vkt::ModelFn& fn, vkt::ReplicateOptions options, std::int64_t batch = 2) {
    const auto replicated = vkt::replicate_model_fn(fn, std::move(options));
    vkt::ModelContext root(instance, {{"x", {{batch, 1}}}}, {{"y", {{batch, 1}}}});
    root.set_device_pool(&vkt::test::tower_devices());
    spec = replicated(root, {}, {}, vkt::Mode::Train, {});
  }
  void step(std::vector<float> x, std::vector<float> y) {
    const auto rows = static_cast<std::int64_t>(x.size());
    spec.run->train_step({{"x", HostTensor::floats({rows, 1}, x)}},
                         {{"y", HostTensor::floats({rows, 1}, y)}});
  }
  float c() { return spec.run->variable("c")[0]; }
};

vkt::ReplicateOptions towers(int n, vkt::LossReduction reduction) {
  return {.loss_reduction = reduction, .devices = std::vector<std::uint32_t>(n, 0)};
}

}  // namespace

TEST_CASE("the scalar example's numbers on two towers: Sum, Mean, and two steps",
          "[device-matrix]") {
  SECTION("Sum: loss 27, c becomes 7") {
    Run run(scalar_model, towers(2, vkt::LossReduction::Sum));
    CHECK(run.spec.run->towers() == 2);
    // Tower 0's op names carry no prefix, tower 1's are scoped; variables are shared by name.
    const std::string loss0 = run.spec.run->tower_spec(0).loss.name();
    const std::string loss1 = run.spec.run->tower_spec(1).loss.name();
    CHECK(loss0.find("tower_") == std::string::npos);
    CHECK(loss1.rfind("tower_1/", 0) == 0);
    CHECK(run.spec.run->tower_graph(1).find_variable("c").has_value());
    // Each tower's rows start at its shard of the global batch (dropout draws by
    // the global row); every tower starts from the same initial values.
    CHECK(run.spec.run->tower_graph(0).options().first_row == 0);
    CHECK(run.spec.run->tower_graph(1).options().first_row == 1);
    run.step({1, 2}, {1, 2});
    CHECK(run.spec.run->loss() == 27.0f);
    CHECK(run.c() == 7.0f);
    CHECK(run.spec.run->global_step() == 1);
    // The second step's gradients start from zero: c becomes 3, loss 24.
    run.step({1.5f, 2.5f}, {1.5f, 2.5f});
    CHECK(run.spec.run->loss() == 24.0f);
    CHECK(run.c() == 3.0f);
    CHECK(run.spec.run->global_step() == 2);
    // Every tower got the new weights back.
    CHECK(run.spec.run->tower_graph(1).values(
              *run.spec.run->tower_graph(1).find_variable("c"))[0] == 3.0f);
  }
  SECTION("Mean: loss 13.5, c becomes 8.5") {
    Run run(scalar_model, towers(2, vkt::LossReduction::Mean));
    run.step({1, 2}, {1, 2});
    CHECK(run.spec.run->loss() == 13.5f);
    CHECK(run.c() == 8.5f);
  }
  SECTION("SumByNonzeroWeights (the default) scales like Mean") {
    Run run(scalar_model, {.devices = {0, 0}});
    run.step({1, 2}, {1, 2});
    CHECK(run.c() == 8.5f);
  }
}

TEST_CASE(
    "Mirrored variables give the scalar example's numbers, each tower updating its own replica",
    "[device-matrix]") {
  Run run(scalar_model, {.loss_reduction = vkt::LossReduction::Sum,
                         .devices = {0, 0},
                         .variable_mode = vkt::VariableMode::Mirrored});
  run.step({1, 2}, {1, 2});
  CHECK(run.spec.run->loss() == 27.0f);
  CHECK(run.c() == 7.0f);
  run.step({1.5f, 2.5f}, {1.5f, 2.5f});
  CHECK(run.c() == 3.0f);
  for (int t = 0; t < 2; ++t) {
    vkt::Graph& g = run.spec.run->tower_graph(t);
    CHECK(g.values(*g.find_variable("c"))[0] == 3.0f);
    CHECK(g.find_variable("c/SGD/momentum").has_value());  // each tower has its own slots
    CHECK(g.global_step() == 2);
  }
}

TEST_CASE(
    "RoundRobin variables give the scalar example's numbers, each variable on its owner's device",
    "[device-matrix]") {
  const auto two_variables = [](vkt::ModelContext& ctx, const vkt::TensorDict& f,
                                const vkt::TensorDict& l, vkt::Mode mode, const vkt::Params&) {
    vkt::Graph& g = ctx.graph();
    const Tensor c = g.variable("c", {}, vkt::Initializer::constant(10.0f));  // on tower 0's device
    const Tensor d = g.variable("d", {}, vkt::Initializer::constant(2.0f));   // on tower 1's
    const Tensor loss = vkt::reduce_sum(vkt::abs(l.at("y") - f.at("x") * c)) +
                        vkt::reduce_sum(vkt::abs(l.at("y") - f.at("x") * d));
    vkt::TowerOptimizer sgd(std::make_unique<vkt::SGD>(1.0f));
    return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = sgd.minimize(loss)};
  };
  Run run(two_variables, {.loss_reduction = vkt::LossReduction::Sum,
                          .devices = {0, 0},
                          .variable_mode = vkt::VariableMode::RoundRobin});
  run.step({1, 2}, {1, 2});
  CHECK(run.spec.run->loss() == 27.0f + 3.0f);
  CHECK(run.c() == 7.0f);
  CHECK(run.spec.run->variable("d")[0] == -1.0f);
  run.step({1.5f, 2.5f}, {1.5f, 2.5f});
  CHECK(run.c() == 3.0f);
  for (int t = 0; t < 2; ++t) {  // both towers got both new values
    vkt::Graph& g = run.spec.run->tower_graph(t);
    CHECK(g.values(*g.find_variable("c"))[0] == 3.0f);
    CHECK(g.global_step() == 2);
  }
  CHECK(run.spec.run->global_step() == 2);
}

TEST_CASE("one tower scales nothing: loss 27 and c = 7 for every reduction", "[device-matrix]") {
  for (auto reduction : {vkt::LossReduction::Sum, vkt::LossReduction::Mean,
                         vkt::LossReduction::SumByNonzeroWeights}) {
    Run run(scalar_model, towers(1, reduction));
    run.step({1, 2}, {1, 2});
    CHECK(run.spec.run->loss() == 27.0f);
    CHECK(run.c() == 7.0f);
    CHECK(run.spec.run->global_step() == 1);
  }
}

TEST_CASE("two losses and two TowerOptimizers on their own variables, one and two towers, Sum",
          "[device-matrix]") {
  const auto model = [](vkt::ModelContext& ctx, const vkt::TensorDict& f, const vkt::TensorDict& l,
                        vkt::Mode mode, const vkt::Params&) {
    vkt::Graph& g = ctx.graph();
    const Tensor c = g.variable("c", {}, vkt::Initializer::constant(10.0f));
    const Tensor d = g.variable("d", {}, vkt::Initializer::constant(2.0f));
    const Tensor loss_c = vkt::reduce_sum(vkt::abs(l.at("y") - f.at("x") * c));
    const Tensor loss_d = vkt::reduce_sum(vkt::abs(l.at("y") - f.at("x") * d));
    vkt::TowerOptimizer first(std::make_unique<vkt::SGD>(1.0f, vkt::SGDOptions{}, "first"));
    vkt::TowerOptimizer second(std::make_unique<vkt::SGD>(1.0f, vkt::SGDOptions{}, "second"));
    first.minimize(loss_c, std::vector<Tensor>{c});
    const Tensor train = second.minimize(loss_d, std::vector<Tensor>{d});
    return vkt::EstimatorSpec{.mode = mode, .loss = loss_c + loss_d, .train_op = train};
  };
  // The train op is only the second call: the first must be applied anyway,
  // on one tower as on two.
  for (const int n : {1, 2}) {
    INFO(n << " tower(s)");
    Run run(model, towers(n, vkt::LossReduction::Sum));
    run.step({1, 2}, {1, 2});
    CHECK(run.c() == 7.0f);
    CHECK(run.spec.run->variable("d")[0] == -1.0f);
    CHECK(run.spec.run->loss() == 27.0f + 3.0f);
    CHECK(run.spec.run->global_step() == 1);
  }
}

TEST_CASE("an MLP trained with Adam on N towers matches 1 tower on the same global batch",
          "[device-matrix]") {
  const std::int64_t batch = 12, in = 7;
  std::mt19937 rng(5);
  std::vector<HostBatch> xs, ys;
  for (int s = 0; s < 20; ++s) {
    auto [x, y] = vkt::test::random_mlp_batch(rng, batch, in);
    xs.push_back(std::move(x));
    ys.push_back(std::move(y));
  }
  const auto train = [&](int n, vkt::VariableMode variable_mode) {
    vkt::Instance instance;
    const auto replicated = vkt::replicate_model_fn(
        vkt::test::adam_mlp,
        {.devices = std::vector<std::uint32_t>(n, 0), .variable_mode = variable_mode});
    vkt::ModelContext root(instance, {{"x", {{batch, in}}}}, {{"y", {{batch}, vkt::DType::I32}}},
                           {.seed = 9});
    root.set_device_pool(&vkt::test::tower_devices());
    vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
    for (int s = 0; s < 20; ++s) spec.run->train_step(xs[s], ys[s]);
    std::vector<std::vector<float>> vars;
    for (const char* name : {"hidden/kernel", "hidden/bias", "out/kernel", "out/bias"}) {
      vars.push_back(spec.run->variable(name));
    }
    vars.push_back({spec.run->loss()});
    return vars;
  };
  const auto one = train(1, vkt::VariableMode::SharedLocalParameterServer);
  for (const auto mode : {vkt::VariableMode::SharedLocalParameterServer,
                          vkt::VariableMode::Mirrored, vkt::VariableMode::RoundRobin}) {
    for (int n : {2, 3, 4}) {
      INFO(n << " towers, variable mode " << static_cast<int>(mode));
      const auto many = train(n, mode);
      for (std::size_t v = 0; v < one.size(); ++v) {
        double diff = 0, scale = 0;
        for (std::size_t i = 0; i < one[v].size(); ++i) {
          diff = std::max<double>(diff, std::abs(many[v][i] - one[v][i]));
          scale = std::max<double>(scale, std::abs(one[v][i]));
        }
        CHECK(diff <= 1e-5 * scale);
      }
      CHECK(many == train(n, mode));  // the same run again: the same bits
    }
  }
}

TEST_CASE("replication errors say what to fix, before anything runs", "[device-matrix]") {
  CHECK_THAT(vkt::test::error_of([] {
               vkt::replicate_model_fn(scalar_model, {.loss_reduction = vkt::LossReduction::None});
             }),
             Contains("a reduction is required"));
  CHECK_THAT(
      vkt::test::error_of([] { Run run(scalar_model, towers(2, vkt::LossReduction::Sum), 3); }),
      Contains("the batch of 3 examples ('x', shape [3, 1]) does not divide among 2 towers"));
  CHECK_THAT(vkt::test::error_of([] {
               Run run(scalar_model, {.devices = {0, 9}});
             }),
             Contains("device index 9 does not exist"));

  const auto unwrapped = [](vkt::ModelContext& ctx, const vkt::TensorDict& f,
                            const vkt::TensorDict& l, vkt::Mode mode, const vkt::Params&) {
    const Tensor c = ctx.graph().variable("c", {}, vkt::Initializer::constant(10.0f));
    const Tensor loss = vkt::reduce_sum(vkt::abs(l.at("y") - f.at("x") * c));
    vkt::SGD sgd(1.0f);
    return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = sgd.minimize(loss)};
  };
  CHECK_THAT(vkt::test::error_of([&] { Run run(unwrapped, towers(2, vkt::LossReduction::Sum)); }),
             Contains("without TowerOptimizer"));
  Run single(unwrapped,
             towers(1, vkt::LossReduction::Sum));  // one tower: a plain optimizer is fine
  single.step({1, 2}, {1, 2});
  CHECK(single.c() == 7.0f);

  const auto disagreeing = [](vkt::ModelContext& ctx, const vkt::TensorDict& f,
                              const vkt::TensorDict& l, vkt::Mode mode, const vkt::Params&) {
    const Tensor c = ctx.graph().variable("c", {}, vkt::Initializer::constant(10.0f));
    const Tensor loss = vkt::reduce_sum(vkt::abs(l.at("y") - f.at("x") * c));
    vkt::TowerOptimizer sgd(std::make_unique<vkt::SGD>(1.0f));
    Tensor train = sgd.minimize(loss);
    if (ctx.tower() == 1) {
      vkt::TowerOptimizer extra(std::make_unique<vkt::SGD>(0.5f, vkt::SGDOptions{}, "extra"));
      train = extra.minimize(loss);
    }
    return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = train};
  };
  CHECK_THAT(vkt::test::error_of([&] { Run run(disagreeing, towers(2, vkt::LossReduction::Sum)); }),
             Contains("every tower must make the same optimizer calls in the same order"));
}

TEST_CASE("a replicated run saves and restores: 10 + restart + 10 steps equal 20",
          "[device-matrix]") {
  const auto model = [](vkt::ModelContext&, const vkt::TensorDict& f, const vkt::TensorDict& l,
                        vkt::Mode mode, const vkt::Params&) {
    const Tensor h = vkt::layers::dense(f.at("x"), 8, vkt::layers::Activation::Tanh, "hidden");
    const Tensor out = vkt::layers::dense(h, 1, vkt::layers::Activation::None, "out");
    const Tensor loss = vkt::mean_squared_error(l.at("y"), out);
    vkt::TowerOptimizer adam([] { return std::make_unique<vkt::Adam>(0.05f); });
    return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = adam.minimize(loss)};
  };
  const std::int64_t batch = 4;
  const HostBatch x = {
      {"x", HostTensor::floats({batch, 3}, {1, 2, 3, -1, 0, 2, 0.5f, 1, -2, 3, 3, 1})}};
  const HostBatch y = {{"y", HostTensor::floats({batch, 1}, {1, -1, 0.5f, 2})}};
  const std::string path = "/tmp/vkt_test_tower_resume.safetensors";
  for (const auto mode : {vkt::VariableMode::SharedLocalParameterServer,
                          vkt::VariableMode::Mirrored, vkt::VariableMode::RoundRobin}) {
    INFO("variable mode " << static_cast<int>(mode));
    const auto make = [&](vkt::Instance& instance, std::uint64_t seed) {
      const auto replicated =
          vkt::replicate_model_fn(model, {.devices = {0, 0}, .variable_mode = mode});
      vkt::ModelContext root(instance, {{"x", {{batch, 3}}}}, {{"y", {{batch, 1}}}},
                             {.seed = seed});
      root.set_device_pool(&vkt::test::tower_devices());
      return replicated(root, {}, {}, vkt::Mode::Train, {}).run;
    };
    vkt::Instance instance;
    auto straight = make(instance, 1);
    for (int s = 0; s < 20; ++s) straight->train_step(x, y);
    auto first = make(instance, 1);
    for (int s = 0; s < 10; ++s) first->train_step(x, y);
    first->save(path);
    auto resumed = make(instance, 2);  // another seed: everything must come from the file
    resumed->restore(path);
    CHECK(resumed->global_step() == 10);
    for (int s = 0; s < 10; ++s) resumed->train_step(x, y);
    CHECK(resumed->global_step() == 20);
    for (const char* name : {"hidden/kernel", "hidden/bias", "out/kernel", "out/bias"}) {
      CHECK(resumed->variable(name) == straight->variable(name));
    }
    CHECK(resumed->loss() == straight->loss());
  }
  std::remove(path.c_str());
}

TEST_CASE("last_step_times: the slowest tower's device time, read back when asked") {
  Run run(scalar_model, towers(2, vkt::LossReduction::Sum));
  run.step({1, 2}, {5, 6});
  const vkt::TowerRun::StepTimes& times = run.spec.run->last_step_times();
  const double slowest = times.slowest_tower;
  CHECK(slowest > 0.0);  // lavapipe has timestamp queries
  CHECK(slowest <= times.step);
  CHECK(run.spec.run->last_step_times().slowest_tower == slowest);  // read once
  run.step({1, 2}, {5, 6});
  CHECK(run.spec.run->last_step_times().slowest_tower > 0.0);
}

TEST_CASE("VKT_DEVICES is the default choice of a run that names no devices, never over a list") {
  const vkt::test::EnvScope devices("VKT_DEVICES", "0,0");
  // The program's list stands: one tower, not the environment's two.
  Run given(scalar_model, towers(1, vkt::LossReduction::Sum));
  CHECK(given.spec.run->towers() == 1);
  // No list: the environment's.
  Run chosen(scalar_model, {.loss_reduction = vkt::LossReduction::Sum});
  CHECK(chosen.spec.run->towers() == 2);
}
