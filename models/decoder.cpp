// models::decoder_logits: a Llama-family or GPT-2 decoder composed of the
// graph's ops, its variables under the Hugging Face module names.
#include "decoder.h"

#include <fmt/format.h>

#include <cmath>

#include "../runtime/graph/frozen_scope.h"
#include "../runtime/graph/graph.h"
#include "../runtime/graph/ops/dropout.h"
#include "../runtime/graph/ops/elementwise.h"
#include "../runtime/graph/ops/embedding.h"
#include "../runtime/graph/ops/layer_norm.h"
#include "../runtime/graph/ops/matmul.h"
#include "../runtime/graph/ops/repeat_kv.h"
#include "../runtime/graph/ops/rms_norm.h"
#include "../runtime/graph/ops/rotary_embedding.h"
#include "../runtime/graph/ops/shape_ops.h"
#include "../runtime/vulkan/error.h"

namespace vkt::models {
namespace {

/// Builds one decoder in one graph; the activations are rows [B * T, D].
class DecoderBuilder {
 public:
  DecoderBuilder(const Tensor& tokens, const Tensor& positions, const DecoderConfig& config,
                 const DecoderWeights& weights, const DecoderOptions& options,
                 const AttentionFn& attention)
      : g_(tokens.graph()),
        attention_(attention),
        tokens_(tokens),
        positions_(positions),
        c_(config),
        weights_(weights),
        o_(options),
        targets_(options.lora_targets.empty() ? default_lora_targets(config)
                                              : options.lora_targets),
        batch_(tokens.shape()[0]),
        time_(tokens.shape()[1]) {}

  Tensor logits() {
    Tensor h = embed();
    for (std::int64_t l = 0; l < c_.num_hidden_layers; ++l) {
      h = c_.architecture == Architecture::Gpt2 ? gpt2_block(h, l) : llama_block(h, l);
    }
    const bool gpt2 = c_.architecture == Architecture::Gpt2;
    h = gpt2 ? layer_norm(h, "transformer.ln_f") : rms_norm(h, "model.norm");
    const std::string table = gpt2 ? "transformer.wte" : "model.embed_tokens";
    Tensor logits = c_.tie_word_embeddings
                        ? matmul(h,
                                 weight(table + "/embeddings", {c_.vocab_size, c_.hidden_size},
                                        Initializer::normal(0.0f, 0.02f)),
                                 false, true)
                        : project(h, "lm_head", c_.vocab_size, c_.lm_head_bias);
    if (c_.tie_word_embeddings && c_.lm_head_bias) {
      logits = bias_add(logits, weight("lm_head/bias", {c_.vocab_size}, Initializer::zeros()));
    }
    return reshape(logits, Shape{batch_, time_, c_.vocab_size});  // [B, T, V]
  }

 private:
  /// A pretrained weight: frozen in the base type under LoRA, else trainable.
  Tensor weight(const std::string& name, const Shape& shape, const Initializer& fresh) {
    const Initializer init = weights_.initializer(name).value_or(fresh);
    if (!o_.lora) return g_.variable(name, shape, init);
    return layer_weight(g_.variable(name, shape, init, false, o_.lora->base_dtype));
  }

  /// x [N, in] times the module's kernel (and bias), plus its adapter where
  /// LoRA targets it: alpha / r * (x lora_a) lora_b.
  Tensor project(const Tensor& x, const std::string& module, std::int64_t units, bool bias) {
    const std::int64_t in = x.shape()[1];
    Tensor y = matmul(x, weight(module + "/kernel", {in, units}, Initializer::normal(0.0f, 0.02f)));
    if (bias) y = bias_add(y, weight(module + "/bias", {units}, Initializer::zeros()));
    if (!o_.lora || !lora_targeted(module, targets_)) return y;
    const std::int64_t r = o_.lora->rank;
    // PEFT's kaiming_uniform(a = sqrt(5)) on [r, in]: bound 1 / sqrt(in).
    const auto bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(in)));
    const Tensor a = g_.variable(
        module + "/lora_a", {in, r},
        weights_.initializer(module + "/lora_a").value_or(Initializer::uniform(-bound, bound)));
    const Tensor b =
        g_.variable(module + "/lora_b", {r, units},
                    weights_.initializer(module + "/lora_b").value_or(Initializer::zeros()));
    return y + matmul(matmul(x, a), b) * (o_.lora->alpha / static_cast<float>(r));
  }

