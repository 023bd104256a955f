// TowerRun's evaluation and prediction steps: the towers run on their own and
// the host adds up metric accumulators or concatenates predictions in tower order.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

#include "../runtime/mpi/process_group.h"
#include "../runtime/vulkan/error.h"
#include "tower_run.h"
#include "towers.h"

namespace vkt {

void TowerRun::check_eval_metrics() const {
  const std::map<std::string, Metric>& first = towers_->front().spec.eval_metric_ops;
  // A per-example accumulator's rows are its tower's shard: only the rest of
  // its shape must agree (shards may differ: ReplicateOptions::shard_weights).
  const auto shapes = [](const Metric& m) {
    std::vector<std::string> out;
    for (const Tensor& a : m.accumulators) {
      std::vector<std::int64_t> dims = a.shape().dims();
      if (!m.per_example || dims.empty()) {
        out.push_back(a.shape().str());
        continue;
      }
      dims.erase(dims.begin());
      out.push_back(fmt::format("[rows{}{}]", dims.empty() ? "" : ", ", fmt::join(dims, ", ")));
    }
    return fmt::format("{}", fmt::join(out, ", "));
  };
  for (int i = 1; i < towers(); ++i) {
    const std::map<std::string, Metric>& ours =
        (*towers_)[static_cast<std::size_t>(i)].spec.eval_metric_ops;
    const auto missing = [](const std::map<std::string, Metric>& a,
                            const std::map<std::string, Metric>& b) -> const std::string* {
      for (const auto& [name, metric] : a) {
        if (!b.count(name)) return &name;
      }
      return nullptr;
    };
    const std::string* name = missing(ours, first);
    const bool only_ours = name != nullptr;
    if (!only_ours) name = missing(first, ours);
    if (name != nullptr) {
      throw Error(fmt::format(
          "eval metric '{}' is returned by tower {} but not by tower {}; every tower's model "
          "function must return the same eval_metric_ops",
          *name, only_ours ? i : 0, only_ours ? 0 : i));
    }
    for (const auto& [metric_name, metric] : first) {
      const Metric& other = ours.at(metric_name);
      if (shapes(metric) != shapes(other) || metric.per_example != other.per_example) {
        throw Error(fmt::format(
            "eval metric '{}' is computed differently on tower 0 (accumulators [{}]{}) and tower "
            "{} ([{}]{}); every tower must compute each metric the same way",
            metric_name, shapes(metric), metric.per_example ? ", per example" : "", i,
            shapes(other), other.per_example ? ", per example" : ""));
      }
    }
  }
}

void TowerRun::evaluate_step(const HostBatch& features, const HostBatch& labels,
                             std::optional<std::int64_t> real_examples) {
  if (mode_ != Mode::Eval) throw Error("evaluate_step: this model was built for another mode");
  const std::int64_t rows = towers_->batch();
  // Across processes a rank's slice of the last batch may be padding only.
  const std::int64_t fewest = processes() > 1 ? 0 : 1;
  if (real_examples && (*real_examples < fewest || *real_examples > rows)) {
    throw Error(fmt::format("evaluate_step: {} real examples in a batch of {}; give {} to {}",
                            *real_examples, rows, fewest, rows));
  }
  const std::int64_t real = real_examples.value_or(rows);
  // Tower i's real rows: the batch's first `real` rows, in tower order.
  const auto real_rows = [&](int i) {
    const Towers::Tower& t = (*towers_)[static_cast<std::size_t>(i)];
    return std::clamp<std::int64_t>(real - t.first, 0, t.rows);
  };
  // The towers' losses weigh their real rows as equal shards' would.
  const float equal_scale = loss_scale(1, towers(), towers(), mode_);
  for (int i = 0; i < towers(); ++i) {
    const std::int64_t tower_real = real_rows(i);
    if (tower_real > 0 && tower_real < (*towers_)[static_cast<std::size_t>(i)].rows &&
        !(*towers_)[static_cast<std::size_t>(i)].takes_example_weights) {
      throw Error(fmt::format(
          "evaluate: the last batch has {} examples, padded to {}, and the model's loss does not "
          "weigh the padding out (vkt's losses do when given no weights; a loss of your own "
          "needs ModelContext::example_weights()); or evaluate a multiple of {} examples",
          real, rows, rows));
    }
  }
  run_towers(features, labels, real_examples);
  for (int i = 0; i < towers(); ++i) {  // tower order: the sums come out the same every run
    Towers::Tower& t = (*towers_)[static_cast<std::size_t>(i)];
    const std::int64_t tower_real = real_rows(i);
    if (tower_real == 0) continue;  // padding only
    double scaled = t.executor->read(t.scaled_loss)[0];
    if (t.scale != equal_scale) scaled = scaled / t.scale * equal_scale;
    // A mean weighs its real rows; a sum is already the total of its rows, so
    // every tower's weighs the batch's real rows alike (as one tower's would:
    // the batch's total loss, however the rows fall among the towers).
    const double weight = options_.loss_reduction == LossReduction::Sum
                              ? static_cast<double>(real) / towers()
                              : static_cast<double>(tower_real);
    loss_sum_ += scaled * weight;
    examples_sum_ += static_cast<double>(tower_real) / (towers() * processes());
    std::size_t next = 0;
    for (const auto& [name, metric] : t.spec.eval_metric_ops) {
      std::vector<std::vector<double>>& sums = sums_.at(name);
      for (std::size_t a = 0; a < metric.accumulators.size(); ++a) {
        const Tensor& accumulator = t.accumulators[next++];
        const std::vector<float> values = t.executor->read(accumulator);
        // Per example: only the real rows; otherwise the whole tensor.
        const std::size_t width =
            metric.per_example ? values.size() / static_cast<std::size_t>(t.rows) : values.size();
        const std::size_t used = metric.per_example ? width * tower_real : values.size();
        sums[a].resize(width, 0.0);
        for (std::size_t j = 0; j < used; ++j) sums[a][j % width] += values[j];
      }
    }
  }
}

void TowerRun::reset_metrics() {
  for (auto& [name, sums] : sums_) {
    for (std::vector<double>& s : sums) s.clear();
  }
  loss_sum_ = 0;
  examples_sum_ = 0;
}

std::map<std::string, double> TowerRun::metrics() const {
  double loss_sum = loss_sum_, examples_sum = examples_sum_;
  std::map<std::string, std::vector<std::vector<double>>> sums = sums_;
  if (processes() > 1) {  // every process's sums, added in rank order
    const Towers::Tower& first = towers_->front();
    std::vector<double> flat{loss_sum, examples_sum};
    std::size_t next = 0;
    for (const auto& [name, metric] : first.spec.eval_metric_ops) {
      for (std::vector<double>& s : sums.at(name)) {
        const auto elements =
            static_cast<std::size_t>(first.accumulators[next++].shape().elements());
        s.resize(metric.per_example ? elements / static_cast<std::size_t>(first.rows) : elements,
                 0.0);
        flat.insert(flat.end(), s.begin(), s.end());
      }
    }
    distribution_.processes->allreduce_sum(std::span<double>(flat),
                                           "evaluation: the metrics' sums");
    loss_sum = flat[0];
    examples_sum = flat[1];
    std::size_t at = 2;
    for (auto& [name, per_accumulator] : sums) {
      for (std::vector<double>& s : per_accumulator) {
        std::copy_n(flat.begin() + static_cast<std::ptrdiff_t>(at), s.size(), s.begin());
        at += s.size();
      }
    }
  }
  std::map<std::string, double> out;
  out["loss"] = examples_sum == 0 ? 0.0 : loss_sum / examples_sum;
  for (const auto& [name, metric] : towers_->front().spec.eval_metric_ops) {
    out[name] = metric.value(sums.at(name));
  }
  return out;
}

HostBatch TowerRun::predict_step(const HostBatch& features) {
  if (mode_ != Mode::Predict) throw Error("predict_step: this model was built for another mode");
  run_towers(features, {});
  HostBatch out;
  for (Towers::Tower& t : *towers_) {  // tower order = input order
    for (const auto& [name, tensor] : t.spec.predictions) {
      HostTensor& whole = out[name];
      std::vector<std::int64_t> dims = tensor.shape().dims();
      if (whole.shape.rank() > 0) dims[0] += whole.shape[0];
      whole.shape = Shape(dims);
      whole.dtype = tensor.dtype();
      if (tensor.dtype() == DType::F32) {
        const std::vector<float> v = t.executor->read(tensor);
        whole.f32.insert(whole.f32.end(), v.begin(), v.end());
      } else {
        const std::vector<std::int32_t> v = t.executor->read_i32(tensor);
        whole.i32.insert(whole.i32.end(), v.begin(), v.end());
      }
    }
  }
  return out;
}

}  // namespace vkt
