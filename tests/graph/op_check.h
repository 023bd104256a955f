#pragma once
// The op test harness: runs one op on the device and checks
//   - its forward values against a CPU reference in double precision, and
//   - the device's gradient of L = sum(w * op(x)) (w fixed random weights) for
//     every input against central finite differences of the CPU reference.

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <vktower/runtime/graph/autodiff.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/reduce.h>

#include "../shared_device.h"

namespace vkt::test {

using Values = std::vector<double>;

/// Rows of a [rows, dim] table by id, zeros for ids out of range: what
/// embedding_lookup gathers, in the table's own type.
template <typename T>
std::vector<T> gather_rows(const std::vector<T>& table, std::int64_t dim,
                           const std::vector<std::int32_t>& ids) {
  const auto rows = static_cast<std::int64_t>(table.size()) / dim;
  std::vector<T> out;
  for (const std::int32_t id : ids) {
    for (std::int64_t c = 0; c < dim; ++c) {
      out.push_back(id >= 0 && id < rows ? table[static_cast<std::size_t>(id * dim + c)] : T{0});
    }
  }
  return out;
}

/// The sizes of a product [m, k] x [k, n].
struct MatmulDims {
  std::int64_t m, k, n;
};

/// op(a) op(b) in double, each operand stored transposed where its flag says.
inline Values matmul_reference(const Values& a, const Values& b, MatmulDims d, bool ta = false,
                               bool tb = false) {
  Values c(static_cast<std::size_t>(d.m * d.n), 0.0);
  for (std::int64_t i = 0; i < d.m; ++i) {
    for (std::int64_t p = 0; p < d.k; ++p) {
      const double x = a[static_cast<std::size_t>(ta ? p * d.m + i : i * d.k + p)];
      for (std::int64_t j = 0; j < d.n; ++j) {
        c[static_cast<std::size_t>(i * d.n + j)] +=
            x * b[static_cast<std::size_t>(tb ? j * d.k + p : p * d.n + j)];
      }
    }
  }
  return c;
}

struct OpSpec {
  std::string name;
  std::vector<Shape> shapes;
  std::function<Tensor(const std::vector<Tensor>&)> build;
  std::function<Values(const std::vector<Values>&)> reference;
  /// Range of the random inputs, per input (default [-1, 1] for all).
  std::vector<std::pair<double, double>> ranges{};
  /// Inputs that get a gradient (default: all).
  std::vector<bool> differentiable{};
  double forward_tolerance = 1e-5;
  double gradient_tolerance = 2e-3;
};

struct OpResult {
  std::vector<Values> inputs;
  std::vector<float> output;
  std::vector<std::vector<float>> gradients;
};

inline double close_enough(double got, double want, double tol) {
  return std::abs(got - want) <= tol * (1.0 + std::abs(want));
}

inline OpResult check_op(const OpSpec& spec, std::uint32_t seed = 1) {
  INFO("op " << spec.name);
  Device& device = shared_device();
  Graph g(device);
  std::mt19937 rng(seed);
  std::vector<Tensor> inputs;
  OpResult result;
  for (std::size_t i = 0; i < spec.shapes.size(); ++i) {
    inputs.push_back(g.input("in" + std::to_string(i), spec.shapes[i]));
    const auto range = i < spec.ranges.size() ? spec.ranges[i] : std::pair{-1.0, 1.0};
    std::uniform_real_distribution<float> dist(static_cast<float>(range.first),
                                               static_cast<float>(range.second));
    Values v(static_cast<std::size_t>(spec.shapes[i].elements()));
    for (double& x : v) x = dist(rng);  // float values, held in double
    result.inputs.push_back(v);
  }
  const Tensor y = spec.build(inputs);
  const Values expected = spec.reference(result.inputs);
  REQUIRE(static_cast<std::int64_t>(expected.size()) == y.shape().elements());

  std::uniform_real_distribution<float> wdist(-1.0f, 1.0f);
  std::vector<float> w(expected.size());
  for (float& x : w) x = wdist(rng);
  const Tensor loss = reduce_sum(mul(y, g.constant(y.shape(), w)));
  std::vector<Tensor> wrt;
  std::vector<std::size_t> wrt_index;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (i >= spec.differentiable.size() || spec.differentiable[i]) {
      wrt.push_back(inputs[i]);
      wrt_index.push_back(i);
    }
  }
  const std::vector<Gradient> grads = gradients(loss, wrt);
  std::vector<Tensor> fetches{y, loss};
  for (const Gradient& gr : grads) {
    REQUIRE(gr.valid());
    fetches.push_back(gr.dense);
  }
  Executor exec(g, fetches);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::vector<float> f(result.inputs[i].begin(), result.inputs[i].end());
    exec.feed("in" + std::to_string(i), f);
  }
  exec.run();
  result.output = exec.read(y);
  std::size_t wrong = 0;
  for (std::size_t j = 0; j < expected.size(); ++j) {
    if (!close_enough(result.output[j], expected[j], spec.forward_tolerance)) {
      if (wrong++ < 5)
        UNSCOPED_INFO("forward[" << j << "] = " << result.output[j] << ", expected "
                                 << expected[j]);
    }
  }
  CHECK(wrong == 0);

  // L(x) = sum_j w_j f(x)_j on the CPU reference, differentiated numerically.
  const auto L = [&](const std::vector<Values>& x) {
    const Values out = spec.reference(x);
    double s = 0;
    for (std::size_t j = 0; j < out.size(); ++j) s += w[j] * out[j];
    return s;
  };
  for (std::size_t k = 0; k < wrt.size(); ++k) {
    const std::size_t i = wrt_index[k];
    const std::vector<float> got = exec.read(grads[k].dense);
    REQUIRE(got.size() == result.inputs[i].size());
    std::vector<Values> x = result.inputs;
    std::size_t bad = 0;
    for (std::size_t j = 0; j < got.size(); ++j) {
      const double x0 = x[i][j];
      const double h = 1e-6 * std::max(1.0, std::abs(x0));
      x[i][j] = x0 + h;
      const double up = L(x);
      x[i][j] = x0 - h;
      const double down = L(x);
      x[i][j] = x0;
      const double numeric = (up - down) / (2 * h);
      if (!close_enough(got[j], numeric, spec.gradient_tolerance)) {
        if (bad++ < 5) {
          UNSCOPED_INFO("d/d input" << i << "[" << j << "] = " << got[j] << ", finite difference "
                                    << numeric << " at x = " << x0);
        }
      }
    }
    CHECK(bad == 0);
    result.gradients.push_back(got);
  }
  return result;
}

