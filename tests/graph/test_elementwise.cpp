// Forward values and gradients of the elementwise ops, the reductions and
// reshape, against double-precision CPU references (see op_check.h).
#include <fmt/format.h>

#include <vktower/runtime/graph/ops/shape_ops.h>

#include "../test_support.h"
#include "op_check.h"

using Catch::Matchers::Contains;
using vkt::Shape;
using vkt::Tensor;
using vkt::test::OpSpec;
using vkt::test::Values;

namespace {

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> build;
  std::function<double(double)> f;
  std::pair<double, double> range{-2.0, 2.0};
};

double sigmoid_ref(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {"neg", [](const Tensor& x) { return vkt::neg(x); }, [](double x) { return -x; }},
      {"abs", [](const Tensor& x) { return vkt::abs(x); }, [](double x) { return std::abs(x); }},
      {"exp", [](const Tensor& x) { return vkt::exp(x); }, [](double x) { return std::exp(x); }},
      {"log",
       [](const Tensor& x) { return vkt::log(x); },
       [](double x) { return std::log(x); },
       {0.1, 3.0}},
      {"sqrt",
       [](const Tensor& x) { return vkt::sqrt(x); },
       [](double x) { return std::sqrt(x); },
       {0.1, 3.0}},
      {"square", [](const Tensor& x) { return vkt::square(x); }, [](double x) { return x * x; }},
      {"pow 3", [](const Tensor& x) { return vkt::pow(x, 3.0f); },
       [](double x) { return x * x * x; }},
      {"pow 1.5",
       [](const Tensor& x) { return vkt::pow(x, 1.5f); },
       [](double x) { return std::pow(x, 1.5); },
       {0.1, 3.0}},
      {"relu", [](const Tensor& x) { return vkt::relu(x); },
       [](double x) { return std::max(x, 0.0); }},
      {"leaky_relu", [](const Tensor& x) { return vkt::leaky_relu(x, 0.1f); },
       [](double x) { return x >= 0 ? x : 0.1 * x; }},
      {"elu", [](const Tensor& x) { return vkt::elu(x, 0.7f); },
       [](double x) { return x > 0 ? x : 0.7 * (std::exp(x) - 1); }},
      {"gelu", [](const Tensor& x) { return vkt::gelu(x); },
       [](double x) {
         return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
       }},
      {"gelu erf",
       [](const Tensor& x) { return vkt::gelu(x, vkt::GeluForm::Erf); },
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); },
       {-5, 5}},
      {"sigmoid", [](const Tensor& x) { return vkt::sigmoid(x); }, sigmoid_ref, {-8, 8}},
      {"tanh",
       [](const Tensor& x) { return vkt::tanh(x); },
       [](double x) { return std::tanh(x); },
       {-5, 5}},
      {"softplus",
       [](const Tensor& x) { return vkt::softplus(x); },
       [](double x) { return std::log1p(std::exp(x)); },
       {-8, 8}},
      {"silu",
       [](const Tensor& x) { return vkt::silu(x); },
       [](double x) { return x * sigmoid_ref(x); },
       {-8, 8}},
  };
  return cases;
}

}  // namespace

TEST_CASE("unary ops: forward and gradient against the CPU reference") {
  const std::int64_t n = GENERATE(1, 7, 33, 127, 1000);
  for (const UnaryCase& c : unary_cases()) {
    OpSpec spec{
        .name = std::string(c.name) + " on " + std::to_string(n),
        .shapes = {Shape{n}},
        .build = [&](const std::vector<Tensor>& in) { return c.build(in[0]); },
        .reference =
            [&](const std::vector<Values>& in) {
              Values out(in[0].size());
              for (std::size_t i = 0; i < out.size(); ++i) out[i] = c.f(in[0][i]);
              return out;
            },
        .ranges = {c.range},
    };
    vkt::test::check_op(spec, static_cast<std::uint32_t>(n));
  }
}

