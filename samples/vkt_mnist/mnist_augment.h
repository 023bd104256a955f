#pragma once
// Training-time augmentation for vkt-mnist: every training image moved by a
// random whole number of pixels, up to `max_shift` in each direction. With
// 8,000 training digits the network otherwise learns their exact positions;
// shifts of one pixel lift held-out accuracy by about half a point in as many
// steps (docs/PERFORMANCE.md, vkt-mnist).

#include <fmt/format.h>

#include <vktower/vktower.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace mnist {

/// splitmix64 of (seed, batch, row): the same shifts on every run, on any
/// number of towers (the global batch is shifted before it is split) and
/// after a resume (batches are counted from InputContext::start_batch).
inline std::uint64_t shift_draw(std::uint64_t seed, std::uint64_t batch, std::uint64_t row) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + batch * 0xD1B54A32D192ED03ull +
                    row * 0x94D049BB133111EBull + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Image `pixels` [side, side] (one channel) moved by (dy, dx); the cells
/// it uncovers are 0 (MNIST's background).
inline void shift_image(float* pixels, std::int64_t side, std::int64_t dy, std::int64_t dx) {
  std::vector<float> out(static_cast<std::size_t>(side * side), 0.0f);
  for (std::int64_t r = 0; r < side; ++r) {
    const std::int64_t from_r = r - dy;
    if (from_r < 0 || from_r >= side) continue;
    for (std::int64_t c = 0; c < side; ++c) {
      const std::int64_t from_c = c - dx;
      if (from_c >= 0 && from_c < side) {
        out[static_cast<std::size_t>(r * side + c)] = pixels[from_r * side + from_c];
      }
    }
  }
  std::copy(out.begin(), out.end(), pixels);
}

/// The batches of `inner`, each image of feature `x` [N, side, side, 1] moved
/// by dy, dx uniform in [-max_shift, max_shift].
class ShiftedInput final : public vkt::Input {
 public:
  ShiftedInput(std::unique_ptr<vkt::Input> inner, std::uint64_t seed, std::int64_t max_shift,
               std::uint64_t first_batch)
      : inner_(std::move(inner)), seed_(seed), max_shift_(max_shift), batch_(first_batch) {}

  std::int64_t batch_size() const override { return inner_->batch_size(); }

  std::optional<vkt::Batch> next() override {
    std::optional<vkt::Batch> batch = inner_->next();
    if (!batch) return batch;
    vkt::HostTensor& x = batch->features.at("x");
    const std::int64_t side = x.shape[1];
    const auto span = static_cast<std::uint64_t>(2 * max_shift_ + 1);
    for (std::int64_t row = 0; row < x.rows(); ++row) {
      const std::uint64_t draw = shift_draw(seed_, batch_, static_cast<std::uint64_t>(row));
      const auto dy = static_cast<std::int64_t>(draw % span) - max_shift_;
      const auto dx = static_cast<std::int64_t>((draw / span) % span) - max_shift_;
      shift_image(x.f32.data() + row * side * side, side, dy, dx);
    }
    ++batch_;
    return batch;
  }

 private:
  std::unique_ptr<vkt::Input> inner_;
  std::uint64_t seed_;
  std::int64_t max_shift_;
  std::uint64_t batch_;
};

/// `input` with its images shifted (ShiftedInput); `input` itself for max_shift 0.
inline vkt::InputFn shifted_input(vkt::InputFn input, std::uint64_t seed, std::int64_t max_shift) {
  if (max_shift == 0) return input;
  return [input = std::move(input), seed, max_shift](const vkt::InputContext& context) {
    return std::unique_ptr<vkt::Input>(
        std::make_unique<ShiftedInput>(input(context), seed, max_shift, context.start_batch));
  };
}

}  // namespace mnist
