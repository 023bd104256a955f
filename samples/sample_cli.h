#pragma once
// What every training sample shares on its command line: the flags the samples
// all take, the towers they name, and the closing lines of their report.

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <vktower/runtime/mpi/process_group.h>
#include <vktower/tower/device_list.h>
#include <vktower/tower/estimator.h>
#include <vktower/vktower.h>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "sample_errors.h"
#include "sample_flags.h"

/// --devices, --model-dir, --steps, --seed, --batch-size, --accumulate, --mpi,
/// --precision, --loss-scale, --exchange-dtype, --weight-copy-dtype,
/// --shard-weights, --on-device-loss.
struct SampleFlags {
  std::string devices = "all";
  std::string model_dir{};
  std::uint64_t steps = 0;
  std::uint64_t seed = 0;
  std::int64_t batch_size = 0;
  int accumulate = 1;
  bool mpi = false;  // join the MPI world even when Open MPI's mpirun did not start us
  std::string precision = "fp32";
  std::string loss_scale = "auto";
  std::string exchange_dtype = "fp32";
  std::string weight_copy_dtype = "fp32";
  std::string on_device_loss = "stop";
  std::string shard_weights = "equal";
};

/// Adds the shared flags to `app`, with `flags` holding the sample's defaults.
inline void add_sample_flags(CLI::App& app, SampleFlags& flags, const char* seed_meaning) {
  app.add_option("--devices", flags.devices,
                 "all|gpu|cpu|list: all = every GPU, the CPU only without one; a list like 0,0 "
                 "runs one tower per entry (VKT_DEVICES overrides)")
      ->capture_default_str();
  app.add_option("--model-dir", flags.model_dir,
                 "checkpoints and metrics.csv; resumes from it (default: a new temporary dir)");
  app.add_option("--steps", flags.steps, "training steps (more, when resuming)")
      ->capture_default_str()
      ->check(whole_number_from<std::uint64_t>(1));
  app.add_option("--seed", flags.seed, seed_meaning)
      ->capture_default_str()
      ->check(whole_number_from<std::uint64_t>(0));
  app.add_option("--batch-size", flags.batch_size,
                 "global batch (a multiple of the towers); a micro-batch with --accumulate")
      ->capture_default_str()
      ->check(whole_number_from<std::int64_t>(1));
  add_accumulate_flag(app, flags.accumulate);
  app.add_option("--precision", flags.precision,
                 "fp32|fp16|bf16: where the matrix products run (fp16 and bf16 sum in f32 and "
                 "keep f32 weights, gradients and updates; they need 16-bit storage buffers)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  app.add_option("--loss-scale", flags.loss_scale,
                 "auto|dynamic|off: dynamic loss scaling as PyTorch's GradScaler (a step with an "
                 "inf or NaN gradient is skipped, the scale halved); auto = dynamic under fp16")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "dynamic", "off"}));
  app.add_option("--exchange-dtype", flags.exchange_dtype,
                 "fp32|fp16|bf16: the type gradients travel in between towers and between "
                 "processes (half the bytes in fp16 or bf16, summed in f32; as PyTorch DDP's "
                 "fp16 compression hook)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  app.add_option("--weight-copy-dtype", flags.weight_copy_dtype,
                 "fp32|fp16|bf16: the type the new weights travel to the towers in (the "
                 "consolidation device keeps f32 masters; the towers compute with the copies)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  app.add_option("--shard-weights", flags.shard_weights,
                 "equal|measured|LIST: each tower's share of the batch: measured = by each "
                 "device's speed over the first steps (kept in the checkpoints); a list like 3,1 "
                 "(one number per tower) gives the first tower 3/4 of it")
      ->capture_default_str();
  app.add_option("--on-device-loss", flags.on_device_loss,
                 "stop|continue: when a tower's device is lost, stop (the last checkpoint is "
                 "intact) or go on without it from the last checkpoint, the batch unchanged")
      ->capture_default_str()
      ->check(CLI::IsMember({"stop", "continue"}));
  app.add_flag("--mpi", flags.mpi,
               "one process of an MPI job (a launch by Open MPI's mpirun is noticed without "
               "it); see docs/DISTRIBUTED.md");
}

/// ReplicateOptions::precision from --precision.
inline vkt::Precision precision_of(const SampleFlags& flags) {
  return vkt::parse_precision(flags.precision, "--precision");
}

/// ReplicateOptions::loss_scaling from --loss-scale (checked by CLI11).
inline vkt::LossScaling loss_scaling_of(const SampleFlags& flags) {
  if (flags.loss_scale == "dynamic") return vkt::LossScaling::Dynamic;
  return flags.loss_scale == "off" ? vkt::LossScaling::Off : vkt::LossScaling::Auto;
}

