// conv2d and the fused attention under the fp16 and bf16 precision policies:
// the half layer's numbers (operands rounded to the half type, f32 inside,
// the output rounded once), forward and every gradient, on the f32 kernels,
// and on the tiled kernels reading the operands stored in half (conv2d's x
// and filter, the fused attention's q, k and v, and its result).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <vktower/runtime/graph/half.h>
#include <vktower/runtime/graph/ops/cast.h>
#include <vktower/vktower.h>

#include "../shared_device.h"
#include "../test_support.h"
#include "matmul_variant_scope.h"

using vkt::DType;
using vkt::Tensor;
using vkt::test::float_bits;

namespace {

/// One conv2d of `g` on x [batch, 7, 6, 3] and a 3 x 2 filter to 4 channels
/// (strided, padded: every tap and edge case of the GEMM), the loss
/// sum(y * c), and its gradients. `rounded`: the half conv written out with
/// round_to_half in an f32 graph.
struct ConvCase {
  Tensor y, dx, df;
};
ConvCase conv_case(vkt::Graph& g, std::optional<DType> rounded, std::int64_t stride_h,
                   std::int64_t batch) {
  const Tensor x = g.input("x", {batch, 7, 6, 3});
  const Tensor f = g.input("f", {3, 2, 3, 4});
  // Stride 1 takes dx as a forward conv of the flipped filter (conv_flip.cpp).
  const vkt::Conv2dOptions options{.strides = {stride_h, 1}, .padding = vkt::Padding::Same};
  const auto round = [&](const Tensor& t) { return rounded ? vkt::round_to_half(t, *rounded) : t; };
  const Tensor y = round(vkt::conv2d(round(x), round(f), options));
  const Tensor c = g.constant(y.shape(), vkt::test::random_floats(y.shape().elements(), 21));
  const std::vector<vkt::Gradient> grads = vkt::gradients(vkt::reduce_sum(y * c), {x, f});
  return {y, grads[0].dense, grads[1].dense};
}

/// The fused attention of q [2, 2, 5, 8] over k, v [2, 2, 7, 8], causal, and
/// the gradients of sum(y * c) for q, k and v; `rounded` as conv_case's.
std::vector<Tensor> attention_case(vkt::Graph& g, std::optional<DType> rounded) {
  const Tensor q = g.input("q", {2, 2, 5, 8});
  const Tensor k = g.input("k", {2, 2, 7, 8});
  const Tensor v = g.input("v", {2, 2, 7, 8});
  const auto round = [&](const Tensor& t) { return rounded ? vkt::round_to_half(t, *rounded) : t; };
  const Tensor y = round(vkt::scaled_dot_product_attention(
      round(q), round(k), round(v), {.causal = true, .kernel = vkt::AttentionKernel::Fused}));
  const Tensor c = g.constant(y.shape(), vkt::test::random_floats(y.shape().elements(), 24));
  std::vector<Tensor> out{y};
  for (const vkt::Gradient& d : vkt::gradients(vkt::reduce_sum(y * c), {q, k, v})) {
    out.push_back(d.dense);
  }
  return out;
}

std::vector<std::vector<float>> run_case(vkt::Graph& g, const std::vector<Tensor>& fetches,
                                         const std::map<std::string, std::vector<float>>& feeds) {
  vkt::Executor exec(g, fetches);
  for (const auto& [name, values] : feeds) exec.feed(name, values);
  exec.run();
  std::vector<std::vector<float>> out;
  for (const Tensor& t : fetches) out.push_back(exec.read(t));
  return out;
}

/// The policy's outputs `got` against the layer written out with round_to_half
/// (`want`): the same bits, not f32's (the policy did round), each a value of
/// the half type. `names` lists the outputs for the failure message.
void check_policy_bits(const std::vector<std::vector<float>>& got,
                       const std::vector<std::vector<float>>& want,
                       const std::vector<std::vector<float>>& f32, DType half, const char* names) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("output " << i << " " << names);
    CHECK(float_bits(got[i]) == float_bits(want[i]));
    CHECK(float_bits(got[i]) != float_bits(f32[i]));
    CHECK(float_bits(got[i]) == float_bits(vkt::from_half(vkt::to_half(got[i], half), half)));
  }
}

vkt::Precision policy_of(DType half) {
  return half == DType::F16 ? vkt::Precision::F16 : vkt::Precision::BF16;
}

}  // namespace

