#include "kernel.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "detail/lifetime_lock.h"
#include "detail/log.h"
#include "detail/vk_check.h"
#include "device.h"
#include "error.h"
#include "pipeline_builder.h"
#include "shader_registry.h"

namespace vkt {
namespace {

VkDescriptorType descriptor_type(detail::BindingKind kind) {
  switch (kind) {
    case detail::BindingKind::UniformBuffer:
      return VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER;
    case detail::BindingKind::UniformTexelBuffer:
      return VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
    case detail::BindingKind::StorageTexelBuffer:
      return VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER;
    default:
      return VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  }
}

}  // namespace

std::string KernelDesc::cache_key() const {
  std::string key = fmt::format("{}|{},{},{}", shader, local_size[0], local_size[1], local_size[2]);
  std::vector<SpecConstant> sorted = constants;
  std::sort(sorted.begin(), sorted.end(),
            [](const SpecConstant& a, const SpecConstant& b) { return a.id < b.id; });
  for (const SpecConstant& c : sorted) key += fmt::format("|{}={:08x}", c.id, c.bits);
  return key;
}

Kernel::Kernel(Device& device, const KernelDesc& desc)
    : device_(&device),
      name_(desc.shader),
      shader_(detail::reflect(shaders::find(desc.shader), desc.shader)) {
  const DeviceInfo& info = device.info();
  // The optimizers' sparse update binds 11 storage buffers (a window per arena
  // part); a device allowing fewer per stage could not build the pipeline.
  const auto storage = static_cast<std::uint32_t>(
      std::count_if(shader_.bindings.begin(), shader_.bindings.end(),
                    [](const auto& b) { return b.kind == detail::BindingKind::StorageBuffer; }));
  if (storage > device.limits().maxPerStageDescriptorStorageBuffers) {
    throw Error(fmt::format(
        "kernel '{}' binds {} storage buffers but device {} ({}) allows {} per shader stage", name_,
        storage, info.index, info.name, device.limits().maxPerStageDescriptorStorageBuffers));
  }
  // Every user-given constant must exist in the shader, and not be a workgroup one.
  std::vector<VkSpecializationMapEntry> entries;
  std::vector<std::uint32_t> data;
  auto add = [&](std::uint32_t id, std::uint32_t bits) {
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (entries[i].constantID == id) {
        throw Error(
            fmt::format("kernel '{}': specialization constant {} is given twice", name_, id));
      }
    }
    entries.push_back({id, static_cast<std::uint32_t>(data.size() * 4), 4});
    data.push_back(bits);
  };
  local_size_ = shader_.local_size;
  for (int i = 0; i < 3; ++i) {
    if (desc.local_size[i] == 0) continue;
    if (!shader_.local_size_ids[i]) {
      if (desc.local_size[i] == local_size_[i]) continue;  // asks for what it is
      throw Error(
          fmt::format("kernel '{}': its workgroup size is fixed in the shader ({}x{}x{}); "
                      "declare local_size_{}_id to choose it at run time, or leave "
                      "KernelDesc::local_size at 0",
                      name_, local_size_[0], local_size_[1], local_size_[2], "xyz"[i]));
    }
    local_size_[i] = desc.local_size[i];
    add(*shader_.local_size_ids[i], desc.local_size[i]);
  }
  for (const SpecConstant& c : desc.constants) {
    if (!std::binary_search(shader_.spec_ids.begin(), shader_.spec_ids.end(), c.id)) {
      throw Error(
          fmt::format("kernel '{}' has no specialization constant {} (it declares {}); "
                      "check the constant_id in shaders/{}.comp",
                      name_, c.id, fmt::join(shader_.spec_ids, ", "), name_));
    }
    for (int i = 0; i < 3; ++i) {
      if (shader_.local_size_ids[i] == c.id) {
        throw Error(
            fmt::format("kernel '{}': constant {} is the workgroup size; set it through "
                        "KernelDesc::local_size",
                        name_, c.id));
      }
    }
    add(c.id, c.bits);
  }
  const std::uint64_t invocations = std::uint64_t{local_size_[0]} * local_size_[1] * local_size_[2];
  for (int i = 0; i < 3; ++i) {
    if (local_size_[i] > info.max_workgroup_size[i] ||
        invocations > info.max_workgroup_invocations) {
      throw Error(
          fmt::format("kernel '{}': workgroup {}x{}x{} is larger than device {} ({}) "
                      "allows ({}x{}x{}, {} invocations); use a smaller local_size",
                      name_, local_size_[0], local_size_[1], local_size_[2], info.index, info.name,
                      info.max_workgroup_size[0], info.max_workgroup_size[1],
                      info.max_workgroup_size[2], info.max_workgroup_invocations));
    }
  }

