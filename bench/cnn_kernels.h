#pragma once
// vkt-bench-cnn's kernel figures: each convolution GEMM of the CNN's training
// step (forward, filter gradient, input gradient) alone in a graph, timed on
// the device, against a plain vkt::matmul of the im2col shape of the same
// GEMM in the same run. Uses conv2d's internal backprop ops (conv_gemm.h) so
// that each graph holds exactly one GEMM: the bench is built in the tree only.

#include <fmt/format.h>

#include <vktower/runtime/graph/ops/conv_gemm.h>
#include <vktower/vktower.h>
#include "../samples/vkt_mnist/mnist_model.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace cnn_bench {

/// A batch of random 28x28 images (pixels in [0, 1)) and labels 0..9.
struct RandomDigits {
  std::vector<float> x;
  std::vector<std::int32_t> y;
};
inline RandomDigits random_digits(std::int64_t batch, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  RandomDigits d{std::vector<float>(static_cast<std::size_t>(batch * 28 * 28)),
                 std::vector<std::int32_t>(static_cast<std::size_t>(batch))};
  for (float& v : d.x) v = pixel(rng);
  for (auto& v : d.y) v = static_cast<std::int32_t>(rng() % 10);
  return d;
}

/// One convolution GEMM of the step and its im2col matmul: [m, k] x [k, n].
struct ConvGemmCase {
  std::string name;
  vkt::conv_detail::ConvGemm gemm;
  vkt::conv_detail::ConvGeometry geometry;
  std::int64_t m = 0, k = 0, n = 0;
  bool transpose_a = false;  // the filter gradient: im2col(x)^T x dy
  double flops() const { return 2.0 * static_cast<double>(m * k * n); }
};

struct KernelTimes {
  double conv_ms = 0, matmul_ms = 0;
};

/// A k x k "same" convolution's geometry, padding as conv2d plans it.
inline vkt::conv_detail::ConvGeometry same_conv(std::int64_t batch, std::int64_t side,
                                                std::int64_t in_c, std::int64_t out_c,
                                                std::int64_t k, std::int64_t stride) {
  const vkt::WindowPlan plan =
      vkt::plan_window({.size = {k, k}, .strides = {stride, stride}, .padding = vkt::Padding::Same},
                       side, side, "bench conv");
  vkt::conv_detail::ConvGeometry g;
  g.batch = batch;
  g.in_h = g.in_w = side;
  g.out_h = plan.out_h;
  g.out_w = plan.out_w;
  g.in_c = in_c;
  g.out_c = out_c;
  g.k_h = g.k_w = k;
  g.stride_h = g.stride_w = stride;
  g.pad_top = plan.pad_top;
  g.pad_left = plan.pad_left;
  return g;
}

/// The GEMMs a training step of the CNN runs: both convolutions forward and
/// their filter gradients, and the second's input gradient (the first
/// convolution's input is the data, which needs none).
inline std::vector<ConvGemmCase> step_gemms(std::int64_t batch, const mnist::CnnOptions& o) {
  using vkt::conv_detail::ConvGemm;
  const mnist::CnnSides sides = mnist::cnn_sides(o);
  const auto c1 = same_conv(batch, 28, 1, o.conv1_filters, o.conv1_kernel, o.conv1_stride);
  const auto c2 =
      same_conv(batch, sides.pool1, o.conv1_filters, o.conv2_filters, o.conv2_kernel, 1);
  const std::vector<std::pair<std::string, vkt::conv_detail::ConvGeometry>> convs{{"conv1", c1},
                                                                                  {"conv2", c2}};
  std::vector<ConvGemmCase> cases;
  for (const auto& [label, g] : convs) {
    const std::int64_t pixels = g.batch * g.out_h * g.out_w, kk = g.k_h * g.k_w;
    cases.push_back({label + " forward", ConvGemm::Forward, g, pixels, kk * g.in_c, g.out_c});
    cases.push_back({label + " filter gradient", ConvGemm::BackpropFilter, g, kk * g.in_c, pixels,
                     g.out_c, true});
  }
  const std::int64_t in_pixels = c2.batch * c2.in_h * c2.in_w;
  cases.push_back({"conv2 input gradient", ConvGemm::BackpropInput, c2, in_pixels,
                   c2.k_h * c2.k_w * c2.out_c, c2.in_c});
  return cases;
}

/// A graph and the inputs made in it (all fed before it runs).
struct InputGraph {
  explicit InputGraph(vkt::Device& device) : graph(device) {}
  vkt::Tensor input(const std::string& name, const vkt::Shape& shape) {
    inputs.push_back(graph.input(name, shape));
    return inputs.back();
  }
  vkt::Graph graph;
  std::vector<vkt::Tensor> inputs;
};

/// The median device time of `reps` runs of `fetches` (after one warm-up),
/// every input fed with uniform values.
inline double device_median_ms(InputGraph& g, const std::vector<vkt::Tensor>& fetches, int reps) {
  vkt::Executor exec(g.graph, fetches, {.training = false, .timestamps = true});
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const vkt::Tensor& input : g.inputs) {
    std::vector<float> values(static_cast<std::size_t>(input.shape().elements()));
    for (float& v : values) v = uniform(rng);
    exec.feed(input.name(), values);
  }
  exec.run();
  exec.wait();
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    exec.run();
    times.push_back(exec.device_ms().value_or(0.0));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// The conv GEMM `c` alone in a graph: its operands are inputs.
