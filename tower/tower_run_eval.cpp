// TowerRun's evaluation and prediction steps: the towers run on their own and
// the host adds up metric accumulators or concatenates predictions in tower order.
#include <fmt/format.h>

#include "../runtime/vulkan/error.h"
#include "tower_run.h"

namespace vkt {

void TowerRun::evaluate_step(const HostBatch& features, const HostBatch& labels) {
  if (mode_ != Mode::Eval) throw Error("evaluate_step: this model was built for another mode");
  run_towers(features, labels);
  for (Tower& t : towers_) {  // tower order: the sums come out the same every run
    loss_sum_ += t.executor->read(t.scaled_loss)[0];
    std::size_t next = 0;
    for (const auto& [name, metric] : t.spec.eval_metric_ops) {
      std::vector<std::vector<double>>& sums = sums_.at(name);
      for (std::size_t a = 0; a < metric.accumulators.size(); ++a) {
        const std::vector<float> values = t.executor->read(t.accumulators[next++]);
        sums[a].resize(values.size(), 0.0);
        for (std::size_t j = 0; j < values.size(); ++j) sums[a][j] += values[j];
      }
    }
  }
  ++batches_;
}

std::map<std::string, double> TowerRun::metrics() const {
  std::map<std::string, double> out;
  out["loss"] = batches_ == 0 ? 0.0 : loss_sum_ / static_cast<double>(batches_);
  for (const auto& [name, metric] : towers_.front().spec.eval_metric_ops) {
    out[name] = metric.value(sums_.at(name));
  }
  return out;
}

HostBatch TowerRun::predict_step(const HostBatch& features) {
  if (mode_ != Mode::Predict) throw Error("predict_step: this model was built for another mode");
  run_towers(features, {});
  HostBatch out;
  for (Tower& t : towers_) {  // tower order = input order
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
