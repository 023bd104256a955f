// layers::batch_norm on one graph: forward and gradient against a double
// reference, the moving averages as state updates, inference on them, and
// cross_replica_sum's hand-over to the host inside a run.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <vktower/runtime/graph/autodiff.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/batch_norm.h>
#include <vktower/runtime/graph/ops/cross_replica.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/reduce.h>
#include <vktower/runtime/graph/ops/state_update.h>

#include "../shared_device.h"
#include "../test_support.h"
#include "op_check.h"

using Catch::Matchers::Contains;
using vkt::Tensor;
using vkt::test::Values;

namespace {

constexpr float kEps = 1e-3f;

// Per channel (the last dimension of `shape`): mean and biased variance.
struct RefMoments {
  std::vector<double> mean, variance;
};
RefMoments ref_moments(const Values& x, std::int64_t channels) {
  const auto rows = static_cast<std::int64_t>(x.size()) / channels;
  RefMoments m{std::vector<double>(channels, 0.0), std::vector<double>(channels, 0.0)};
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < channels; ++c) m.mean[c] += x[r * channels + c] / rows;
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < channels; ++c) {
      const double d = x[r * channels + c] - m.mean[c];
      m.variance[c] += d * d / rows;
    }
  }
  return m;
}

Values ref_batch_norm(const Values& x, std::int64_t channels) {
  const RefMoments m = ref_moments(x, channels);
  Values y(x.size());
  for (std::size_t j = 0; j < x.size(); ++j) {
    const auto c = static_cast<std::int64_t>(j) % channels;
    y[j] = (x[j] - m.mean[c]) / std::sqrt(m.variance[c] + kEps);
  }
  return y;
}

}  // namespace

TEST_CASE("batch_norm in training: forward and gradient of NHWC and N x C inputs", "[batch_norm]") {
  for (const bool sync : {false, true}) {
    for (const vkt::Shape& shape : {vkt::Shape{2, 3, 5, 4}, vkt::Shape{7, 3}}) {
      INFO("sync " << sync << ", x " << shape.str());
      const std::int64_t channels = shape[shape.rank() - 1];
      vkt::test::check_op(
          {.name = "batch_norm",
           .shapes = {shape},
           .build =
               [&](const std::vector<Tensor>& in) {
                 return vkt::layers::batch_norm(in[0], true, {.epsilon = kEps, .sync = sync});
               },
           .reference =
               [&](const std::vector<Values>& in) { return ref_batch_norm(in[0], channels); },
           .ranges = {{-2.0, 3.0}},
           .forward_tolerance = 1e-4,
           .gradient_tolerance = 3e-3});
    }
  }
}

TEST_CASE("batch_norm's moving averages: a state update per training run, no global step",
          "[batch_norm]") {
  vkt::Device& device = vkt::test::shared_device();
  vkt::Graph g(device);
  const vkt::Shape shape{4, 2, 3, 3};
  const Tensor x = g.input("x", shape);
  const Tensor y = vkt::layers::batch_norm(x, true, {.momentum = 0.75f, .name = "bn"});
  const Tensor loss = vkt::reduce_sum(y * y);
  const Tensor gamma = *g.find_variable("bn/gamma");
  const Tensor grad = vkt::gradients(loss, {gamma})[0].dense;
  vkt::Executor step(g, {loss, grad});
  const std::vector<float> values = vkt::test::random_floats(shape.elements(), 7, -1.0f, 4.0f);
  step.feed("x", values);
  step.run();
  step.run();
  // Two runs of one batch: m1 = 0.25 mean, m2 = 0.75 m1 + 0.25 mean.
  const RefMoments m = ref_moments(Values(values.begin(), values.end()), 3);
  const double rows = static_cast<double>(shape.elements() / 3);
  const std::vector<float> mean = g.values(*g.find_variable("bn/moving_mean"));
  const std::vector<float> variance = g.values(*g.find_variable("bn/moving_variance"));
  for (int c = 0; c < 3; ++c) {
    const double unbiased = m.variance[c] * rows / (rows - 1);
    CHECK(mean[c] == Approx(0.4375 * m.mean[c]).epsilon(1e-5));
    CHECK(variance[c] == Approx(0.5625 + 0.4375 * unbiased).epsilon(1e-5));
  }
  CHECK(g.global_step() == 0);  // state updates are no training step

  // An evaluation program reads them and changes nothing.
  vkt::Executor eval(g, {y}, {.training = false});
  eval.feed("x", values);
  eval.run();
  CHECK(g.values(*g.find_variable("bn/moving_mean")) == mean);
}