inline vkt::Tensor add_conv_gemm(InputGraph& g, const ConvGemmCase& c, const std::string& tag) {
  using vkt::conv_detail::ConvGemm;
  const auto& geo = c.geometry;
  const vkt::Shape x{geo.batch, geo.in_h, geo.in_w, geo.in_c};
  const vkt::Shape w{geo.k_h, geo.k_w, geo.in_c, geo.out_c};
  const vkt::Shape dy{geo.batch, geo.out_h, geo.out_w, geo.out_c};
  switch (c.gemm) {
    case ConvGemm::Forward:
      return vkt::conv2d(g.input(tag + "x", x), g.input(tag + "w", w),
                         {.strides = {geo.stride_h, geo.stride_w}, .padding = vkt::Padding::Same});
    case ConvGemm::BackpropFilter:
      return vkt::conv_detail::conv2d_backprop_filter(g.input(tag + "x", x),
                                                      g.input(tag + "dy", dy), geo);
    case ConvGemm::BackpropInput: {
      // What conv2d's gradient records: at stride 1 a forward convolution.
      const vkt::Tensor dy_in = g.input(tag + "dy", dy), w_in = g.input(tag + "w", w);
      const std::optional<vkt::Tensor> forward =
          vkt::conv_detail::conv2d_input_gradient_as_forward(dy_in, w_in, geo);
      return forward ? *forward : vkt::conv_detail::conv2d_backprop_input(dy_in, w_in, geo);
    }
  }
  return {};
}

/// Each case's conv GEMM and its matmul, each in a graph of its own.
inline KernelTimes time_case(vkt::Device& device, const ConvGemmCase& c, int reps) {
  KernelTimes t;
  {
    InputGraph g(device);
    const vkt::Tensor y = add_conv_gemm(g, c, "");
    t.conv_ms = device_median_ms(g, {y}, reps);
  }
  {
    InputGraph g(device);
    const vkt::Tensor a = g.input("a", c.transpose_a ? vkt::Shape{c.k, c.m} : vkt::Shape{c.m, c.k});
    const vkt::Tensor b = g.input("b", {c.k, c.n});
    t.matmul_ms = device_median_ms(g, {vkt::matmul(a, b, c.transpose_a)}, reps);
  }
  return t;
}

/// Every conv GEMM of the step in one graph: the step's conv time.
inline double all_convs_ms(vkt::Device& device, const std::vector<ConvGemmCase>& cases, int reps) {
  InputGraph g(device);
  std::vector<vkt::Tensor> outs;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    outs.push_back(add_conv_gemm(g, cases[i], fmt::format("c{}_", i)));
  }
  return device_median_ms(g, outs, reps);
}

/// One kernel of a 1-tower training step (forward, loss and every gradient,
/// no optimizer update) with its device time summed over its commands.
struct StepKernel {
  std::string op, kernel;
  int commands = 0;
  double ms = 0;
};

/// The step's device time by op and kernel (ExecutorOptions::profile), each
/// command's fastest of `reps` runs (the least disturbed by other processes
/// on a shared machine), largest first.
inline std::vector<StepKernel> step_profile(vkt::Device& device, std::int64_t batch,
                                            const mnist::CnnOptions& o, int reps) {
  InputGraph g(device);
  const vkt::Tensor x = g.input("x", {batch, 28, 28, 1});
  const vkt::Tensor y = g.graph.input("y", {batch}, vkt::DType::I32);
  const vkt::Tensor loss = vkt::sparse_softmax_cross_entropy(y, mnist::cnn_logits(x, o, true));
  std::vector<vkt::Tensor> fetches{loss};
  for (const vkt::Gradient& grad : vkt::gradients(loss, g.graph.trainable_variables())) {
    fetches.push_back(grad.dense);
  }
  vkt::Executor exec(g.graph, fetches, {.training = true, .profile = true});
  const RandomDigits data = random_digits(batch, 7);
  exec.feed("x", data.x);
  exec.feed("y", data.y);
  exec.run();
  exec.wait();
  std::vector<std::vector<double>> times;
  std::vector<vkt::Executor::CommandProfile> commands;
  for (int r = 0; r < reps; ++r) {
    exec.run();
    commands = exec.profile();
    times.resize(commands.size());
    for (std::size_t i = 0; i < commands.size(); ++i) times[i].push_back(commands[i].ms);
  }
  std::vector<StepKernel> kernels;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    const double ms = *std::min_element(times[i].begin(), times[i].end());
    const auto same = [&](const StepKernel& k) {
      return k.op == commands[i].op && k.kernel == commands[i].kernel;
    };
    auto found = std::find_if(kernels.begin(), kernels.end(), same);
    if (found == kernels.end()) {
      kernels.push_back({commands[i].op, commands[i].kernel, 0, 0});
      found = kernels.end() - 1;
    }
    found->commands += 1;
    found->ms += ms;
  }
  std::sort(kernels.begin(), kernels.end(),
            [](const StepKernel& a, const StepKernel& b) { return a.ms > b.ms; });
  return kernels;
}

}  // namespace cnn_bench
