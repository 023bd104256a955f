// Dynamic loss scaling (vkt::LossScaler) on one graph: the unscaled updates
// against an unscaled run's bits, the skip of exactly the calls whose
// gradients overflow, the scale's schedule, and its errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <memory>
#include <random>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/loss_scaler.h>
#include <vktower/optimizers/sgd.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/embedding.h>
#include <vktower/runtime/graph/ops/matmul.h>
#include <vktower/runtime/graph/ops/reduce.h>

#include "../shared_device.h"
#include "../test_support.h"

using Catch::Matchers::Contains;
using vkt::Tensor;

namespace {

/// An embedding (sparse gradients) into a dense layer, trained by Adam
/// clipped by global norm, with or without a loss scaler of `interval`.
struct ScaledModel {
  explicit ScaledModel(bool scaled, std::uint32_t interval = 3)
      : graph(vkt::test::shared_device()), adam(0.01f, {.clipping = {.global_norm = 0.5f}}) {
    const Tensor table = graph.variable("table", {6, 4}, vkt::Initializer::uniform(-1, 1));
    const Tensor w = graph.variable("w", {4, 3}, vkt::Initializer::uniform(-1, 1));
    const Tensor ids = graph.input("ids", {5}, vkt::DType::I32);
    const Tensor target = graph.input("t", {5, 3});
    loss = vkt::reduce_sum(vkt::tanh(vkt::matmul(vkt::embedding_lookup(table, ids), w)) * target);
    if (scaled) {
      scaler = std::make_unique<vkt::LossScaler>(
          graph, vkt::LossScaleOptions{.growth_interval = interval});
      train = scaler->apply_gradients(adam, adam.compute_gradients(scaler->scale(loss)));
      scale_update = scaler->update();
      step = std::make_unique<vkt::Executor>(graph, std::vector<Tensor>{loss, train, scale_update});
    } else {
      train = adam.minimize(loss);
      step = std::make_unique<vkt::Executor>(graph, std::vector<Tensor>{loss, train});
    }
  }
  /// Every variable's values (weights and Adam's slots, not the scaler's).
  std::vector<std::vector<float>> state() {
    std::vector<std::vector<float>> out;
    for (const vkt::Variable& v : graph.variables()) {
      if (v.tensor.name().rfind("loss_scale/", 0) != 0) out.push_back(graph.values(v.tensor));
    }
    return out;
  }
  void run(const std::vector<std::int32_t>& ids, const std::vector<float>& t) {
    step->feed("ids", ids);
    step->feed("t", t);
    step->run();
  }

  vkt::Graph graph;
  vkt::Adam adam;
  std::unique_ptr<vkt::LossScaler> scaler;
  Tensor loss, train, scale_update;
  std::unique_ptr<vkt::Executor> step;
};

std::vector<float> random_targets(std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> t(15);
  for (float& v : t) v = normal(rng);
  return t;
}

}  // namespace

TEST_CASE(
    "a loss scaler's updates give an unscaled run's bits (dense and sparse, clipped by norm), "
    "and its scale doubles every growth interval") {
  ScaledModel scaled(true, 3), plain(false);
  std::mt19937 rng(7);
  const std::vector<std::int32_t> ids{0, 3, 3, 5, 1};
  for (int step = 0; step < 7; ++step) {
    const std::vector<float> t = random_targets(rng);
    scaled.run(ids, t);
    plain.run(ids, t);
    INFO("step " << step);
    // The scale is a power of two, so scaling the loss scales every gradient
    // exactly, and unscaling gives the same bits.
    CHECK(scaled.state() == plain.state());
    const std::vector<float> used = scaled.step->read(scaled.scale_update);
    CHECK(used[0] == std::ldexp(65536.0f, step / 3));  // the scale this step took
    CHECK(used[1] == 0.0f);
    CHECK(scaled.graph.values(scaled.scaler->good_steps_variable())[0] ==
          static_cast<float>((step + 1) % 3));
  }
  CHECK(scaled.graph.values(scaled.scaler->scale_variable())[0] == 65536.0f * 4);
}

