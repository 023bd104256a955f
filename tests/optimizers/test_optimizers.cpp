// Every optimizer against a double-precision CPU implementation of its
// documented formula, and the optimizer machinery (slots, several optimizers,
// schedules, clipping, errors).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <memory>
#include <random>

#include <vktower/optimizers/adagrad.h>
#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/ftrl.h>
#include <vktower/optimizers/rmsprop.h>
#include <vktower/optimizers/sgd.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/embedding.h>
#include <vktower/runtime/graph/ops/reduce.h>

#include "../shared_device.h"
#include "../test_support.h"
#include "optimizer_reference.h"

using Catch::Matchers::Contains;
using vkt::Shape;
using vkt::Tensor;
using vkt::test::RefOptimizer;
using vkt::test::RefState;

namespace {

using Case = vkt::test::OptimizerCase;

std::vector<Case> cases() {
  const float lr = 0.01f;
  return {
      {"SGD", [=] { return std::make_unique<vkt::SGD>(lr); }, {.kind = "sgd", .lr = lr}},
      {"SGD momentum dampening weight_decay",
       [=] {
         return std::make_unique<vkt::SGD>(
             lr, vkt::SGDOptions{.momentum = 0.9f, .dampening = 0.1f, .weight_decay = 0.01f});
       },
       {.kind = "sgd", .lr = lr, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}},
      {"SGD nesterov",
       [=] {
         return std::make_unique<vkt::SGD>(lr, vkt::SGDOptions{.momentum = 0.8f, .nesterov = true});
       },
       {.kind = "sgd", .lr = lr, .momentum = 0.8, .nesterov = true}},
      {"Momentum",
       [=] { return std::make_unique<vkt::Momentum>(lr, 0.9f); },
       {.kind = "sgd", .lr = lr, .momentum = 0.9}},
      {"Adam", [=] { return std::make_unique<vkt::Adam>(lr); }, {.kind = "adam", .lr = lr}},
      {"Adam amsgrad weight_decay",
       [=] {
         return std::make_unique<vkt::Adam>(
             lr, vkt::AdamOptions{
                     .beta1 = 0.8f, .beta2 = 0.99f, .weight_decay = 0.05f, .amsgrad = true});
       },
       {.kind = "adam",
        .lr = lr,
        .weight_decay = 0.05,
        .beta1 = 0.8,
        .beta2 = 0.99,
        .amsgrad = true}},
      {"AdamW",
       [=] { return std::make_unique<vkt::AdamW>(lr); },
       {.kind = "adamw", .lr = lr, .weight_decay = 0.01}},
      {"Adagrad",
       [=] {
         return std::make_unique<vkt::Adagrad>(
             lr, vkt::AdagradOptions{
                     .lr_decay = 0.01f, .weight_decay = 0.02f, .initial_accumulator_value = 0.1f});
       },
       {.kind = "adagrad", .lr = lr, .weight_decay = 0.02, .eps = 1e-10, .lr_decay = 0.01},
       0.1},
      {"RMSprop",
       [=] { return std::make_unique<vkt::RMSprop>(lr); },
       {.kind = "rmsprop", .lr = lr}},
      {"RMSprop centered momentum weight_decay",
       [=] {
         return std::make_unique<vkt::RMSprop>(
             lr, vkt::RMSpropOptions{
                     .alpha = 0.9f, .weight_decay = 0.01f, .momentum = 0.5f, .centered = true});
       },
       {.kind = "rmsprop",
        .lr = lr,
        .momentum = 0.5,
        .weight_decay = 0.01,
        .alpha = 0.9,
        .centered = true}},
      {"Ftrl",
       [=] { return std::make_unique<vkt::Ftrl>(0.1f, vkt::FtrlOptions{.l1 = 0.01f, .l2 = 0.1f}); },
       {.kind = "ftrl", .lr = 0.1, .l1 = 0.01, .l2 = 0.1},
       0.1},
  };
}

}  // namespace

