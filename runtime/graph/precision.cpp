// The precision policy's names, and PrecisionScope.
#include <fmt/format.h>

#include "../vulkan/device.h"
#include "../vulkan/error.h"
#include "graph.h"
#include "precision_scope.h"

namespace vkt {

const char* to_string(Precision precision) {
  switch (precision) {
    case Precision::F32:
      return "fp32";
    case Precision::F16:
      return "fp16";
    case Precision::BF16:
      return "bf16";
  }
  return "?";
}

Precision parse_precision(const std::string& text, const std::string& what) {
  for (const Precision p : {Precision::F32, Precision::F16, Precision::BF16}) {
    if (text == to_string(p)) return p;
  }
  throw Error(fmt::format("{}: '{}' is not a precision; give fp32, fp16 or bf16", what, text));
}

DType compute_dtype(Precision precision) {
  return precision == Precision::F16    ? DType::F16
         : precision == Precision::BF16 ? DType::BF16
                                        : DType::F32;
}

void check_precision_device(const Device& device, Precision precision, const std::string& what) {
  if (precision == Precision::F32 || device.info().storage_16bit) return;
  const DeviceInfo& info = device.info();
  throw Error(fmt::format(
      "{} {}: device {} ({}) has no 16-bit storage buffers (storageBuffer16BitAccess), which {} "
      "products need; compute in fp32 there",
      what, to_string(precision), info.index, info.name, to_string(precision)));
}

PrecisionScope::PrecisionScope(Graph& graph, Precision precision)
    : graph_(graph), before_(graph.options_.precision) {
  check_precision_device(graph.device(), precision, "PrecisionScope");
  graph_.options_.precision = precision;
}

PrecisionScope::~PrecisionScope() {
  graph_.options_.precision = before_;
}

}  // namespace vkt
