#include "warm_start.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <vector>

#include "../runtime/io/checkpoint.h"
#include "../runtime/io/checkpoint_manager.h"
#include "../runtime/vulkan/error.h"
#include "tower_run.h"

namespace vkt {

namespace fs = std::filesystem;

namespace {

std::regex compile(const std::string& pattern) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw Error(fmt::format(
        "WarmStartSettings.vars_to_warm_start '{}' is not a valid regular expression: {}", pattern,
        e.what()));
  }
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

/// Up to three of `names`, the closest to `name` first.
std::string closest(const std::string& name, const std::map<std::string, HostTensor>& names) {
  std::vector<std::pair<std::size_t, std::string>> ranked;
  for (const auto& [candidate, tensor] : names) {
    ranked.emplace_back(edit_distance(name, candidate), candidate);
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> shown;
  for (std::size_t i = 0; i < ranked.size() && i < 3; ++i) shown.push_back(ranked[i].second);
  return shown.empty() ? "it holds no tensor" : fmt::format("closest: {}", fmt::join(shown, ", "));
}

}  // namespace

void check_warm_start_settings(const WarmStartSettings& settings) {
  if (settings.ckpt_to_initialize_from.empty()) {
    throw Error(
        "WarmStartSettings.ckpt_to_initialize_from is empty; give a .safetensors checkpoint or a "
        "model directory");
  }
  (void)compile(settings.vars_to_warm_start);
}

std::string warm_start_file(const std::string& from) {
  std::error_code ec;
  if (fs::is_directory(from, ec)) {
    const std::optional<std::string> latest = CheckpointManager(from, 1).latest();
    if (!latest) {
      throw Error(fmt::format(
          "warm start: model directory '{}' has no checkpoint (no 'checkpoint' index); give a "
          "directory a run has saved to, or a .safetensors file",
          from));
    }
    return *latest;
  }
  if (!fs::exists(from, ec)) {
    throw Error(fmt::format(
        "warm start: '{}' does not exist; give a .safetensors checkpoint or a model directory",
        from));
  }
  return from;
}

void warm_start(TowerRun& run, const WarmStartSettings& settings) {
  check_warm_start_settings(settings);
  const std::regex pattern = compile(settings.vars_to_warm_start);
  const std::string file = warm_start_file(settings.ckpt_to_initialize_from);
  const std::map<std::string, HostTensor> saved = read_safetensors(file);

  // Tower 0's graph holds every variable of the model in every variable mode.
  std::vector<std::pair<std::string, const HostTensor*>> chosen;
  std::vector<std::string> weights;
  for (const Variable& v : run.tower_graph(0).variables()) {
    // The weights: trainable variables and frozen ones (a FrozenScope's, or
    // half ones). Optimizer slots and moving averages start fresh.
    if (!v.trainable && !v.frozen_weight) continue;
    const std::string& name = v.tensor.name();
    weights.push_back(name);
    if (!std::regex_search(name, pattern, std::regex_constants::match_continuous)) continue;
    const auto renamed = settings.var_name_to_prev_var_name.find(name);
    const std::string prev =
        renamed == settings.var_name_to_prev_var_name.end() ? name : renamed->second;
    const auto found = saved.find(prev);
    if (found == saved.end()) {
      throw Error(fmt::format(
          "warm start: '{}' has no tensor '{}' for variable '{}' ({}); map the name with "
          "var_name_to_prev_var_name or leave the variable out of vars_to_warm_start",
          file, prev, name, closest(prev, saved)));
    }
    const HostTensor& t = found->second;
    if (t.dtype != DType::F32 || t.shape != v.tensor.shape()) {
      throw Error(fmt::format(
          "warm start: variable '{}' has shape {} ({}), but tensor '{}' of '{}' has shape {} "
          "({})",
          name, v.tensor.shape().str(), to_string(v.tensor.dtype()), prev, file, t.shape.str(),
          to_string(t.dtype)));
    }
    chosen.emplace_back(name, &t);
  }
  if (chosen.empty()) {
    throw Error(fmt::format(
        "warm start: vars_to_warm_start '{}' matches none of the model's weights (trainable or "
        "frozen variables: {})",
        settings.vars_to_warm_start, fmt::join(weights, ", ")));
  }
  for (const auto& [name, prev] : settings.var_name_to_prev_var_name) {
    const bool used =
        std::any_of(chosen.begin(), chosen.end(), [&](const auto& c) { return c.first == name; });
    if (!used) {
      throw Error(fmt::format(
          "warm start: var_name_to_prev_var_name maps '{}' (to '{}'), which is not a weight "
          "(a trainable or frozen variable) that vars_to_warm_start '{}' picks",
          name, prev, settings.vars_to_warm_start));
    }
  }
  for (const auto& [name, tensor] : chosen) run.assign(name, tensor->f32);
}

}  // namespace vkt