TEST_CASE("batch_norm in inference normalizes with the moving statistics", "[batch_norm]") {
  vkt::Device& device = vkt::test::shared_device();
  vkt::Graph g(device);
  const Tensor x = g.input("x", {5, 2});
  const Tensor y = vkt::layers::batch_norm(x, false, {.epsilon = 0.5f, .name = "bn"});
  g.assign(*g.find_variable("bn/moving_mean"), std::vector<float>{1.0f, -2.0f});
  g.assign(*g.find_variable("bn/moving_variance"), std::vector<float>{3.5f, 0.5f});
  g.assign(*g.find_variable("bn/gamma"), std::vector<float>{2.0f, 1.0f});
  g.assign(*g.find_variable("bn/beta"), std::vector<float>{0.0f, 10.0f});
  vkt::Executor run(g, {y}, {.training = false});
  const std::vector<float> values = vkt::test::random_floats(10, 3);
  run.feed("x", values);
  run.run();
  const std::vector<float> got = run.read(y);
  for (std::size_t j = 0; j < values.size(); ++j) {
    const double want = j % 2 == 0 ? 2.0 * (values[j] - 1.0) / 2.0 : (values[j] + 2.0) + 10.0;
    CHECK(got[j] == Approx(want).epsilon(1e-5));
  }
}

TEST_CASE("cross_replica_sum hands its value to the host inside the run, gradient included",
          "[batch_norm]") {
  vkt::Device& device = vkt::test::shared_device();
  vkt::Graph g(device);
  const Tensor x = g.input("x", {3});
  const Tensor s = vkt::cross_replica_sum(x * 2.0f);
  const Tensor loss = vkt::reduce_sum(s * s);
  const Tensor dx = vkt::gradients(loss, {x})[0].dense;
  std::vector<std::size_t> points;
  // Three "replicas" that hold the same value: the sum is three times it.
  vkt::Executor run(
      g, {s, dx},
      {.replica_sum = [&](std::size_t point, std::span<const float> local, std::span<float> sum) {
        points.push_back(point);
        for (std::size_t i = 0; i < local.size(); ++i) sum[i] = 3.0f * local[i];
      }});
  CHECK(run.replica_sums() == 2);  // forward and backward
  run.feed("x", std::vector<float>{1.0f, -2.0f, 0.5f});
  run.run();
  run.run();
  CHECK(points == std::vector<std::size_t>{0, 1, 0, 1});
  CHECK(run.read(s) == std::vector<float>{6.0f, -12.0f, 3.0f});
  // L = sum (6x)^2 over 3 replicas' sums; dL/dx = 3 * 2 * (2 * 6x) = 72x.
  CHECK(run.read(dx) == std::vector<float>{72.0f, -144.0f, 36.0f});
}

TEST_CASE("batch_norm and assign_moving_average refuse bad inputs", "[batch_norm]") {
  vkt::Device& device = vkt::test::shared_device();
  vkt::Graph g(device);
  const Tensor v = g.input("v", {4});
  const Tensor i = g.input("i", {4, 2}, vkt::DType::I32);
  const Tensor x = g.input("x", {1, 3});
  using vkt::test::error_of;
  CHECK_THAT(error_of([&] { vkt::layers::batch_norm(v, true); }), Contains("rank 2 or more"));
  CHECK_THAT(error_of([&] { vkt::layers::batch_norm(i, true); }), Contains("f32"));
  CHECK_THAT(error_of([&] { vkt::layers::batch_norm(x, true); }),
             Contains("more than one value per channel"));
  CHECK_THAT(error_of([&] { vkt::layers::batch_norm(x, false, {.momentum = 1.5f}); }),
             Contains("momentum 1.5"));
  const Tensor w = g.variable("w", {4});
  CHECK_THAT(error_of([&] { vkt::assign_moving_average(w, v, 0.9f); }),
             Contains("trainable = false"));
  const Tensor m = g.variable("m", {3}, vkt::Initializer::zeros(), false);
  CHECK_THAT(error_of([&] { vkt::assign_moving_average(m, v, 0.9f); }), Contains("shape"));
  CHECK_THAT(error_of([&] { g.add_state_update(v); }), Contains("state update"));
  CHECK(g.state_updates().empty());
}
