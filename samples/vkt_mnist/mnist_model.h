#pragma once
// The MNIST CNN of vkt-mnist, shared with bench/cnn_bench.cpp so that the
// benchmark times exactly the model the sample trains.

#include <vktower/vktower.h>

#include <cstdint>
#include <string>

namespace mnist {

/// The network's widths, its first convolution's stride and its optional
/// batch normalization.
struct CnnOptions {
  // 16 first filters: the second convolution's GEMMs (most of the step) take
  // half the time they take after 32, and with the sample's shifted images and
  // label smoothing the accuracy stays (a PyTorch replica over 10 seeds, 500
  // steps: 0.9772 mean against 0.9785 for 32; docs/PERFORMANCE.md).
  std::int64_t conv1_filters = 16;
  std::int64_t conv2_filters = 32;
  // Square filters, "same" padding. The second convolution's cost on
  // lavapipe grows with its filter area, and 3x3 learned as well as 5x5 there.
  std::int64_t conv1_kernel = 5;
  std::int64_t conv2_kernel = 3;
  /// 2: the first convolution samples every other pixel (28x28 -> 14x14).
  /// On lavapipe a convolution's cost follows its output pixels more than
  /// its FLOPs (docs/PERFORMANCE.md, vkt-bench-cnn), and at stride 1 the
  /// full-resolution layer alone took most of a step.
  std::int64_t conv1_stride = 2;
  /// A 2x2 max pool after the first convolution too (after the second
  /// always). Off: the second convolution sees 14x14, which reached 0.97 in
  /// fewer epochs than 7x7 did (0.965-0.97 after 5 epochs).
  bool first_pool = false;
  std::int64_t dense_units = 128;
  std::int64_t classes = 10;
  bool batch_norm = false;
  bool sync_batch_norm = false;  // the global batch's statistics on every tower
};

/// The side of each stage's output for a side x side image: the first
/// convolution, the first pool, (the second convolution keeps it), the second pool.
struct CnnSides {
  std::int64_t conv1 = 0, pool1 = 0, pool2 = 0;
};

inline CnnSides cnn_sides(const CnnOptions& o, std::int64_t side = 28) {
  CnnSides s;
  s.conv1 = (side + o.conv1_stride - 1) / o.conv1_stride;  // "same": ceil(side / stride)
  s.pool1 = o.first_pool ? s.conv1 / 2 : s.conv1;          // 2x2 windows, stride 2, valid
  s.pool2 = s.pool1 / 2;
  return s;
}

/// Multiply-adds x 2 of one example's forward pass through the convolutions
/// and dense layers.
inline double forward_flops(const CnnOptions& o, std::int64_t side = 28) {
  const CnnSides s = cnn_sides(o, side);
  const auto kk1 = static_cast<double>(o.conv1_kernel * o.conv1_kernel);
  const auto kk2 = static_cast<double>(o.conv2_kernel * o.conv2_kernel);
  const double conv1 = 2.0 * static_cast<double>(s.conv1 * s.conv1 * o.conv1_filters) * kk1;
  const double conv2 = 2.0 * static_cast<double>(s.pool1 * s.pool1 * o.conv2_filters) * kk2 *
                       static_cast<double>(o.conv1_filters);
  const auto flat = static_cast<double>(s.pool2 * s.pool2 * o.conv2_filters);
  const double dense = 2.0 * flat * static_cast<double>(o.dense_units) +
                       2.0 * static_cast<double>(o.dense_units * o.classes);
  return conv1 + conv2 + dense;
}

struct ConvBlock {
  std::int64_t filters = 0, kernel = 0, stride = 1;
  bool pool = true;
  std::string name;
};

/// conv -> [batch norm] -> ReLU -> [2x2 max pool], as one block of the network.
inline vkt::Tensor conv_block(const vkt::Tensor& x, const ConvBlock& b, const CnnOptions& o,
                              bool training) {
  using vkt::layers::Activation;
  const std::int64_t filters = b.filters, stride = b.stride;
  const std::string& name = b.name;
  const vkt::Conv2dOptions conv{.strides = {stride, stride}, .padding = vkt::Padding::Same};
  vkt::Tensor h;
  if (o.batch_norm) {
    // The bias is kept although beta makes it redundant: the variables stay
    // the same with and without --batch-norm but for the batch norm's own.
    h = vkt::layers::conv2d(x, filters, {b.kernel, b.kernel}, conv, Activation::None, name);
    // Momentum 0.9 (PyTorch's 0.1) rather than Keras' 0.99: a run of a few
    // hundred steps must leave moving statistics that evaluation can use.
    h = vkt::relu(vkt::layers::batch_norm(
        h, training,
        {.momentum = 0.9f, .epsilon = 1e-3f, .sync = o.sync_batch_norm, .name = name + "_bn"}));
  } else {
    h = vkt::layers::conv2d(x, filters, {b.kernel, b.kernel}, conv, Activation::Relu, name);
  }
  return b.pool ? vkt::layers::max_pool2d(h) : h;
}

/// images [N, 28, 28, 1] in [0, 1] -> logits [N, classes]: conv (stride
/// conv1_stride) - [pool] - conv - pool - dense (ReLU) - dense.
inline vkt::Tensor cnn_logits(const vkt::Tensor& images, const CnnOptions& o, bool training) {
  using vkt::layers::Activation;
  vkt::Tensor h =
      conv_block(images, {o.conv1_filters, o.conv1_kernel, o.conv1_stride, o.first_pool, "conv1"},
                 o, training);
  h = conv_block(h, {o.conv2_filters, o.conv2_kernel, 1, true, "conv2"}, o, training);
  h = vkt::layers::dense(vkt::layers::flatten(h), o.dense_units, Activation::Relu, "dense");
  return vkt::layers::dense(h, o.classes, Activation::None, "logits");
}

/// Softmax cross-entropy against labels smoothed by `smoothing` (PyTorch's
/// label_smoothing): the target is 1 - smoothing on the label plus smoothing /
/// classes on every class, so the loss is (1 - smoothing) x the plain loss plus
/// smoothing x the mean over classes of -log softmax. A network that may not
/// become certain of its 8,000 training digits generalizes better to others.
inline vkt::Tensor smoothed_cross_entropy(const vkt::Tensor& labels, const vkt::Tensor& logits,
                                          const vkt::Tensor& weights, double smoothing) {
  const vkt::Tensor plain = vkt::sparse_softmax_cross_entropy(labels, logits, weights);
  if (smoothing == 0.0) return plain;
  const auto s = static_cast<float>(smoothing);
  const vkt::Tensor uniform = vkt::neg(vkt::reduce_mean(vkt::log_softmax(logits)));
  return plain * (1.0f - s) + uniform * s;
}

}  // namespace mnist
