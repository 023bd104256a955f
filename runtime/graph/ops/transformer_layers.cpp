// layers::multi_head_attention and layers::transformer_block, composed of the
// graph's ops (dense, split, permute, scaled_dot_product_attention, layer
// norm, GELU): GPT-2's pre-LayerNorm block.
#include <fmt/format.h>

#include <optional>

#include "../../vulkan/error.h"
#include "../frozen_scope.h"
#include "../graph.h"
#include "attention.h"
#include "cast.h"
#include "dropout.h"
#include "elementwise.h"
#include "layers.h"
#include "shape_ops.h"

namespace vkt::layers {

Tensor multi_head_attention(const Tensor& x, int heads, const AttentionLayerOptions& options,
                            const std::string& given_name) {
  const std::string name = layer_name(x, given_name, "multi_head_attention");
  if (!x.valid()) throw Error(fmt::format("multi_head_attention '{}': the input is empty", name));
  const Shape s = x.shape();  // a copy: new nodes may move the graph's shapes
  if (s.rank() != 3) {
    throw Error(
        fmt::format("multi_head_attention '{}': input '{}' has shape {}; it takes "
                    "[batch, time, width]",
                    name, x.name(), s.str()));
  }
  const std::int64_t b = s[0], t = s[1], d = s[2];
  if (heads < 1 || d % heads != 0) {
    throw Error(
        fmt::format("multi_head_attention '{}': width {} does not divide into {} heads; "
                    "give a number of heads that divides it",
                    name, d, heads));
  }
  const std::int64_t dh = d / heads;
  // One fused projection for q, k and v, its heads moved out in one copy,
  // [B, T, 3, H, Dh] -> [3, B, H, T, Dh]; q, k and v are then views on it.
  // A projection: a dense layer, or a frozen one with an adapter.
  const auto project = [&](const Tensor& in, std::int64_t units, const std::string& layer) {
    return options.lora ? lora_dense(in, units, *options.lora, Activation::None, layer)
                        : dense(in, units, Activation::None, layer);
  };
  const Tensor projected = project(x, 3 * d, name + "/qkv");
  const std::vector<Tensor> qkv =
      split(permute(reshape(projected, Shape{b, t, 3, heads, dh}), {2, 0, 3, 1, 4}), {1, 1, 1}, 0);
  const auto to_heads = [&](const Tensor& y) { return reshape(y, Shape{b, heads, t, dh}); };
  const Tensor y = scaled_dot_product_attention(
      to_heads(qkv[0]), to_heads(qkv[1]), to_heads(qkv[2]),
      {.causal = options.causal, .dropout = options.attention_dropout, .kernel = options.kernel});
  // Heads back in place; a result the precision policy holds in half moves
  // as half (the output projection's cast to it is then that tensor itself).
  const auto merge = [&](const Tensor& heads_first) {
    return reshape(permute(heads_first, {0, 2, 1, 3}), Shape{b, t, d});
  };
  const std::optional<Tensor> y_half = widened_from(y);
  const Tensor merged = y_half && dh % 2 == 0 ? cast(merge(*y_half), DType::F32) : merge(y);
  return project(merged, d, name + "/out");
}

Tensor transformer_block(const Tensor& x, int heads, const TransformerOptions& options,
                         const std::string& given_name) {
  const std::string name = layer_name(x, given_name, "transformer_block");
  if (!x.valid()) throw Error(fmt::format("transformer_block '{}': the input is empty", name));
  const std::int64_t d = x.shape()[x.shape().rank() - 1];
  const auto drop = [&](const Tensor& y) {
    return options.dropout > 0.0f ? dropout(y, options.dropout) : y;
  };
  // A LoRA fine-tune freezes every weight but the attention's adapters.
  std::optional<FrozenScope> frozen;
  const auto freeze = [&] {
    if (options.lora) frozen.emplace(x.graph(), options.lora->base_dtype);
  };
  freeze();
  const Tensor normed = layer_norm(x, 1e-5f, name + "/ln_1");
  frozen.reset();  // lora_dense freezes the projections' bases itself
  Tensor h = x + drop(multi_head_attention(normed, heads,
                                           {.causal = options.causal,
                                            .attention_dropout = options.dropout,
                                            .kernel = options.attention_kernel,
                                            .lora = options.lora},
                                           name + "/attention"));
  freeze();
  const Tensor inner = dense(layer_norm(h, 1e-5f, name + "/ln_2"), options.mlp_ratio * d,
                             Activation::Gelu, name + "/mlp_in");
  h = h + drop(dense(inner, d, Activation::None, name + "/mlp_out"));
  return h;
}

}  // namespace vkt::layers
