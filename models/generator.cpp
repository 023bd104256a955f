// models::Generator: one recorded single-token program over a key/value cache.
#include "generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "../runtime/graph/executor.h"
#include "../runtime/graph/graph.h"
#include "../runtime/graph/ops/elementwise.h"
#include "../runtime/graph/ops/matmul.h"
#include "../runtime/graph/ops/repeat_kv.h"
#include "../runtime/graph/ops/shape_ops.h"
#include "../runtime/graph/ops/state_update.h"
#include "../runtime/vulkan/error.h"

namespace vkt::models {

/// The session's graph and its executor. The cache of layer l is the state
/// variables "cache.l.key" and "cache.l.value" [1, Hkv, L, Dh]; each step
/// writes the new token's keys and values into slot p (a where over the
/// one-hot "slot" [L, 1]), attends over the slots up to p (the mask
/// "visible" [L]), and stores the written cache back.
struct Generator::Program {
  Program(Device& device, const DecoderConfig& config, const DecoderWeights& weights,
          const DecoderOptions& options, std::int64_t length)
      : graph(device),
        slot_values(static_cast<std::size_t>(length)),
        visible_values(static_cast<std::size_t>(length)) {
    const Tensor token = graph.input("token", {1, 1}, DType::I32);
    const Tensor position = graph.input("position", {1}, DType::I32);
    const Tensor slot = graph.input("slot", {length, 1});
    const Tensor visible = graph.input("visible", {length});
    const std::int64_t kv = config.num_key_value_heads, dh = config.head_dim;
    std::vector<Tensor> fetches;
    const AttentionFn cached = [&](const Tensor& q, const Tensor& k, const Tensor& v,
                                   std::int64_t layer) {
      const auto write = [&](const Tensor& fresh, const char* what) {
        const Tensor cache = graph.variable(fmt::format("cache.{}.{}", layer, what),
                                            {1, kv, length, dh}, Initializer::zeros(), false);
        const Tensor written = where(slot, fresh, cache);  // [1, Hkv, L, Dh]
        fetches.push_back(assign_moving_average(cache, written, 0.0f));
        return written;
      };
      const std::int64_t heads = q.shape()[1];
      Tensor keys = write(k, "key"), values = write(v, "value");
      if (heads != kv) {
        keys = repeat_kv(keys, heads / kv);
        values = repeat_kv(values, heads / kv);
      }
      const auto batched = [&](const Tensor& t) {
        return reshape(t, Shape{heads, t.shape()[2], dh});
      };
      const Tensor scores = matmul(batched(q), batched(keys), false, true);  // [H, 1, L]
      const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));
      const Tensor p = masked_softmax(scores, scale, false, visible);
      return reshape(matmul(p, batched(values)), Shape{1, heads, 1, dh});
    };
    logits = decoder_logits(token, position, config, weights, options, cached);
    fetches.insert(fetches.begin(), logits);
    executor = std::make_unique<Executor>(graph, fetches, ExecutorOptions{.training = false});
  }

  Graph graph;
  Tensor logits;
  std::unique_ptr<Executor> executor;
  std::vector<float> slot_values, visible_values;
};

Generator::Generator(Device& device, const DecoderConfig& config, const DecoderWeights& weights,
                     const DecoderOptions& options, std::int64_t max_length)
    : max_length_(max_length) {
  if (max_length < 1 || max_length > config.max_position_embeddings) {
    throw Error(fmt::format(
        "generation: a length of {} tokens must be 1 to the model's max_position_embeddings {}",
        max_length, config.max_position_embeddings));
  }
  DecoderOptions inference = options;
  inference.dropout = 0.0f;
  program_ = std::make_unique<Program>(device, config, weights, inference, max_length);
}

Generator::~Generator() = default;

std::vector<float> Generator::step(std::int32_t token) {
  if (position_ >= max_length_) {
    throw Error(
        fmt::format("generation: the cache holds {} tokens and is full; reset() it or "
                    "give a larger length",
                    max_length_));
  }
  Program& p = *program_;
  std::fill(p.slot_values.begin(), p.slot_values.end(), 0.0f);
  p.slot_values[static_cast<std::size_t>(position_)] = 1.0f;
  for (std::size_t j = 0; j < p.visible_values.size(); ++j) {
    p.visible_values[j] = static_cast<std::int64_t>(j) <= position_ ? 1.0f : 0.0f;
  }
  const std::int32_t at = static_cast<std::int32_t>(position_);
  p.executor->feed("token", std::span<const std::int32_t>(&token, 1));
  p.executor->feed("position", std::span<const std::int32_t>(&at, 1));
  p.executor->feed("slot", p.slot_values);
  p.executor->feed("visible", p.visible_values);
  p.executor->run();
  ++position_;
  return p.executor->read(p.logits);
}

std::vector<std::int32_t> Generator::generate(std::span<const std::int32_t> prompt,
                                              const GenerationOptions& options) {
  if (prompt.empty()) throw Error("generation: the prompt has no tokens; give at least one");
  if (static_cast<std::int64_t>(prompt.size()) > max_length_) {
    throw Error(fmt::format("generation: a prompt of {} tokens does not fit a length of {}",
                            prompt.size(), max_length_));
  }
  reset();
  std::vector<float> logits;
  for (const std::int32_t t : prompt) logits = step(t);
  std::mt19937_64 random(options.seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<std::int32_t> out;
  while (static_cast<std::int64_t>(out.size()) < options.max_new_tokens) {
    const std::int32_t next = pick_token(logits, options, uniform(random));
    out.push_back(next);
    const auto& stops = options.stop_tokens;
    if (std::find(stops.begin(), stops.end(), next) != stops.end() || position_ >= max_length_) {
      break;
    }
    if (static_cast<std::int64_t>(out.size()) < options.max_new_tokens) logits = step(next);
  }
  return out;
}

std::int32_t pick_token(std::span<const float> logits, const GenerationOptions& options,
                        double random_draw) {
  std::vector<std::int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  // Most likely first; the lower id first among equals, so greedy is deterministic.
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b]; });
  if (options.temperature <= 0.0 || order.size() == 1) return order.front();
  std::size_t k = order.size();
  if (options.top_k > 0) k = std::min(k, static_cast<std::size_t>(options.top_k));
  std::vector<double> weights(k);
  const double top = logits[order.front()];
  double total = 0;
  for (std::size_t i = 0; i < k; ++i) {
    weights[i] = std::exp((static_cast<double>(logits[order[i]]) - top) / options.temperature);
    total += weights[i];
  }
  double target = random_draw * total;
  for (std::size_t i = 0; i < k; ++i) {
    if (target < weights[i]) return order[i];
    target -= weights[i];
  }
  return order[k - 1];
}

}  // namespace vkt::models
