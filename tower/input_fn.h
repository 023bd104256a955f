#pragma once
// Input functions: where an Estimator reads its batches.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../runtime/io/dataset.h"
#include "../runtime/io/host_tensor.h"

namespace vkt {

/// One batch as the model sees it: features, and labels (empty for prediction).
struct Batch {
  HostBatch features;
  HostBatch labels;
};

/// A source of batches for one train, evaluate or predict call.
class Input {
 public:
  virtual ~Input() = default;
  /// Rows of a full batch: the global batch the model is built for.
  virtual std::int64_t batch_size() const = 0;
  /// The next batch (the last may be short), or nothing when the data ends.
  virtual std::optional<Batch> next() = 0;
};

/// What the Estimator tells an input function.
struct InputContext {
  /// Training resumes at this global step: an input that can (dataset_input
  /// does) starts with the batch that step would have read (start_batch), so a
  /// run resumed from a checkpoint sees the data an uninterrupted run would have seen.
  std::uint64_t start_step = 0;
  /// The batch that step starts with: start_step x RunConfig::accumulate_steps
  /// (each global step reads that many batches). An input that resumes starts
  /// here.
  std::uint64_t start_batch = 0;
};

/// Makes a fresh Input each time an Estimator trains, evaluates or predicts.
using InputFn = std::function<std::unique_ptr<Input>(const InputContext&)>;

struct DatasetInputOptions {
  std::int64_t batch_size = 32;
  /// Passes over the data; 0 repeats it without end (training by steps).
  int epochs = 1;
  /// Reshuffles every epoch with seed + epoch; none keeps the data's order.
  std::optional<std::uint64_t> shuffle_seed{};
  /// Training: true (the towers' shards must divide). Evaluation and
  /// prediction: false, the short last batch is kept (and padded by the Estimator).
  bool drop_remainder = false;
  /// The columns that are labels; the others are features.
  std::vector<std::string> label_columns{"y"};
};

/// An input function over an in-memory data set, batched on a background
/// thread (BatchStream):
///
///   estimator.train(vkt::dataset_input(train, {.batch_size = 64, .epochs = 0,
///                                              .shuffle_seed = 7, .drop_remainder = true}),
///                   {.max_steps = 1000});
///   auto result = estimator.evaluate(vkt::dataset_input(test, {.batch_size = 64}));
///
/// vkt::Error (when the input is made) for a label column the data set lacks.
InputFn dataset_input(Dataset data, DatasetInputOptions options);

}  // namespace vkt
