#pragma once
// replicate_model_fn: one model function, every GPU (or the devices named).

#include <cstdint>
#include <optional>
#include <vector>

#include "../optimizers/loss_scaler.h"
#include "../runtime/vulkan/device.h"
#include "model_fn.h"

namespace vkt {

/// How the towers' losses (and so their gradients) combine (README, "The
/// scalar example"). Sum: summed. Mean and SumByNonzeroWeights: each tower's loss is
/// scaled by 1/N before its gradients are taken, so the sums are averages.
/// None is rejected: with several towers a reduction is required.
enum class LossReduction { None, Sum, Mean, SumByNonzeroWeights };

/// Where variables and optimizer slots live. SharedLocalParameterServer: the
/// masters and slots on the consolidation device, weights copied back to the
/// towers after each step. Mirrored: the summed gradients are copied to every
/// tower, and each tower applies the optimizers to its own variables and slots
/// (no weight copy-back). RoundRobin: variable k (in creation order) has its
/// master, its reduction and its updates on tower k mod N's device, spreading
/// that work; the new values go back to every tower.
enum class VariableMode { SharedLocalParameterServer, RoundRobin, Mirrored };

/// Where the consolidation work (the masters, the sums, the updates) runs when
/// the consolidation device is also a tower's. OnTowerDevice (what Auto picks):
/// on that tower's own VkDevice, so its gradients and weights never leave its
/// memory (device copies only). SeparateDevice: on a VkDevice (and VkInstance)
/// of its own beside the tower's. Both give the same bits; on lavapipe, too,
/// the tower's own device measured as fast or faster (docs/PERFORMANCE.md).
enum class ConsolidationPlacement { Auto, OnTowerDevice, SeparateDevice };

/// Whether towers repeated on one physical device share a VkDevice. Shared: one
/// Device (and its queues) for all of them, so every copy between the towers
/// and the consolidation work on it is a device copy ordered by timeline
/// semaphores, and a training step waits on the host once. PerTower: each tower
/// its own VkInstance and VkDevice; copies between them pass through host
/// memory, with a host wait per copy. Auto: PerTower on a CPU device (lavapipe
/// runs the devices of separate instances concurrently, those of one device one
/// after another), Shared on a GPU. Both give the same bits.
enum class TowerDevices { Auto, PerTower, Shared };

/// How the batch is shared among the towers when no shard_weights are given.
/// Equal: equal shards. Measured: equal shards for the first measure_steps
/// steps past the first (whose pipelines are still being built), then each
/// tower's share in proportion to its examples per second on its device over
/// them, fixed from then on and kept in the checkpoints, so a resume on the
/// same towers shards the same way (on another count it measures again).
enum class ShardSplit { Equal, Measured };

/// Dynamic loss scaling of the towers' gradients (LossScaler, PyTorch's
/// GradScaler). Auto: Dynamic under Precision::F16, whose gradients underflow
/// without it; Off under F32 and BF16 (bf16 has f32's range).
enum class LossScaling { Auto, Off, Dynamic };

struct ReplicateOptions {
  LossReduction loss_reduction = LossReduction::SumByNonzeroWeights;
  /// Indices into the instance's devices, may repeat and mix GPUs and CPU
  /// devices, taken as given; empty = the default choice: VKT_DEVICES when set
  /// (a program that names no devices moves to another device set without
  /// recompiling; the run logs once that it did), else choose_default_devices
  /// (every usable GPU, the CPU devices only when there is none). A program
  /// that lets the environment replace its own list calls
  /// device_list_from_environment() where it starts, as the samples do.
  std::vector<std::uint32_t> devices{};
  VariableMode variable_mode = VariableMode::SharedLocalParameterServer;
  /// Device index of the consolidation device; default: the first tower's.
  std::optional<std::uint32_t> consolidation_device{};
  ConsolidationPlacement consolidation_placement = ConsolidationPlacement::Auto;
  /// Gradients travel to the consolidation device in buckets of about this
  /// many bytes, in the order the backward pass writes them; each bucket moves
  /// and is summed while the backward pass goes on (PyTorch DDP's bucket_cap_mb).
  /// Any size gives the same bits.
  std::size_t bucket_bytes = std::size_t{4} << 20;
  TowerDevices tower_devices = TowerDevices::Auto;
  /// Where every tower's matrix products run (GraphOptions::precision): fp32,
  /// or fp16 / bf16 with f32 sums, variables, gradients and updates (the
  /// samples' --precision). A half precision on a device without 16-bit
  /// storage buffers is a vkt::Error naming the device.
  Precision precision = Precision::F32;
  /// Whether the loss is scaled (the samples' --loss-scale): each step's summed
  /// gradients are checked on the consolidation device and a step holding an
  /// inf or NaN is skipped on every tower and process (weights and optimizer
  /// slots unchanged), the scale halved. The scale and its count of good steps
  /// are variables ("loss_scale/scale", "loss_scale/good_steps"), saved in
  /// checkpoints. It turns the exchange on even for one tower, since the
  /// check and the update run on the consolidation device. Not with
  /// VariableMode::RoundRobin, whose updates are spread over the towers.
  LossScaling loss_scaling = LossScaling::Auto;
  /// The scale's first value and growth interval, when scaled.
  LossScaleOptions loss_scale{};
  /// The type the towers' dense gradients travel in to the consolidation
  /// device (the samples' --exchange-dtype): F32, or F16 / BF16, half the
  /// bytes (PyTorch DDP's fp16 compression hook). Each tower rounds its
  /// gradients (already divided by the tower count: each tower's loss is)
  /// to the half type on its own device; the sum widens them exactly and adds
  /// in f32, in tower order, so runs stay bit-identical. Only gradients that
  /// travel are rounded: one tower without loss scaling keeps f32. Mirrored
  /// sends the sum back to the towers in the half type too (every replica
  /// updates with the same rounded sum; the other modes update from the f32
  /// sum, so Mirrored's bits differ from theirs). Between
  /// processes too: each rounds its towers' sum to the half type, half the
  /// bytes travel, and the ranks' values are added in f32 in rank order and
  /// rounded once (the same bits on every rank). Sparse rows stay f32.
  DType exchange_dtype = DType::F32;
  /// The type the new weights travel in from the consolidation device to
  /// the towers (the samples' --weight-copy-dtype): F32, or F16 / BF16, half
  /// the bytes. The master keeps f32 weights; the towers compute with the
  /// trainable weights rounded to the half type (everything else, such as
  /// moving averages and the loss scale, travels in f32). For
  /// SharedLocalParameterServer, whose master sends weights, and RoundRobin,
  /// whose shares send theirs; Mirrored sends gradients, not weights.
  DType weight_copy_dtype = DType::F32;
  /// How every device of the run is made (towers and consolidation); default:
  /// DeviceOptions::from_environment() (VKT_FORCE_STAGING) with cache_dir =
  /// default_cache_dir() (the user's cache directory, VKT_CACHE_DIR=off: none).
  std::optional<DeviceOptions> device_options{};
  /// Per tower, in the order of `devices`: the options its Device is made
  /// with, in place of device_options (e.g. a fault injected into one tower
  /// with DeviceOptions::lose_device_at_submit). Empty: device_options for
  /// every tower; otherwise one entry per tower. Towers that share a Device
  /// (TowerDevices::Shared) take the first one's.
  std::vector<DeviceOptions> tower_device_options{};
  /// Each tower's share of the batch (the samples' --shard-weights), in the
  /// order of `devices`: empty, equal shards (the batch must divide among the
  /// towers); else one weight per tower, each tower's rows in proportion
  /// (3:1 gives a batch of 16 as 12 and 4; every tower at least one row).
  /// Losses and gradients weigh each tower by its rows, so Mean and
  /// SumByNonzeroWeights over unequal shards equal one tower on the batch, and
  /// so do the evaluation's loss and metrics. Across processes each rank's
  /// slice is shared the same way.
  std::vector<double> shard_weights{};
  /// With no shard_weights: equal shards, or shares measured over the first
  /// steps (the samples' --shard-weights measured; one process only).
  ShardSplit shard_split = ShardSplit::Equal;
  /// Steps measured under ShardSplit::Measured (after the first). At least 1.
  std::uint32_t measure_steps = 10;
};

/// Returns a model function of the same type that, called with a root
/// ModelContext, builds `model_fn` once per tower (in tower order, each on its
/// device's graph, with its shard of the batch) and returns a spec whose `run`
/// trains the towers together: gradients summed in tower order on the
/// consolidation device, each TowerOptimizer call applied once there, in call
/// order, the global step advanced once, the new weights copied back to every
/// tower. Tower 0's op names carry no prefix, tower i's are scoped "tower_i/";
/// variables are shared by name. Throws vkt::Error for LossReduction::None.
///
///   vkt::ModelFn replicated = vkt::replicate_model_fn(my_model, {.loss_reduction =
///   vkt::LossReduction::Sum}); vkt::ModelContext root(instance, {{"x", {{4, 1}}}}, {{"y", {{4,
///   1}}}}); vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
///   spec.run->train_step(features, labels);
ModelFn replicate_model_fn(ModelFn model_fn, ReplicateOptions options = {});

/// The loss scaling `options` ask for (Auto resolved by the precision), or none.
std::optional<LossScaleOptions> loss_scaling_of(const ReplicateOptions& options);

/// True when `model_fn` was made by replicate_model_fn.
bool is_replicated(const ModelFn& model_fn);

}  // namespace vkt