namespace {

/// The policy's conv2d against the half conv written out with round_to_half in
/// an f32 graph, bit for bit: forward and both gradients, each output a half
/// value. `stored_half`: the policy's kernels read x and the filter as half
/// tensors (where products take half ones).
void check_conv_policy(bool stored_half) {
  std::vector<float> xv = vkt::test::random_floats(8 * 7 * 6 * 3, 22, -3.0f, 3.0f);
  xv[0] = 70000.0f;  // past f16's range
  xv[1] = 1e-6f;     // in its subnormals
  const std::vector<float> fv = vkt::test::random_floats(3 * 2 * 3 * 4, 23, -1.0f, 1.0f);
  // Stride 2; stride 1 (dx on the flipped filter) with a batch of 8, which
  // gives dfilter's GEMM 336 k, split on the tiled kernel (KSplit).
  for (const auto& [stride, batch] : {std::pair<std::int64_t, std::int64_t>{2, 2}, {1, 8}}) {
    const std::vector<float> x(xv.begin(), xv.begin() + batch * 7 * 6 * 3);
    const auto run = [&](vkt::Graph& g, const ConvCase& c) {
      return run_case(g, {c.y, c.dx, c.df}, {{"x", x}, {"f", fv}});
    };
    for (const DType half : {DType::F16, DType::BF16}) {
      INFO(vkt::to_string(half) << ", stride " << stride << ", batch " << batch);
      vkt::Graph plain(vkt::test::shared_device());
      const auto f32 = run(plain, conv_case(plain, std::nullopt, stride, batch));
      vkt::Graph policy(vkt::test::shared_device(), {.precision = policy_of(half)});
      vkt::Graph written(vkt::test::shared_device());
      const ConvCase c = conv_case(policy, std::nullopt, stride, batch);
      // The forward conv, and at stride 1 dx's on the flipped filter: the
      // operands in half where products take half tensors.
      int convs = 0, splits = 0;
      for (const vkt::Node& node : policy.nodes()) {
        splits += node.op->type() == "conv2d_backprop_filter_split_k";
        if (node.op->type() != "conv2d") continue;
        ++convs;
        for (const Tensor& in : node.inputs) CHECK(in.dtype() == (stored_half ? half : DType::F32));
      }
      CHECK(convs == (stride == 1 ? 2 : 1));
      CHECK(splits == (stored_half && stride == 1 ? 1 : 0));  // only the tiled kernel splits
      check_policy_bits(run(policy, c), run(written, conv_case(written, half, stride, batch)), f32,
                        half, "(y, dx, dfilter)");
    }
  }
}

}  // namespace

TEST_CASE(
    "conv2d under the half precision policies: the bits of the half conv written out, "
    "forward and both gradients, and every output a half value") {
  const vkt::test::VariantScope texel("texel");
  check_conv_policy(false);
}

TEST_CASE(
    "where products take half tensors the policy's conv2d reads x and the filter stored in half, "
    "with the same bits") {
  const vkt::test::VariantScope tiled("tiled");
  check_conv_policy(true);
}

namespace {

/// Where the fused attention stores its result in half, the backward kernels'
/// delta = do . o reads that result (autocast's numbers) where the written-out
/// attention's reads the f32 one: dq and dk (not dv) may differ from it by a
/// few roundings of the half type, an element of `got` against `want` within
/// 4 units in the last place of the tensor's largest magnitude. A misread
/// result or log-sum-exp is off by the gradient's own size.
void check_close_to_written(const std::vector<float>& got, const std::vector<float>& want,
                            DType half) {
  REQUIRE(got.size() == want.size());
  float largest = 0.0f;
  for (const float w : want) largest = std::max(largest, std::abs(w));
  const float ulp = std::ldexp(largest, half == DType::F16 ? -10 : -7);
  REQUIRE(largest > 0.01f);
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": " << got[i] << " against " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= 4 * ulp);
  }
  CHECK(float_bits(got) == float_bits(vkt::from_half(vkt::to_half(got, half), half)));
}

/// The policy's fused attention against the half attention written out with
/// round_to_half in an f32 graph (on the f32 kernels), bit for bit: forward
/// and every gradient, each output a half value. `stored_half`: the policy's
/// kernels read q, k and v as half tensors (where products take half ones)
/// and write the result in half, which dq and dk read (check_close_to_written).
void check_attention_policy(bool stored_half) {
  const std::map<std::string, std::vector<float>> feeds{
      {"q", vkt::test::random_floats(2 * 2 * 5 * 8, 25, -2.0f, 2.0f)},
      {"k", vkt::test::random_floats(2 * 2 * 7 * 8, 26, -2.0f, 2.0f)},
      {"v", vkt::test::random_floats(2 * 2 * 7 * 8, 27, -2.0f, 2.0f)}};
  vkt::Graph plain(vkt::test::shared_device());
  const auto f32 = run_case(plain, attention_case(plain, std::nullopt), feeds);
  for (const DType half : {DType::F16, DType::BF16}) {
    INFO(vkt::to_string(half));
    vkt::Graph policy(vkt::test::shared_device(), {.precision = policy_of(half)});
    vkt::Graph written(vkt::test::shared_device());
    const std::vector<Tensor> fetches = attention_case(policy, std::nullopt);
    const DType stored = stored_half ? half : DType::F32;
    int kernels = 0;
    for (const vkt::Node& node : policy.nodes()) {
      const std::string type = node.op->type();
      if (type == "fused_attention") {
        for (const Tensor& in : node.inputs) CHECK(in.dtype() == stored);
        CHECK(node.output.dtype() == stored);
      }
      if (type != "attention_grad_q" && type != "attention_grad_kv") continue;
      ++kernels;
      CHECK(node.inputs[3].dtype() == stored);  // the forward's result
      CHECK(node.inputs[4].dtype() == stored);  // its gradient
    }
    CHECK(kernels == 2);
    const auto got = run_case(policy, fetches, feeds);
    const auto want = run_case(written, attention_case(written, half), feeds);
    if (!stored_half) {
      check_policy_bits(got, want, f32, half, "(y, dq, dk, dv)");
      continue;
    }
    check_policy_bits({got[0], got[3]}, {want[0], want[3]}, {f32[0], f32[3]}, half, "(y, dv)");
    for (const int i : {1, 2}) {
      INFO((i == 1 ? "dq" : "dk"));
      check_close_to_written(got[i], want[i], half);
    }
  }
}

}  // namespace