TEST_CASE("each optimizer matches its formula over 100 steps of random gradients") {
  const std::vector<Shape> shapes{Shape{7}, Shape{33, 3}, Shape{1}};
  for (const Case& c : cases()) {
    INFO(c.label);
    vkt::Graph g(vkt::test::shared_device(), {.seed = 5});
    std::unique_ptr<vkt::Optimizer> opt = c.make();
    std::vector<vkt::GradVar> gvs;
    std::vector<Tensor> vars;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      vars.push_back(
          g.variable(fmt::format("w{}", i), shapes[i], vkt::Initializer::uniform(-1, 1)));
      gvs.push_back({vkt::Gradient{g.input(fmt::format("g{}", i), shapes[i])}, vars.back()});
    }
    const Tensor train = opt->apply_gradients(gvs);
    vkt::Executor exec(g, {train});

    std::vector<RefState> ref(shapes.size());
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const std::vector<float> p = g.values(vars[i]);
      ref[i].p.assign(p.begin(), p.end());
      for (const std::string& s : opt->slot_names()) {
        const double init = (s == "sum" || s == "accumulator") ? c.initial_slot : 0.0;
        ref[i].slot[s] = std::vector<double>(p.size(), init);
      }
    }
    std::mt19937 rng(17);
    std::normal_distribution<float> grad(0.0f, 1.0f);
    for (std::uint64_t t = 1; t <= 100; ++t) {
      for (std::size_t i = 0; i < shapes.size(); ++i) {
        std::vector<float> gv(static_cast<std::size_t>(shapes[i].elements()));
        for (float& x : gv) x = grad(rng);
        exec.feed(fmt::format("g{}", i), gv);
        c.ref.step(ref[i], std::vector<double>(gv.begin(), gv.end()), t);
      }
      exec.run();
    }
    exec.wait();
    CHECK(g.global_step() == 100);
    double worst = 0;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const auto compare = [&](const std::vector<float>& got, const std::vector<double>& want) {
        for (std::size_t j = 0; j < got.size(); ++j) {
          worst = std::max(worst, std::abs(got[j] - want[j]) / std::max(std::abs(want[j]), 1.0));
        }
      };
      compare(g.values(vars[i]), ref[i].p);
      for (const std::string& s : opt->slot_names())
        compare(g.values(opt->get_slot(vars[i], s)), ref[i].slot[s]);
    }
    CHECK(worst < 1e-5);
  }
}

TEST_CASE("the README's scalar example on one device: c goes from 10 to 7") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor c = g.variable("c", {}, vkt::Initializer::constant(10.0f));
  const Tensor x = g.input("x", {2, 1});
  const Tensor y = g.input("y", {2, 1});
  const Tensor loss = vkt::reduce_sum(vkt::abs(y - x * c));
  vkt::SGD sgd(1.0f);
  const Tensor train = sgd.minimize(loss);
  vkt::Executor exec(g, {loss, train});
  exec.feed("x", std::vector<float>{1, 2});
  exec.feed("y", std::vector<float>{1, 2});
  exec.run();
  CHECK(exec.read(loss)[0] == 27.0f);
  CHECK(g.values(c)[0] == 7.0f);
  CHECK(exec.read(train)[0] == 1.0f);  // the learning rate the step used
  CHECK(g.global_step() == 1);
}

TEST_CASE("two optimizers on their own variables apply in order, the global step advances once") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor c = g.variable("c", {}, vkt::Initializer::constant(10.0f));
  const Tensor d = g.variable("d", {}, vkt::Initializer::constant(2.0f));
  const Tensor x = g.input("x", {2, 1});
  const Tensor y = g.input("y", {2, 1});
  const Tensor loss =
      vkt::reduce_sum(vkt::abs(y - x * c)) + vkt::reduce_sum(vkt::square(x * d - y));
  vkt::SGD sgd(1.0f);
  vkt::Adam adam(0.1f);
  const Tensor t1 = sgd.minimize(loss, std::vector<Tensor>{c});
  const Tensor t2 = adam.minimize(loss, std::vector<Tensor>{d});
  vkt::Executor exec(g, {loss, t1, t2});
  exec.feed("x", std::vector<float>{1, 2});
  exec.feed("y", std::vector<float>{1, 2});
  exec.run();
  CHECK(g.global_step() == 1);
  CHECK(g.values(c)[0] == 7.0f);  // as in the single-optimizer example
  // Adam's first step moves by lr * sign(g) (up to eps): g_d = 2*(1*1) + 2*(2*2) = 10 > 0.
  CHECK(g.values(d)[0] == Approx(2.0 - 0.1).epsilon(1e-6));
  // Both gradients were taken before either update: the loss is the pre-update value.
  CHECK(exec.read(loss)[0] == 27.0f + 1.0f + 4.0f);
}

TEST_CASE("the same variable updated by two optimizers in call order") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor c = g.variable("c", {}, vkt::Initializer::constant(10.0f));
  const Tensor loss = c * 2.0f;  // gradient 2, from the forward values
  vkt::SGD first(1.0f, {}, "first");
  vkt::SGD second(0.5f, {}, "second");
  const Tensor t1 = first.minimize(loss);
  const Tensor t2 = second.minimize(loss);
  vkt::Executor exec(g, {t2, t1});  // fetch order does not matter: call order does
  exec.run();
  CHECK(g.values(c)[0] == 10.0f - 2.0f - 1.0f);
  CHECK(g.global_step() == 1);
}

