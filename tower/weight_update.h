#pragma once
// The optimizers' updates on the consolidation device(s), and the new weights back to every tower.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../runtime/graph/executor.h"
#include "../runtime/vulkan/buffer.h"
#include "../runtime/vulkan/cross_device_copy.h"
#include "../runtime/vulkan/device.h"
#include "gradient_exchange.h"
#include "replicate.h"
#include "weight_broadcast.h"

namespace vkt {

class Instance;
class Towers;
struct OptimizerCalls;

/// Mirrored: every tower's own updates of every recorded call, on its own
/// variables and slots, per tower. Recorded before the towers' step programs
/// are made, so the slots (variables) are in their variable arenas.
std::vector<std::vector<Tensor>> record_mirrored_updates(Towers& towers,
                                                         const OptimizerCalls& calls);

/// Where the update runs: the devices of the towers (indices into `root`'s)
/// and the run's choices of a consolidation device.
struct UpdatePlacement {
  const Instance* root = nullptr;
  std::vector<std::uint32_t> devices;
  const ReplicateOptions* options = nullptr;
  DeviceOptions device_options;
};

/// Where the summed gradients become new weights, by variable mode:
/// SharedLocalParameterServer, a master graph on the consolidation device
/// (every variable's master, the summed dense gradients, the towers' sparse
/// rows concatenated, every optimizer call's update) whose new weights go
/// back to every tower in one copy; Mirrored, each tower's own update of its
/// replica after the sum is sent to every tower; RoundRobin, every N-th
/// variable's master, update and copy-back on tower N's device. It tells the
/// exchange where the sums go (destinations(), sparse_rows()).
///
///   vkt::WeightUpdate update(towers, calls, buckets, placement, processes, rank, k, {});
///   vkt::GradientExchange exchange(update.destinations(), update.sparse_rows(), ...);
///   update.apply(summed, towers);  // each step, once the exchange is complete
class WeightUpdate {
 public:
  /// `mirrored_updates`: record_mirrored_updates()'s, for Mirrored.
  WeightUpdate(Towers& towers, const OptimizerCalls& calls, const GradientBuckets& buckets,
               const UpdatePlacement& placement, int processes, int rank, int accumulate_steps,
               std::vector<std::vector<Tensor>> mirrored_updates);
  ~WeightUpdate();
  WeightUpdate(const WeightUpdate&) = delete;
  WeightUpdate& operator=(const WeightUpdate&) = delete;

  /// Per destination (one; RoundRobin: one per share, in share order), where
  /// the towers' dense gradients are summed.
  const std::vector<GradientDestination>& destinations() const { return destinations_; }
  /// Every tower's sparse rows, per micro-batch, into the master's slots.
  const std::vector<SparseRows>& sparse_rows() const { return sparse_rows_; }
  /// The master's sparse gradients: across processes, each rank's rows are
  /// its block of these (rank order).
  const std::vector<BufferRange>& gathered() const { return master_sparse_; }

  /// Applies the step's complete gradients (`summed`, as GradientExchange::
  /// complete() left it) and starts the new weights towards every tower
  /// (Towers::weights_arrive), each after its step (`towers_done`), whose
  /// state updates write the same arena. Returns when the update was
  /// submitted (the copy-back's start).
  std::chrono::steady_clock::time_point apply(const GradientExchange::Summed& summed,
                                              std::span<const Ticket> towers_done, Towers& towers);

  /// Where the loss scaler's state ("loss_scale/scale", ".../good_steps",
  /// ".../skipped_steps", in a row) is updated: the master's, or tower 0's
  /// (Mirrored), and the compute queue of that update. None without loss
  /// scaling, or where the three do not lie in a row.
  struct ScaleState {
    BufferRange range;
    std::uint32_t lane = 0;
  };
  std::optional<ScaleState> loss_scale_state() const;
  /// The last apply()'s update of the loss scaler's state (where
  /// loss_scale_state() says), else none.
  const Ticket& scale_updated() const { return scale_updated_; }

