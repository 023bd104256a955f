// The update's consolidation device: the SharedLocalParameterServer master graph
// (the masters, the summed dense gradients, the towers' sparse rows
// concatenated, the optimizers' updates) and Mirrored's per-tower updates.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "../runtime/vulkan/error.h"
#include "../runtime/vulkan/instance.h"
#include "optimizer_calls.h"
#include "towers.h"
#include "weight_update.h"

namespace vkt {

void WeightUpdate::build_master(Towers& towers, const OptimizerCalls& calls,
                                const GradientBuckets& buckets, const UpdatePlacement& placement) {
  Towers::Tower& first = towers.front();
  const std::uint32_t index =
      placement.options->consolidation_device.value_or(placement.devices.front());
  Device& consolidation =
      consolidation_device(towers, placement, index, master_instance_, master_device_);
  master_ = std::make_unique<Graph>(consolidation, first.graph->options());
  check_same_layout(*master_, *first.graph);
  // The masters in tower 0's order: the variable arenas then share a layout,
  // and the weights go back to every tower in one copy.
  for (const Variable& v : first.graph->variables()) {
    const Tensor master = master_->variable(v.tensor.name(), v.tensor.shape(), v.initializer,
                                            v.trainable, v.tensor.dtype());
    if (v.optional_in_checkpoint) master_->set_optional_in_checkpoint(master);
  }
  // The summed dense gradients in tower 0's gradient-arena order, for the same
  // reason: runs of them then go to the master in one copy per tower.
  const int n = static_cast<int>(towers.size());
  std::vector<std::pair<std::size_t, Tensor>> by_offset;
  for (const OptimizerCalls::Call& call : calls.calls) {
    for (const GradVar& gv : call.per_tower[0]) {
      if (!gv.grad.sparse()) {
        by_offset.emplace_back(first.executor->range(gv.grad.dense).offset, gv.grad.dense);
      }
    }
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::map<int, Tensor> external;  // tower 0 gradient id -> master gradient
  for (const auto& [offset, g] : by_offset) {
    const Tensor var = Tensor(first.graph.get(), first.graph->info(g).gradient_of);
    external[g.id()] = master_->external_gradient(*master_->find_variable(var.name()));
  }
  // Sparse gradients are concatenated, as TensorFlow concatenates IndexedSlices:
  // one slot of a tower's rows per (process, micro-batch, tower), process r's
  // micro-batch m tower i's at slot (r k + m) n + i, so the lazy update sees
  // every row the whole step read (one tower on the whole batch: the same rows,
  // in the same order without accumulation). Made after the dense ones, they
  // lie after them in the master's arena.
  const int slots = processes_ * accumulate_ * n;
  std::map<int, Gradient> external_sparse;  // tower 0 values id -> master gradient
  for (const OptimizerCalls::Call& call : calls.calls) {
    for (const GradVar& gv : call.per_tower[0]) {
      if (!gv.grad.sparse()) continue;
      external_sparse[gv.grad.values.id()] = master_->external_sparse_gradient(
          *master_->find_variable(gv.var.name()), slots * gv.grad.values.shape()[0]);
    }
  }
  // The towers' scale variables have their masters: the scaler takes them.
  std::optional<LossScaler> scaler;
  if (calls.loss_scaling) scaler.emplace(*master_, *calls.loss_scaling);
  std::vector<Tensor> updates;
  for (const OptimizerCalls::Call& call : calls.calls) {
    std::vector<GradVar> gvs;
    for (const GradVar& gv : call.per_tower[0]) {
      const Tensor var = *master_->find_variable(gv.var.name());
      if (gv.grad.sparse()) {
        gvs.push_back({external_sparse.at(gv.grad.values.id()), var});
      } else {
        gvs.push_back({Gradient{external.at(gv.grad.dense.id())}, var});
      }
    }
    updates.push_back(scaler ? scaler->apply_gradients(*call.optimizer, gvs)
                             : call.optimizer->apply_gradients(gvs));
  }
  if (scaler) updates.push_back(scaler->update());
  // Its parameters (the step, the learning rates) are written two runs ahead:
  // writing the next ones never waits for the running update.
  master_executor_ =
      std::make_unique<Executor>(*master_, updates, ExecutorOptions{.double_buffered_feeds = true});

  // Each dense gradient goes to its place in the master's gradient arena, in
  // its bucket; the sparse ones lie after all of them.
  std::size_t dense_end = 0;  // in the master's arena
  for (const auto& [offset, g] : by_offset) {
    const BufferRange m = master_executor_->range(external.at(g.id()));
    dense_end = std::max(dense_end, align_up(m.offset + m.size(), 16));
  }
  for (const auto& [id, gradient] : external_sparse) {
    for (const Tensor& t : {gradient.values, gradient.indices}) {
      if (master_executor_->range(t).offset < dense_end) {
        throw Error("internal: a sparse gradient lies among the master's dense gradients");
      }
    }
  }
  for (const auto& [id, gradient] : external_sparse) {
    master_sparse_.push_back(master_executor_->range(gradient.values));
    master_sparse_.push_back(master_executor_->range(gradient.indices));
  }
  std::vector<std::vector<GradientReducer::Segment>> segments;
  std::vector<BufferRange> weights;
  const std::size_t frozen = first.graph->frozen_bytes();
  const std::size_t arena = first.graph->variable_arena().size();
  for (int i = 0; i < n; ++i) {
    Towers::Tower& t = towers[static_cast<std::size_t>(i)];
    for (const Variable& v : t.graph->variables()) {
      if (master_->variable_range(*master_->find_variable(v.tensor.name())).offset !=
          t.graph->variable_range(v.tensor).offset) {
        throw Error(fmt::format("internal: variable '{}' lies elsewhere in the master's arena",
                                v.tensor.name()));
      }
    }
    segments.emplace_back();
    for (std::size_t k = 0; k < t.gradients.size(); ++k) {
      const Tensor& g0 = first.gradients[k];
      if (!external.count(g0.id())) continue;  // sparse
      segments.back().push_back({t.executor->range(t.gradients[k]),
                                 master_executor_->range(external.at(g0.id())).offset,
                                 buckets.of_gradient[k]});
    }
    // Tower i's rows of every sparse gradient, at its slots in the master's:
    // one copy per micro-batch.
    for (int m = 0; m < accumulate_; ++m) {
      const auto slot = static_cast<std::size_t>((rank_ * accumulate_ + m) * n + i);
      for (const OptimizerCalls::Call& call : calls.calls) {
        const std::vector<GradVar>& ours = call.per_tower[static_cast<std::size_t>(i)];
        const std::vector<GradVar>& zeros = call.per_tower[0];
        for (std::size_t j = 0; j < ours.size(); ++j) {
          if (!ours[j].grad.sparse()) continue;
          const Gradient& master = external_sparse.at(zeros[j].grad.values.id());
          for (const auto& [src, dst] : {std::pair{ours[j].grad.values, master.values},
                                         std::pair{ours[j].grad.indices, master.indices}}) {
            const BufferRange from = t.executor->range(src);
            const BufferRange to = master_executor_->range(dst);
            if (from.size() * static_cast<std::size_t>(slots) != to.size()) {
              throw Error(fmt::format(
                  "tower {} has a sparse gradient of '{}' of shape {}, but the towers' rows "
                  "make {}; every tower must run the same model",
                  i, ours[j].var.name(), src.shape().str(), dst.shape().str()));
            }
            sparse_rows_.push_back(
                {static_cast<std::size_t>(i), m, from,
                 BufferRange(*to.buffer, to.offset + slot * from.size(), from.size())});
          }
        }
      }
    }
    weights.emplace_back(t.graph->variable_arena(), frozen, arena - frozen);
  }
  // The new weights are read once from the master and sent to every tower,
  // the trainable ones in half where asked; the frozen half variables, which
  // no step changes, lie before them and stay where they are.
  std::vector<WeightBroadcast::Range> trainable;
  for (const Variable& v : first.graph->variables()) {
    if (!v.trainable) continue;
    const BufferRange r = first.graph->variable_range(v.tensor);
    trainable.push_back({r.offset - frozen, r.size()});
  }
  weights_out_ = std::make_unique<WeightBroadcast>(
      BufferRange(master_->variable_arena(), frozen, arena - frozen), weights, trainable,
      placement.options->weight_copy_dtype);
  destinations_.push_back({by_offset.empty()
                               ? BufferRange()
                               : BufferRange(master_executor_->gradient_arena(), 0, dense_end),
                           std::move(segments)});
}

std::vector<std::vector<Tensor>> record_mirrored_updates(Towers& towers,
                                                         const OptimizerCalls& calls) {
  std::vector<std::vector<Tensor>> updates(towers.size());
  for (std::size_t i = 0; i < towers.size(); ++i) {
    Towers::Tower& t = towers[i];
    // The towers' calls are recorded; from here on the tower's graph takes the
    // updates itself, so it is no longer a replica that must defer them.
    t.graph->set_attachment(nullptr);
    // The summed gradients arrive as external gradients in the order the
    // forward executor will place the tower's own (by tensor id), so the gradient
    // arenas of both programs share one layout and the sum lands in one copy.
    std::vector<Tensor> grads;
    for (const OptimizerCalls::Call& call : calls.calls) {
      for (const GradVar& gv : call.per_tower[i]) grads.push_back(gv.grad.dense);
    }
    std::vector<Tensor> sorted = grads;
    std::sort(sorted.begin(), sorted.end(),
              [](const Tensor& a, const Tensor& b) { return a.id() < b.id(); });
    std::map<int, Tensor> external;
    for (const Tensor& g : sorted) {
      external[g.id()] =
          t.graph->external_gradient(Tensor(t.graph.get(), t.graph->info(g).gradient_of));
    }
    // Every tower decides each skip alike: the sums it checks are the same bits.
    std::optional<LossScaler> scaler;
    if (calls.loss_scaling) scaler.emplace(*t.graph, *calls.loss_scaling);
    for (const OptimizerCalls::Call& call : calls.calls) {
      std::vector<GradVar> gvs;
      for (const GradVar& gv : call.per_tower[i]) {
        gvs.push_back({Gradient{external.at(gv.grad.dense.id())}, gv.var});
      }
      // Tower 0's optimizer object serves every tower: its slots are kept per graph.
      updates[i].push_back(scaler ? scaler->apply_gradients(*call.optimizer, gvs)
                                  : call.optimizer->apply_gradients(gvs));
    }
    if (scaler) updates[i].push_back(scaler->update());
  }
  return updates;
}

void WeightUpdate::build_mirrored(Towers& towers, const GradientBuckets& buckets,
                                  const UpdatePlacement& placement,
                                  std::vector<std::vector<Tensor>>& updates) {
  const std::uint32_t index =
      placement.options->consolidation_device.value_or(placement.devices.front());
  Device& consolidation =
      consolidation_device(towers, placement, index, master_instance_, master_device_);
  std::vector<BufferRange> arenas;
  std::vector<std::vector<GradientReducer::Segment>> segments;
  for (std::size_t i = 0; i < towers.size(); ++i) {
    Towers::Tower& t = towers[i];
    // On the tower's own queue: its next step follows its update there.
    tower_updates_.push_back(std::make_unique<Executor>(
        *t.graph, updates.at(i),
        ExecutorOptions{.double_buffered_feeds = true, .compute_queue = t.lane}));
    if (i == 0) scale_lane_ = t.lane;
    Executor& update = *tower_updates_.back();
    if (update.gradient_arena().size() != t.executor->gradient_arena().size()) {
      throw Error("internal: a tower's update program does not line up with its gradients");
    }
    arenas.emplace_back(update.gradient_arena());
    // The update program's gradient arena shares the forward program's layout,
    // so each gradient's sum goes where it came from.
    segments.emplace_back();
    for (std::size_t k = 0; k < t.gradients.size(); ++k) {
      const BufferRange r = t.executor->range(t.gradients[k]);
      segments.back().push_back({r, r.offset, buckets.of_gradient[k]});
    }
  }
  const std::size_t bytes = align_up(towers.front().executor->gradient_arena().size(), 16);
  mirrored_sum_ = Buffer(consolidation, bytes);
  destinations_.push_back({BufferRange(mirrored_sum_), std::move(segments)});
  // The sum is read once and sent to every tower's update program, in the
  // exchange's type (--exchange-dtype): with a half type every tower updates
  // its replica with the same rounded sums, half the bytes on the way back
  // too (PyTorch's fp16 hook does the same), which the other modes, whose
  // update reads the f32 sum, do not round. The arena holds dense f32
  // gradients alone (Mirrored refuses sparse ones) and the padding between
  // them, which nothing reads: it travels as one half range.
  const BufferRange sum(mirrored_sum_, 0, arenas.front().size());
  broadcast_ = std::make_unique<WeightBroadcast>(
      sum, arenas, std::vector<WeightBroadcast::Range>{{0, sum.size()}},
      placement.options->exchange_dtype);
}

}  // namespace vkt
