#pragma once
// Embedding lookup (gather rows by i32 ids) and the scatter-add that turns its
// sparse row gradient into a dense tensor.

#include <cstdint>

#include "../tensor.h"

namespace vkt {

/// Rows of `params` [V, D] (normally a variable) picked by `ids` (i32, any
/// rank up to 3): the result has shape [ids..., D], f32. An id outside [0, V)
/// gives a row of zeros (TensorFlow raises an error on the CPU; a shader
/// cannot, and must not read outside params) and its gradient is dropped.
///
/// A half table (f16 or bf16, such as a frozen half variable) gives its rows
/// widened to f32, exactly; so does a frozen half variable read through
/// `cast(table, F32)` or `layer_weight`, without widening the whole table.
///
/// The gradient with respect to params is sparse when params is a variable (or
/// an input or constant): Gradient{.values = dy as [k, D], .indices = ids as
/// [k]}, k = ids' element count, duplicates left in, so no dense [V, D] tensor
/// is made. When params is computed by other ops, they need a dense gradient,
/// so it is densified with scatter_add_dense.
///
///   vkt::Tensor table = g.variable("emb", {10000, 64}, vkt::Initializer::normal(0, 0.1f));
///   vkt::Tensor e = vkt::embedding_lookup(table, word_ids);   // [B, T] -> [B, T, 64]
Tensor embedding_lookup(const Tensor& params, const Tensor& ids);

/// A dense [rows, D] tensor: zeros, plus values[j] added to row indices[j] for
/// each j, duplicates summed in increasing j (the same bits on every run and
/// device). values is f32 [k, D], indices i32 [k]; indices outside [0, rows)
/// are dropped. Deterministic without float atomics: each invocation owns up
/// to 32 columns of one output row and scans all k indices, so the cost is
/// rows * ceil(D / 32) * k index comparisons plus k * D additions. Cheap for
/// small tables or few ids; for a large table and a large batch of ids prefer
/// applying the rows directly (as a sparse optimizer update does).
Tensor scatter_add_dense(const Tensor& values, const Tensor& indices, std::int64_t rows);

}  // namespace vkt