/// A dtype flag's value (fp32|fp16|bf16, checked by CLI11).
inline vkt::DType dtype_flag(const std::string& value) {
  return vkt::compute_dtype(vkt::parse_precision(value, "a dtype flag"));
}

/// ReplicateOptions::shard_weights from --shard-weights ("equal", "measured"
/// or one number above 0 per tower); vkt::Error in the flag's words otherwise.
inline std::vector<double> shard_weights_of(const SampleFlags& flags, std::size_t towers) {
  if (flags.shard_weights == "equal" || flags.shard_weights == "measured") return {};
  std::vector<double> weights;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = flags.shard_weights.find(',', start);
    const std::string item = flags.shard_weights.substr(start, comma - start);
    const double w = finite_number(item);
    if (!(w > 0)) {
      throw vkt::Error(fmt::format(
          "--shard-weights {}: '{}' is not a number above 0; give equal or one number per "
          "tower, e.g. 3,1",
          flags.shard_weights, item));
    }
    weights.push_back(w);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (weights.size() != towers) {
    throw vkt::Error(fmt::format(
        "--shard-weights {} gives {} weight{} for {} tower{} (--devices); give one per tower",
        flags.shard_weights, weights.size(), weights.size() == 1 ? "" : "s", towers,
        towers == 1 ? "" : "s"));
  }
  return weights;
}

/// The ReplicateOptions the shared flags set (--precision, --loss-scale,
/// --exchange-dtype, --weight-copy-dtype, --shard-weights), on `devices`.
inline vkt::ReplicateOptions replicate_options(const SampleFlags& flags,
                                               std::vector<std::uint32_t> devices) {
  std::vector<double> weights = shard_weights_of(flags, devices.size());
  return {.devices = std::move(devices),
          .precision = precision_of(flags),
          .loss_scaling = loss_scaling_of(flags),
          .exchange_dtype = dtype_flag(flags.exchange_dtype),
          .weight_copy_dtype = dtype_flag(flags.weight_copy_dtype),
          .shard_weights = std::move(weights),
          .shard_split = flags.shard_weights == "measured" ? vkt::ShardSplit::Measured
                                                           : vkt::ShardSplit::Equal};
}

/// RunConfig::mpi from the flags: on with --mpi, else detected from the launch.
inline std::optional<bool> mpi_setting(const SampleFlags& flags) {
  return flags.mpi ? std::optional<bool>(true) : std::nullopt;
}

/// RunConfig::on_device_loss from --on-device-loss (checked by CLI11).
inline vkt::DeviceLossAction device_loss_action(const SampleFlags& flags) {
  return flags.on_device_loss == "continue" ? vkt::DeviceLossAction::Continue
                                            : vkt::DeviceLossAction::Stop;
}

/// The job's processes: 1 unless the Estimator joined an MPI world.
inline int processes_of(const vkt::Estimator& estimator) {
  return estimator.processes() ? estimator.processes()->size() : 1;
}

struct Towers {
  std::vector<std::uint32_t> devices;
  std::string description;  // "0,0: llvmpipe ..."
  /// The instance that read the list, kept open for the run: while one lives
  /// the loader keeps the Vulkan driver loaded, so the instances the Estimator
  /// opens do not load it again (lavapipe: ~20 ms each).
  std::unique_ptr<vkt::Instance> instance;
};

/// The --devices list, replaced by VKT_DEVICES when that is set.
inline Towers resolve_devices(const std::string& list) {
  Towers towers;
  towers.instance = std::make_unique<vkt::Instance>();
  const vkt::Instance& instance = *towers.instance;
  towers.devices =
      vkt::device_list_from_environment(instance, vkt::parse_device_list(list, instance));
  std::vector<std::string> names;
  for (const std::uint32_t d : towers.devices) {
    if (names.empty() || names.back() != instance.device(d).name) {
      names.push_back(instance.device(d).name);
    }
  }
  towers.description =
      fmt::format("{}: {}", fmt::join(towers.devices, ","), fmt::join(names, ", "));
  return towers;
}

/// The report's last rows before the sample's result line: where the model
/// is, and (under VKT_VALIDATION) the validation layer's message count.
inline void print_model_dir(const vkt::Estimator& estimator, const SampleFlags& flags) {
  fmt::print("{:<12} {}{}\n", "model dir", estimator.config().model_dir,
             flags.model_dir.empty() ? " (temporary: removed at exit; give --model-dir to keep it)"
                                     : " (checkpoints, metrics.csv, loss.png)");
  if (vkt::InstanceOptions::from_environment().validation) {
    fmt::print("validation messages: {}\n", vkt::Instance::process_validation_messages());
  }
}
