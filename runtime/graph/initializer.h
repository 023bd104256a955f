#pragma once
// How a variable's first values are made: seeded, identical on every device.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shape.h"

namespace vkt {

struct HostTensor;

/// A variable initializer. Values are made on the host from a seed derived from
/// the graph's seed and the variable's name, so the same name gets the same
/// values in every tower, on every device and in every run.
///
///   g.variable("dense/kernel", {784, 128}, vkt::Initializer::glorot_uniform());
struct Initializer {
  enum class Kind { Constant, Uniform, Normal, TruncatedNormal, GlorotUniform, HeNormal, Values };
  Kind kind = Kind::Constant;
  float a = 0.0f;  ///< constant value, uniform low, or normal mean
  float b = 0.0f;  ///< uniform high, or normal standard deviation
  /// Kind::Values: the values and their shape (shared: towers copy initializers).
  std::shared_ptr<const std::vector<float>> values{};
  Shape values_shape{};

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
  /// Exactly these values (weights trained elsewhere, another framework's
  /// initial weights). The variable's shape must equal `values.shape`: a
  /// vkt::Error naming the variable and both shapes otherwise. f32 values only.
  ///
  ///   g.variable("dense/kernel", {4, 2}, vkt::Initializer::from_values(kernel));
  static Initializer from_values(const HostTensor& values);

  std::string str() const;
};

/// The values `init` gives a tensor of `shape` with `seed` (Kind::Values: its
/// values, when the shapes are equal; a vkt::Error otherwise). Fans follow Keras:
/// fan_in = dims[-2] and fan_out = dims[-1], each times the receptive field (the
/// product of the dimensions before those two); a vector uses its length for both.
std::vector<float> initial_values(const Initializer& init, const Shape& shape, std::uint64_t seed);

/// A 64-bit seed from a graph seed and a variable name (FNV-1a then splitmix64).
std::uint64_t variable_seed(std::uint64_t graph_seed, const std::string& name);

}  // namespace vkt
