#pragma once
// What the [torch] tests share: the interpreter that runs their PyTorch side.

#include <filesystem>
#include <string>

#include "../bench/torch_reference.h"
#include "test_support.h"

namespace vkt::test {

/// The first interpreter that imports torch ($VKT_PYTHON, python3, /usr/bin/python3),
/// as the benchmarks find it.
using vkt::bench::torch_python;

/// The line a [torch] test warns with when it skips.
inline const char* kNoTorch =
    "skipped: no python3 here imports torch (apt-get install python3-torch, or set VKT_PYTHON "
    "to an interpreter that has it)";

/// The command that runs tests/<script> (a PyTorch side) on `dir` for `steps`
/// steps under `python`: the scripts take DIR STEPS and write their results there.
inline std::string torch_reference_command(const std::string& python, const std::string& script,
                                           const std::filesystem::path& dir, int steps) {
  const std::filesystem::path path = source_dir() / "tests" / script;
  return "'" + python + "' '" + path.string() + "' '" + dir.string() + "' " + std::to_string(steps);
}

}  // namespace vkt::test