TEST_CASE(
    "a loss scaler skips exactly the optimizer call whose gradients hold an inf or NaN, and "
    "halves the scale") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor a = g.variable("a", {3}, vkt::Initializer::constant(1.0f));
  const Tensor b = g.variable("b", {3}, vkt::Initializer::constant(2.0f));
  const Tensor xa = g.input("xa", {3});
  const Tensor xb = g.input("xb", {3});
  // The gradients are xa and xb, times the scale.
  const Tensor loss = vkt::reduce_sum(a * xa) + vkt::reduce_sum(b * xb);
  vkt::Adam adam(0.1f);
  vkt::SGD sgd(0.5f, {.momentum = 0.9f});
  vkt::LossScaler scaler(g, {.growth_interval = 2});
  const Tensor scaled = scaler.scale(loss);
  const Tensor train_a = scaler.apply_gradients(adam, adam.compute_gradients(scaled, {{a}}));
  const Tensor train_b = scaler.apply_gradients(sgd, sgd.compute_gradients(scaled, {{b}}));
  const Tensor update = scaler.update();
  vkt::Executor step(g, {train_a, train_b, update});
  const auto run = [&](std::vector<float> fa, std::vector<float> fb) {
    step.feed("xa", fa);
    step.feed("xb", fb);
    step.run();
    return step.read(update);
  };
  const auto values = [&](const Tensor& var, const char* slot, vkt::Optimizer& opt) {
    return std::pair{g.values(var), g.values(opt.get_slot(var, slot))};
  };
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();

  CHECK(run({1, -2, 0.5f}, {1, 1, 1}) == std::vector<float>{65536, 0});
  // b's gradient 1e35 x 65536 overflows: SGD skips b (weights and momentum
  // unchanged) while Adam updates a; the scale halves, the count restarts.
  auto a_before = values(a, "m", adam);
  auto b_before = values(b, "momentum", sgd);
  CHECK(run({1, 1, 1}, {1e35f, 0, 0}) == std::vector<float>{65536, 1});
  CHECK(values(b, "momentum", sgd) == b_before);
  CHECK(values(a, "m", adam) != a_before);
  CHECK(g.values(scaler.scale_variable())[0] == 32768.0f);
  CHECK(g.values(scaler.good_steps_variable())[0] == 0.0f);

  // 1e33 x 32768 is finite (its square is not, so a norm would overflow):
  // not skipped. A NaN in a's gradient skips Adam, m and v and a unchanged.
  a_before = values(a, "v", adam);
  const std::vector<float> a_m = g.values(adam.get_slot(a, "m"));
  b_before = values(b, "momentum", sgd);
  CHECK(run({nan, 0, 0}, {1e33f, 0, 0}) == std::vector<float>{32768, 1});
  CHECK(values(a, "v", adam) == a_before);
  CHECK(g.values(adam.get_slot(a, "m")) == a_m);
  CHECK(values(b, "momentum", sgd) != b_before);
  CHECK(g.values(scaler.scale_variable())[0] == 16384.0f);

  // -inf in both: both skip. Then two good steps double the scale again.
  a_before = values(a, "m", adam);
  b_before = values(b, "momentum", sgd);
  CHECK(run({-inf, 0, 0}, {0, inf, 0}) == std::vector<float>{16384, 1});
  CHECK(values(a, "m", adam) == a_before);
  CHECK(values(b, "momentum", sgd) == b_before);
  CHECK(run({1, 1, 1}, {1, 1, 1}) == std::vector<float>{8192, 0});
  CHECK(run({1, 1, 1}, {1, 1, 1}) == std::vector<float>{8192, 0});
  CHECK(g.values(scaler.scale_variable())[0] == 16384.0f);
  CHECK(g.values(scaler.good_steps_variable())[0] == 0.0f);
  CHECK(g.values(scaler.skipped_steps_variable())[0] == 3.0f);  // three of six steps
}

TEST_CASE("loss scaler misuse is a vkt::Error naming the fix") {
  vkt::Graph g(vkt::test::shared_device());
  CHECK_THAT(vkt::test::error_of([&] { vkt::LossScaler bad(g, {.initial_scale = 1000.0f}); }),
             Contains("not a power of two"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::LossScaler bad(g, {.growth_interval = 0}); }),
             Contains("growth interval is 0"));
  vkt::LossScaler scaler(g);
  CHECK_THAT(vkt::test::error_of([&] { scaler.update(); }),
             Contains("scaler.apply_gradients(optimizer, grads) first"));
}
