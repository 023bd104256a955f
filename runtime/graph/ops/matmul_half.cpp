// matmul of f16 or bf16 matrices (shaders/matmul_half.comp): the scalar half
// kernel, f32 sums rounded once to the operands' type.
#include <fmt/format.h>

#include "../../vulkan/device.h"
#include "../../vulkan/error.h"
#include "../graph.h"
#include "batch_matmul.h"
#include "cast.h"
#include "kernel_util.h"
#include "matmul.h"

namespace vkt {
namespace {

struct HalfMatmulPush {
  std::uint32_t m, n, k;
};

constexpr std::uint32_t kTile = 16;  // matmul_half.comp's output tile

/// How a user names the type in code, for messages.
const char* dtype_name(DType dtype) {
  return dtype == DType::F16 ? "vkt::DType::F16" : "vkt::DType::BF16";
}

class HalfMatmulOp final : public Op {
 public:
  HalfMatmulOp(bool transpose_a, bool transpose_b) : ta_(transpose_a), tb_(transpose_b) {}
  std::string type() const override { return "matmul"; }
  bool takes_half() const override { return true; }

  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const auto m = static_cast<std::uint32_t>(out.shape()[0]);
    const auto n = static_cast<std::uint32_t>(out.shape()[1]);
    const auto k = static_cast<std::uint32_t>(in[0].shape()[ta_ ? 0 : 1]);
    const Kernel& kernel = ctx.device().kernel(
        {.shader = "matmul_half",
         .constants = {SpecConstant::u32(0, out.dtype() == DType::F16 ? 1u : 2u),
                       SpecConstant::u32(1, ta_ ? 1u : 0u), SpecConstant::u32(2, tb_ ? 1u : 0u)}});
    ctx.stream().dispatch(kernel, {ctx.buffer(in[0]), ctx.buffer(in[1]), ctx.buffer(out)},
                          HalfMatmulPush{m, n, k},
                          Groups{(n + kTile - 1) / kTile, (m + kTile - 1) / kTile, 1});
  }

  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    return matmul_detail::matmul_gradients(in[0], in[1], dy, ta_, tb_);
  }

 private:
  bool ta_, tb_;
};

}  // namespace

Tensor matmul_detail::half_matmul(const Tensor& a, const Tensor& b, bool transpose_a,
                                  bool transpose_b, const std::string& what) {
  if (&a.graph() != &b.graph()) {
    throw Error(
        fmt::format("{}: '{}' and '{}' belong to different graphs (devices); copy one "
                    "across first",
                    what, a.name(), b.name()));
  }
  if (a.dtype() != b.dtype()) {
    throw Error(fmt::format(
        "{}: '{}' holds {} values and '{}' {}; cast both to one type (vkt::cast(x, {}))", what,
        a.name(), to_string(a.dtype()), b.name(), to_string(b.dtype()),
        dtype_name(is_half(a.dtype()) ? a.dtype() : b.dtype())));
  }
  const DeviceInfo& device = a.graph().device().info();
  if (!device.storage_16bit) {
    throw Error(fmt::format(
        "{}: {} matmul needs 16-bit storage buffers (storageBuffer16BitAccess), which device "
        "{} ({}) does not offer; compute in f32 there",
        what, to_string(a.dtype()), device.index, device.name));
  }
  if (a.shape().rank() != 2 || b.shape().rank() != 2) {
    throw Error(fmt::format(
        "{}: {} matmul takes matrices (rank 2), got {} x {}; reshape them, or cast to f32 for "
        "batched products",
        what, to_string(a.dtype()), a.shape().str(), b.shape().str()));
  }
  const std::int64_t m = a.shape()[transpose_a ? 1 : 0], ka = a.shape()[transpose_a ? 0 : 1];
  const std::int64_t kb = b.shape()[transpose_b ? 1 : 0], n = b.shape()[transpose_b ? 0 : 1];
  if (ka != kb) {
    throw Error(fmt::format(
        "{}: inner dimensions differ: {}{} x {}{} ({} vs {}); the columns of the left operand "
        "must match the rows of the right one",
        what, a.shape().str(), transpose_a ? "^T" : "", b.shape().str(), transpose_b ? "^T" : "",
        ka, kb));
  }
  // Where matmuls take the texel kernel (CPU devices): the operands widened
  // to f32 (exact), that kernel's f32 sums, one rounding to the half type:
  // the half kernel's arithmetic (in the texel kernel's summation order) at
  // the f32 kernel's speed; matmul_half.comp's barriers are slow on a CPU.
  if (matmul_variant(a.graph().device()) == MatmulVariant::Texel) {
    return cast(f32_matmul(cast(a, DType::F32), cast(b, DType::F32), transpose_a, transpose_b),
                a.dtype());
  }
  return a.graph().add_node(std::make_unique<HalfMatmulOp>(transpose_a, transpose_b), {a, b},
                            Shape{m, n}, a.dtype());
}

}  // namespace vkt
