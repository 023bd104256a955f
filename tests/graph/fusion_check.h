#pragma once
// Runs a program with and without the Executor's fusion (ExecutorOptions::
// fuse): the tests of fusion compare the two runs' bits and count the commands
// fusion saves, exactly.

#include <catch2/catch.hpp>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include <vktower/runtime/graph/autodiff.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/matmul.h>
#include <vktower/runtime/graph/ops/reduce.h>

#include "../shared_device.h"
#include "../test_support.h"

namespace vkt::test {

/// A program's fetched values and its command count.
struct FusionOutcome {
  std::vector<std::vector<float>> values;
  std::size_t commands = 0;
};

/// Input name -> values, fed where the program takes that input.
using Feeds = std::map<std::string, std::vector<float>>;

inline FusionOutcome run_program(Graph& g, const std::vector<Tensor>& fetches, const Feeds& feeds,
                                 bool fuse) {
  Executor exec(g, fetches, {.fuse = fuse});
  for (const auto& [name, values] : feeds) {
    if (exec.takes_input(name)) exec.feed(name, values);
  }
  exec.run();
  FusionOutcome out{.values = {}, .commands = exec.dispatch_count()};
  for (const Tensor& t : fetches) out.values.push_back(exec.read(t));
  return out;
}

/// Runs `fetches` fused and unfused: the same bits, and `saved` fewer commands.
inline FusionOutcome check_fused(Graph& g, const std::vector<Tensor>& fetches, const Feeds& feeds,
                                 std::size_t saved) {
  const FusionOutcome plain = run_program(g, fetches, feeds, false);
  const FusionOutcome fused = run_program(g, fetches, feeds, true);
  INFO("commands: unfused " << plain.commands << ", fused " << fused.commands);
  CHECK(fused.commands + saved == plain.commands);
  REQUIRE(fused.values.size() == plain.values.size());
  for (std::size_t i = 0; i < fetches.size(); ++i) {
    INFO("fetch '" << fetches[i].name() << "'");
    CHECK(fused.values[i] == plain.values[i]);
  }
  return fused;
}

/// One training step of a tanh dense layer under a squared sigmoid loss
/// (matmul, bias_add, tanh, sigmoid, sub, square, mean): the loss and the
/// gradients of the kernel and the bias, with the Executor's fusion on or off.
inline FusionOutcome dense_tanh_step(bool fuse, Precision precision = Precision::F32) {
  Graph g(shared_device(), {.seed = 11, .precision = precision});
  const Tensor x = g.input("x", {24, 8});
  const Tensor w = g.variable("w", {8, 5}, Initializer::glorot_uniform());
  const Tensor b = g.variable("b", {5}, Initializer::uniform(-0.5f, 0.5f));
  const Tensor h = tanh(bias_add(matmul(x, w), b));
  const Tensor loss = reduce_mean(square(sigmoid(h) - 0.25f));
  const std::vector<Gradient> grads = gradients(loss, {w, b});
  Executor exec(g, {loss, grads[0].dense, grads[1].dense}, {.fuse = fuse});
  exec.feed("x", random_floats(24 * 8, 6));
  exec.run();
  return FusionOutcome{{exec.read(loss), exec.read(grads[0].dense), exec.read(grads[1].dense)},
                       exec.dispatch_count()};
}

/// dense_tanh_step fused and unfused: the same bits, and `saved` fewer commands.
inline void check_dense_tanh_step(Precision precision, std::size_t saved) {
  const FusionOutcome plain = dense_tanh_step(false, precision);
  const FusionOutcome fused = dense_tanh_step(true, precision);
  INFO("commands: unfused " << plain.commands << ", fused " << fused.commands);
  CHECK(fused.commands + saved == plain.commands);
  for (std::size_t i = 0; i < 3; ++i) CHECK(fused.values[i] == plain.values[i]);
}

}  // namespace vkt::test
