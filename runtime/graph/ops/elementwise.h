#pragma once
// Elementwise ops: arithmetic with NumPy broadcasting, math and activations.

#include "../tensor.h"

namespace vkt {

/// a + b, a - b, a * b, a / b, max(a, b), min(a, b) with broadcasting ([N,D] with
/// [D], with [N,1], with a scalar...). Shapes that do not broadcast are a
/// vkt::Error naming the op and both shapes.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
/// a / b, and 0 where b == 0 (TensorFlow's div_no_nan).
Tensor div_no_nan(const Tensor& a, const Tensor& b);
/// 1.0 where the comparison holds, else 0.0. No gradient flows through them.
Tensor greater_equal(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor equal(const Tensor& a, const Tensor& b);
Tensor not_equal(const Tensor& a, const Tensor& b);
/// a where `condition` is nonzero, else b, with broadcasting (all f32; the
/// comparisons above make conditions). A select: an infinity or NaN in the
/// branch not taken stays out, which makes masks such as -inf above the
/// diagonal safe. Gradients: dy to a where taken, to b elsewhere; none to the
/// condition.
///
///   vkt::Tensor masked = vkt::where(keep, scores, g.scalar(-INFINITY));
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
/// `x` repeated along the dimensions where `shape` is larger (x must broadcast to it).
Tensor broadcast_to(const Tensor& x, const Shape& shape);
/// The sum of `x` over the dimensions it was broadcast along to reach its shape
/// from `shape` (the gradient of a broadcast).
Tensor sum_to(const Tensor& x, const Shape& shape);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, float b);
Tensor operator-(const Tensor& a, float b);
Tensor operator*(const Tensor& a, float b);
Tensor operator*(float a, const Tensor& b);
Tensor operator/(const Tensor& a, float b);
Tensor operator-(const Tensor& a);

Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor square(const Tensor& x);
/// x^c for a constant c (negative x only for integer c).
Tensor pow(const Tensor& x, float c);
Tensor relu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, float alpha = 0.2f);
Tensor elu(const Tensor& x, float alpha = 1.0f);
/// GELU's two forms: Erf, the exact x Phi(x) = 0.5 x (1 + erf(x / sqrt 2))
/// (PyTorch's default), and Tanh, the approximation 0.5 x (1 + tanh(sqrt(2/pi)
/// (x + 0.044715 x^3))) (TensorFlow's approximate=True, GPT-2's).
enum class GeluForm { Tanh, Erf };
/// GELU; the tanh form unless told otherwise.
///
///   vkt::Tensor h = vkt::gelu(x, vkt::GeluForm::Erf);
Tensor gelu(const Tensor& x, GeluForm form = GeluForm::Tanh);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
/// log(1 + exp(x)), computed without overflow.
Tensor softplus(const Tensor& x);
/// SiLU (swish), x * sigmoid(x), as Llama's MLP applies it; its gradient is
/// sigmoid(x) (1 + x (1 - sigmoid(x))).
///
///   vkt::Tensor h = vkt::silu(x);
Tensor silu(const Tensor& x);
/// silu(gate) * up, the gated unit of Llama's MLP (Shazeer's SwiGLU): gate and
/// up the two projections of one input, of the same shape (no broadcasting).
/// Two ops, silu and mul, so a fused elementwise chain records them as one.
///
///   vkt::Tensor h = vkt::swiglu(gate_proj(x), up_proj(x));  // then down_proj(h)
Tensor swiglu(const Tensor& gate, const Tensor& up);
/// -1, 0 or 1. No gradient.
Tensor sign(const Tensor& x);
/// A copy of x in its own memory.
Tensor identity(const Tensor& x);

}  // namespace vkt
