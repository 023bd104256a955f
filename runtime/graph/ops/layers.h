#pragma once
// Layers: ops together with the variables they own.

#include <cstdint>
#include <optional>
#include <string>

#include "../tensor.h"
#include "attention.h"
#include "conv.h"
#include "pool.h"

namespace vkt::layers {

/// The activation a layer applies to its output (the elementwise ops of the
/// same names; LeakyRelu with slope 0.2, Elu with alpha 1, Gelu in tanh form).
enum class Activation { None, Relu, Sigmoid, Tanh, Gelu, Elu, LeakyRelu, Softplus };

/// `activation` applied to x (x itself for None).
Tensor activate(const Tensor& x, Activation activation);

/// `activation` applied to a layer's pre-activation `y` as dense applies it:
/// under a half precision, the input of an activation whose gradient reads it
/// (gelu, elu, leaky_relu, softplus) is stored rounded to the half type.
Tensor activate_layer_output(const Tensor& y, Activation activation);

/// The name a layer's variables go under: `name` when given, else the next of
/// `base`, `base_1`, `base_2`, ... in x's graph (Graph::unique_layer_name), as
/// Keras names unnamed layers. For layers of one's own:
///
///   const std::string scope = vkt::layers::layer_name(x, name, "my_layer");
std::string layer_name(const Tensor& x, const std::string& name, const char* base);

/// A fully connected layer: act(bias_add(matmul(x, kernel), bias)) with the
/// variables "<name>/kernel" [in, units] (glorot_uniform) and "<name>/bias"
/// [units] (zeros), where in is x's last dimension. x [..., in] of rank 2 or
/// more gives [..., units]. Calling it again with the same name reuses the
/// variables (as every tower does); another input width is then a vkt::Error.
/// Without a name each call is a new layer: "dense", "dense_1", ...
/// Recorded as one fused op, matmul_bias_act (dense_fused.h); gelu comes after it.
/// Under a half precision the product is the policy's (matmul), then the bias
/// and the activation in f32; the input of gelu, elu, leaky_relu and softplus,
/// which their gradients read, is rounded to the half type and stored in it.
///
///   vkt::Tensor h = vkt::layers::dense(x, 128, vkt::layers::Activation::Relu, "hidden");
///   vkt::Tensor logits = vkt::layers::dense(h, 10, vkt::layers::Activation::None, "logits");
Tensor dense(const Tensor& x, std::int64_t units, Activation activation = Activation::None,
             const std::string& name = "");

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

/// A convolution layer: act(bias_add(conv2d(x, kernel, options), bias)) with the
/// variables "<name>/kernel" [KH, KW, C / groups, filters] (glorot_uniform) and
/// "<name>/bias" [filters] (zeros), for x [N, H, W, C]. Reuses its variables by
/// name as dense does (conv_layer.cpp); unnamed: "conv2d", "conv2d_1", ...
///
///   vkt::Tensor h = vkt::layers::conv2d(images, 32, {5, 5}, {.padding = vkt::Padding::Same},
///                                       vkt::layers::Activation::Relu, "conv1");
Tensor conv2d(const Tensor& x, std::int64_t filters, std::array<std::int64_t, 2> kernel_size,
              const Conv2dOptions& options = {}, Activation activation = Activation::None,
              const std::string& name = "");

/// Pooling and flatten as layers (they own no variables): vkt::max_pool2d,
/// vkt::avg_pool2d, vkt::global_avg_pool and vkt::flatten (pool.h, shape_ops.h).
///
///   vkt::Tensor h = vkt::layers::flatten(vkt::layers::max_pool2d(conv));
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options = {});
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options = {});
Tensor global_avg_pool(const Tensor& x);
Tensor flatten(const Tensor& x);

/// vkt::layer_norm over the last dimension D with the variables "<name>/gamma"
/// [D] (ones) and "<name>/beta" [D] (zeros); the same name reuses them;
/// unnamed: "layer_norm", "layer_norm_1", ...
///
///   vkt::Tensor h = vkt::layers::layer_norm(x, 1e-5f, "ln1");
Tensor layer_norm(const Tensor& x, float epsilon = 1e-5f, const std::string& name = "");

/// vkt::rms_norm over the last dimension D with the variable "<name>/gamma"
/// [D] (ones), Hugging Face's LlamaRMSNorm; the same name reuses it; unnamed:
/// "rms_norm", "rms_norm_1", ...
///
///   vkt::Tensor h = vkt::layers::rms_norm(x, 1e-6f, "model.norm");
Tensor rms_norm(const Tensor& x, float epsilon = 1e-6f, const std::string& name = "");

/// What multi_head_attention does besides the heads.
struct AttentionLayerOptions {
  bool causal = true;              ///< each position attends to itself and earlier ones
  float attention_dropout = 0.0f;  ///< dropout on the attention probabilities in training
  AttentionKernel kernel = AttentionKernel::Auto;  ///< fused or composed (attention.h)
  /// When set, the qkv and out projections are lora_dense layers: frozen
  /// bases with trainable adapters (PEFT's target modules c_attn and c_proj).
  std::optional<LoraOptions> lora{};
};

/// Multi-head self-attention over x [B, T, D]: one dense projection to q, k
/// and v ("<name>/qkv", [D, 3D]), H heads of D / H, scaled dot-product
/// attention (attention.h), and the output projection ("<name>/out", [D, D]).
/// Result [B, T, D]. Unnamed: "multi_head_attention", "multi_head_attention_1", ...
///
///   vkt::Tensor y = vkt::layers::multi_head_attention(x, 4, {.causal = true}, "attn");
Tensor multi_head_attention(const Tensor& x, int heads, const AttentionLayerOptions& options = {},
                            const std::string& name = "");

/// What transformer_block builds.
struct TransformerOptions {
  bool causal = true;
  /// Dropout on the attention probabilities and on both residual branches.
  float dropout = 0.0f;
  /// The MLP's hidden width, as a multiple of D (GPT-2: 4).
  std::int64_t mlp_ratio = 4;
  AttentionKernel attention_kernel = AttentionKernel::Auto;  ///< fused or composed (attention.h)
  /// When set, a LoRA fine-tune of the block: the attention's projections
  /// take adapters (AttentionLayerOptions::lora) and every other weight
  /// (both norms, the MLP) is frozen in `lora->base_dtype`.
  std::optional<LoraOptions> lora{};
};

/// GPT-2's pre-LayerNorm block over x [B, T, D]:
///   h = x + dropout(attention(layer_norm(x)))
///   y = h + dropout(dense(gelu(dense(layer_norm(h), 4D)), D))
/// with its variables under "<name>/" (ln_1, attention, ln_2, mlp_in, mlp_out).
///
///   for (int l = 0; l < 4; ++l) h = vkt::layers::transformer_block(h, 4, {.dropout = 0.1f});
Tensor transformer_block(const Tensor& x, int heads, const TransformerOptions& options = {},
                         const std::string& name = "");

}  // namespace vkt::layers
