// A two-layer MLP with softmax cross-entropy: the loss and every gradient
// against a hand-written double-precision CPU implementation of the same network.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <random>

#include <vktower/runtime/graph/autodiff.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>

#include "../shared_device.h"
#include "matmul_variant_scope.h"

namespace {

using Matrix = std::vector<double>;  // row-major

struct CpuMlp {
  int batch, in, hidden, out;
  Matrix w1, b1, w2, b2;

  // Returns the mean cross-entropy; fills the gradients.
  double step(const Matrix& x, const std::vector<int>& labels, Matrix& dw1, Matrix& db1,
              Matrix& dw2, Matrix& db2) const {
    Matrix pre(batch * hidden), h(batch * hidden), logits(batch * out);
    for (int b = 0; b < batch; ++b) {
      for (int j = 0; j < hidden; ++j) {
        double s = b1[j];
        for (int i = 0; i < in; ++i) s += x[b * in + i] * w1[i * hidden + j];
        pre[b * hidden + j] = s;
        h[b * hidden + j] = std::max(s, 0.0);
      }
      for (int k = 0; k < out; ++k) {
        double s = b2[k];
        for (int j = 0; j < hidden; ++j) s += h[b * hidden + j] * w2[j * out + k];
        logits[b * out + k] = s;
      }
    }
    double loss = 0;
    Matrix dlogits(batch * out);
    for (int b = 0; b < batch; ++b) {
      double m = -INFINITY, z = 0;
      for (int k = 0; k < out; ++k) m = std::max(m, logits[b * out + k]);
      for (int k = 0; k < out; ++k) z += std::exp(logits[b * out + k] - m);
      loss += -(logits[b * out + labels[b]] - m - std::log(z)) / batch;
      for (int k = 0; k < out; ++k) {
        const double p = std::exp(logits[b * out + k] - m) / z;
        dlogits[b * out + k] = (p - (k == labels[b] ? 1.0 : 0.0)) / batch;
      }
    }
    dw2.assign(hidden * out, 0);
    db2.assign(out, 0);
    dw1.assign(in * hidden, 0);
    db1.assign(hidden, 0);
    Matrix dpre(batch * hidden, 0);
    for (int b = 0; b < batch; ++b) {
      for (int k = 0; k < out; ++k) {
        const double d = dlogits[b * out + k];
        db2[k] += d;
        for (int j = 0; j < hidden; ++j) {
          dw2[j * out + k] += h[b * hidden + j] * d;
          dpre[b * hidden + j] += d * w2[j * out + k];
        }
      }
      for (int j = 0; j < hidden; ++j) {
        if (pre[b * hidden + j] <= 0) dpre[b * hidden + j] = 0;
        db1[j] += dpre[b * hidden + j];
        for (int i = 0; i < in; ++i) dw1[i * hidden + j] += x[b * in + i] * dpre[b * hidden + j];
      }
    }
    return loss;
  }
};

/// max |got - want| / max |want|: the error relative to the tensor's scale.
double relative_error(const std::vector<float>& got, const Matrix& want) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return diff / scale;
}

}  // namespace

TEST_CASE("a two-layer MLP's loss and gradients match a hand-written CPU network") {
  const char* variant = GENERATE("texel", "tiled");
  const vkt::test::VariantScope scope(variant);
  INFO("matmul variant " << variant);
  const int batch = 16, in = 20, hidden = 33, out = 10;
  vkt::Graph g(vkt::test::shared_device(), {.seed = 11});
  const vkt::Tensor x = g.input("x", {batch, in});
  const vkt::Tensor labels = g.input("labels", {batch}, vkt::DType::I32);
  const vkt::Tensor h = vkt::layers::dense(x, hidden, vkt::layers::Activation::Relu, "hidden");
  const vkt::Tensor logits = vkt::layers::dense(h, out, vkt::layers::Activation::None, "out");
  const vkt::Tensor loss = vkt::sparse_softmax_cross_entropy(labels, logits);
  const std::vector<vkt::Tensor> vars = {
      *g.find_variable("hidden/kernel"), *g.find_variable("hidden/bias"),
      *g.find_variable("out/kernel"), *g.find_variable("out/bias")};
  const std::vector<vkt::Gradient> grads = vkt::gradients(loss, vars);
  std::vector<vkt::Tensor> fetches{loss};
  for (const vkt::Gradient& gr : grads) fetches.push_back(gr.dense);
  vkt::Executor exec(g, fetches);

  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> xs(batch * in);
  for (float& v : xs) v = normal(rng);
  std::vector<std::int32_t> ys(batch);
  for (int b = 0; b < batch; ++b) ys[b] = static_cast<std::int32_t>((b * 7 + 3) % out);
  // Nonzero biases, so that their part of the forward pass is checked too.
  std::vector<float> b1(hidden), b2(out);
  for (float& v : b1) v = 0.1f * normal(rng);
  for (float& v : b2) v = 0.1f * normal(rng);
  g.assign(vars[1], b1);
  g.assign(vars[3], b2);
  exec.feed("x", xs);
  exec.feed("labels", ys);
  exec.run();

  const auto as_double = [](const std::vector<float>& v) { return Matrix(v.begin(), v.end()); };
  const CpuMlp cpu{batch,
                   in,
                   hidden,
                   out,
                   as_double(g.values(vars[0])),
                   as_double(b1),
                   as_double(g.values(vars[2])),
                   as_double(b2)};
  Matrix dw1, db1, dw2, db2;
  const double want_loss =
      cpu.step(as_double(xs), std::vector<int>(ys.begin(), ys.end()), dw1, db1, dw2, db2);
  CHECK(std::abs(exec.read(loss)[0] - want_loss) <= 1e-5 * std::abs(want_loss));
  CHECK(relative_error(exec.read(grads[0].dense), dw1) < 1e-5);
  CHECK(relative_error(exec.read(grads[1].dense), db1) < 1e-5);
  CHECK(relative_error(exec.read(grads[2].dense), dw2) < 1e-5);
  CHECK(relative_error(exec.read(grads[3].dense), db2) < 1e-5);
}
