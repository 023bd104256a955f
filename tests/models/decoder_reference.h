#pragma once
// A decoder's logits in double precision, written from the published math
// with plain loops over Hugging Face-named tensors (no vktower op), as the
// reference the device's decoders are checked against.

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <vktower/models/hf_config.h>

namespace vkt::test {

/// Hugging Face-named tensors in their checkpoint layout, as doubles.
using HfTensors = std::map<std::string, std::vector<double>>;

/// A row-major [rows, cols] activation.
struct Rows {
  std::int64_t rows = 0, cols = 0;
  std::vector<double> v;
  double& at(std::int64_t r, std::int64_t c) { return v[static_cast<std::size_t>(r * cols + c)]; }
  double at(std::int64_t r, std::int64_t c) const {
    return v[static_cast<std::size_t>(r * cols + c)];
  }
};

/// The decoder of `config` on one sequence `tokens` (positions 0..T-1):
/// logits [T, vocab], row-major.
class DecoderReference {
 public:
  DecoderReference(const models::DecoderConfig& config, const HfTensors& tensors)
      : c_(config), w_(tensors) {}

  std::vector<double> logits(const std::vector<std::int32_t>& tokens) const {
    const auto t = static_cast<std::int64_t>(tokens.size());
    const std::int64_t d = c_.hidden_size;
    const bool gpt2 = c_.architecture == models::Architecture::Gpt2;
    Rows h{t, d, std::vector<double>(static_cast<std::size_t>(t * d))};
    const std::vector<double>& table =
        w(gpt2 ? "transformer.wte.weight" : "model.embed_tokens.weight");
    for (std::int64_t i = 0; i < t; ++i) {
      for (std::int64_t j = 0; j < d; ++j) {
        h.at(i, j) = table[static_cast<std::size_t>(tokens[static_cast<std::size_t>(i)] * d + j)];
        if (gpt2) h.at(i, j) += w("transformer.wpe.weight")[static_cast<std::size_t>(i * d + j)];
      }
    }
    for (std::int64_t l = 0; l < c_.num_hidden_layers; ++l)
      h = gpt2 ? gpt2_block(h, l) : llama_block(h, l);
    h = gpt2 ? layer_norm(h, "transformer.ln_f") : rms_norm(h, "model.norm");
    Rows out;
    if (c_.tie_word_embeddings) {
      out = times_transposed(h, table, c_.vocab_size);
    } else {
      out = linear(h, "lm_head", false);
    }
    return out.v;
  }

 private:
  const std::vector<double>& w(const std::string& name) const { return w_.at(name); }

