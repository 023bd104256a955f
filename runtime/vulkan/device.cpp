#include "device.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "detail/lifetime_lock.h"
#include "detail/log.h"
#include "detail/query_device.h"
#include "detail/vk_check.h"
#include "error.h"
#include "host_transfer.h"
#include "instance.h"
#include "kernel.h"
#include "pipeline_builder.h"
#include "pipeline_cache.h"

namespace vkt {
namespace {}  // namespace

MatmulKernels parse_matmul_kernels(std::string_view text, std::string_view source) {
  if (text == "auto") return MatmulKernels::Auto;
  if (text == "tiled") return MatmulKernels::Tiled;
  if (text == "texel") return MatmulKernels::Texel;
  throw Error(
      fmt::format("{}='{}' is not a matmul variant; use tiled, texel or auto", source, text));
}

RowKernels parse_row_kernels(std::string_view text, std::string_view source) {
  if (text == "auto") return RowKernels::Auto;
  if (text == "workgroup") return RowKernels::Workgroup;
  if (text == "invocation") return RowKernels::Invocation;
  throw Error(fmt::format(
      "{}='{}' is not a way to run row kernels; use workgroup, invocation or auto", source, text));
}

DeviceOptions DeviceOptions::from_environment() {
  DeviceOptions options;
  const char* env = std::getenv("VKT_FORCE_STAGING");
  options.force_staging =
      env != nullptr && std::string_view(env) != "" && std::string_view(env) != "0";
  if (const char* variant = std::getenv("VKT_MATMUL_VARIANT");
      variant != nullptr && *variant != '\0') {
    options.matmul = parse_matmul_kernels(variant, "VKT_MATMUL_VARIANT");
  }
  if (const char* rows = std::getenv("VKT_ROW_KERNELS"); rows != nullptr && *rows != '\0') {
    options.row_kernels = parse_row_kernels(rows, "VKT_ROW_KERNELS");
  }
  return options;
}

std::string to_string(const DeviceObjectCounts& c) {
  return fmt::format(
      "memory allocations {}, command pools {}, command buffers {}, descriptor pools {}, "
      "buffer views {}, pipelines {}",
      c.memory_allocations, c.command_pools, c.command_buffers, c.descriptor_pools, c.buffer_views,
      c.pipelines);
}

Device::Device(Instance& instance, std::uint32_t index, DeviceOptions options)
    : instance_(&instance), info_(instance.device(index)), options_(options) {
  if (options_.staging_chunk_bytes == 0) {
    throw Error(
        "DeviceOptions::staging_chunk_bytes is 0: give at least 1 byte (the default is 64 MiB)");
  }
  if (options_.disable_16bit_storage) info_.storage_16bit = false;
  if (options_.disable_cooperative_matrix || !info_.storage_16bit) info_.cooperative_f16.clear();
  if (!info_.unusable_reason.empty()) {
    throw Error(fmt::format("device {} ({}) cannot run vktower: it {}", index, info_.name,
                            info_.unusable_reason));
  }
  physical_ = instance.vk_physical_device(index);
  vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);
  VkPhysicalDeviceProperties properties{};
  vkGetPhysicalDeviceProperties(physical_, &properties);
  limits_ = properties.limits;
  if (const std::uint64_t a = options_.min_buffer_offset_alignment; a != 0) {
    if ((a & (a - 1)) != 0 || a > 65536) {
      throw Error(fmt::format(
          "DeviceOptions::min_buffer_offset_alignment {} is not a power of two up to 65536", a));
    }
    limits_.minStorageBufferOffsetAlignment = std::max(limits_.minStorageBufferOffsetAlignment, a);
    limits_.minTexelBufferOffsetAlignment = std::max(limits_.minTexelBufferOffsetAlignment, a);
  }
  max_storage_range_ = limits_.maxStorageBufferRange;
  if (options_.max_storage_buffer_range != 0) {
    if (options_.max_storage_buffer_range < DeviceOptions::kMinStorageBufferRange) {
      throw Error(fmt::format(
          "DeviceOptions::max_storage_buffer_range {} is too small: give 0 (the device's "
          "own {} bytes) or at least {} bytes",
          options_.max_storage_buffer_range, limits_.maxStorageBufferRange,
          DeviceOptions::kMinStorageBufferRange));
    }
    max_storage_range_ =
        std::min<std::uint64_t>(max_storage_range_, options_.max_storage_buffer_range);
  }
  maps_storage_ = info_.unified_memory && !options_.force_staging;