/// Row-major index helpers for references over broadcasting: shapes padded
/// with 1 on the left to the largest rank (kMaxRank).
constexpr int kRefRank = Shape::kMaxRank;

inline std::vector<std::int64_t> padded(const Shape& s) {
  std::vector<std::int64_t> d(kRefRank, 1);
  for (int i = 0; i < s.rank(); ++i) d[kRefRank - s.rank() + i] = s[i];
  return d;
}

/// Element of `v` (shape `s`) read at the coordinates `c` of a broadcast shape.
inline double at_broadcast(const Values& v, const Shape& s, const std::vector<std::int64_t>& c) {
  const auto d = padded(s);
  std::int64_t index = 0;
  for (int i = 0; i < kRefRank; ++i) index = index * d[i] + (d[i] == 1 ? 0 : c[i]);
  return v[static_cast<std::size_t>(index)];
}

/// Coordinates (padded to kRefRank) of flat index `j` in shape `s`.
inline std::vector<std::int64_t> coords(std::int64_t j, const Shape& s) {
  const auto d = padded(s);
  std::vector<std::int64_t> c(kRefRank);
  for (int i = kRefRank - 1; i >= 0; --i) {
    c[i] = j % d[i];
    j /= d[i];
  }
  return c;
}

}  // namespace vkt::test