TEST_CASE("Adam's slots after one step are (1-beta1) g and (1-beta2) g^2") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor w = g.variable("w", {3}, vkt::Initializer::constant(1.0f));
  const Tensor x = g.constant({3}, std::vector<float>{1.0f, -2.0f, 0.5f});
  const Tensor loss = vkt::reduce_sum(w * x);  // gradient = x
  vkt::Adam adam(0.001, {.beta1 = 0.9, .beta2 = 0.999});
  const Tensor train = adam.minimize(loss);
  CHECK(adam.slot_names() == std::vector<std::string>{"m", "v", "v_max"});
  CHECK(adam.get_slot(w, "m").name() == "w/Adam/m");
  CHECK(adam.variables().size() == 3);
  vkt::Executor exec(g, {train});
  exec.run();
  const std::vector<float> m = g.values(adam.get_slot(w, "m"));
  const std::vector<float> v = g.values(adam.get_slot(w, "v"));
  const float grads[3] = {1.0f, -2.0f, 0.5f};
  for (int i = 0; i < 3; ++i) {
    // 1 - beta formed in double and rounded once (gradients are powers of 2,
    // so the products are exact): formed in float, 1 - 0.999f would be
    // 0.00099998713, 1.3e-5 off.
    CHECK(m[i] == static_cast<float>(1.0 - 0.9) * grads[i]);
    CHECK(v[i] == static_cast<float>(1.0 - 0.999) * grads[i] * grads[i]);
  }
  CHECK_THAT(vkt::test::error_of([&] { adam.get_slot(w, "velocity"); }),
             Contains("no slot 'velocity'"));
}

TEST_CASE("learning-rate schedules follow their formulas, read back from the train op") {
  const auto step = vkt::LearningRate::step_decay(0.1f, 10, 0.5f);
  CHECK(step.at(0) == Approx(0.1f));
  CHECK(step.at(9) == Approx(0.1f));
  CHECK(step.at(10) == Approx(0.05f));
  CHECK(step.at(25) == Approx(0.025f));
  const auto expo = vkt::LearningRate::exponential_decay(0.1f, 100, 0.5f);
  CHECK(expo.at(50) == Approx(0.1 * std::pow(0.5, 0.5)));
  CHECK(vkt::LearningRate::exponential_decay(0.1f, 100, 0.5f, true).at(150) == Approx(0.05f));
  const auto cosine = vkt::LearningRate::cosine_decay(0.2f, 100, 0.1f, 10);
  CHECK(cosine.at(0) == 0.0f);
  CHECK(cosine.at(5) == Approx(0.1f));
  CHECK(cosine.at(10) == Approx(0.2f));
  CHECK(cosine.at(60) == Approx(0.2 * (0.1 + 0.9 * 0.5)));  // half way: cos = 0
  CHECK(cosine.at(110) == Approx(0.02f));
  CHECK(cosine.at(1000) == Approx(0.02f));

  // On the device: the rate of each step, with nothing re-recorded.
  vkt::Graph g(vkt::test::shared_device());
  const Tensor w = g.variable("w", {}, vkt::Initializer::constant(0.0f));
  vkt::SGD sgd(vkt::LearningRate::step_decay(1.0f, 2, 0.5f));
  const Tensor train = sgd.minimize(w * 1.0f);  // gradient 1: w -= lr each step
  vkt::Executor exec(g, {train});
  const float expected[] = {1.0f, 1.0f, 0.5f, 0.5f, 0.25f};
  float w_expected = 0;
  for (float lr : expected) {
    exec.run();
    CHECK(exec.read(train)[0] == lr);
    w_expected -= lr;
    CHECK(g.values(w)[0] == w_expected);
  }
}

TEST_CASE("clipping by global norm scales every gradient by the same factor, by value clamps") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor a = g.variable("a", {2}, vkt::Initializer::zeros());
  const Tensor b = g.variable("b", {2}, vkt::Initializer::zeros());
  const Tensor ga = g.constant({2}, std::vector<float>{3.0f, 0.0f});
  const Tensor gb = g.constant({2}, std::vector<float>{0.0f, -4.0f});
  const Tensor loss = vkt::reduce_sum(a * ga) + vkt::reduce_sum(b * gb);  // gradients: ga, gb
  vkt::SGD clipped(1.0f, {.clipping = {.global_norm = 1.0f}}, "clipped");
  const Tensor train = clipped.minimize(loss);
  vkt::Executor exec(g, {train});
  exec.run();
  // Global norm 5 -> factor 1/5 for both variables.
  CHECK(g.values(a) == std::vector<float>{-0.6f, 0.0f});
  CHECK(g.values(b) == std::vector<float>{0.0f, 0.8f});

  vkt::Graph h(vkt::test::shared_device());
  const Tensor v = h.variable("v", {3}, vkt::Initializer::zeros());
  const Tensor loss2 =
      vkt::reduce_sum(v * h.constant({3}, std::vector<float>{5.0f, -0.25f, -7.0f}));
  vkt::SGD by_value(1.0f, {.clipping = {.value = 0.5f}}, "by_value");
  vkt::Executor exec2(h, {by_value.minimize(loss2)});
  exec2.run();
  CHECK(h.values(v) == std::vector<float>{-0.5f, 0.25f, 0.5f});
}