  if (options_.compute_queues == 0) {
    throw Error("DeviceOptions::compute_queues is 0: give at least 1 (the default)");
  }
  const detail::QueueFamilies families = detail::find_queue_families(physical_);
  const std::uint32_t lanes =
      std::max<std::uint32_t>(1, std::min(options_.compute_queues, families.compute_queues));
  const std::vector<float> priorities(lanes, 1.0f);
  std::vector<VkDeviceQueueCreateInfo> queues;
  for (std::uint32_t family : {families.compute, families.transfer}) {
    if (family == UINT32_MAX) continue;
    VkDeviceQueueCreateInfo q{};
    q.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
    q.queueFamilyIndex = family;
    q.queueCount = family == families.compute ? lanes : 1;
    q.pQueuePriorities = priorities.data();
    queues.push_back(q);
  }

  std::vector<const char*> extensions;
  const bool core_timeline = info_.api_version_raw >= VK_API_VERSION_1_2;
  if (!core_timeline) extensions.push_back(VK_KHR_TIMELINE_SEMAPHORE_EXTENSION_NAME);
  // The spec requires enabling portability_subset wherever it is offered (MoltenVK).
  if (detail::has_device_extension(physical_, "VK_KHR_portability_subset")) {
    extensions.push_back("VK_KHR_portability_subset");
  }

