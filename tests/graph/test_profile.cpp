// Per-command profiling: Stream::profile_commands() and ExecutorOptions::profile.
// Every command gets a non-negative device time, named after its kernel and op,
// and a profiled training step computes the same bits as an unprofiled one.
#include <catch2/catch.hpp>

#include <random>
#include <set>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/sgd.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/vulkan/buffer.h>
#include <vktower/runtime/vulkan/kernel.h>
#include <vktower/runtime/vulkan/stream.h>

#include "../shared_device.h"
#include "../test_support.h"

using Catch::Matchers::Contains;

namespace {

struct SaxpyParams {
  float a;
  std::uint32_t n;
};

/// An MLP training graph with its loss and train op; the same seed gives the
/// same initial weights.
struct Mlp {
  vkt::Graph graph;
  vkt::Tensor loss, train_op;
  std::vector<vkt::Tensor> variables;

  Mlp(vkt::Device& device, bool adam) : graph(device, {.seed = 5}) {
    using vkt::layers::Activation;
    const vkt::Tensor x = graph.input("x", {24, 13});
    const vkt::Tensor y = graph.input("y", {24}, vkt::DType::I32);
    const vkt::Tensor h = vkt::layers::dense(x, 33, Activation::Relu, "h");
    const vkt::Tensor logits = vkt::layers::dense(h, 7, Activation::None, "logits");
    loss = vkt::sparse_softmax_cross_entropy(y, logits);
    train_op = adam ? vkt::Adam(1e-2).minimize(loss) : vkt::SGD(0.1).minimize(loss);
    for (const char* name : {"h/kernel", "h/bias", "logits/kernel", "logits/bias"}) {
      variables.push_back(*graph.find_variable(name));
    }
  }
};

}  // namespace

TEST_CASE("a profiled stream times every command, past one query pool, across segments",
          "[profile]") {
  vkt::Device& device = vkt::test::shared_device();
  if (!device.info().timestamps) {
    WARN("device 0 has no timestamp queries: nothing to profile");
    return;
  }
  const std::uint32_t n = 517;
  vkt::Buffer a(device, n * sizeof(float));
  vkt::Buffer b(device, n * sizeof(float));
  a.upload(std::vector<float>(n, 1.0f));
  const vkt::Kernel& saxpy = device.kernel({.shader = "saxpy", .local_size = {64, 1, 1}});
  vkt::Stream stream(device);
  CHECK_THAT(vkt::test::error_of([&] { (void)stream.command_times(); }),
             Contains("profile_commands()"));
  stream.fill(b, 0);  // before profiling: not timed
  stream.profile_commands();
  const int dispatches = 150;  // more timestamps than one query pool holds
  for (int i = 0; i < dispatches; ++i) {
    stream.dispatch(saxpy, {a, b}, SaxpyParams{1.0f, n}, vkt::Stream::groups_for(saxpy, n));
    if (i == dispatches / 2) stream.end_segment();
  }
  const std::size_t plain = stream.timestamp();  // a timestamp of its own in between
  stream.copy(b, a);
  CHECK(stream.dispatch_count() == dispatches);
  CHECK(stream.command_count() == dispatches + 2);
  for (int replay = 0; replay < 2; ++replay) stream.run();

  const std::vector<vkt::Stream::CommandTime> times = stream.command_times();
  REQUIRE(times.size() == dispatches + 1);
  for (std::size_t k = 0; k < times.size(); ++k) {
    INFO("command " << k);
    CHECK(times[k].command == k + 1);  // the fill before profile_commands() is not listed
    CHECK(times[k].label == (k + 1 < times.size() ? "saxpy" : "copy"));
    CHECK(times[k].ns >= 0.0);
  }
  CHECK(stream.elapsed_ns(0, plain) >= 0.0);
  // Each run: b = 0, then b += a 150 times, then a = b; so a = 150 after the
  // first run and 150 * 150 after the second.
  CHECK(a.download<float>() == std::vector<float>(n, 1.0f * dispatches * dispatches));
}

TEST_CASE("a profiled training step names every command's op and computes the same bits",
          "[profile]") {
  vkt::Device& device = vkt::test::shared_device();
  const bool adam = GENERATE(false, true);
  INFO((adam ? "Adam" : "SGD"));
  Mlp plain_model(device, adam), profiled_model(device, adam);
  for (std::size_t v = 0; v < plain_model.variables.size(); ++v) {
    REQUIRE(plain_model.graph.values(plain_model.variables[v]) ==
            profiled_model.graph.values(profiled_model.variables[v]));
  }
  vkt::Executor plain(plain_model.graph, {plain_model.loss, plain_model.train_op});
  vkt::Executor profiled(profiled_model.graph, {profiled_model.loss, profiled_model.train_op},
                         {.profile = true});
  CHECK(plain.profile().empty());
  CHECK(profiled.dispatch_count() == plain.dispatch_count());
  CHECK(profiled.stream().dispatch_count() == plain.stream().dispatch_count());

  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> x(24 * 13);
    for (float& v : x) v = normal(rng);
    std::vector<std::int32_t> y(24);
    for (auto& v : y) v = static_cast<std::int32_t>(rng() % 7);
    for (vkt::Executor* e : {&plain, &profiled}) {
      e->feed("x", x);
      e->feed("y", y);
      e->run();
    }
    CHECK(profiled.read(profiled_model.loss) == plain.read(plain_model.loss));
  }
  for (std::size_t v = 0; v < plain_model.variables.size(); ++v) {
    INFO("variable " << plain_model.variables[v].name());
    CHECK(profiled_model.graph.values(profiled_model.variables[v]) ==
          plain_model.graph.values(plain_model.variables[v]));
  }

  if (!device.info().timestamps) {
    WARN("device 0 has no timestamp queries: profile() stays empty");
    CHECK(profiled.profile().empty());
    return;
  }
  const std::vector<vkt::Executor::CommandProfile> profile = profiled.profile();
  REQUIRE(profile.size() == profiled.dispatch_count());
  std::set<std::string> ops;
  for (const vkt::Executor::CommandProfile& p : profile) {
    INFO(p.op << " " << p.tensor << " " << p.kernel);
    CHECK(p.ms >= 0.0);
    CHECK(!p.kernel.empty());
    // Every command is an op's, but the copy of the feeds where they are staged.
    CHECK((p.op == "feed" ? p.kernel == "copy" && p.tensor.empty() : !p.tensor.empty()));
    ops.insert(p.op);
  }
  CHECK(ops.count("matmul") == 1);
  CHECK(ops.count(adam ? "apply_opt_adam" : "apply_opt_sgd") == 1);
}
