#pragma once
// Double-precision CPU implementations of the optimizers' documented formulas,
// for the tests to compare the shaders against.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace vkt {
class Optimizer;
}

namespace vkt::test {

/// One variable's state: parameters and slots by name.
struct RefState {
  std::vector<double> p;
  std::map<std::string, std::vector<double>> slot;
};

struct RefOptimizer {
  std::string kind;  // sgd, adam, adamw, adagrad, rmsprop, ftrl
  double lr = 0.01;
  // sgd
  double momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
  // adam
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool amsgrad = false;
  // adagrad
  double lr_decay = 0, initial_accumulator = 0;
  // rmsprop
  double alpha = 0.99;
  bool centered = false;
  // ftrl
  double power = -0.5, l1 = 0, l2 = 0;

  /// Applies step t (1-based) with gradient g to `s`.
  void step(RefState& s, const std::vector<double>& g_in, std::uint64_t t) const {
    for (std::size_t i = 0; i < s.p.size(); ++i) {
      double g = g_in[i];
      double& p = s.p[i];
      if (kind == "sgd") {
        g += weight_decay * p;
        if (momentum != 0) {
          double& b = s.slot["momentum"][i];
          b = t == 1 ? g : momentum * b + (1 - dampening) * g;
          g = nesterov ? g + momentum * b : b;
        }
        p -= lr * g;
      } else if (kind == "adam" || kind == "adamw") {
        if (kind == "adamw")
          p *= 1 - lr * weight_decay;
        else
          g += weight_decay * p;
        double& m = s.slot["m"][i];
        double& v = s.slot["v"][i];
        m = beta1 * m + (1 - beta1) * g;
        v = beta2 * v + (1 - beta2) * g * g;
        double vv = v;
        if (amsgrad) {
          double& vmax = s.slot["v_max"][i];
          vmax = std::max(vmax, v);
          vv = vmax;
        }
        const double bc1 = 1 - std::pow(beta1, static_cast<double>(t));
        const double bc2 = 1 - std::pow(beta2, static_cast<double>(t));
        p -= lr / bc1 * m / (std::sqrt(vv) / std::sqrt(bc2) + eps);
      } else if (kind == "adagrad") {
        g += weight_decay * p;
        const double clr = lr / (1 + (static_cast<double>(t) - 1) * lr_decay);
        double& sum = s.slot["sum"][i];
        sum += g * g;
        p -= clr * g / (std::sqrt(sum) + eps);
      } else if (kind == "rmsprop") {
        g += weight_decay * p;
        double& sq = s.slot["square_avg"][i];
        sq = alpha * sq + (1 - alpha) * g * g;
        double avg;
        if (centered) {
          double& ga = s.slot["grad_avg"][i];
          ga = alpha * ga + (1 - alpha) * g;
          avg = std::sqrt(sq - ga * ga) + eps;
        } else {
          avg = std::sqrt(sq) + eps;
        }
        if (momentum > 0) {
          double& b = s.slot["momentum_buffer"][i];
          b = momentum * b + g / avg;
          p -= lr * b;
        } else {
          p -= lr * g / avg;
        }
      } else if (kind == "ftrl") {
        double& acc = s.slot["accumulator"][i];
        double& lin = s.slot["linear"][i];
        const double acc_new = acc + g * g;
        lin += g - (std::pow(acc_new, -power) - std::pow(acc, -power)) / lr * p;
        const double quad = std::pow(acc_new, -power) / lr + 2 * l2;
        p = std::abs(lin) > l1 ? ((lin > 0 ? l1 : -l1) - lin) / quad : 0.0;
        acc = acc_new;
      }
    }
  }
};

/// The lazy sparse update (see optimizer.h) of a [rows, width] variable: each
/// row named in `indices` (those outside [0, rows) skipped) gets one step with
/// the sum of its `values` rows, scaled by `scale` and clamped to [-clip, clip]
/// (clip 0 = off); the other rows and their slots are left alone.
inline void lazy_sparse_step(const RefOptimizer& opt, RefState& s, std::size_t width,
                             const std::vector<double>& values, const std::vector<int>& indices,
                             std::uint64_t t, double scale = 1.0, double clip = 0.0) {
  const auto rows = static_cast<int>(s.p.size() / width);
  std::map<int, std::vector<double>> sums;
  for (std::size_t j = 0; j < indices.size(); ++j) {
    if (indices[j] < 0 || indices[j] >= rows) continue;
    std::vector<double>& sum = sums.try_emplace(indices[j], width, 0.0).first->second;
    for (std::size_t c = 0; c < width; ++c) sum[c] += values[j * width + c];
  }
  for (auto& [row, g] : sums) {
    for (double& x : g) x = clip > 0 ? std::clamp(x * scale, -clip, clip) : x * scale;
    const auto at = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(row) * width);
    const auto w = static_cast<std::ptrdiff_t>(width);
    RefState one;
    one.p.assign(s.p.begin() + at, s.p.begin() + at + w);
    for (auto& [name, slot] : s.slot)
      one.slot[name].assign(slot.begin() + at, slot.begin() + at + w);
    opt.step(one, g, t);
    std::copy(one.p.begin(), one.p.end(), s.p.begin() + at);
    for (auto& [name, slot] : s.slot)
      std::copy(one.slot[name].begin(), one.slot[name].end(), slot.begin() + at);
  }
}

/// An optimizer under test: how to make it and its reference formula.
struct OptimizerCase {
  std::string label;
  std::function<std::unique_ptr<Optimizer>()> make;
  RefOptimizer ref;
  double initial_slot = 0.0;  // of Adagrad's "sum" and FTRL's "accumulator"
};

}  // namespace vkt::test