  // Host memory import: every device of a cross-device copy then reads and
  // writes one host allocation (CrossDeviceCopy), no memcpy between them.
  const bool imports =
      options_.import_host_memory && info_.api_version_raw >= VK_API_VERSION_1_1 &&
      detail::has_device_extension(physical_, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
  if (imports) {
    extensions.push_back(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
    VkPhysicalDeviceExternalMemoryHostPropertiesEXT host{};
    host.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT;
    VkPhysicalDeviceProperties2 properties2{};
    properties2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    properties2.pNext = &host;
    vkGetPhysicalDeviceProperties2(physical_, &properties2);
    host_import_alignment_ = static_cast<std::size_t>(host.minImportedHostPointerAlignment);
  }

  VkPhysicalDeviceTimelineSemaphoreFeatures timeline{};
  timeline.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES;
  timeline.timelineSemaphore = VK_TRUE;
  // 16-bit storage where offered: the half types' kernels (matmul on f16 and
  // bf16 tensors) read and write 16-bit elements.
  VkPhysicalDevice16BitStorageFeatures storage16{};
  storage16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  storage16.storageBuffer16BitAccess = info_.storage_16bit ? VK_TRUE : VK_FALSE;
  timeline.pNext = &storage16;
  // Cooperative matrices where offered, with what their kernels' SPIR-V
  // declares: f16 arithmetic and the Vulkan memory model.
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cooperative{};
  cooperative.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  cooperative.cooperativeMatrix = VK_TRUE;
  VkPhysicalDeviceShaderFloat16Int8Features float16{};
  float16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  float16.shaderFloat16 = VK_TRUE;
  float16.pNext = &cooperative;
  VkPhysicalDeviceVulkanMemoryModelFeatures memory_model{};
  memory_model.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES;
  memory_model.vulkanMemoryModel = VK_TRUE;
  memory_model.pNext = &float16;
  if (!info_.cooperative_f16.empty()) {
    extensions.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    storage16.pNext = &memory_model;
  }
  VkDeviceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  info.pNext = &timeline;
  info.queueCreateInfoCount = static_cast<std::uint32_t>(queues.size());
  info.pQueueCreateInfos = queues.data();
  info.enabledExtensionCount = static_cast<std::uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  {
    const std::unique_lock lifetime(detail::lifetime_lock());
    VKT_CHECK(vkCreateDevice(physical_, &info, nullptr, &device_));
  }

  try {
    const char* wait_name = core_timeline ? "vkWaitSemaphores" : "vkWaitSemaphoresKHR";
    const char* value_name =
        core_timeline ? "vkGetSemaphoreCounterValue" : "vkGetSemaphoreCounterValueKHR";
    wait_semaphores_ =
        reinterpret_cast<PFN_vkWaitSemaphores>(vkGetDeviceProcAddr(device_, wait_name));
    semaphore_value_ =
        reinterpret_cast<PFN_vkGetSemaphoreCounterValue>(vkGetDeviceProcAddr(device_, value_name));
    if (imports) {
      host_pointer_properties_ = reinterpret_cast<PFN_vkGetMemoryHostPointerPropertiesEXT>(
          vkGetDeviceProcAddr(device_, "vkGetMemoryHostPointerPropertiesEXT"));
      if (host_pointer_properties_ == nullptr) host_import_alignment_ = 0;
    }
    if (wait_semaphores_ == nullptr || semaphore_value_ == nullptr) {
      throw Error(fmt::format("device {} ({}) does not expose {}; update its driver", index,
                              info_.name, wait_name));
    }

    auto make_queue = [&](Queue& q, std::uint32_t family, std::uint32_t index) {
      q.family = family;
      vkGetDeviceQueue(device_, family, index, &q.queue);
      VkSemaphoreTypeCreateInfo type{};
      type.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
      type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
      type.initialValue = 0;
      VkSemaphoreCreateInfo semaphore{};
      semaphore.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO;
      semaphore.pNext = &type;
      VKT_CHECK(vkCreateSemaphore(device_, &semaphore, nullptr, &q.timeline));
    };
    compute_.resize(lanes);
    for (std::uint32_t lane = 0; lane < lanes; ++lane) {
      make_queue(compute_[lane], families.compute, lane);
    }
    if (families.transfer != UINT32_MAX) make_queue(transfer_, families.transfer, 0);

    DeviceCacheKey key{.vendor_id = properties.vendorID,
                       .device_id = properties.deviceID,
                       .driver_version = properties.driverVersion};
    std::copy(std::begin(properties.pipelineCacheUUID), std::end(properties.pipelineCacheUUID),
              key.pipeline_cache_uuid.begin());
    pipeline_cache_ = std::make_unique<PipelineCache>(device_, key, options_.cache_dir);
    pipeline_builder_ = std::make_unique<PipelineBuilder>();
    tuning_ = detail::shared_tuning_cache(options_.cache_dir, key.stem());
  } catch (...) {
    release();
    throw;
  }
  detail::log().debug("device {} ready: {} ({}), {} memory{}", index, info_.name,
                      to_string(info_.type), maps_storage_ ? "mapped" : "staged",
                      has_transfer_queue() ? ", transfer queue" : "");
}

Device::~Device() {
  save_caches();
  release();
}

void Device::save_caches() {
  // Pipelines still building go into the cache too.
  {
    std::lock_guard lock(kernels_mutex_);
    for (const auto& [key, kernel] : kernels_) {
      try {
        kernel->vk_pipeline();
      } catch (const Error&) {
        // Reported where the kernel is used.
      }
    }
  }
  if (pipeline_cache_) pipeline_cache_->save();
  if (tuning_) tuning_->save();
}

std::size_t Device::pipeline_cache_loaded_bytes() const {
  return pipeline_cache_->loaded_bytes();
}

VkPipelineCache Device::vk_pipeline_cache() const {
  return pipeline_cache_->handle();
}

void Device::release() {
  if (device_ == VK_NULL_HANDLE) return;
  vkDeviceWaitIdle(device_);
  host_transfer_.reset();
  kernels_.clear();  // each waits for its build
  pipeline_builder_.reset();
  pipeline_cache_.reset();
  tuning_.reset();
  for (Queue* q : all_queues()) {
    if (q->timeline != VK_NULL_HANDLE) vkDestroySemaphore(device_, q->timeline, nullptr);
    q->timeline = VK_NULL_HANDLE;
  }
  const std::unique_lock lifetime(detail::lifetime_lock());
  vkDestroyDevice(device_, nullptr);
  device_ = VK_NULL_HANDLE;
}

const Kernel& Device::kernel(const KernelDesc& desc) {
  const std::string key = desc.cache_key();
  std::lock_guard lock(kernels_mutex_);
  auto found = kernels_.find(key);
  if (found != kernels_.end()) return *found->second;
  auto made = std::make_unique<Kernel>(*this, desc);
  return *kernels_.emplace(key, std::move(made)).first->second;
}

DeviceObjectCounts Device::object_counts() const {
  const auto created = [&](DeviceObject kind) {
    return created_[static_cast<std::size_t>(kind)].load();
  };
  return {.memory_allocations = allocations_.load(),
          .command_pools = created(DeviceObject::CommandPool),
          .command_buffers = created(DeviceObject::CommandBuffer),
          .descriptor_pools = created(DeviceObject::DescriptorPool),
          .buffer_views = created(DeviceObject::BufferView),
          .pipelines = created(DeviceObject::Pipeline)};
}

void Device::count_created(DeviceObject kind) {
  created_[static_cast<std::size_t>(kind)].fetch_add(1);
}

HostTransfer& Device::host_transfer() {
  std::lock_guard lock(host_transfer_mutex_);
  if (!host_transfer_) {
    host_transfer_ = std::make_unique<HostTransfer>(*this, options_.staging_chunk_bytes);
  }
  return *host_transfer_;
}

void Device::wait_idle() {
  wait_all(submitted());
}

std::vector<Device::Queue*> Device::all_queues() {
  std::vector<Queue*> all;
  for (Queue& q : compute_) all.push_back(&q);
  all.push_back(&transfer_);
  return all;
}

const Device::Queue& Device::queue(QueueKind kind, std::uint32_t lane) const {
  return const_cast<Device*>(this)->queue(kind, lane);
}
Device::Queue& Device::queue(QueueKind kind, std::uint32_t lane) {
  if (kind == QueueKind::Transfer && transfer_.queue != VK_NULL_HANDLE) return transfer_;
  if (kind == QueueKind::Transfer) return compute_.front();
  if (lane >= compute_.size()) {
    throw Error(fmt::format("internal: compute queue {} of device {}'s {}", lane, info_.index,
                            compute_.size()));
  }
  return compute_[lane];
}

Ticket Device::submit(QueueKind kind, VkCommandBuffer commands, std::span<const Ticket> waits) {
  return submit(kind, 0, std::span<const VkCommandBuffer>(&commands, 1), waits);
}

Ticket Device::submit(QueueKind kind, std::span<const VkCommandBuffer> commands,
                      std::span<const Ticket> waits) {
  return submit(kind, 0, commands, waits);
}

Ticket Device::submit(QueueKind kind, std::uint32_t lane, std::span<const VkCommandBuffer> commands,
                      std::span<const Ticket> waits) {
  if (commands.empty()) throw Error("internal: a submit of no command buffers");
  const bool transfer = kind == QueueKind::Transfer && has_transfer_queue();
  if (kind == QueueKind::Transfer) lane = 0;
  Queue& q = queue(kind, lane);
  std::vector<VkSemaphore> wait_semaphores;
  std::vector<std::uint64_t> wait_values;
  std::vector<VkPipelineStageFlags> wait_stages;
  for (const Ticket& t : waits) {
    if (t.device == nullptr) continue;
    if (t.device != this) {
      throw Error(
          "a submit can wait only for tickets of its own Device; wait for another "
          "device's ticket on the host (ticket.wait()) first");
    }
    wait_semaphores.push_back(queue(t.queue, t.lane).timeline);
    wait_values.push_back(t.value);
    wait_stages.push_back(VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
  }
  const std::size_t n = commands.size();
  std::vector<std::uint64_t> signals(n);
  std::vector<VkTimelineSemaphoreSubmitInfo> timelines(n);
  std::vector<VkSubmitInfo> submits(n);
  std::lock_guard lock(*q.mutex);
  if (lost()) report_lost("a submit after the device was lost");
  const std::uint64_t number = submits_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (options_.lose_device_at_submit && number >= *options_.lose_device_at_submit) {
    report_lost(
        fmt::format("vkQueueSubmit number {} (DeviceOptions::lose_device_at_submit)", number));
  }
  for (std::size_t k = 0; k < n; ++k) {
    signals[k] = q.last_value + 1 + k;
    VkTimelineSemaphoreSubmitInfo& timeline = timelines[k];
    timeline.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO;
    timeline.signalSemaphoreValueCount = 1;
    timeline.pSignalSemaphoreValues = &signals[k];
    VkSubmitInfo& submit = submits[k];
    submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    submit.pNext = &timeline;
    if (k == 0) {
      timeline.waitSemaphoreValueCount = static_cast<std::uint32_t>(wait_values.size());
      timeline.pWaitSemaphoreValues = wait_values.data();
      submit.waitSemaphoreCount = static_cast<std::uint32_t>(wait_semaphores.size());
      submit.pWaitSemaphores = wait_semaphores.data();
      submit.pWaitDstStageMask = wait_stages.data();
    }
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &commands[k];
    submit.signalSemaphoreCount = 1;
    submit.pSignalSemaphores = &q.timeline;
  }
  check_alive(vkQueueSubmit(q.queue, static_cast<std::uint32_t>(n), submits.data(), VK_NULL_HANDLE),
              "vkQueueSubmit");
  q.last_value = signals.back();
  return Ticket{this, transfer ? QueueKind::Transfer : QueueKind::Compute, signals.back(),
                transfer ? 0 : lane};
}

void Device::wait(const Ticket& ticket) const {
  wait_all(std::span<const Ticket>(&ticket, 1));
}

void Device::wait_all(std::span<const Ticket> tickets) const {
  // Per timeline, the highest value asked for that no earlier wait has seen.
  std::vector<const Queue*> queues;
  std::vector<VkSemaphore> semaphores;
  std::vector<std::uint64_t> values;
  for (const Ticket& t : tickets) {
    if (t.value == 0 || t.device == nullptr) continue;
    if (t.device != this) throw Error("internal: Device::wait_all given another device's ticket");
    const Queue& q = queue(t.queue, t.lane);
    if (t.value <= q.waited->load(std::memory_order_acquire)) continue;
    const auto at = std::find(queues.begin(), queues.end(), &q);
    if (at == queues.end()) {
      queues.push_back(&q);
      semaphores.push_back(q.timeline);
      values.push_back(t.value);
    } else {
      auto& v = values[static_cast<std::size_t>(at - queues.begin())];
      v = std::max(v, t.value);
    }
  }
  if (queues.empty()) return;
  host_waits_.fetch_add(1, std::memory_order_relaxed);
  VkSemaphoreWaitInfo info{};
  info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO;
  info.semaphoreCount = static_cast<std::uint32_t>(semaphores.size());
  info.pSemaphores = semaphores.data();
  info.pValues = values.data();
  check_alive(wait_semaphores_(device_, &info, UINT64_MAX), "vkWaitSemaphores");
  for (std::size_t k = 0; k < queues.size(); ++k) {
    std::atomic<std::uint64_t>& waited = *queues[k]->waited;
    std::uint64_t seen = waited.load(std::memory_order_relaxed);
    while (seen < values[k] && !waited.compare_exchange_weak(seen, values[k])) {
    }
  }
}

std::vector<Ticket> Device::submitted() const {
  std::vector<Ticket> tickets;
  for (std::uint32_t lane = 0; lane < compute_.size(); ++lane) {
    std::lock_guard lock(*compute_[lane].mutex);
    tickets.push_back(Ticket{this, QueueKind::Compute, compute_[lane].last_value, lane});
  }
  if (has_transfer_queue()) {
    std::lock_guard lock(*transfer_.mutex);
    tickets.push_back(Ticket{this, QueueKind::Transfer, transfer_.last_value});
  }
  return tickets;
}

bool Device::done(const Ticket& ticket) const {
  std::uint64_t value = 0;
  check_alive(semaphore_value_(device_, queue(ticket.queue, ticket.lane).timeline, &value),
              "vkGetSemaphoreCounterValue");
  return value >= ticket.value;
}

void Device::report_lost(std::string_view call) const {
  lost_.store(true, std::memory_order_release);
  throw DeviceLost(fmt::format("device {} ({}) was lost: {} gave VK_ERROR_DEVICE_LOST", info_.index,
                               info_.name, call),
                   info_.index);
}

void Device::check_alive(VkResult result, std::string_view call) const {
  if (result == VK_ERROR_DEVICE_LOST) report_lost(call);
  detail::check(result, call);
}

void Ticket::wait() const {
  if (device != nullptr) device->wait(*this);
}
bool Ticket::done() const {
  return device == nullptr || device->done(*this);
}

}  // namespace vkt
