// conv2d under the fp16 and bf16 precision policies: the half conv's numbers
// (operands rounded to the half type, f32 sums, the output rounded once),
// forward and both gradients, on the f32 kernels.
#include <bit>
#include <cstdint>
#include <vector>

#include <vktower/runtime/graph/half.h>
#include <vktower/runtime/graph/ops/cast.h>
#include <vktower/vktower.h>

#include "../shared_device.h"
#include "../test_support.h"

using vkt::DType;
using vkt::Tensor;

namespace {

std::vector<std::uint32_t> bits(const std::vector<float>& v) {
  std::vector<std::uint32_t> out;
  for (const float f : v) out.push_back(std::bit_cast<std::uint32_t>(f));
  return out;
}

/// One conv2d of `g` on x [2, 7, 6, 3] and a 3 x 2 filter to 4 channels
/// (strided, padded: every tap and edge case of the GEMM), the loss
/// sum(y * c), and its gradients. `rounded`: the half conv written out with
/// round_to_half in an f32 graph.
struct ConvCase {
  Tensor y, dx, df;
};
ConvCase conv_case(vkt::Graph& g, std::optional<DType> rounded) {
  const Tensor x = g.input("x", {2, 7, 6, 3});
  const Tensor f = g.input("f", {3, 2, 3, 4});
  const vkt::Conv2dOptions options{.strides = {2, 1}, .padding = vkt::Padding::Same};
  const auto round = [&](const Tensor& t) { return rounded ? vkt::round_to_half(t, *rounded) : t; };
  const Tensor y = round(vkt::conv2d(round(x), round(f), options));
  const Tensor c = g.constant(y.shape(), vkt::test::random_floats(y.shape().elements(), 21));
  const std::vector<vkt::Gradient> grads = vkt::gradients(vkt::reduce_sum(y * c), {x, f});
  return {y, grads[0].dense, grads[1].dense};
}

}  // namespace

TEST_CASE(
    "conv2d under the half precision policies: the bits of the half conv written out, "
    "forward and both gradients, and every output a half value") {
  std::vector<float> xv = vkt::test::random_floats(2 * 7 * 6 * 3, 22, -3.0f, 3.0f);
  xv[0] = 70000.0f;  // past f16's range
  xv[1] = 1e-6f;     // in its subnormals
  const std::vector<float> fv = vkt::test::random_floats(3 * 2 * 3 * 4, 23, -1.0f, 1.0f);
  const auto run = [&](vkt::Graph& g, const ConvCase& c) {
    vkt::Executor exec(g, {c.y, c.dx, c.df});
    exec.feed("x", xv);
    exec.feed("f", fv);
    exec.run();
    return std::vector<std::vector<float>>{exec.read(c.y), exec.read(c.dx), exec.read(c.df)};
  };
  vkt::Graph plain(vkt::test::shared_device());
  const std::vector<std::vector<float>> f32 = run(plain, conv_case(plain, std::nullopt));
  for (const DType half : {DType::F16, DType::BF16}) {
    INFO(vkt::to_string(half));
    vkt::Graph policy(
        vkt::test::shared_device(),
        {.precision = half == DType::F16 ? vkt::Precision::F16 : vkt::Precision::BF16});
    vkt::Graph written(vkt::test::shared_device());
    const std::vector<std::vector<float>> got = run(policy, conv_case(policy, std::nullopt));
    const std::vector<std::vector<float>> want = run(written, conv_case(written, half));
    for (std::size_t i = 0; i < 3; ++i) {
      INFO("output " << i << " (y, dx, dfilter)");
      CHECK(bits(got[i]) == bits(want[i]));
      CHECK(bits(got[i]) != bits(f32[i]));  // the policy did round
      CHECK(bits(got[i]) == bits(vkt::from_half(vkt::to_half(got[i], half), half)));
    }
  }
}
