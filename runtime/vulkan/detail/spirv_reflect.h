#pragma once
// Reads from a compute shader's SPIR-V what a pipeline needs (internal): its
// descriptor bindings, push-constant block size, specialization constants and
// workgroup size. Saves every kernel from declaring them by hand, and lets a
// dispatch with the wrong buffers or constants fail with a clear message.

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace vkt::detail {

enum class BindingKind { StorageBuffer, UniformBuffer, UniformTexelBuffer, StorageTexelBuffer };

struct ReflectedBinding {
  std::uint32_t set = 0;
  std::uint32_t binding = 0;
  BindingKind kind = BindingKind::StorageBuffer;
  bool read_only = false;  ///< declared readonly: the kernel never writes it
  std::string name;        ///< the block's type name (or the variable's), for messages
};

struct ReflectedShader {
  std::vector<ReflectedBinding> bindings;  ///< sorted by binding
  std::uint32_t push_constant_bytes = 0;
  std::vector<std::uint32_t> spec_ids;  ///< every SpecId the shader declares
  /// Workgroup size as compiled (LocalSize or the composite's defaults).
  std::array<std::uint32_t, 3> local_size{1, 1, 1};
  /// SpecIds that set the workgroup size (local_size_x_id etc.), if used.
  std::array<std::optional<std::uint32_t>, 3> local_size_ids;
};

/// Throws vkt::Error naming `shader` when the words are not a compute shader.
ReflectedShader reflect(std::span<const std::uint32_t> words, const std::string& shader);

}  // namespace vkt::detail