TEST_CASE(
    "the fused attention under the half precision policies: the bits of the half attention "
    "written out, forward and every gradient, and every output a half value") {
  const vkt::test::VariantScope texel("texel");
  check_attention_policy(false);
}

TEST_CASE(
    "where products take half tensors the policy's fused attention reads q, k and v stored in "
    "half, with the same bits") {
  const vkt::test::VariantScope tiled("tiled");
  check_attention_policy(true);
}

namespace {

/// multi_head_attention of x [2, 5, 8] (2 heads, causal, the fused kernels)
/// and the gradients of sum(y * c) for x and the layer's weights, or with
/// `by_hand` the same layer written out of public ops, its heads merged in
/// f32 (the result widened, permuted, then cast again by the projection).
std::vector<Tensor> multi_head_case(vkt::Graph& g, bool by_hand) {
  const Tensor x = g.input("x", {2, 5, 8});
  Tensor y;
  if (by_hand) {
    const Tensor projected = vkt::layers::dense(x, 24, vkt::layers::Activation::None, "attn/qkv");
    const std::vector<Tensor> qkv = vkt::split(
        vkt::permute(vkt::reshape(projected, {2, 5, 3, 2, 4}), {2, 0, 3, 1, 4}), {1, 1, 1}, 0);
    const auto heads = [](const Tensor& t) { return vkt::reshape(t, {2, 2, 5, 4}); };
    const Tensor o =
        vkt::scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]),
                                          {.causal = true, .kernel = vkt::AttentionKernel::Fused});
    y = vkt::layers::dense(vkt::reshape(vkt::permute(o, {0, 2, 1, 3}), {2, 5, 8}), 8,
                           vkt::layers::Activation::None, "attn/out");
  } else {
    y = vkt::layers::multi_head_attention(
        x, 2, {.causal = true, .kernel = vkt::AttentionKernel::Fused}, "attn");
  }
  const Tensor c = g.constant(y.shape(), vkt::test::random_floats(y.shape().elements(), 28));
  std::vector<Tensor> wrt{x};
  for (const Tensor& v : g.trainable_variables()) wrt.push_back(v);
  std::vector<Tensor> out{y};
  for (const vkt::Gradient& d : vkt::gradients(vkt::reduce_sum(y * c), wrt)) {
    out.push_back(d.dense);
  }
  return out;
}

}  // namespace

TEST_CASE(
    "where the fused attention writes its result in half, multi_head_attention merges the heads "
    "in half, with the bits of the merge in f32") {
  const vkt::test::VariantScope tiled("tiled");
  const std::map<std::string, std::vector<float>> feeds{
      {"x", vkt::test::random_floats(2 * 5 * 8, 29, -2.0f, 2.0f)}};
  for (const DType half : {DType::F16, DType::BF16}) {
    INFO(vkt::to_string(half));
    vkt::Graph layer(vkt::test::shared_device(), {.precision = policy_of(half)});
    vkt::Graph by_hand(vkt::test::shared_device(), {.precision = policy_of(half)});
    const std::vector<Tensor> fetches = multi_head_case(layer, false);
    // The result's permutes (forward, and back in the backward pass) move
    // half words, and no f32 copy of the result is permuted.
    int half_permutes = 0, f32_permutes = 0;
    for (const vkt::Node& node : layer.nodes()) {
      if (node.op->type() != "permute") continue;
      (node.output.dtype() == half ? half_permutes : f32_permutes) += 1;
    }
    CHECK(half_permutes == 2);
    CHECK(f32_permutes == 2);  // the projection's heads moved out, and back
    const auto got = run_case(layer, fetches, feeds);
    const auto want = run_case(by_hand, multi_head_case(by_hand, true), feeds);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("output " << i);
      CHECK(float_bits(got[i]) == float_bits(want[i]));
    }
  }
}