  const VkDevice vk = device.vk_device();
  std::vector<VkDescriptorSetLayoutBinding> bindings;
  for (const detail::ReflectedBinding& b : shader_.bindings) {
    VkDescriptorSetLayoutBinding layout_binding{};
    layout_binding.binding = b.binding;
    layout_binding.descriptorType = descriptor_type(b.kind);
    layout_binding.descriptorCount = 1;
    layout_binding.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    bindings.push_back(layout_binding);
  }
  VkDescriptorSetLayoutCreateInfo set_info{};
  set_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  set_info.bindingCount = static_cast<std::uint32_t>(bindings.size());
  set_info.pBindings = bindings.data();
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VKT_CHECK(vkCreateDescriptorSetLayout(vk, &set_info, nullptr, &set_layout));
  set_layout_ = {vk, set_layout};

  VkPushConstantRange push{};
  push.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  push.size = shader_.push_constant_bytes;
  VkPipelineLayoutCreateInfo layout_info{};
  layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &set_layout;
  layout_info.pushConstantRangeCount = push.size > 0 ? 1 : 0;
  layout_info.pPushConstantRanges = &push;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VKT_CHECK(vkCreatePipelineLayout(vk, &layout_info, nullptr, &layout));
  layout_ = {vk, layout};

  // The build runs on a worker: it owns copies of what it reads, and this
  // object waits for it before it is destroyed.
  const std::span<const std::uint32_t> words = shaders::find(desc.shader);
  const VkPipelineCache cache = device.vk_pipeline_cache();
  device.count_created(DeviceObject::Pipeline);
  built_ = device.pipeline_builder().start(
      [this, vk, cache, layout, words, entries = std::move(entries), data = std::move(data),
       index = info.index] { build(vk, cache, layout, words, entries, data, index); },
      words.size_bytes());
}

Kernel::~Kernel() {
  if (built_.valid()) built_.wait();
}

VkPipeline Kernel::vk_pipeline() const {
  built_.get();
  return pipeline_.get();
}

void Kernel::build(VkDevice vk, VkPipelineCache cache, VkPipelineLayout layout,
                   std::span<const std::uint32_t> words,
                   const std::vector<VkSpecializationMapEntry>& entries,
                   const std::vector<std::uint32_t>& data, std::uint32_t device_index) {
  const std::shared_lock lifetime(detail::lifetime_lock());
  const auto started = std::chrono::steady_clock::now();
  VkShaderModuleCreateInfo module_info{};
  module_info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module_info.codeSize = words.size_bytes();
  module_info.pCode = words.data();
  VkShaderModule raw_module = VK_NULL_HANDLE;
  VKT_CHECK(vkCreateShaderModule(vk, &module_info, nullptr, &raw_module));
  // Only needed until the pipeline exists.
  detail::DeviceHandle<VkShaderModule, vkDestroyShaderModule> module(vk, raw_module);

  VkSpecializationInfo specialization{};
  specialization.mapEntryCount = static_cast<std::uint32_t>(entries.size());
  specialization.pMapEntries = entries.data();
  specialization.dataSize = data.size() * sizeof(std::uint32_t);
  specialization.pData = data.data();
  VkComputePipelineCreateInfo pipeline_info{};
  pipeline_info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  pipeline_info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  pipeline_info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pipeline_info.stage.module = module.get();
  pipeline_info.stage.pName = "main";
  pipeline_info.stage.pSpecializationInfo = entries.empty() ? nullptr : &specialization;
  pipeline_info.layout = layout;
  VkPipeline pipeline = VK_NULL_HANDLE;
  VKT_CHECK(vkCreateComputePipelines(vk, cache, 1, &pipeline_info, nullptr, &pipeline));
  pipeline_ = {vk, pipeline};
  detail::log().debug(
      "kernel '{}' built on device {} ({}x{}x{}, {} buffers, {} push bytes, {} SPIR-V bytes) in "
      "{:.1f} ms",
      name_, device_index, local_size_[0], local_size_[1], local_size_[2], shader_.bindings.size(),
      shader_.push_constant_bytes, words.size_bytes(),
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
          .count());
}

}  // namespace vkt