TEST_CASE(
    "the elementwise vec4 kernels (a multiple of 4 elements) give the scalar kernels' bits: unary "
    "ops with their gradients and a same-shape product") {
  constexpr std::int64_t kVec4 = 1024;
  // y = f(x), dx of sum(y * w): on kVec4 elements every kernel takes vec4s;
  // on one more, none does. The first kVec4 elements must agree bit for bit.
  const auto run = [](const UnaryCase& c, std::int64_t n) {
    vkt::Graph g(vkt::test::shared_device());
    const Tensor x = g.input("x", {n});
    const Tensor y = c.build(x);
    const std::vector<float> ws = vkt::test::random_floats(kVec4 + 1, 5);
    const Tensor w = g.constant({n}, std::span(ws).first(static_cast<std::size_t>(n)));
    const Tensor dx = vkt::gradients(vkt::reduce_sum(y * w), {x})[0].dense;
    vkt::Executor exec(g, {y, dx}, {.fuse = false});
    const std::vector<float> xs = vkt::test::random_floats(
        kVec4 + 1, 6, static_cast<float>(c.range.first), static_cast<float>(c.range.second));
    exec.feed("x", std::span(xs).first(static_cast<std::size_t>(n)));
    exec.run();
    std::vector<float> ys = exec.read(y), dxs = exec.read(dx);
    ys.resize(kVec4);
    dxs.resize(kVec4);
    return std::pair{ys, dxs};
  };
  for (const UnaryCase& c : unary_cases()) {
    INFO(c.name);
    const auto vec4 = run(c, kVec4), scalar = run(c, kVec4 + 1);
    CHECK(vec4.first == scalar.first);
    CHECK(vec4.second == scalar.second);
  }
}

namespace {

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> build;
  std::function<double(double, double)> f;
  std::pair<double, double> b_range{-1.0, 1.0};
};

const std::vector<BinaryCase>& binary_cases() {
  static const std::vector<BinaryCase> cases = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; },
       [](double a, double b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; },
       [](double a, double b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; },
       [](double a, double b) { return a * b; }},
      {"div",
       [](const Tensor& a, const Tensor& b) { return a / b; },
       [](double a, double b) { return a / b; },
       {0.5, 2.0}},
      {"div_no_nan",
       [](const Tensor& a, const Tensor& b) { return vkt::div_no_nan(a, b); },
       [](double a, double b) { return b == 0 ? 0 : a / b; },
       {0.5, 2.0}},
      {"maximum", [](const Tensor& a, const Tensor& b) { return vkt::maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return vkt::minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }},
  };
  return cases;
}

Values broadcast_reference(const std::function<double(double, double)>& f, const Values& a,
                           const Shape& sa, const Values& b, const Shape& sb) {
  const Shape out = vkt::broadcast_shapes(sa, sb, "reference");
  Values r(static_cast<std::size_t>(out.elements()));
  for (std::int64_t j = 0; j < out.elements(); ++j) {
    const auto c = vkt::test::coords(j, out);
    r[static_cast<std::size_t>(j)] =
        f(vkt::test::at_broadcast(a, sa, c), vkt::test::at_broadcast(b, sb, c));
  }
  return r;
}

}  // namespace

TEST_CASE("binary ops with broadcasting: forward and gradient against the CPU reference") {
  const auto shapes = GENERATE(std::pair{Shape{7, 33}, Shape{7, 33}},         // same shape
                               std::pair{Shape{7, 33}, Shape{33}},            // [N,D] with [D]
                               std::pair{Shape{7, 33}, Shape{7, 1}},          // [N,D] with [N,1]
                               std::pair{Shape{127}, Shape{}},                // with a scalar
                               std::pair{Shape{}, Shape{5, 3}},               // scalar first
                               std::pair{Shape{4, 1}, Shape{1, 6}},           // outer broadcast
                               std::pair{Shape{2, 3, 1, 5}, Shape{3, 4, 1}},  // rank 4
                               std::pair{Shape{2, 1, 3, 4, 5}, Shape{1, 3, 3, 4, 5}},
                               std::pair{Shape{2, 3, 1, 2, 2, 3}, Shape{3, 2, 2, 1}});  // rank 6
  for (const BinaryCase& c : binary_cases()) {
    OpSpec spec{
        .name = std::string(c.name) + " " + shapes.first.str() + " " + shapes.second.str(),
        .shapes = {shapes.first, shapes.second},
        .build = [&](const std::vector<Tensor>& in) { return c.build(in[0], in[1]); },
        .reference =
            [&](const std::vector<Values>& in) {
              return broadcast_reference(c.f, in[0], shapes.first, in[1], shapes.second);
            },
        .ranges = {{-1.0, 1.0}, c.b_range},
    };
    vkt::test::check_op(spec, 3);
  }
}

