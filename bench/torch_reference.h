#pragma once
// What the benchmarks that compare with PyTorch share: finding a python3 that
// imports torch, and running a reference script (bench/pytorch_*.py) that
// prints `key=value` lines.

#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vkt::bench {

/// The first interpreter that imports torch: $VKT_PYTHON, python3 on the
/// PATH, /usr/bin/python3 (Debian's python3-torch is for the system Python;
/// a pyenv python3 earlier on the PATH does not see it).
inline std::optional<std::string> torch_python() {
  std::vector<std::string> candidates{"python3", "/usr/bin/python3"};
  if (const char* env = std::getenv("VKT_PYTHON"); env != nullptr && *env != '\0') {
    candidates.insert(candidates.begin(), env);
  }
  for (const std::string& python : candidates) {
    const std::string probe = fmt::format("'{}' -c 'import torch' >/dev/null 2>&1", python);
    if (std::system(probe.c_str()) == 0) return python;
  }
  return std::nullopt;
}

/// The path of a reference script in bench/: under $VKT_SOURCE_DIR/bench where
/// that is set (a bundle unpacked away from the checkout, scripts/gpu-report.sh),
/// else in the source tree the bench was built from (`built_dir`).
inline std::string bench_script(const char* built_dir, const std::string& name) {
  if (const char* env = std::getenv("VKT_SOURCE_DIR"); env != nullptr && *env != '\0') {
    return fmt::format("{}/bench/{}", env, name);
  }
  return fmt::format("{}/{}", built_dir, name);
}

/// Runs `script` (a path) with `args` under `python` with OMP_WAIT_POLICY=PASSIVE
/// (so that PyTorch's OpenMP threads do not spin against the other side's);
/// its key=value lines, or nothing when it failed or printed no `required`
/// (pytorch_examples_per_s unless told). Other lines are echoed, indented.
inline std::optional<std::map<std::string, std::string>> run_torch_script(
    const std::string& python, const std::string& script, const std::string& args,
    const std::string& required = "pytorch_examples_per_s") {
  const std::string command =
      fmt::format("OMP_WAIT_POLICY=PASSIVE '{}' '{}' {} 2>&1", python, script, args);
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::map<std::string, std::string> values;
  std::array<char, 512> line{};
  while (fgets(line.data(), static_cast<int>(line.size()), pipe) != nullptr) {
    std::string text(line.data());
    if (!text.empty() && text.back() == '\n') text.pop_back();
    const std::size_t eq = text.find('=');
    if (eq == std::string::npos) {
      fmt::print("  pytorch: {}\n", text);
    } else {
      values[text.substr(0, eq)] = text.substr(eq + 1);
    }
  }
  if (pclose(pipe) != 0 || !values.contains(required)) return std::nullopt;
  return values;
}

}  // namespace vkt::bench
