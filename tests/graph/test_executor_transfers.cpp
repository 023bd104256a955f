// Feeding, running and reading an Executor in a loop makes nothing after the
// first iteration, on the staged path (a discrete GPU's) and the mapped one.
#include <catch2/catch.hpp>

#include <random>

#include <vktower/runtime/graph/autodiff.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/reduce.h>
#include <vktower/runtime/vulkan/device.h>
#include <vktower/runtime/vulkan/instance.h>

using vkt::Initializer;
using vkt::Tensor;

TEST_CASE("an executor fed, run and read in a loop makes nothing after the first iteration") {
  const bool staged = GENERATE(false, true);
  INFO("force_staging = " << staged);
  vkt::Instance instance;
  vkt::Device device(instance, 0, vkt::DeviceOptions{.force_staging = staged});
  vkt::Graph g(device);
  const std::int64_t rows = 6, cols = 5;
  const Tensor x = g.input("x", {rows, cols});
  const Tensor w = g.variable("w", {cols}, Initializer::ones());
  const Tensor loss = vkt::reduce_sum(x * w);
  const auto grads = vkt::gradients(loss, {w});
  vkt::Executor exec(g, {loss, grads[0].dense});

  std::mt19937 rng(3);
  vkt::DeviceObjectCounts after_first;
  for (int i = 0; i < 12; ++i) {
    // Small integers: every sum is exact in float, so the reference is exact.
    std::vector<float> xs(rows * cols);
    for (float& v : xs) v = static_cast<float>(static_cast<int>(rng() % 17) - 8);
    std::vector<float> ws(cols);
    for (float& v : ws) v = static_cast<float>(static_cast<int>(rng() % 5) - 2);
    g.assign(w, ws);
    exec.feed("x", xs);
    exec.run();
    double expected = 0;
    std::vector<float> column_sums(cols, 0.0f);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) {
        expected += static_cast<double>(xs[r * cols + c]) * ws[c];
        column_sums[c] += xs[r * cols + c];
      }
    }
    REQUIRE(exec.read(loss) == std::vector<float>{static_cast<float>(expected)});
    REQUIRE(exec.read(grads[0].dense) == column_sums);  // d loss / d w = column sums of x
    REQUIRE(g.values(w) == ws);
    if (i == 0) {
      after_first = device.object_counts();
    } else {
      INFO("iteration " << i);
      REQUIRE(to_string(device.object_counts()) == to_string(after_first));
    }
  }
}

TEST_CASE(
    "double-buffered feeds: the next input is fed while a run is queued, every run fed anew") {
  const bool staged = GENERATE(false, true);
  INFO("force_staging = " << staged);
  vkt::Instance instance;
  vkt::Device device(instance, 0, vkt::DeviceOptions{.force_staging = staged});
  vkt::Graph g(device);
  const Tensor x = g.input("x", {4});
  const Tensor y = g.input("y", {4});
  const Tensor out = x * y;
  vkt::Executor exec(g, {out}, vkt::ExecutorOptions{.double_buffered_feeds = true});
  const auto values = [](float base) {
    return std::vector<float>{base, base + 1, base + 2, base + 3};
  };
  exec.feed("x", values(1));
  exec.feed("y", values(2));
  exec.run();
  // Fed while the first run may still be queued: lands in the other buffer.
  exec.feed("x", values(10));
  exec.feed("y", values(-1));
  CHECK(exec.read(out) == std::vector<float>{2, 6, 12, 20});
  exec.run();
  CHECK(exec.read(out) == std::vector<float>{-10, 0, 12, 26});
  exec.feed("x", values(3));  // y not fed again: its buffer holds an older batch
  CHECK_THROWS_WITH(exec.run(),
                    Catch::Matchers::Contains("1 of 2 inputs were fed since the last run"));
}
