#pragma once
// A chain of elementwise ops recorded as one kernel (shaders/elementwise_chain.comp):
// the Executor's fusion (fused_program) finds the chains, this records them.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "../op.h"

namespace vkt {

struct Node;

namespace ops_detail {

/// The most ops and the most other tensors one fused chain takes.
constexpr std::size_t kChainSteps = 8;
constexpr std::size_t kChainInputs = 4;
/// The most links before the last whose values a chain also writes.
constexpr std::size_t kChainStores = 2;
/// ElementwiseStep::code of binary op k (shaders/elementwise.glsl).
constexpr std::uint32_t kBinaryStepCode = 32;
/// ElementwiseStep::code of the unary steps cast takes (elementwise.glsl;
/// UnaryKind's Identity, RoundF16 and RoundBF16).
constexpr std::uint32_t kIdentityStepCode = 15;
constexpr std::uint32_t kRoundF16StepCode = 17;
constexpr std::uint32_t kRoundBF16StepCode = 18;
/// ElementwiseStep::code of unary op k's gradient dy * f'(t) over {t, dy},
/// where f' reads one forward tensor t (shaders/unary_grad.glsl).
constexpr std::uint32_t kUnaryGradStepCode = 64;

/// The distinct tensors `chain` reads that none of its nodes computes, in the
/// order it first reads them. `chain`: elementwise nodes (Op::elementwise_step),
/// each after the first reading the output of the one before it.
std::vector<Tensor> chain_inputs(std::span<const Node* const> chain);

/// Whether the inputs `chain` reads by broadcast fold into the kernel's 4
/// dims (rank up to 6 usually does; see fold_axes.h).
bool chain_indexable(std::span<const Node* const> chain);

/// Records `chain` (at most kChainSteps nodes over at most kChainInputs
/// chain_inputs) as one dispatch writing its last node's output and the
/// outputs of the nodes `stored` (at most kChainStores; positions in `chain`);
/// the other nodes' outputs are not written.
void record_elementwise_chain(RecordContext& ctx, std::span<const Node* const> chain,
                              std::span<const std::size_t> stored);

}  // namespace ops_detail
}  // namespace vkt
