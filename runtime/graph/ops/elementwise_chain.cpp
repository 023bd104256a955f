// An elementwise chain as one dispatch of shaders/elementwise_chain.comp.
#include "elementwise_chain.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "fold_axes.h"
#include "kernel_util.h"

namespace vkt::ops_detail {
namespace {

constexpr std::uint32_t kItself = 4;          // the other operand is the running value
constexpr std::uint32_t kSwapped = 1u << 11;  // binary(other, v)

struct ChainPush {
  std::uint32_t n, pad[3];
  std::array<std::uint32_t, 4> dims;
  std::array<std::array<std::uint32_t, 4>, kChainInputs> strides;
  std::array<float, kChainSteps> alphas;
};
static_assert(sizeof(ChainPush) == 128, "the push constants every device takes");

/// How elementwise_chain.comp reads input `t` for output shape `out`: its
/// 2-bit mode (0 the same shape, 1 a repeating suffix read by its length, 2
/// strides over the chain's folded dims).
std::uint32_t read_mode(const Shape& t, const Shape& out) {
  if (t == out) return 0;
  // A repeating suffix: t without its leading 1s is the trailing part of out.
  int first = 0;
  while (first < t.rank() && t[first] == 1) ++first;
  const int kept = t.rank() - first;
  bool suffix = kept <= out.rank();
  for (int i = 0; suffix && i < kept; ++i) suffix = t[first + i] == out[out.rank() - kept + i];
  return suffix ? 1 : 2;
}

/// elementwise_chain.comp's element type codes.
std::uint32_t type_code(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::BF16:
      return 2;
    default:
      throw Error(fmt::format("internal: an elementwise chain over a {} tensor", to_string(dtype)));
  }
}

/// The shapes of the inputs read by strides (mode 2), which share one fold of out.
std::vector<Shape> strided_shapes(const std::vector<Tensor>& inputs, const Shape& out) {
  std::vector<Shape> shapes;
  for (const Tensor& t : inputs) {
    if (read_mode(t.shape(), out) == 2) shapes.push_back(t.shape());
  }
  return shapes;
}

}  // namespace

bool chain_indexable(std::span<const Node* const> chain) {
  const Shape& out = chain.back()->output.shape();
  return fold_broadcast(out, strided_shapes(chain_inputs(chain), out)).has_value();
}

std::vector<Tensor> chain_inputs(std::span<const Node* const> chain) {
  std::vector<Tensor> inputs;
  for (std::size_t j = 0; j < chain.size(); ++j) {
    for (const Tensor& t : chain[j]->inputs) {
      const bool computed = j > 0 && t == chain[j - 1]->output;
      if (!computed && std::find(inputs.begin(), inputs.end(), t) == inputs.end()) {
        inputs.push_back(t);
      }
    }
  }
  return inputs;
}

void record_elementwise_chain(RecordContext& ctx, std::span<const Node* const> chain,
                              std::span<const std::size_t> stored) {
  const std::vector<Tensor> inputs = chain_inputs(chain);
  if (chain.empty() || chain.size() > kChainSteps || inputs.size() > kChainInputs ||
      stored.size() > kChainStores) {
    throw Error("internal: an elementwise chain past the fused kernel's limits");
  }
  const auto index_of = [&](const Tensor& t) {
    return static_cast<std::uint32_t>(std::find(inputs.begin(), inputs.end(), t) - inputs.begin());
  };
  const Tensor& out = chain.back()->output;
  ChainPush push{};
  push.n = static_cast<std::uint32_t>(out.shape().elements());
  const auto fold = fold_broadcast(out.shape(), strided_shapes(inputs, out.shape()));
  if (!fold) throw Error("internal: an elementwise chain past the fused kernel's 4 dims");
  push.dims = fold->dims;
  std::uint32_t modes = 0;
  for (std::size_t k = 0, strided = 0; k < inputs.size(); ++k) {
    const std::uint32_t mode = read_mode(inputs[k].shape(), out.shape());
    if (mode == 1) push.strides[k] = {static_cast<std::uint32_t>(inputs[k].shape().elements())};
    if (mode == 2) push.strides[k] = fold->strides[strided++];
    modes |= mode << (2 * k);
  }
  std::vector<SpecConstant> constants{
      SpecConstant::u32(1, static_cast<std::uint32_t>(chain.size())),
      SpecConstant::u32(2, index_of(chain[0]->inputs[0])), SpecConstant::u32(3, modes),
      SpecConstant::u32(14, static_cast<std::uint32_t>(inputs.size()))};
  for (std::size_t j = 0; j < chain.size(); ++j) {
    const Node& node = *chain[j];
    const ElementwiseStep step = *node.op->elementwise_step();
    std::uint32_t word = step.code;
    if (node.inputs.size() == 2) {
      // The running value: the first node's first input, else the last output.
      const Tensor v = j == 0 ? node.inputs[0] : chain[j - 1]->output;
      const bool swapped = node.inputs[0] != v;
      const Tensor& other = node.inputs[swapped ? 0 : 1];
      word |= (other == v ? kItself : index_of(other)) << 8;
      if (swapped) word |= kSwapped;
    }
    constants.push_back(SpecConstant::u32(static_cast<std::uint32_t>(4 + j), word));
    push.alphas[j] = step.alpha;
  }
  std::uint32_t stores = 0;
  std::array<BufferRange, kChainStores> store_to{ctx.buffer(out), ctx.buffer(out)};
  for (std::size_t k = 0; k < stored.size(); ++k) {
    stores |= static_cast<std::uint32_t>(k + 1) << (2 * stored[k]);
    store_to[k] = ctx.buffer(chain[stored[k]]->output);
  }
  constants.push_back(SpecConstant::u32(12, stores));
  // The tensors' element types; any half output makes each invocation two elements.
  std::uint32_t types = type_code(out.dtype()) << 8;
  for (std::size_t k = 0; k < inputs.size(); ++k) types |= type_code(inputs[k].dtype()) << (2 * k);
  for (std::size_t k = 0; k < stored.size(); ++k) {
    types |= type_code(chain[stored[k]]->output.dtype()) << (10 + 2 * k);
  }
  constants.push_back(SpecConstant::u32(13, types));
  const bool paired = (types >> 8) != 0;
  const std::int64_t n = out.shape().elements();
  const Kernel& kernel = ctx.device().kernel(
      {.shader = "elementwise_chain", .local_size = {kLocalSize, 1, 1}, .constants = constants});
  std::array<BufferRange, kChainInputs> bound;
  for (std::size_t k = 0; k < kChainInputs; ++k) {
    bound[k] = ctx.buffer(inputs[std::min(k, inputs.size() - 1)]);
  }
  dispatch_1d(ctx, kernel,
              {bound[0], bound[1], bound[2], bound[3], ctx.buffer(out), store_to[0], store_to[1]},
              push, paired ? (n + 1) / 2 : n);
}

}  // namespace vkt::ops_detail
