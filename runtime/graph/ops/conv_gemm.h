#pragma once
// Internal to the conv2d ops: a convolution's geometry and the implicit-GEMM
// kernels that compute it and its two gradients (conv_gemm.cpp).

#include <cstdint>
#include <optional>
#include <string>

#include "../op.h"
#include "../tensor.h"
#include "matmul_tiles.h"

namespace vkt::conv_detail {

/// A convolution in forward terms: x [batch, in_h, in_w, in_c], filter [k_h,
/// k_w, in_c / groups, out_c], y [batch, out_h, out_w, out_c]. Made by conv2d
/// after every check, so every element index of the three fits an int32.
struct ConvGeometry {
  std::int64_t batch = 1, in_h = 1, in_w = 1, in_c = 1;
  std::int64_t out_h = 1, out_w = 1, out_c = 1;
  std::int64_t k_h = 1, k_w = 1, groups = 1;
  std::int64_t stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  std::int64_t pad_top = 0, pad_left = 0;

  std::int64_t group_c() const { return in_c / groups; }
  std::int64_t group_o() const { return out_c / groups; }
  /// "5x5 stride 2x2 dilation 1x1 groups 1", for names in messages.
  std::string str() const;
};

/// The three GEMMs (numbers as the shaders' CONV_GEMM / CONV_MODE):
///   Forward:        y  = im2col(x) x filter
///   BackpropInput:  dx = dy's transposed-convolution view x filter (read as [taps * Og, Cg])
///   BackpropFilter: dfilter = im2col(x)^T x dy
enum class ConvGemm : std::uint32_t { Forward = 0, BackpropInput = 1, BackpropFilter = 2 };

/// The element types of a GEMM's two operands: f32, or half (f16, bf16) where
/// the precision policy stores them in half.
struct OperandTypes {
  DType a = DType::F32, b = DType::F32;
};

/// Records `gemm` with `a` and `b` its operands (x and filter, dy and filter, x
/// and dy) into `c`, with the texel or the tiled kernel as matmul_variant() says.
/// With a KSplit (the tiled kernel only), `c` receives the partial sums, one
/// copy of the output per slice of k. Half operands take the tiled kernel,
/// which widens them as it reads them; `c` is f32.
void record_conv_gemm(RecordContext& ctx, ConvGemm gemm, const ConvGeometry& g,
                      const BufferRange& a, const BufferRange& b, const BufferRange& c,
                      const KSplit& split = {}, OperandTypes types = {});

/// The split of `gemm`'s k on `device` (split_k over the whole output, every
/// group's columns together; none on the texel kernel).
KSplit split_conv_gemm(const Device& device, ConvGemm gemm, const ConvGeometry& g);

/// The gradients of conv2d as ops of their own (conv_backprop.cpp): dx from dy
/// [batch, out_h, out_w, out_c] and the filter; dfilter from x and dy.
Tensor conv2d_backprop_input(const Tensor& dy, const Tensor& filter, const ConvGeometry& g);
Tensor conv2d_backprop_filter(const Tensor& x, const Tensor& dy, const ConvGeometry& g);

/// dx at stride 1 as conv2d(dy, the filter flipped and its channels swapped),
/// on the faster forward kernel (conv_flip.cpp); nothing where the stride is
/// not 1 or the padding passes the window (then conv2d_backprop_input).
std::optional<Tensor> conv2d_input_gradient_as_forward(const Tensor& dy, const Tensor& filter,
                                                       const ConvGeometry& g);

}  // namespace vkt::conv_detail
