#include "initializer.h"

#include <fmt/format.h>

#include <cmath>

#include "../io/host_tensor.h"
#include "../vulkan/error.h"

namespace vkt {
namespace {

// splitmix64: a tiny, portable generator. std::*_distribution are avoided on
// purpose: their algorithms differ between standard libraries, and the values
// must be the same everywhere.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Standard normal by Box-Muller (one value per call; simple and portable).
  double normal() {
    double u1 = uniform();
    while (u1 <= 0.0) u1 = uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

struct Fans {
  double in = 1, out = 1;
};

Fans fans_of(const Shape& shape) {
  if (shape.rank() == 0) return {};
  if (shape.rank() == 1) return {static_cast<double>(shape[0]), static_cast<double>(shape[0])};
  double receptive = 1;
  for (int i = 0; i + 2 < shape.rank(); ++i) receptive *= static_cast<double>(shape[i]);
  return {static_cast<double>(shape[shape.rank() - 2]) * receptive,
          static_cast<double>(shape[shape.rank() - 1]) * receptive};
}

}  // namespace

Initializer Initializer::from_values(const HostTensor& values) {
  if (values.dtype != DType::F32) {
    throw Error(
        fmt::format("Initializer::from_values: the values (shape {}) are i32; variables "
                    "hold f32 values",
                    values.shape.str()));
  }
  if (static_cast<std::int64_t>(values.f32.size()) != values.shape.elements()) {
    throw Error(fmt::format("Initializer::from_values: shape {} needs {} values, {} were given",
                            values.shape.str(), values.shape.elements(), values.f32.size()));
  }
  Initializer init{Kind::Values, 0.0f, 0.0f};
  init.values = std::make_shared<const std::vector<float>>(values.f32);
  init.values_shape = values.shape;
  return init;
}

std::string Initializer::str() const {
  switch (kind) {
    case Kind::Constant:
      return fmt::format("constant({})", a);
    case Kind::Uniform:
      return fmt::format("uniform({}, {})", a, b);
    case Kind::Normal:
      return fmt::format("normal({}, {})", a, b);
    case Kind::TruncatedNormal:
      return fmt::format("truncated_normal({}, {})", a, b);
    case Kind::GlorotUniform:
      return "glorot_uniform";
    case Kind::Values:
      return fmt::format("values({})", values_shape.str());
    default:
      return "he_normal";
  }
}

std::uint64_t variable_seed(std::uint64_t graph_seed, const std::string& name) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  SplitMix64 mix{h ^ (graph_seed * 0x9E3779B97F4A7C15ull)};
  return mix.next();
}

std::vector<float> initial_values(const Initializer& init, const Shape& shape, std::uint64_t seed) {
  if (init.kind == Initializer::Kind::Values) {
    if (!init.values || init.values_shape != shape) {
      throw Error(
          fmt::format("Initializer::from_values holds values of shape {}; a tensor of "
                      "shape {} cannot take them",
                      init.values_shape.str(), shape.str()));
    }
    return *init.values;
  }
  const std::int64_t n = shape.elements();
  std::vector<float> v(static_cast<std::size_t>(n));
  SplitMix64 rng{seed};
  const Fans fans = fans_of(shape);
  auto truncated = [&](double mean, double stddev) {
    double z = rng.normal();
    while (std::abs(z) > 2.0) z = rng.normal();
    return mean + stddev * z;
  };
  for (std::int64_t i = 0; i < n; ++i) {
    double x = 0;
    switch (init.kind) {
      case Initializer::Kind::Constant:
        x = init.a;
        break;
      case Initializer::Kind::Uniform:
        x = init.a + (init.b - init.a) * rng.uniform();
        break;
      case Initializer::Kind::Normal:
        x = init.a + init.b * rng.normal();
        break;
      case Initializer::Kind::TruncatedNormal:
        x = truncated(init.a, init.b);
        break;
      case Initializer::Kind::GlorotUniform: {
        const double limit = std::sqrt(6.0 / (fans.in + fans.out));
        x = -limit + 2.0 * limit * rng.uniform();
        break;
      }
      case Initializer::Kind::HeNormal:
        x = truncated(0.0, std::sqrt(2.0 / fans.in) / 0.87962566103423978);
        break;
      case Initializer::Kind::Values:  // returned above
        break;
    }
    v[static_cast<std::size_t>(i)] = static_cast<float>(x);
  }
  return v;
}

}  // namespace vkt