  Tensor rms_norm(const Tensor& x, const std::string& module) {
    const Tensor gamma = weight(module + "/gamma", {c_.hidden_size}, Initializer::ones());
    return vkt::rms_norm(x, gamma, static_cast<float>(c_.norm_eps));
  }

  Tensor layer_norm(const Tensor& x, const std::string& module) {
    const Tensor gamma = weight(module + "/gamma", {c_.hidden_size}, Initializer::ones());
    const Tensor beta = weight(module + "/beta", {c_.hidden_size}, Initializer::zeros());
    return vkt::layer_norm(x, gamma, beta, static_cast<float>(c_.norm_eps));
  }

  Tensor drop(const Tensor& x) const { return o_.dropout > 0.0f ? dropout(x, o_.dropout) : x; }

  /// The token embeddings (and GPT-2's learned positions) as rows [B * T, D].
  Tensor embed() {
    const std::int64_t d = c_.hidden_size;
    const Initializer fresh = Initializer::normal(0.0f, 0.02f);
    if (c_.architecture != Architecture::Gpt2) {
      const Tensor table = weight("model.embed_tokens/embeddings", {c_.vocab_size, d}, fresh);
      return reshape(embedding_lookup(table, tokens_), Shape{batch_ * time_, d});
    }
    const Tensor wte = weight("transformer.wte/embeddings", {c_.vocab_size, d}, fresh);
    const Tensor wpe = weight("transformer.wpe/embeddings", {c_.max_position_embeddings, d}, fresh);
    const Tensor h = embedding_lookup(wte, tokens_) + embedding_lookup(wpe, positions_);
    return drop(reshape(h, Shape{batch_ * time_, d}));  // [B, T, D] + [T, D]
  }

  /// Rows [B * T, heads * Dh] as [B, heads, T, Dh].
  Tensor to_heads(const Tensor& rows, std::int64_t heads) const {
    return permute(reshape(rows, Shape{batch_, time_, heads, c_.head_dim}), {0, 2, 1, 3});
  }
  /// [B, H, T, Dh] back to rows [B * T, H * Dh].
  Tensor from_heads(const Tensor& y) const {
    const std::int64_t h = y.shape()[1];
    return reshape(permute(y, {0, 2, 1, 3}), Shape{batch_ * time_, h * c_.head_dim});
  }

  /// Causal attention of q over k and v, or the caller's (a cache's).
  Tensor attend(const Tensor& q, Tensor k, Tensor v, std::int64_t layer) const {
    if (attention_) return attention_(q, k, v, layer);
    const std::int64_t repeats = q.shape()[1] / k.shape()[1];
    if (repeats > 1) {  // grouped-query attention: head i reads key/value head i / repeats
      k = repeat_kv(k, repeats);
      v = repeat_kv(v, repeats);
    }
    return scaled_dot_product_attention(
        q, k, v, {.causal = true, .dropout = o_.dropout, .kernel = o_.attention_kernel});
  }

  Tensor llama_block(Tensor h, std::int64_t layer) {
    const std::string p = fmt::format("model.layers.{}.", layer);
    const std::int64_t heads = c_.num_attention_heads, kv = c_.num_key_value_heads,
                       dh = c_.head_dim;
    const Tensor x = rms_norm(h, p + "input_layernorm");
    const Tensor q =
        rotary_embedding(to_heads(project(x, p + "self_attn.q_proj", heads * dh, c_.q_bias), heads),
                         positions_, static_cast<float>(c_.rope_theta));
    const Tensor k =
        rotary_embedding(to_heads(project(x, p + "self_attn.k_proj", kv * dh, c_.k_bias), kv),
                         positions_, static_cast<float>(c_.rope_theta));
    const Tensor v = to_heads(project(x, p + "self_attn.v_proj", kv * dh, c_.v_bias), kv);
    const Tensor attended = from_heads(attend(q, k, v, layer));
    h = h + drop(project(attended, p + "self_attn.o_proj", c_.hidden_size, c_.o_bias));
    const Tensor y = rms_norm(h, p + "post_attention_layernorm");
    const std::int64_t inner = c_.intermediate_size;
    const Tensor gated = swiglu(project(y, p + "mlp.gate_proj", inner, c_.mlp_bias),
                                project(y, p + "mlp.up_proj", inner, c_.mlp_bias));
    return h + drop(project(gated, p + "mlp.down_proj", c_.hidden_size, c_.mlp_bias));
  }

