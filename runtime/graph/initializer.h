#pragma once
// How a variable's first values are made: seeded, identical on every device.

#include <cstdint>
#include <string>
#include <vector>

#include "shape.h"

namespace vkt {

/// A variable initializer. Values are made on the host from a seed derived from
/// the graph's seed and the variable's name, so the same name gets the same
/// values in every tower, on every device and in every run.
///
///   g.variable("dense/kernel", {784, 128}, vkt::Initializer::glorot_uniform());
struct Initializer {
  enum class Kind { Constant, Uniform, Normal, TruncatedNormal, GlorotUniform, HeNormal };
  Kind kind = Kind::Constant;
  float a = 0.0f;  ///< constant value, uniform low, or normal mean
  float b = 0.0f;  ///< uniform high, or normal standard deviation

  static Initializer zeros() { return {Kind::Constant, 0.0f, 0.0f}; }
  static Initializer ones() { return {Kind::Constant, 1.0f, 0.0f}; }
  static Initializer constant(float value) { return {Kind::Constant, value, 0.0f}; }
  static Initializer uniform(float low, float high) { return {Kind::Uniform, low, high}; }
  static Initializer normal(float mean, float stddev) { return {Kind::Normal, mean, stddev}; }
  /// Normal, redrawn while more than two standard deviations from the mean.
  static Initializer truncated_normal(float mean, float stddev) {
    return {Kind::TruncatedNormal, mean, stddev};
  }
  /// Uniform in +-sqrt(6 / (fan_in + fan_out)) (Glorot and Bengio, 2010).
  static Initializer glorot_uniform() { return {Kind::GlorotUniform, 0.0f, 0.0f}; }
  /// Truncated normal with stddev sqrt(2 / fan_in) / .87962566 (He et al., 2015, as Keras).
  static Initializer he_normal() { return {Kind::HeNormal, 0.0f, 0.0f}; }

  std::string str() const;
};

/// The values `init` gives a tensor of `shape` with `seed`. Fans follow Keras:
/// fan_in = dims[-2] and fan_out = dims[-1], each times the receptive field (the
/// product of the dimensions before those two); a vector uses its length for both.
std::vector<float> initial_values(const Initializer& init, const Shape& shape, std::uint64_t seed);

/// A 64-bit seed from a graph seed and a variable name (FNV-1a then splitmix64).
std::uint64_t variable_seed(std::uint64_t graph_seed, const std::string& name);

}  // namespace vkt
