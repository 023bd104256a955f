// Graph, variables, initializers, autodiff plumbing and the Executor's plan.
#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>

#include <vktower/runtime/graph/autodiff.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/reduce.h>

#include "../shared_device.h"
#include "../test_support.h"

using Catch::Matchers::Contains;
using vkt::Initializer;
using vkt::Shape;
using vkt::Tensor;

TEST_CASE("a variable name means one variable") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor w = g.variable("layer/w", {3, 4}, Initializer::ones());
  CHECK(g.variable("layer/w", {3, 4}) == w);  // reuse, as a second tower does
  CHECK(g.find_variable("layer/w") == w);
  CHECK_FALSE(g.find_variable("layer/v").has_value());
  const std::string message = vkt::test::error_of([&] { g.variable("layer/w", {4, 3}); });
  CHECK_THAT(message, Contains("'layer/w'"));
  CHECK_THAT(message, Contains("[3, 4]"));
  CHECK_THAT(message, Contains("[4, 3]"));
  g.input("x", {2});
  CHECK_THAT(vkt::test::error_of([&] { g.input("x", {3}); }), Contains("already has an input"));
  CHECK_THAT(vkt::test::error_of([&] { g.variable("x", {3}); }), Contains("already has an input"));
  CHECK(g.variables().size() == 1);
  CHECK(g.trainable_variables().size() == 1);
}

TEST_CASE("initializers give the same values for the same seed and name on every device") {
  vkt::Instance instance;
  vkt::Device a(instance, 0);
  vkt::Device b(instance, 0);
  vkt::Graph ga(a, {.seed = 42});
  vkt::Graph gb(b, {.seed = 42});
  vkt::Graph other(b, {.seed = 43});
  const Shape shape{64, 32};
  const Tensor wa = ga.variable("w", shape, Initializer::glorot_uniform());
  const Tensor wb = gb.variable("w", shape, Initializer::glorot_uniform());
  const Tensor wo = other.variable("w", shape, Initializer::glorot_uniform());
  const Tensor va = ga.variable("v", shape, Initializer::glorot_uniform());
  const std::vector<float> xa = ga.values(wa), xb = gb.values(wb);
  CHECK(xa == xb);
  CHECK(xa != other.values(wo));  // another seed
  CHECK(xa != ga.values(va));     // another name

  // glorot_uniform: within +-sqrt(6/(in+out)), variance limit^2/3.
  const double limit = std::sqrt(6.0 / (64 + 32));
  double sum2 = 0;
  for (float x : xa) {
    REQUIRE(std::abs(x) <= limit);
    sum2 += static_cast<double>(x) * x;
  }
  CHECK(sum2 / xa.size() == Approx(limit * limit / 3).epsilon(0.1));
}

TEST_CASE("each initializer follows its definition") {
  vkt::Graph g(vkt::test::shared_device(), {.seed = 7});
  const Shape big{200, 50};
  const Tensor zeros = g.variable("zeros", {5}, Initializer::zeros());
  const Tensor ones = g.variable("ones", {5}, Initializer::ones());
  const Tensor seven = g.variable("seven", {5}, Initializer::constant(7.5f));
  const Tensor uniform = g.variable("uniform", big, Initializer::uniform(2.0f, 3.0f));
  const Tensor normal = g.variable("normal", big, Initializer::normal(1.0f, 2.0f));
  const Tensor truncated = g.variable("truncated", big, Initializer::truncated_normal(0.0f, 0.5f));
  const Tensor he = g.variable("he", big, Initializer::he_normal());
  CHECK(g.values(zeros) == std::vector<float>(5, 0.0f));
  CHECK(g.values(ones) == std::vector<float>(5, 1.0f));
  CHECK(g.values(seven) == std::vector<float>(5, 7.5f));
  const auto stats = [](const std::vector<float>& v) {
    double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size(), var = 0;
    for (float x : v) var += (x - mean) * (x - mean);
    return std::pair{mean, std::sqrt(var / v.size())};
  };
  const auto u = g.values(uniform);
  CHECK(*std::min_element(u.begin(), u.end()) >= 2.0f);
  CHECK(*std::max_element(u.begin(), u.end()) < 3.0f);
  CHECK(stats(u).first == Approx(2.5).epsilon(0.01));
  const auto [nm, ns] = stats(g.values(normal));
  CHECK(nm == Approx(1.0).margin(0.06));
  CHECK(ns == Approx(2.0).epsilon(0.03));
  const auto t = g.values(truncated);
  for (float x : t) REQUIRE(std::abs(x) <= 1.0f);  // two standard deviations
  // he_normal: truncated normal whose standard deviation is sqrt(2 / fan_in) after truncation.
  const auto [hm, hs] = stats(g.values(he));
  CHECK(hm == Approx(0.0).margin(0.01));
  CHECK(hs == Approx(std::sqrt(2.0 / 200)).epsilon(0.03));
}

