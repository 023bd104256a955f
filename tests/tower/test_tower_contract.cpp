// TensorFlow's replicate_model_fn contract on N towers: one TowerOptimizer
// used for several losses, eval metrics every tower must agree on (checked
// when the model is built), the model's training hooks once per step, and
// optimizer slots readable in every variable mode.
#include <catch2/catch.hpp>

#include <memory>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/sgd.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/reduce.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>

#include "../test_support.h"
#include "../tower_devices.h"

using Catch::Matchers::Contains;
using vkt::HostBatch;
using vkt::HostTensor;
using vkt::Tensor;
using vkt::test::error_of;

namespace {

constexpr std::int64_t kBatch = 6;  // divides among 1, 2 and 3 towers

std::vector<std::uint32_t> devices(int n) {
  return std::vector<std::uint32_t>(static_cast<std::size_t>(n), 0);
}

/// x = 1..6, y = x: with c = 10 (and d = 2), y - x c < 0 for every row, so
/// d/dc sum|y - x c| = sum x = 21, on any split of the batch.
HostBatch features() {
  return {{"x", HostTensor::floats({kBatch, 1}, {1, 2, 3, 4, 5, 6})}};
}
HostBatch labels() {
  return {{"y", HostTensor::floats({kBatch, 1}, {1, 2, 3, 4, 5, 6})}};
}

std::shared_ptr<vkt::TowerRun> build(vkt::Instance& instance, const vkt::ModelFn& fn,
                                     vkt::ReplicateOptions options, vkt::Mode mode) {
  vkt::ModelContext root(instance, {{"x", {{kBatch, 1}}}}, {{"y", {{kBatch, 1}}}});
  root.set_device_pool(&vkt::test::tower_devices());
  return vkt::replicate_model_fn(fn, std::move(options))(root, {}, {}, mode, {}).run;
}

constexpr vkt::VariableMode kModes[] = {vkt::VariableMode::SharedLocalParameterServer,
                                        vkt::VariableMode::Mirrored, vkt::VariableMode::RoundRobin};

/// What a model function saw of its TowerOptimizer after the calls.
struct Seen {
  bool made_before = true, made_after = false;
  std::string name;
  std::vector<std::string> slot_names;
  std::size_t variables = 99, apply_calls = 0;
};

}  // namespace

TEST_CASE("one TowerOptimizer minimizes two losses on 1, 2 and 3 towers, and answers after",
          "[device-matrix][tower-contract]") {
  // The factory form and the object form: both are used twice on tower 0.
  for (const bool factory : {true, false}) {
    for (const auto mode : kModes) {
      for (const int n : {1, 2, 3}) {
        INFO((factory ? "factory" : "object")
             << ", variable mode " << static_cast<int>(mode) << ", " << n << " tower(s)");
        std::vector<Seen> seen;
        const auto model = [&](vkt::ModelContext& ctx, const vkt::TensorDict& f,
                               const vkt::TensorDict& l, vkt::Mode m, const vkt::Params&) {
          vkt::Graph& g = ctx.graph();
          const Tensor c = g.variable("c", {}, vkt::Initializer::constant(10.0f));
          const Tensor d = g.variable("d", {}, vkt::Initializer::constant(2.0f));
          const Tensor loss_c = vkt::reduce_sum(vkt::abs(l.at("y") - f.at("x") * c));
          const Tensor loss_d = vkt::reduce_sum(vkt::abs(l.at("y") - f.at("x") * d));
          auto sgd = factory ? vkt::TowerOptimizer([] { return std::make_unique<vkt::SGD>(1.0f); })
                             : vkt::TowerOptimizer(std::make_unique<vkt::SGD>(0.5f));
          Seen s;
          s.made_before = sgd.made();
          sgd.minimize(loss_c, std::vector<Tensor>{c});
          const Tensor train = sgd.minimize(loss_d, std::vector<Tensor>{d});
          s.made_after = sgd.made();
          s.name = sgd.name();
          s.slot_names = sgd.slot_names();
          s.variables = sgd.variables().size();
          s.apply_calls = sgd.apply_calls();
          seen.push_back(s);
          return vkt::EstimatorSpec{.mode = m, .loss = loss_c + loss_d, .train_op = train};
        };
        vkt::Instance instance;
        auto run = build(instance, model,
                         {.loss_reduction = vkt::LossReduction::Sum,
                          .devices = devices(n),
                          .variable_mode = mode},
                         vkt::Mode::Train);
        REQUIRE(seen.size() == static_cast<std::size_t>(n));
        for (const Seen& s : seen) {
          CHECK(s.made_before == !factory);
          CHECK(s.made_after);
          CHECK(s.name == "SGD");
          CHECK(s.slot_names == std::vector<std::string>{"momentum"});
          CHECK(s.apply_calls == 2);
          // One tower: the wrapper's optimizer made the slots in the tower's
          // graph. Several: the towers' copy makes them later, on the masters.
          CHECK(s.variables == (n == 1 ? 2u : 0u));
        }
        run->train_step(features(), labels());
        // Each loss's gradient is 21 (Sum over the whole batch, however split).
        const float lr = factory ? 1.0f : 0.5f;
        CHECK(run->variable("c")[0] == 10.0f - lr * 21.0f);
        CHECK(run->variable("d")[0] == 2.0f - lr * 21.0f);
        CHECK(run->loss() == (9.0f + 1.0f) * 21.0f);
        CHECK(run->global_step() == 1);
      }
    }
  }
}

