#pragma once
// Text generation that keeps the weights on the device and a key/value
// cache: each new token is one single-token step, whatever came before it.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "decoder.h"

namespace vkt {
class Device;
}

namespace vkt::models {

/// How generate() picks each token and when it stops.
struct GenerationOptions {
  std::int64_t max_new_tokens = 64;
  /// 0: greedy (the most likely token, the lowest id on a tie); above 0: a
  /// draw from softmax(logits / temperature).
  double temperature = 0.0;
  /// Draw only among the k most likely tokens (0: all of them).
  std::int64_t top_k = 0;
  std::uint64_t seed = 0;  ///< the draws' seed: the same seed, the same text
  /// Generation stops after any of these (the tokenizer's and config's end of
  /// sequence), which is kept in the result.
  std::vector<std::int32_t> stop_tokens{};
};

/// An inference session on one device: the decoder of `config` with its
/// weights uploaded once, and a key/value cache of `max_length` positions per
/// layer. step() runs one token through the model (one recorded program,
/// replayed: no re-recording and no reload), writing its keys and values
/// into the cache, and returns the logits for the next token.
///
///   vkt::models::Generator generator(device, model.config, model.weights, {}, 256);
///   std::vector<std::int32_t> ids = generator.generate(tokenizer->encode("Once"),
///                                                      {.max_new_tokens = 40});
class Generator {
 public:
  /// `options` must be the ones the weights were trained with (LoRA's
  /// adapters read "<module>/lora_a" and "/lora_b" from `weights`). A
  /// `max_length` past the model's max_position_embeddings is a vkt::Error.
  Generator(Device& device, const DecoderConfig& config, const DecoderWeights& weights,
            const DecoderOptions& options, std::int64_t max_length);
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  /// Runs `token` at the next position; the logits [vocab] of what follows
  /// it. A vkt::Error once max_length tokens have run (reset() starts again).
  std::vector<float> step(std::int32_t token);
  /// Forgets every token: the next step is at position 0.
  void reset() { position_ = 0; }
  /// The position the next step runs at (the tokens in the cache).
  std::int64_t position() const { return position_; }
  std::int64_t max_length() const { return max_length_; }

  /// Resets, runs `prompt` (at least one token), then picks up to
  /// max_new_tokens tokens as `options` say; the new tokens alone. Stops
  /// early at a stop token or when the cache is full.
  std::vector<std::int32_t> generate(std::span<const std::int32_t> prompt,
                                     const GenerationOptions& options);

 private:
  struct Program;
  std::unique_ptr<Program> program_;
  std::int64_t max_length_ = 0;
  std::int64_t position_ = 0;
};

/// The token `options` picks from `logits` (greedy, or a draw with
/// temperature and top-k from `random_draw`, a uniform number in [0, 1)).
std::int32_t pick_token(std::span<const float> logits, const GenerationOptions& options,
                        double random_draw);

}  // namespace vkt::models
