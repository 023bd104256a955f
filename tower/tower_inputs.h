#pragma once
// How a TowerRun names its inputs; shared by its source files, not installed API.

#include <string>

namespace vkt::detail {

/// The hidden input behind ModelContext::example_weights() in Mode::Eval.
inline constexpr const char* kExampleWeights = "__example_weights";

/// The graph input of a feature or label: its key, or "features"/"labels"
/// for the single unnamed one.
inline std::string input_name(const std::string& key, const char* kind) {
  return key.empty() ? kind : key;
}

}  // namespace vkt::detail