  Tensor gpt2_block(Tensor h, std::int64_t layer) {
    const std::string p = fmt::format("transformer.h.{}.", layer);
    const std::int64_t d = c_.hidden_size, heads = c_.num_attention_heads, dh = c_.head_dim;
    const Tensor qkv = project(layer_norm(h, p + "ln_1"), p + "attn.c_attn", 3 * d, true);
    // [B, T, 3, H, Dh] -> [3, B, H, T, Dh]: q, k and v as views of one copy.
    const std::vector<Tensor> parts = split(
        permute(reshape(qkv, Shape{batch_, time_, 3, heads, dh}), {2, 0, 3, 1, 4}), {1, 1, 1}, 0);
    const auto part = [&](int i) {
      return reshape(parts[static_cast<std::size_t>(i)], Shape{batch_, heads, time_, dh});
    };
    const Tensor attended = from_heads(attend(part(0), part(1), part(2), layer));
    h = h + drop(project(attended, p + "attn.c_proj", d, true));
    const Tensor inner =
        gelu(project(layer_norm(h, p + "ln_2"), p + "mlp.c_fc", c_.intermediate_size, true),
             GeluForm::Tanh);
    return h + drop(project(inner, p + "mlp.c_proj", d, true));
  }

  Graph& g_;
  const AttentionFn& attention_;
  Tensor tokens_, positions_;
  const DecoderConfig& c_;
  const DecoderWeights& weights_;
  const DecoderOptions& o_;
  std::vector<std::string> targets_;
  std::int64_t batch_, time_;
};

void check_inputs(const Tensor& tokens, const Tensor& positions, const DecoderConfig& c) {
  if (!tokens.valid() || tokens.shape().rank() != 2 || tokens.dtype() != DType::I32) {
    throw Error(fmt::format("decoder_logits: tokens must be i32 [batch, time], got {}",
                            tokens.valid() ? tokens.shape().str() : "an empty tensor"));
  }
  const std::int64_t t = tokens.shape()[1];
  if (!positions.valid() || positions.dtype() != DType::I32 || positions.shape() != Shape{t}) {
    throw Error(fmt::format("decoder_logits: positions must be i32 [{}] (one per token), got {}", t,
                            positions.valid() ? positions.shape().str() : "an empty tensor"));
  }
  if (t > c.max_position_embeddings) {
    throw Error(
        fmt::format("decoder_logits: a context of {} tokens is longer than the model's "
                    "max_position_embeddings {}; give a context of at most {}",
                    t, c.max_position_embeddings, c.max_position_embeddings));
  }
}

}  // namespace

std::vector<std::string> default_lora_targets(const DecoderConfig& config) {
  if (config.architecture == Architecture::Gpt2) return {"attn.c_attn", "attn.c_proj"};
  return {"q_proj", "k_proj", "v_proj", "o_proj"};
}

bool lora_targeted(const std::string& module, const std::vector<std::string>& targets) {
  for (const std::string& t : targets) {
    if (module == t) return true;
    if (module.size() > t.size() && module.compare(module.size() - t.size(), t.size(), t) == 0 &&
        module[module.size() - t.size() - 1] == '.') {
      return true;
    }
  }
  return false;
}

Tensor decoder_logits(const Tensor& tokens, const Tensor& positions, const DecoderConfig& config,
                      const DecoderWeights& weights, const DecoderOptions& options,
                      const AttentionFn& attention) {
  check_inputs(tokens, positions, config);
  return DecoderBuilder(tokens, positions, config, weights, options, attention).logits();
}

}  // namespace vkt::models