TEST_CASE(
    "rank 5: a chain whose broadcasts fold past 4 axes runs op by op, and one op past 4 "
    "is refused") {
  // x + p alone folds to 4 axes, (.) * q alone to 3, but p and q together
  // alternate 5 times: the fused chain kernel cannot index them.
  const Shape sx{2, 2, 2, 2, 2}, sp{2, 1, 2, 1, 1}, sq{2, 2, 1, 1, 2};
  const OpSpec spec{
      .name = "(x + p) * q",
      .shapes = {sx, sp, sq},
      .build = [](const std::vector<Tensor>& in) { return (in[0] + in[1]) * in[2]; },
      .reference =
          [&](const std::vector<Values>& in) {
            Values r(static_cast<std::size_t>(sx.elements()));
            for (std::int64_t j = 0; j < sx.elements(); ++j) {
              const auto c = vkt::test::coords(j, sx);
              r[static_cast<std::size_t>(j)] =
                  (in[0][static_cast<std::size_t>(j)] + vkt::test::at_broadcast(in[1], sp, c)) *
                  vkt::test::at_broadcast(in[2], sq, c);
            }
            return r;
          }};
  vkt::test::check_op(spec, 4);

  vkt::Graph g(vkt::test::shared_device());
  const Tensor a = g.input("a", {2, 1, 2, 1, 2}), b = g.input("b", {2, 2, 2, 2, 2});
  CHECK_THAT(vkt::test::error_of([&] { vkt::add(a, b); }),
             Contains("add('a', 'b'): [2, 1, 2, 1, 2] and [2, 2, 2, 2, 2] broadcast to") &&
                 Contains("merge adjacent axes with a reshape"));
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::sum_to(b, Shape{2, 1, 2, 1, 2});
             }),
             Contains("sum_to('b', [2, 1, 2, 1, 2])") && Contains("merge adjacent axes"));
}

TEST_CASE("comparison ops give 0/1 masks and pass no gradient") {
  vkt::Device& device = vkt::test::shared_device();
  vkt::Graph g(device);
  const Tensor a = g.input("a", {4});
  const Tensor b = g.input("b", {4});
  const Tensor ge = vkt::greater_equal(a, b), gt = vkt::greater(a, b), eq = vkt::equal(a, b),
               ne = vkt::not_equal(a, b);
  const Tensor loss = vkt::reduce_sum(ge * a + gt * b);
  const auto grads = vkt::gradients(loss, {a, b});
  vkt::Executor exec(g, {ge, gt, eq, ne, grads[0].dense, grads[1].dense});
  exec.feed("a", std::vector<float>{1, 2, 3, 4});
  exec.feed("b", std::vector<float>{2, 2, 2, 5});
  exec.run();
  CHECK(exec.read(ge) == std::vector<float>{0, 1, 1, 0});
  CHECK(exec.read(gt) == std::vector<float>{0, 0, 1, 0});
  CHECK(exec.read(eq) == std::vector<float>{0, 1, 0, 0});
  CHECK(exec.read(ne) == std::vector<float>{1, 0, 1, 1});
  // Only through the multiplications: d/da = ge, d/db = gt.
  CHECK(exec.read(grads[0].dense) == std::vector<float>{0, 1, 1, 0});
  CHECK(exec.read(grads[1].dense) == std::vector<float>{0, 0, 1, 0});
}