TEST_CASE("a replayed step gives the same bits, and 1000 replays allocate nothing") {
  vkt::Device& device = vkt::test::shared_device();
  vkt::Graph g(device, {.seed = 3});
  const Tensor x = g.input("x", {33, 7});
  const Tensor w = g.variable("w", {7}, Initializer::normal(0.0f, 1.0f));
  const Tensor loss = vkt::reduce_mean(vkt::tanh(x * w) + vkt::sigmoid(x));
  const auto grads = vkt::gradients(loss, {w});
  vkt::Executor exec(g, {loss, grads[0].dense});
  exec.feed("x", vkt::test::random_floats(33 * 7, 9));
  exec.run();
  const std::vector<float> first_loss = exec.read(loss);
  const std::vector<float> first_grad = exec.read(grads[0].dense);
  const std::uint64_t allocations = device.allocation_count();
  for (int i = 0; i < 1000; ++i) exec.run();
  CHECK(device.allocation_count() == allocations);
  CHECK(exec.read(loss) == first_loss);
  CHECK(exec.read(grads[0].dense) == first_grad);
  CHECK(exec.step() == 1001);
}

TEST_CASE("dead activations share memory") {
  vkt::Graph g(vkt::test::shared_device());
  const std::int64_t n = 1000;
  Tensor t = g.input("x", {n});
  for (int i = 0; i < 10; ++i) t = vkt::relu(t) + 1.0f;  // 20 activations of 4000 bytes in a chain
  const Tensor out = vkt::reduce_sum(t);
  vkt::Executor exec(g, {out}, {.fuse = false});  // fused, the chain's links have no memory at all
  std::vector<float> x(n, -1.0f);
  exec.feed("x", x);
  exec.run();
  CHECK(exec.read(out)[0] == Approx(10.0f * n));
  // A chain needs two live blocks at a time, never twenty.
  CHECK(exec.range(t).buffer->size() <= 3 * 4000 + 64);
}

TEST_CASE("gradients accumulate over every use and skip what the loss does not reach") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.variable("x", {4});
  const Tensor unused = g.variable("unused", {4});
  const Tensor loss = vkt::reduce_sum(x * x + x * 3.0f);  // d/dx = 2x + 3
  const auto grads = vkt::gradients(loss, {x, unused});
  REQUIRE(grads[0].valid());
  CHECK_FALSE(grads[1].valid());  // no gradient, not zeros
  vkt::Executor exec(g, {loss, grads[0].dense});
  g.assign(x, std::vector<float>{1, -2, 0.5f, 4});
  exec.run();
  CHECK(exec.read(grads[0].dense) == std::vector<float>{5, -1, 4, 11});
  CHECK(exec.read(loss)[0] == Approx(1 + 4 + 0.25 + 16 + 3 * 3.5));
}

TEST_CASE("graph and executor misuse is a vkt::Error naming the problem") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {5, 3});
  const Tensor y = g.input("y", {4});
  const Tensor w = g.variable("w", {3});
  const std::string broadcast = vkt::test::error_of([&] { vkt::add(x, y); });
  CHECK_THAT(broadcast, Contains("add('x', 'y')"));
  CHECK_THAT(broadcast, Contains("[5, 3]"));
  CHECK_THAT(broadcast, Contains("[4]"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::gradients(x * w, {w}); }),
             Contains("must be a scalar"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::reduce_sum(x, 2); }),
             Contains("axis 2 is out of range"));
  CHECK_THAT(vkt::test::error_of([&] {
               Shape({1, 2, 3, 4, 5, 6, 7});
             }),
             Contains("rank 0 to 6: merge adjacent axes with a reshape"));

  vkt::Graph other(vkt::test::shared_device());
  const Tensor z = other.input("z", {3});
  CHECK_THAT(vkt::test::error_of([&] { vkt::mul(w, z); }), Contains("different graphs"));

  const Tensor out = vkt::reduce_sum(x * w);
  vkt::Executor exec(g, {out});
  CHECK_THAT(vkt::test::error_of([&] { exec.run(); }),
             Contains("input 'x' ([5, 3]) was never fed"));
  CHECK_THAT(vkt::test::error_of([&] { exec.feed("x", std::vector<float>(14)); }),
             Contains("has shape [5, 3] (15 values) but 14 values were given"));
  CHECK_THAT(vkt::test::error_of([&] { exec.feed("nope", std::vector<float>(1)); }),
             Contains("no input named 'nope'"));
  CHECK_THAT(vkt::test::error_of([&] { exec.feed("y", std::vector<float>(4)); }),
             Contains("not used by this Executor"));
  CHECK_THAT(vkt::test::error_of([&] { exec.feed("x", std::vector<std::int32_t>(15)); }),
             Contains("holds f32 values, i32 were given"));
  CHECK_THAT(vkt::test::error_of([&] { g.variable("late", {2}); }),
             Contains("make every variable before the first Executor"));
  exec.feed("x", std::vector<float>(15, 1.0f));
  exec.run();
  const Tensor hidden = x * w;  // built after: not in the program
  CHECK_THAT(vkt::test::error_of([&] { (void)exec.read(hidden); }),
             Contains("was not fetched by this Executor"));
}

TEST_CASE("1-D ops cover tensors past 65535 workgroups") {
  vkt::Graph g(vkt::test::shared_device());
  const std::int64_t n = std::int64_t{65536} * 256 + 5;  // one workgroup too many for x alone
  const Tensor x = g.input("x", {n});
  const Tensor y = vkt::relu(x) * 2.0f;
  vkt::Executor exec(g, {y});
  std::vector<float> host(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 1000) - 500.0f;
  exec.feed("x", host);
  exec.run();
  const std::vector<float> out = exec.read(y);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < host.size(); ++i) wrong += out[i] != std::max(host[i], 0.0f) * 2.0f;
  CHECK(wrong == 0);
}
