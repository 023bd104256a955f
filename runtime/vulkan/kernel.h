#pragma once
// A compute pipeline built from an embedded shader.

#include <vulkan/vulkan_core.h>

#include <array>
#include <bit>
#include <cstdint>
#include <future>
#include <span>
#include <string>
#include <vector>

#include "detail/handle.h"
#include "detail/spirv_reflect.h"

namespace vkt {

class Device;

/// A specialization constant's value, stored as its 32-bit pattern.
struct SpecConstant {
  std::uint32_t id = 0;
  std::uint32_t bits = 0;

  static SpecConstant u32(std::uint32_t id, std::uint32_t v) { return {id, v}; }
  static SpecConstant i32(std::uint32_t id, std::int32_t v) {
    return {id, std::bit_cast<std::uint32_t>(v)};
  }
  static SpecConstant f32(std::uint32_t id, float v) {
    return {id, std::bit_cast<std::uint32_t>(v)};
  }
};

/// What Device::kernel() builds: a shader by name, its workgroup size (for
/// shaders that declare local_size_*_id; 0 keeps the shader's default) and any
/// other specialization constants (tile sizes, scales, ...).
struct KernelDesc {
  std::string shader;
  std::array<std::uint32_t, 3> local_size{0, 0, 0};
  std::vector<SpecConstant> constants{};

  std::string cache_key() const;
};

/// A compute pipeline with its descriptor set layout (one binding per buffer
/// the shader declares, in binding order) and push-constant range, all read from
/// the SPIR-V. Made and cached by Device::kernel(); used by Stream::dispatch().
/// The pipeline itself is built on the Device's PipelineBuilder threads: a
/// program's kernels compile side by side while its stream is recorded, and
/// vk_pipeline() waits for the one it needs (Stream binds pipelines only when
/// it ends its recording).
///
///   const vkt::Kernel& saxpy = device.kernel({.shader = "saxpy", .local_size = {256, 1, 1}});
class Kernel {
 public:
  /// Prefer Device::kernel(), which caches. Throws vkt::Error for an unknown
  /// shader, a constant the shader lacks, or a workgroup the device cannot run.
  Kernel(Device& device, const KernelDesc& desc);
  /// Waits for the pipeline's build (the worker writes into this object).
  ~Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  const std::string& name() const { return name_; }
  const std::vector<detail::ReflectedBinding>& bindings() const { return shader_.bindings; }
  std::uint32_t push_constant_bytes() const { return shader_.push_constant_bytes; }
  std::array<std::uint32_t, 3> local_size() const { return local_size_; }
  const Device& device() const { return *device_; }

  /// Waits until the pipeline is built; throws vkt::Error if its build failed.
  VkPipeline vk_pipeline() const;
  VkPipelineLayout vk_layout() const { return layout_.get(); }
  VkDescriptorSetLayout vk_set_layout() const { return set_layout_.get(); }

 private:
  /// The pipeline's build (on a PipelineBuilder thread).
  void build(VkDevice vk, VkPipelineCache cache, VkPipelineLayout layout,
             std::span<const std::uint32_t> words,
             const std::vector<VkSpecializationMapEntry>& entries,
             const std::vector<std::uint32_t>& data, std::uint32_t device_index);

  const Device* device_;
  std::string name_;
  detail::ReflectedShader shader_;
  std::array<std::uint32_t, 3> local_size_{};
  detail::DeviceHandle<VkDescriptorSetLayout, vkDestroyDescriptorSetLayout> set_layout_;
  detail::DeviceHandle<VkPipelineLayout, vkDestroyPipelineLayout> layout_;
  detail::DeviceHandle<VkPipeline, vkDestroyPipeline> pipeline_;  // written by the build
  std::shared_future<void> built_;
};

}  // namespace vkt
