#pragma once
// A stretch of a graph built under another precision policy than the graph's.

#include <string>

#include "graph.h"

namespace vkt {

/// While it lives, the ops built on `graph` compute under `precision` instead
/// of the graph's policy (GraphOptions::precision), and so do their gradients,
/// whenever they are built: Keras' dtype="float32" on one layer of a mixed
/// model, or PyTorch's autocast(enabled=False) around a numerically delicate
/// stretch; a half precision opens a half stretch in an f32 graph. Scopes
/// nest, and the policy in effect before comes back when one goes. Loss
/// scaling follows ReplicateOptions, not scopes: an f32 model with an fp16
/// stretch asks for it (ReplicateOptions::loss_scaling = Dynamic).
///
///   vkt::Graph g(device, {.precision = vkt::Precision::F16});
///   vkt::Tensor h = vkt::layers::dense(x, 256, vkt::layers::Activation::Relu);  // fp16 product
///   vkt::Tensor logits;
///   {
///     vkt::PrecisionScope keep_f32(g, vkt::Precision::F32);
///     logits = vkt::layers::dense(h, 10);  // f32 product, and f32 gradients
///   }
class PrecisionScope {
 public:
  /// A half `precision` on a device without 16-bit storage buffers is a
  /// vkt::Error, and the graph's policy stays as it was.
  PrecisionScope(Graph& graph, Precision precision);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Graph& graph_;
  Precision before_;
};

/// Throws a vkt::Error naming `what`, the device and the missing feature when
/// `precision` is half and `device` has no 16-bit storage buffers, which the
/// half kernels read and write.
void check_precision_device(const Device& device, Precision precision, const std::string& what);

}  // namespace vkt