  /// The master graph (SharedLocalParameterServer), else null.
  Graph* master() const { return master_.get(); }
  /// RoundRobin's shares' graphs, in share order; else none.
  std::vector<Graph*> share_graphs() const;
  /// The masters' weights (the master's, or RoundRobin's shares') to every
  /// tower, now (after a restore), in the copies' type.
  void send_weights();
  /// The Devices the update made for itself (a separate consolidation device).
  std::vector<const Device*> own_devices() const;
  /// Times the copy-backs blocked the step's thread.
  std::uint64_t host_waits() const;

 private:
  void build_master(Towers& towers, const OptimizerCalls& calls, const GradientBuckets& buckets,
                    const UpdatePlacement& placement);
  void build_mirrored(Towers& towers, const GradientBuckets& buckets,
                      const UpdatePlacement& placement, std::vector<std::vector<Tensor>>& updates);
  void build_round_robin(Towers& towers, const OptimizerCalls& calls,
                         const GradientBuckets& buckets, const UpdatePlacement& placement);
  /// The Device for consolidation work on physical device `index`: `tower`'s
  /// (or the first tower's on `index`) when the placement allows, else a new
  /// one kept in `instance` and `device`.
  static Device& consolidation_device(Towers& towers, const UpdatePlacement& placement,
                                      std::uint32_t index, std::unique_ptr<Instance>& instance,
                                      std::unique_ptr<Device>& device,
                                      const Device* tower = nullptr);
  /// vkt::Error unless `graph` (a master or a share) lays its arenas out as
  /// the towers' `tower0` does: its device aligns buffers more coarsely than
  /// every tower's (a separate consolidation device).
  static void check_same_layout(const Graph& graph, const Graph& tower0);
  /// True for a variable that a state update of tower 0 (`tower0`) writes.
  static bool is_state_variable(const Graph& tower0, const std::string& name);
  /// Tower 0's state variables' copies into their masters (state_variables.cpp).
  void build_state_copies(const Towers& towers);
  /// Starts them after tower 0's last run; appends, per copy, the ticket of its
  /// master's device to `arrived`.
  void copy_state(const Towers& towers, std::vector<Ticket>& arrived);
  std::chrono::steady_clock::time_point apply_round_robin(const std::vector<Ticket>& summed,
                                                          Towers& towers);

  int processes_, rank_, accumulate_;
  // First, so that they outlive the graphs and programs on them.
  std::unique_ptr<Instance> master_instance_;
  std::unique_ptr<Device> master_device_;  // null when the master is on a tower's Device
  std::unique_ptr<Graph> master_;
  std::unique_ptr<Executor> master_executor_;
  // Mirrored: each tower's update program, on its own graph and queue.
  std::vector<std::unique_ptr<Executor>> tower_updates_;
  Buffer mirrored_sum_;
  // RoundRobin: one share of the variables per device.
  struct Share {
    std::unique_ptr<Instance> instance;
    std::unique_ptr<Device> device;  // null when it is on its tower's Device
    std::unique_ptr<Graph> graph;
    std::unique_ptr<Executor> executor;  // null when its variables take no update
    // Per variable, to every tower (ReplicateOptions::weight_copy_dtype).
    std::vector<std::unique_ptr<WeightBroadcast>> weights_back;
  };
  std::vector<Share> shares_;
  // Mirrored: the summed gradients, read once and sent to every tower.
  std::unique_ptr<WeightBroadcast> broadcast_;
  std::unique_ptr<WeightBroadcast> weights_out_;  // SharedLocalParameterServer's weights
  // Per sparse gradient of the master, its values' and its indices' ranges
  // (processes x k x n slots of a tower's rows; rank r's block is the
  // contiguous slots [r k n, (r + 1) k n)).
  std::vector<BufferRange> master_sparse_;
  // Tower 0's state variables (moving averages) into their masters, each step.
  std::vector<std::unique_ptr<CrossDeviceCopy>> state_in_;
  std::vector<GradientDestination> destinations_;
  std::vector<SparseRows> sparse_rows_;
  Ticket scale_updated_;
  std::uint32_t scale_lane_ = 0;  // the queue of loss_scale_state()'s update
};

}  // namespace vkt
