#include "input_fn.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <limits>

#include "../runtime/vulkan/error.h"

namespace vkt {
namespace {

/// A BatchStream whose columns are split into features and labels.
class DatasetInput : public Input {
 public:
  DatasetInput(const Dataset& data, const DatasetInputOptions& options, std::int64_t first_batch)
      : batch_size_(options.batch_size),
        labels_(options.label_columns),
        stream_(data, options.batch_size, options.drop_remainder,
                options.epochs == 0 ? INT_MAX : options.epochs, options.shuffle_seed, first_batch) {
  }

  std::int64_t batch_size() const override { return batch_size_; }

  std::optional<Batch> next() override {
    std::optional<HostBatch> columns = stream_.next();
    if (!columns) return std::nullopt;
    Batch batch;
    for (auto& [name, tensor] : *columns) {
      const bool is_label = std::find(labels_.begin(), labels_.end(), name) != labels_.end();
      (is_label ? batch.labels : batch.features)[name] = std::move(tensor);
    }
    return batch;
  }

 private:
  std::int64_t batch_size_;
  std::vector<std::string> labels_;
  BatchStream stream_;
};

}  // namespace

InputFn dataset_input(Dataset data, DatasetInputOptions options) {
  for (const std::string& label : options.label_columns) {
    if (!data.columns().count(label)) {
      std::vector<std::string> names;
      for (const auto& [name, column] : data.columns()) names.push_back(name);
      throw Error(
          fmt::format("dataset_input: label column '{}' is not in the data set; its columns are {}",
                      label, fmt::join(names, ", ")));
    }
  }
  if (options.epochs < 0) {
    throw Error(
        fmt::format("dataset_input: epochs is {}; give 1 or more, or 0 to repeat", options.epochs));
  }
  return [data = std::move(data), options](const InputContext& context) {
    if (context.start_batch >
        static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      throw Error(fmt::format("dataset_input: cannot start at batch {}; it passes the largest {}",
                              context.start_batch, std::numeric_limits<std::int64_t>::max()));
    }
    return std::make_unique<DatasetInput>(data, options,
                                          static_cast<std::int64_t>(context.start_batch));
  };
}

}  // namespace vkt
