#pragma once
// A pretrained decoder as an Estimator model function: next-token
// cross-entropy, AdamW on what trains (the adapters under LoRA), a cosine
// schedule after a linear warm-up, and clipping to a global norm.

#include <cstdint>
#include <memory>

#include "../runtime/io/dataset.h"
#include "../tower/model_fn.h"
#include "decoder.h"
#include "pretrained.h"

namespace vkt::models {

/// How causal_lm_model_fn trains.
struct CausalLmSettings {
  DecoderOptions decoder{};
  double learning_rate = 1e-3;  ///< the peak rate
  std::uint64_t steps = 100;    ///< the cosine's length
  /// The linear warm-up's share of `steps` (at least one step).
  double warmup_fraction = 0.05;
  /// AdamW's decoupled decay on the matrices (Hugging Face Trainer's
  /// weight_decay; none on biases and norms).
  double weight_decay = 0.0;
  float clip_norm = 1.0f;  ///< the gradients' global norm is clipped to this
};

/// The model function of a causal language model over `model`: features
/// "tokens" [B, T] (i32) at positions 0..T-1, labels "next" [B, T] (i32), the
/// mean next-token cross-entropy as the loss, and "logits" [B, T, vocab] as
/// the prediction. Wrap it in replicate_model_fn for towers.
///
///   auto model = std::make_shared<const vkt::models::PretrainedDecoder>(
///       vkt::models::load_pretrained("tiny-llama"));
///   vkt::Estimator estimator(vkt::replicate_model_fn(vkt::models::causal_lm_model_fn(
///       model, {.decoder = {.lora = vkt::layers::LoraOptions{.rank = 8}}})));
ModelFn causal_lm_model_fn(std::shared_ptr<const PretrainedDecoder> model,
                           const CausalLmSettings& settings);

/// The mean next-token cross-entropy of the decoder (`weights`, built with
/// `options`) over the first `max_batches` batches of `batch_size` windows
/// of `windows` ("tokens" and "next", as token_windows makes them), on one
/// device, outside any Estimator: what a model scores before it is trained
/// or after, read from its checkpoint. The batch shrinks to the windows
/// there are; none is a vkt::Error.
double held_out_loss(Device& device, const DecoderConfig& config, const DecoderWeights& weights,
                     const DecoderOptions& options, const Dataset& windows, std::int64_t batch_size,
                     std::int64_t max_batches);

}  // namespace vkt::models
