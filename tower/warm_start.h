#pragma once
// Warm start: a new model's variables taken from another run's checkpoint
// (tf.estimator.WarmStartSettings).

#include <map>
#include <string>

namespace vkt {

class TowerRun;

/// Which variables a training run takes from a checkpoint when it starts with
/// no checkpoint of its own (RunConfig::warm_start_from). The optimizer slots
/// start fresh and the global step at 0; once the model directory holds a
/// checkpoint, a new run resumes from that instead.
///
///   config.warm_start_from = vkt::WarmStartSettings{
///       .ckpt_to_initialize_from = "pretrained",  // a model dir or a .safetensors file
///       .vars_to_warm_start = "hidden.*",
///       .var_name_to_prev_var_name = {{"hidden/kernel", "encoder/kernel"}}};
struct WarmStartSettings {
  /// A safetensors checkpoint, or a model directory (its newest checkpoint).
  std::string ckpt_to_initialize_from{};
  /// A regular expression (ECMAScript) over the weights' names (trainable
  /// variables and frozen ones: a FrozenScope's, or half ones; never
  /// optimizer slots or moving averages), matched from the start of the name as TensorFlow's
  /// re.match does: "hidden1/" takes hidden1/kernel and hidden1/bias. The default takes every
  /// weight. One that matches nothing is a vkt::Error. A half variable takes the file's values
  /// rounded to its type (exact from a tensor of it).
  std::string vars_to_warm_start = ".*";
  /// A variable's name in the checkpoint when it differs from the model's
  /// (model name -> checkpoint name). Every entry must name a variable that
  /// is warm-started.
  std::map<std::string, std::string> var_name_to_prev_var_name{};
};

/// The checkpoint file warm start reads for `from`: the path itself, or a
/// model directory's newest checkpoint; vkt::Error when neither exists.
std::string warm_start_file(const std::string& from);

/// Assigns `run` the variables `settings` picks, read from its checkpoint.
/// Every check comes first (a missing file or tensor, with the names closest
/// to it; a shape or dtype mismatch; a regular expression that is invalid or
/// matches nothing; an unused name-map entry): a vkt::Error naming the file
/// and the variable, with nothing assigned.
void warm_start(TowerRun& run, const WarmStartSettings& settings);

/// Throws vkt::Error when the checkpoint path is empty or `vars_to_warm_start`
/// is not a valid regular expression (the checks that need no file).
void check_warm_start_settings(const WarmStartSettings& settings);

}  // namespace vkt