TEST_CASE("one TowerOptimizer object shared by every tower's model function, 2 and 3 towers",
          "[device-matrix][tower-contract]") {
  for (const int n : {2, 3}) {
    INFO(n << " towers");
    vkt::TowerOptimizer shared([] { return std::make_unique<vkt::SGD>(0.5f); });
    const auto model = [&](vkt::ModelContext& ctx, const vkt::TensorDict& f,
                           const vkt::TensorDict& l, vkt::Mode m, const vkt::Params&) {
      const Tensor c = ctx.graph().variable("c", {}, vkt::Initializer::constant(10.0f));
      const Tensor loss = vkt::reduce_sum(vkt::abs(l.at("y") - f.at("x") * c));
      return vkt::EstimatorSpec{.mode = m, .loss = loss, .train_op = shared.minimize(loss)};
    };
    vkt::Instance instance;
    auto run =
        build(instance, model, {.loss_reduction = vkt::LossReduction::Sum, .devices = devices(n)},
              vkt::Mode::Train);
    CHECK(shared.apply_calls() == static_cast<std::size_t>(n));
    run->train_step(features(), labels());
    CHECK(run->variable("c")[0] == 10.0f - 0.5f * 21.0f);
    CHECK(run->global_step() == 1);
  }
}

TEST_CASE("one Adam TowerOptimizer on two losses sharing a variable: N towers equal 1",
          "[device-matrix][tower-contract]") {
  // Both calls update c: its m and v are one pair, updated twice a step, on
  // one tower as on the towers' copy of the optimizer.
  const auto model = [](vkt::ModelContext& ctx, const vkt::TensorDict& f, const vkt::TensorDict& l,
                        vkt::Mode m, const vkt::Params&) {
    vkt::Graph& g = ctx.graph();
    const Tensor c = g.variable("c", {}, vkt::Initializer::constant(1.5f));
    const Tensor d = g.variable("d", {}, vkt::Initializer::constant(-0.5f));
    const Tensor first = vkt::reduce_sum(vkt::square(l.at("y") - f.at("x") * c - d));
    const Tensor second = vkt::reduce_sum(vkt::square(f.at("x") * c - 2.0f));
    vkt::TowerOptimizer adam([] { return std::make_unique<vkt::Adam>(0.1f); });
    adam.minimize(first, std::vector<Tensor>{c, d});
    return vkt::EstimatorSpec{
        .mode = m, .loss = first + second, .train_op = adam.minimize(second, std::vector{c})};
  };
  const auto train = [&](int n, vkt::VariableMode mode) {
    vkt::Instance instance;
    auto run = build(
        instance, model,
        {.loss_reduction = vkt::LossReduction::Sum, .devices = devices(n), .variable_mode = mode},
        vkt::Mode::Train);
    for (int s = 0; s < 3; ++s) run->train_step(features(), labels());
    std::vector<std::vector<float>> values;
    for (const char* name : {"c", "d", "c/Adam/m", "c/Adam/v", "d/Adam/m", "d/Adam/v"}) {
      values.push_back(run->variable(name));
    }
    return values;
  };
  const auto one = train(1, vkt::VariableMode::SharedLocalParameterServer);
  CHECK(one[0][0] != 1.5f);  // trained
  for (const auto mode : kModes) {
    for (const int n : {2, 3}) {
      INFO("variable mode " << static_cast<int>(mode) << ", " << n << " towers");
      const auto many = train(n, mode);
      for (std::size_t v = 0; v < one.size(); ++v) {
        INFO("value " << v);
        CHECK(many[v][0] == Approx(one[v][0]).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("Adam's slots read through TowerRun::variable in every variable mode on 2 towers",
          "[device-matrix][tower-contract]") {
  // c on tower 0's device, d on tower 1's (RoundRobin): each slot where its variable is.
  const auto model = [](vkt::ModelContext& ctx, const vkt::TensorDict& f, const vkt::TensorDict& l,
                        vkt::Mode m, const vkt::Params&) {
    vkt::Graph& g = ctx.graph();
    const Tensor c = g.variable("c", {}, vkt::Initializer::constant(10.0f));
    const Tensor d = g.variable("d", {}, vkt::Initializer::constant(2.0f));
    const Tensor loss = vkt::reduce_sum(vkt::abs(l.at("y") - f.at("x") * c)) +
                        vkt::reduce_sum(vkt::abs(l.at("y") - f.at("x") * d));
    vkt::TowerOptimizer adam(std::make_unique<vkt::Adam>(0.1f));
    return vkt::EstimatorSpec{.mode = m, .loss = loss, .train_op = adam.minimize(loss)};
  };
  const auto slots = [&](int n, vkt::VariableMode mode) {
    vkt::Instance instance;
    auto run = build(
        instance, model,
        {.loss_reduction = vkt::LossReduction::Sum, .devices = devices(n), .variable_mode = mode},
        vkt::Mode::Train);
    run->train_step(features(), labels());
    std::vector<float> values;
    for (const char* name : {"c/Adam/m", "c/Adam/v", "d/Adam/m", "d/Adam/v"}) {
      values.push_back(run->variable(name).at(0));
    }
    return values;
  };
  const std::vector<float> one = slots(1, vkt::VariableMode::SharedLocalParameterServer);
  // After one step with gradient 21: m = (1 - beta1) 21, v = (1 - beta2) 21^2.
  CHECK(one[0] == Approx(0.1 * 21).epsilon(1e-6));
  CHECK(one[1] == Approx(0.001 * 21 * 21).epsilon(1e-4));  // 1 - beta2 rounds in float
  CHECK(one[2] == one[0]);
  CHECK(one[3] == one[1]);
  for (const auto mode : kModes) {
    INFO("variable mode " << static_cast<int>(mode));
    CHECK(slots(2, mode) == one);
  }
}

namespace {

/// A model whose eval metrics depend on the tower: `differ` picks how.
vkt::ModelFn metrics_model(int odd_tower, bool extra) {
  return [=](vkt::ModelContext& ctx, const vkt::TensorDict& f, const vkt::TensorDict& l,
             vkt::Mode m, const vkt::Params&) {
    const Tensor c = ctx.graph().variable("c", {}, vkt::Initializer::constant(1.0f));
    const Tensor p = f.at("x") * c;
    vkt::EstimatorSpec spec{.mode = m, .loss = vkt::reduce_sum(vkt::abs(l.at("y") - p))};
    spec.eval_metric_ops = {{"mse", vkt::metrics::mean_squared_error(l.at("y"), p)}};
    if (ctx.tower() != odd_tower) {
      spec.eval_metric_ops.emplace("mean_p", vkt::metrics::mean(p));
    } else if (extra) {
      spec.eval_metric_ops.emplace("mean_p", vkt::metrics::mean(p));
      spec.eval_metric_ops.emplace("only_here", vkt::metrics::mean(p));
    }
    return spec;
  };
}

}  // namespace

TEST_CASE("eval metrics that differ between towers are an error when the model is built",
          "[device-matrix][tower-contract]") {
  vkt::Instance instance;
  SECTION("a metric only tower 1 has") {
    CHECK_THAT(
        error_of([&] {
          build(instance, metrics_model(1, true), {.devices = devices(2)}, vkt::Mode::Eval);
        }),
        Contains("eval metric 'only_here'") && Contains("tower 1") && Contains("not by tower 0"));
  }
  SECTION("a metric missing from tower 1") {
    CHECK_THAT(
        error_of([&] {
          build(instance, metrics_model(1, false), {.devices = devices(2)}, vkt::Mode::Eval);
        }),
        Contains("eval metric 'mean_p'") && Contains("tower 0") && Contains("not by tower 1"));
  }
  SECTION("a metric missing from tower 2 of 3, and one missing from tower 0") {
    CHECK_THAT(error_of([&] {
                 build(instance, metrics_model(2, false), {.devices = devices(3)}, vkt::Mode::Eval);
               }),
               Contains("eval metric 'mean_p'") && Contains("not by tower 2"));
    CHECK_THAT(
        error_of([&] {
          build(instance, metrics_model(0, false), {.devices = devices(3)}, vkt::Mode::Eval);
        }),
        Contains("eval metric 'mean_p'") && Contains("tower 1") && Contains("not by tower 0"));
  }
  SECTION("a metric of one name but other accumulators") {
    const auto model = [](vkt::ModelContext& ctx, const vkt::TensorDict& f,
                          const vkt::TensorDict& l, vkt::Mode m, const vkt::Params&) {
      const Tensor c = ctx.graph().variable("c", {}, vkt::Initializer::constant(1.0f));
      const Tensor p = f.at("x") * c;
      vkt::EstimatorSpec spec{.mode = m, .loss = vkt::reduce_sum(vkt::abs(l.at("y") - p))};
      spec.eval_metric_ops = {
          {"m", ctx.tower() == 0 ? vkt::metrics::mean(p) : vkt::metrics::auc(l.at("y"), p, 4)}};
      return spec;
    };
    CHECK_THAT(error_of([&] { build(instance, model, {.devices = devices(2)}, vkt::Mode::Eval); }),
               Contains("eval metric 'm'") && Contains("tower 1") && Contains("tower 0"));
  }
  SECTION("the same metrics on every tower build and evaluate") {
    auto run = build(instance, metrics_model(-1, false), {.devices = devices(3)}, vkt::Mode::Eval);
    run->evaluate_step(features(), labels());
    const auto m = run->metrics();
    CHECK(m.at("mse") == 0.0);
    CHECK(m.at("mean_p") == Approx(3.5));
  }
}

namespace {

/// Counts every hook call of every instance made from one Counts.
struct Counts {
  int begin = 0, after_step = 0, end = 0;
  std::vector<int> after_step_towers;
};

struct CountingHook : vkt::TrainingHook {
  CountingHook(Counts& counts, int tower) : counts(counts), tower(tower) {}
  void begin() override { ++counts.begin; }
  void after_step(std::uint64_t, float) override {
    ++counts.after_step;
    counts.after_step_towers.push_back(tower);
  }
  void end() override { ++counts.end; }
  Counts& counts;
  int tower;
};

}  // namespace

TEST_CASE("the model's training hooks run once per step on 1, 2 and 3 towers",
          "[device-matrix][tower-contract][estimator]") {
  for (const int n : {1, 2, 3}) {
    INFO(n << " tower(s)");
    Counts counts;
    const auto model = [&](vkt::ModelContext& ctx, const vkt::TensorDict& f,
                           const vkt::TensorDict& l, vkt::Mode m, const vkt::Params&) {
      const Tensor c = ctx.graph().variable("c", {}, vkt::Initializer::constant(10.0f));
      const Tensor loss = vkt::reduce_sum(vkt::abs(l.at("y") - f.at("x") * c));
      vkt::TowerOptimizer sgd(std::make_unique<vkt::SGD>(0.01f));
      vkt::EstimatorSpec spec{.mode = m, .loss = loss, .train_op = sgd.minimize(loss)};
      spec.training_hooks = {std::make_shared<CountingHook>(counts, ctx.tower())};
      return spec;
    };
    // The merged spec takes the last tower's hooks, as TensorFlow's does.
    {
      vkt::Instance instance;
      vkt::ModelContext root(instance, {{"x", {{kBatch, 1}}}}, {{"y", {{kBatch, 1}}}});
      root.set_device_pool(&vkt::test::tower_devices());
      const vkt::EstimatorSpec spec = vkt::replicate_model_fn(model, {.devices = devices(n)})(
          root, {}, {}, vkt::Mode::Train, {});
      REQUIRE(spec.training_hooks.size() == 1);
      CHECK(static_cast<const CountingHook&>(*spec.training_hooks[0]).tower == n - 1);
    }
    vkt::test::TempDir dir;
    vkt::Estimator estimator(vkt::replicate_model_fn(model, {.devices = devices(n)}),
                             {.model_dir = dir.path,
                              .save_checkpoints_steps = 0,
                              .log_step_count_steps = 0,
                              .save_summary_steps = 0,
                              .progress = false,
                              .plot_loss = false});
    const vkt::Dataset data({{"x", features().at("x")}, {"y", labels().at("y")}});
    CHECK(estimator.train(vkt::dataset_input(data, {.batch_size = kBatch, .epochs = 0}),
                          {.steps = 4}) == 4);
    CHECK(counts.begin == 1);
    CHECK(counts.after_step == 4);
    CHECK(counts.end == 1);
    CHECK(counts.after_step_towers == std::vector<int>(4, n - 1));
  }
}

TEST_CASE("a TowerOptimizer moved from says so instead of crashing", "[tower-contract]") {
  vkt::TowerOptimizer from(std::make_unique<vkt::SGD>(1.0f));
  vkt::TowerOptimizer to(std::move(from));
  CHECK(to.name() == "SGD");
  CHECK(to.made());
  CHECK_THAT(error_of([&] { (void)from.name(); }), Contains("moved from"));  // NOLINT: on purpose
}
