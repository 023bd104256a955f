#pragma once
// Runs a program with and without the Executor's fusion (ExecutorOptions::
// fuse): the tests of fusion compare the two runs' bits and count the commands
// fusion saves, exactly.

#include <catch2/catch.hpp>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>

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

}  // namespace vkt::test