  /// x [T, in] times an nn.Linear's weight [out, in] transposed.
  Rows times_transposed(const Rows& x, const std::vector<double>& weight, std::int64_t out) const {
    Rows y{x.rows, out, std::vector<double>(static_cast<std::size_t>(x.rows * out))};
    for (std::int64_t i = 0; i < x.rows; ++i) {
      for (std::int64_t o = 0; o < out; ++o) {
        double s = 0;
        for (std::int64_t k = 0; k < x.cols; ++k) {
          s += x.at(i, k) * weight[static_cast<std::size_t>(o * x.cols + k)];
        }
        y.at(i, o) = s;
      }
    }
    return y;
  }
  Rows linear(const Rows& x, const std::string& module, bool bias) const {
    const std::vector<double>& weight = w(module + ".weight");
    Rows y = times_transposed(x, weight, static_cast<std::int64_t>(weight.size()) / x.cols);
    if (bias) add_bias(y, w(module + ".bias"));
    return y;
  }
  /// GPT-2's Conv1D: x [T, in] times weight [in, out], plus bias.
  Rows conv1d(const Rows& x, const std::string& module) const {
    const std::vector<double>& weight = w(module + ".weight");
    const std::int64_t out = static_cast<std::int64_t>(weight.size()) / x.cols;
    Rows y{x.rows, out, std::vector<double>(static_cast<std::size_t>(x.rows * out))};
    for (std::int64_t i = 0; i < x.rows; ++i) {
      for (std::int64_t k = 0; k < x.cols; ++k) {
        for (std::int64_t o = 0; o < out; ++o) {
          y.at(i, o) += x.at(i, k) * weight[static_cast<std::size_t>(k * out + o)];
        }
      }
    }
    add_bias(y, w(module + ".bias"));
    return y;
  }
  static void add_bias(Rows& y, const std::vector<double>& bias) {
    for (std::int64_t i = 0; i < y.rows; ++i) {
      for (std::int64_t o = 0; o < y.cols; ++o) y.at(i, o) += bias[static_cast<std::size_t>(o)];
    }
  }
  Rows rms_norm(const Rows& x, const std::string& module) const {
    Rows y = x;
    const std::vector<double>& gamma = w(module + ".weight");
    for (std::int64_t i = 0; i < x.rows; ++i) {
      double ms = 0;
      for (std::int64_t j = 0; j < x.cols; ++j) ms += x.at(i, j) * x.at(i, j);
      const double r = 1.0 / std::sqrt(ms / static_cast<double>(x.cols) + c_.norm_eps);
      for (std::int64_t j = 0; j < x.cols; ++j)
        y.at(i, j) = x.at(i, j) * r * gamma[static_cast<std::size_t>(j)];
    }
    return y;
  }
  Rows layer_norm(const Rows& x, const std::string& module) const {
    Rows y = x;
    const std::vector<double>& gamma = w(module + ".weight");
    const std::vector<double>& beta = w(module + ".bias");
    for (std::int64_t i = 0; i < x.rows; ++i) {
      double mean = 0, var = 0;
      for (std::int64_t j = 0; j < x.cols; ++j) mean += x.at(i, j);
      mean /= static_cast<double>(x.cols);
      for (std::int64_t j = 0; j < x.cols; ++j) var += (x.at(i, j) - mean) * (x.at(i, j) - mean);
      const double r = 1.0 / std::sqrt(var / static_cast<double>(x.cols) + c_.norm_eps);
      for (std::int64_t j = 0; j < x.cols; ++j) {
        y.at(i, j) = (x.at(i, j) - mean) * r * gamma[static_cast<std::size_t>(j)] +
                     beta[static_cast<std::size_t>(j)];
      }
    }
    return y;
  }
  /// Hugging Face's half-split rotation of each head of x [T, heads * Dh].
  void rotate(Rows& x, std::int64_t heads) const {
    const std::int64_t dh = c_.head_dim, half = dh / 2;
    for (std::int64_t p = 0; p < x.rows; ++p) {
      for (std::int64_t h = 0; h < heads; ++h) {
        for (std::int64_t i = 0; i < half; ++i) {
          const double inv_freq =
              1.0 / std::pow(c_.rope_theta, static_cast<double>(2 * i) / static_cast<double>(dh));
          const double a = static_cast<double>(p) * inv_freq;
          const double x1 = x.at(p, h * dh + i), x2 = x.at(p, h * dh + i + half);
          x.at(p, h * dh + i) = x1 * std::cos(a) - x2 * std::sin(a);
          x.at(p, h * dh + i + half) = x2 * std::cos(a) + x1 * std::sin(a);
        }
      }
    }
  }
  /// Causal attention of q [T, H * Dh] over k, v [T, Hkv * Dh].
  Rows attention(const Rows& q, const Rows& k, const Rows& v) const {
    const std::int64_t heads = c_.num_attention_heads, dh = c_.head_dim,
                       group = heads / c_.num_key_value_heads;
    Rows y{q.rows, heads * dh, std::vector<double>(static_cast<std::size_t>(q.rows * heads * dh))};
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t kh = h / group;
      for (std::int64_t i = 0; i < q.rows; ++i) {
        std::vector<double> s(static_cast<std::size_t>(i + 1));
        double top = -INFINITY, total = 0;
        for (std::int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (std::int64_t e = 0; e < dh; ++e) dot += q.at(i, h * dh + e) * k.at(j, kh * dh + e);
          s[static_cast<std::size_t>(j)] = dot / std::sqrt(static_cast<double>(dh));
          top = std::max(top, s[static_cast<std::size_t>(j)]);
        }
        for (double& x : s) total += (x = std::exp(x - top));
        for (std::int64_t j = 0; j <= i; ++j) {
          for (std::int64_t e = 0; e < dh; ++e) {
            y.at(i, h * dh + e) += s[static_cast<std::size_t>(j)] / total * v.at(j, kh * dh + e);
          }
        }
      }
    }
    return y;
  }
  static Rows add(Rows a, const Rows& b) {
    for (std::size_t i = 0; i < a.v.size(); ++i) a.v[i] += b.v[i];
    return a;
  }
  Rows llama_block(const Rows& h, std::int64_t l) const {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const Rows x = rms_norm(h, p + "input_layernorm");
    Rows q = linear(x, p + "self_attn.q_proj", c_.q_bias);
    Rows k = linear(x, p + "self_attn.k_proj", c_.k_bias);
    const Rows v = linear(x, p + "self_attn.v_proj", c_.v_bias);
    rotate(q, c_.num_attention_heads);
    rotate(k, c_.num_key_value_heads);
    const Rows a = add(h, linear(attention(q, k, v), p + "self_attn.o_proj", c_.o_bias));
    const Rows y = rms_norm(a, p + "post_attention_layernorm");
    Rows gate = linear(y, p + "mlp.gate_proj", c_.mlp_bias);
    const Rows up = linear(y, p + "mlp.up_proj", c_.mlp_bias);
    for (std::size_t i = 0; i < gate.v.size(); ++i) {
      gate.v[i] = gate.v[i] / (1.0 + std::exp(-gate.v[i])) * up.v[i];
    }
    return add(a, linear(gate, p + "mlp.down_proj", c_.mlp_bias));
  }
  Rows gpt2_block(const Rows& h, std::int64_t l) const {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    const std::int64_t d = c_.hidden_size;
    const Rows qkv = conv1d(layer_norm(h, p + "ln_1"), p + "attn.c_attn");
    Rows q{h.rows, d, {}}, k{h.rows, d, {}}, v{h.rows, d, {}};
    for (std::int64_t i = 0; i < h.rows; ++i) {
      for (std::int64_t j = 0; j < d; ++j) {
        q.v.push_back(qkv.at(i, j));
        k.v.push_back(qkv.at(i, d + j));
        v.v.push_back(qkv.at(i, 2 * d + j));
      }
    }
    const Rows a = add(h, conv1d(attention(q, k, v), p + "attn.c_proj"));
    Rows m = conv1d(layer_norm(a, p + "ln_2"), p + "mlp.c_fc");
    for (double& x : m.v) {
      x = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    }
    return add(a, conv1d(m, p + "mlp.c_proj"));
  }

  models::DecoderConfig c_;
  const HfTensors& w_;
};

}  // namespace vkt::test