TEST_CASE("optimizer misuse is a vkt::Error naming the problem") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor w = g.variable("w", {2});
  const Tensor frozen = g.variable("frozen", {2}, vkt::Initializer::zeros(), false);
  const Tensor unused = g.variable("unused", {2});
  const Tensor loss = vkt::reduce_sum(w * w + frozen);
  vkt::SGD sgd(0.1f);
  CHECK_THAT(vkt::test::error_of([&] { sgd.minimize(loss, std::vector<Tensor>{}); }),
             Contains("var_list is empty"));
  CHECK_THAT(vkt::test::error_of([&] { sgd.minimize(loss, std::vector<Tensor>{unused}); }),
             Contains("no gradients to apply"));
  CHECK_THAT(vkt::test::error_of([&] { sgd.minimize(loss, std::vector<Tensor>{loss}); }),
             Contains("is not a variable"));
  CHECK_THAT(vkt::test::error_of([] { vkt::Adam bad(0.1f, {.beta1 = 1.0f}); }), Contains("betas"));
  CHECK_THAT(vkt::test::error_of([] { vkt::SGD bad(0.1f, {.nesterov = true}); }),
             Contains("nesterov"));
  // A reached and an unreached variable: only the reached one gets an update.
  const Tensor train = sgd.minimize(loss, std::vector<Tensor>{w, unused});
  vkt::SGD twin(0.1f);  // same name "SGD": its slots would collide with sgd's
  CHECK_THAT(vkt::test::error_of([&] { twin.minimize(loss, std::vector<Tensor>{w}); }),
             Contains("give them different names"));
  vkt::Executor exec(g, {train});
  const std::vector<float> unused_before = g.values(unused);
  exec.run();
  CHECK(g.values(unused) == unused_before);
  vkt::Adam late(0.1f);  // needs new slot variables, too late now
  CHECK_THAT(vkt::test::error_of([&] { late.minimize(loss); }),
             Contains("make every variable before the first Executor"));
}

TEST_CASE("TowerOptimizer with one tower forwards every call, making its optimizer once") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor c = g.variable("c", {}, vkt::Initializer::constant(10.0f));
  const Tensor x = g.constant({2, 1}, std::vector<float>{1, 2});
  const Tensor loss = vkt::reduce_sum(vkt::abs(x - x * c));
  int made = 0;
  vkt::TowerOptimizer opt([&made] {
    ++made;
    return std::make_unique<vkt::SGD>(1.0f);
  });
  CHECK(made == 0);  // lazily
  CHECK_FALSE(opt.made());
  const Tensor train = opt.minimize(loss);
  CHECK(made == 1);
  CHECK(opt.name() == "SGD");
  CHECK(opt.slot_names() == std::vector<std::string>{"momentum"});
  CHECK(opt.get_slot(c, "momentum").name() == "c/SGD/momentum");
  CHECK(opt.apply_calls() == 1);
  CHECK(made == 1);  // once
  vkt::Executor exec(g, {train});
  exec.run();
  CHECK(g.values(c)[0] == 7.0f);  // the same step as a plain SGD
  CHECK_THAT(
      vkt::test::error_of([] { vkt::TowerOptimizer bad(std::unique_ptr<vkt::Optimizer>{}); }),
      Contains("null"));
}

TEST_CASE("an embedding's sparse gradient is applied, duplicates summed") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor table = g.variable("table", {5, 3}, vkt::Initializer::constant(1.0f));
  const Tensor ids = g.constant_i32({4}, std::vector<std::int32_t>{3, 0, 3, 1});
  const Tensor rows = vkt::embedding_lookup(table, ids);  // [4, 3]
  const Tensor weights =
      g.constant({4, 3}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  const Tensor loss = vkt::reduce_sum(rows * weights);
  vkt::SGD sgd(0.5f);
  vkt::Executor exec(g, {sgd.minimize(loss)});
  exec.run();
  const std::vector<float> expected = {1 - 0.5f * 4,
                                       1 - 0.5f * 5,
                                       1 - 0.5f * 6,  // row 0: id at position 1
                                       1 - 0.5f * 10,
                                       1 - 0.5f * 11,
                                       1 - 0.5f * 12,  // row 1: position 3
                                       1,
                                       1,
                                       1,  // row 2: untouched
                                       1 - 0.5f * 8,
                                       1 - 0.5f * 10,
                                       1 - 0.5f * 12,  // row 3: positions 0 and 2, summed
                                       1,
                                       1,
                                       1};  // row 4: untouched
  CHECK(g.values(table) == expected);
}