namespace {

// Reference reduction over one axis (keepdims layout) or all (axis = -99).
Values reduce_reference(const Values& x, const Shape& s, int axis, bool max) {
  const auto d = vkt::test::padded(s);
  constexpr int kRank = vkt::test::kRefRank;
  const int a = axis == -99 ? -1 : kRank - s.rank() + (axis < 0 ? axis + s.rank() : axis);
  std::vector<std::int64_t> od = d;
  if (a < 0)
    od.assign(kRank, 1);
  else
    od[a] = 1;
  std::int64_t n_out = 1;
  for (const std::int64_t n : od) n_out *= n;
  Values out(static_cast<std::size_t>(n_out), max ? -INFINITY : 0.0);
  for (std::int64_t j = 0; j < s.elements(); ++j) {
    const auto c = vkt::test::coords(j, s);
    std::int64_t o = 0;
    for (int i = 0; i < kRank; ++i) o = o * od[i] + (od[i] == 1 ? 0 : c[i]);
    double& slot = out[static_cast<std::size_t>(o)];
    slot = max ? std::max(slot, x[static_cast<std::size_t>(j)])
               : slot + x[static_cast<std::size_t>(j)];
  }
  return out;
}

}  // namespace

TEST_CASE("reductions over all elements and over one axis") {
  // [300, 3] and [260, 2, 3] over axis 0 (and 1000 over all) take reduce_rows.comp;
  // rank 6 folds its axes into the kernel's 4.
  const Shape shape = GENERATE(Shape{1000}, Shape{7, 33}, Shape{3, 5, 4}, Shape{1, 127},
                               Shape{300, 3}, Shape{260, 2, 3}, Shape{2, 3, 1, 2, 2, 3});
  const int rank = shape.rank();
  std::vector<int> axes{-99};
  for (int a = 0; a < rank; ++a) axes.push_back(a);
  axes.push_back(-1);
  for (int axis : axes) {
    for (int kind = 0; kind < 3; ++kind) {  // sum, mean, max
      for (bool keepdims : {false, true}) {
        if (axis == -99 && keepdims) continue;
        const char* names[] = {"reduce_sum", "reduce_mean", "reduce_max"};
        OpSpec spec{
            .name =
                fmt::format("{} {} axis {} keepdims {}", names[kind], shape.str(), axis, keepdims),
            .shapes = {shape},
            .build =
                [&](const std::vector<Tensor>& in) {
                  if (axis == -99) {
                    return kind == 0   ? vkt::reduce_sum(in[0])
                           : kind == 1 ? vkt::reduce_mean(in[0])
                                       : vkt::reduce_max(in[0]);
                  }
                  return kind == 0   ? vkt::reduce_sum(in[0], axis, keepdims)
                         : kind == 1 ? vkt::reduce_mean(in[0], axis, keepdims)
                                     : vkt::reduce_max(in[0], axis, keepdims);
                },
            .reference =
                [&](const std::vector<Values>& in) {
                  Values r = reduce_reference(in[0], shape, axis, kind == 2);
                  if (kind == 1) {
                    const double count = axis == -99
                                             ? static_cast<double>(shape.elements())
                                             : static_cast<double>(shape[shape.axis(axis, "")]);
                    for (double& v : r) v /= count;
                  }
                  return r;
                },
            .forward_tolerance = 1e-5,
        };
        vkt::test::check_op(spec, 5);
      }
    }
  }
}

TEST_CASE("reshape shares memory and passes the gradient through") {
  OpSpec spec{
      .name = "reshape [6,4] -> [3,8] then square",
      .shapes = {Shape{6, 4}},
      .build =
          [](const std::vector<Tensor>& in) {
            return vkt::square(vkt::reshape(in[0], {3, 8}));
          },
      .reference =
          [](const std::vector<Values>& in) {
            Values r(in[0]);
            for (double& v : r) v *= v;
            return r;
          },
  };
  vkt::test::check_op(spec);
}
