#pragma once
// A dense layer with a frozen base and a trainable low-rank adapter (LoRA).

#include <cstdint>
#include <string>

#include "../tensor.h"
#include "layers.h"

namespace vkt::layers {

/// The adapter of lora_dense: PEFT's LoraConfig(r, lora_alpha), Keras'
/// `Dense.enable_lora(rank)`.
struct LoraOptions {
  std::int64_t rank = 8;  ///< the adapter's inner width r, at least 1
  float alpha = 16.0f;    ///< the adapter's output is scaled by alpha / rank (finite, > 0)
  /// How the frozen base (kernel and bias) is stored: f32, or f16 / bf16 in
  /// half the bytes (see FrozenScope).
  DType base_dtype = DType::BF16;
};

/// A dense layer fine-tuned by LoRA (Hu et al., 2021): act(x kernel + bias +
/// alpha / rank * (x lora_a) lora_b), where "<name>/kernel" [in, units] and
/// "<name>/bias" [units] are the frozen base in `lora.base_dtype` (the names
/// dense gives them, so warm start fills them from a pretrained dense layer's
/// checkpoint), and "<name>/lora_a" [in, rank] (uniform in +-1 / sqrt(in), as
/// PEFT's) and "<name>/lora_b" [rank, units] (zeros, so the layer starts as
/// its base) are trainable f32. Shapes and reuse by name as dense's; unnamed:
/// "dense", "dense_1", ... The adapter's products take the precision policy
/// as every matmul does. No dropout on the adapter's input (PEFT's default).
///
///   config.warm_start_from = vkt::WarmStartSettings{.ckpt_to_initialize_from = "pretrained"};
///   ...
///   vkt::Tensor h = vkt::layers::lora_dense(x, 512, {.rank = 8, .alpha = 16},
///                                           vkt::layers::Activation::Relu, "hidden");
Tensor lora_dense(const Tensor& x, std::int64_t units, const LoraOptions& lora,
                  Activation activation = Activation::None, const std::string& name = "");

}  // namespace vkt::layers
