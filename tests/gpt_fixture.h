#pragma once
// A 2-layer character-model GPT and its data, for the tests that train it on
// towers and processes.

#include <cstdint>
#include <memory>
#include <vector>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/embedding.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/io/dataset.h>
#include <vktower/tower/model_fn.h>

namespace vkt::test {

inline constexpr std::int64_t kVocab = 13, kTime = 6, kWidth = 16;

/// Windows of a token stream that mostly follows t' = 3t + 1 (mod 13): the
/// tokens of each window and the next token at every position.
inline Dataset token_windows(std::int64_t windows) {
  std::vector<std::int32_t> stream(static_cast<std::size_t>(windows + kTime));
  std::uint32_t noise = 7;
  for (std::size_t i = 1; i < stream.size(); ++i) {
    noise = noise * 1664525u + 1013904223u;
    stream[i] = (noise >> 28) == 0 ? static_cast<std::int32_t>(noise >> 8) % kVocab
                                   : (stream[i - 1] * 3 + 1) % kVocab;
  }
  std::vector<std::int32_t> tokens, next;
  for (std::int64_t w = 0; w < windows; ++w) {
    tokens.insert(tokens.end(), stream.begin() + w, stream.begin() + w + kTime);
    next.insert(next.end(), stream.begin() + w + 1, stream.begin() + w + kTime + 1);
  }
  return Dataset({{"tokens", HostTensor::ints({windows, kTime}, tokens)},
                  {"next", HostTensor::ints({windows, kTime}, next)}});
}

/// The GPT: embeddings, two blocks of 2 heads (the fused attention kernels,
/// which Auto leaves to GPUs), a final LayerNorm, logits. The
/// token table's gradient is sparse (rows), or with `dense_table` dense, as
/// the Mirrored and RoundRobin modes need.
inline ModelFn gpt(bool dense_table) {
  return [dense_table](ModelContext& ctx, const TensorDict& f, const TensorDict& l, Mode mode,
                       const Params&) {
    Graph& g = ctx.graph();
    const Tensor wte = g.variable("wte", {kVocab, kWidth}, Initializer::normal(0, 0.1f));
    const Tensor wpe = g.variable("wpe", {kTime, kWidth}, Initializer::normal(0, 0.02f));
    Tensor h =
        embedding_lookup(dense_table ? identity(wte) : wte, f.at("tokens")) + wpe;  // [B, T, D]
    for (int layer = 0; layer < 2; ++layer) {
      h = layers::transformer_block(h, 2,
                                    {.dropout = 0.1f, .attention_kernel = AttentionKernel::Fused});
    }
    const Tensor logits = layers::dense(layers::layer_norm(h), kVocab);  // [B, T, V]
    EstimatorSpec spec{.mode = mode, .predictions = {{"logits", logits}}};
    if (mode == Mode::Predict) return spec;
    spec.loss = sparse_softmax_cross_entropy(l.at("next"), logits, Tensor{}, Reduction::Mean);
    if (mode == Mode::Train) {
      TowerOptimizer adam([] { return std::make_unique<Adam>(0.01f); });
      spec.train_op = adam.minimize(spec.loss);
    }
    return spec;
  };
}

/// Variables of every kind in the GPT: embeddings, attention, norms, MLP, logits.
inline const char* const kGptVariables[] = {"wte",
                                            "wpe",
                                            "transformer_block/attention/qkv/kernel",
                                            "transformer_block/attention/out/kernel",
                                            "transformer_block/ln_2/gamma",
                                            "transformer_block_1/mlp_in/kernel",
                                            "transformer_block_1/mlp_out/bias",
                                            "layer_norm/beta",
                                            "dense/kernel"};

}  // namespace vkt::test
