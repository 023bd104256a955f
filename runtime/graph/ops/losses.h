#pragma once
// Losses with weights and TensorFlow's tf.losses reductions.

#include <cstdint>
#include <optional>

#include "../tensor.h"

namespace vkt {

/// How per-element losses l (weighted by w broadcast to l's shape) become the
/// loss, exactly as tf.losses.Reduction:
///   None                 w * l, per element (l's shape)
///   Sum                  sum(w * l)
///   Mean                 sum(w * l) / sum(w)                  (0 when sum(w) == 0)
///   SumOverBatchSize     sum(w * l) / elements(l)
///   SumByNonzeroWeights  sum(w * l) / count(w != 0)           (0 when no w != 0)
/// Without weights (an empty Tensor) w is 1 everywhere, so Mean,
/// SumOverBatchSize and SumByNonzeroWeights are all the mean of l. In an
/// evaluation graph of replicate_model_fn (Graph::example_weights) "no
/// weights" means 1 for every real example and 0 for the padding of a short
/// last batch, so these are then the mean over the real examples.
enum class Reduction { None, Sum, Mean, SumOverBatchSize, SumByNonzeroWeights };

/// Weights `w` (scalar or broadcastable to `losses`; empty = 1) applied to
/// per-element `losses` and reduced as `reduction` says. Gradients flow to
/// both. `what` names the loss in error messages.
Tensor compute_weighted_loss(const Tensor& losses, const Tensor& weights = Tensor{},
                             Reduction reduction = Reduction::SumByNonzeroWeights,
                             const char* what = "compute_weighted_loss");

/// l = (predictions - labels)^2, same shapes, then weighted and reduced.
Tensor mean_squared_error(const Tensor& labels, const Tensor& predictions,
                          const Tensor& weights = Tensor{},
                          Reduction reduction = Reduction::SumByNonzeroWeights);

/// l = |predictions - labels|, same shapes (gradient sign(predictions - labels), 0 at 0).
Tensor absolute_difference(const Tensor& labels, const Tensor& predictions,
                           const Tensor& weights = Tensor{},
                           Reduction reduction = Reduction::SumByNonzeroWeights);

/// With e = predictions - labels (same shapes), TensorFlow's huber_loss:
/// l = 0.5 e^2 if |e| <= delta, else delta |e| - 0.5 delta^2. delta > 0.
/// The argument order is tf.losses.huber_loss's.
Tensor huber(const Tensor& labels, const Tensor& predictions, const Tensor& weights = Tensor{},
             float delta = 1.0f, Reduction reduction = Reduction::SumByNonzeroWeights);

/// labels i32 [N], logits f32 [N, C] (more generally labels = logits' shape
/// without its last axis): l[n] = logsumexp(logits[n, :]) - logits[n, labels[n]],
/// computed with the row maximum subtracted, so logits of any size are safe.
/// Gradient wrt logits: (softmax(logits) - one_hot(labels)) * dl. Labels get no
/// gradient. A label outside [0, C) reads nothing out of bounds: its loss and its
/// logits' gradient row are NaN (as TensorFlow on a GPU), so it cannot go unnoticed.
/// `ignore_index` (PyTorch's, e.g. -100 for padding tokens): labels equal to it
/// weigh 0 (times `weights` where given) and get no gradient, so Mean and
/// SumByNonzeroWeights average over the other labels only, as PyTorch's
/// cross_entropy(ignore_index=...) does.
///
///   vkt::Tensor loss = vkt::sparse_softmax_cross_entropy(next, logits, {}, vkt::Reduction::Mean,
///   -100);
Tensor sparse_softmax_cross_entropy(const Tensor& labels, const Tensor& logits,
                                    const Tensor& weights = Tensor{},
                                    Reduction reduction = Reduction::SumByNonzeroWeights,
                                    std::optional<std::int32_t> ignore_index = std::nullopt);

/// labels z in [0, 1], f32, same shape as logits x:
/// l = max(x, 0) - x z + log(1 + exp(-|x|)), the stable form of
/// -z log(sigmoid(x)) - (1 - z) log(1 - sigmoid(x)). Gradient wrt x:
/// sigmoid(x) - z; wrt z: -x.
Tensor sigmoid_cross_entropy(const Tensor& labels, const Tensor& logits,
                             const Tensor& weights = Tensor{},
                             Reduction reduction = Reduction::SumByNonzeroWeights);

}  // namespace vkt
