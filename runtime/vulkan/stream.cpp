#include "stream.h"

#include <fmt/format.h>

#include <algorithm>

#include "detail/log.h"
#include "detail/vk_check.h"
#include "device.h"
#include "error.h"
#include "kernel.h"

namespace vkt {
namespace {

constexpr std::uint32_t kSetsPerPool = 64;
constexpr VkPipelineStageFlags kWorkStages =
    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
constexpr VkAccessFlags kWorkWrites = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
constexpr VkAccessFlags kWorkAccess = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                      VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                                      VK_ACCESS_UNIFORM_READ_BIT;

bool overlaps(std::size_t a, std::size_t an, std::size_t b, std::size_t bn) {
  return a < b + bn && b < a + an;
}

}  // namespace

Stream::Stream(Device& device, QueueKind queue, std::uint32_t lane)
    : device_(&device), queue_(queue), lane_(queue == QueueKind::Compute ? lane : 0) {
  if (lane_ >= device.compute_queues()) {
    throw Error(fmt::format("a stream on compute queue {} of a device with {}", lane_,
                            device.compute_queues()));
  }
  const VkDevice vk = device.vk_device();
  VkCommandPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool_info.queueFamilyIndex = device.queue_family(queue);
  VkCommandPool pool = VK_NULL_HANDLE;
  VKT_CHECK(vkCreateCommandPool(vk, &pool_info, nullptr, &pool));
  pool_ = {vk, pool};
  device.count_created(DeviceObject::CommandPool);

  begin_commands();
}

void Stream::begin_commands() {
  VkCommandBufferAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  alloc.commandPool = pool_.get();
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  VKT_CHECK(vkAllocateCommandBuffers(device_->vk_device(), &alloc, &commands_buffer_));
  device_->count_created(DeviceObject::CommandBuffer);
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  // Replays may be queued while an earlier one still runs.
  begin.flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT;
  VKT_CHECK(vkBeginCommandBuffer(commands_buffer_, &begin));
  // Orders this work after everything submitted before it on the queue, this
  // stream's earlier replays and segments included (a barrier's first scope
  // reaches back across submissions).
  record_barrier(work_stages(), work_access(), /*counted=*/false);
}

bool Stream::transfer_only() const {
  return queue_ == QueueKind::Transfer && device_->has_transfer_queue();
}

// A dedicated transfer queue supports neither the compute stage nor shader
// accesses in its barriers.
VkPipelineStageFlags Stream::work_stages() const {
  return transfer_only() ? VkPipelineStageFlags{VK_PIPELINE_STAGE_TRANSFER_BIT} : kWorkStages;
}

VkAccessFlags Stream::work_access() const {
  return transfer_only() ? VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT : kWorkAccess;
}

std::size_t Stream::end_segment() {
  check_recording("end a segment");
  // What the segment wrote becomes visible to the host once its ticket is done
  // (other queues see it through the semaphore).
  record_barrier(VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT, /*counted=*/false);
  end_commands();
  segments_.push_back(commands_buffer_);
  begin_commands();
  return segments_.size() - 1;
}

Ticket Stream::segment_ticket(std::size_t k) const {
  if (k >= segment_count()) {
    throw Error(fmt::format("segment_ticket: segment {} of a stream of {}", k, segment_count()));
  }
  if (last_.device == nullptr || k >= segment_values_.size()) return last_;
  Ticket t = last_;
  t.value = segment_values_[k];
  return t;
}

Stream::~Stream() {
  try {
    last_.wait();
  } catch (const std::exception& e) {
    detail::log().error("a stream was destroyed while its work failed: {}", e.what());
  }
}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    try {
      last_.wait();
    } catch (const std::exception& e) {
      detail::log().error("a stream was replaced while its work failed: {}", e.what());
    }
    device_ = other.device_;
    queue_ = other.queue_;
    lane_ = other.lane_;
    descriptor_pools_ = std::move(other.descriptor_pools_);
    views_ = std::move(other.views_);
    pool_ = std::move(other.pool_);
    commands_buffer_ = std::exchange(other.commands_buffer_, VK_NULL_HANDLE);
    segments_ = std::move(other.segments_);
    segment_values_ = std::move(other.segment_values_);
    query_pools_ = std::move(other.query_pools_);
    timestamps_ = other.timestamps_;
    profile_start_ = other.profile_start_;
    profiled_ = std::move(other.profiled_);
    pending_ = std::move(other.pending_);
    unrecorded_ = std::move(other.unrecorded_);
    failed_ = std::move(other.failed_);
    last_ = std::exchange(other.last_, {});
    commands_ = other.commands_;
    dispatches_ = other.dispatches_;
    barriers_ = other.barriers_;
    ended_ = other.ended_;
  }
  return *this;
}

void Stream::record(std::function<void(VkCommandBuffer)> command) {
  unrecorded_.push_back(std::move(command));
}

void Stream::end_commands() {
  const std::vector<std::function<void(VkCommandBuffer)>> commands = std::move(unrecorded_);
  unrecorded_.clear();
  try {
    for (const auto& command : commands) command(commands_buffer_);
    VKT_CHECK(vkEndCommandBuffer(commands_buffer_));
  } catch (const std::exception& e) {
    // Half recorded: this stream can never be submitted.
    failed_ = e.what();
    throw;
  }
}

void Stream::check_recording(const char* what) const {
  if (!pool_) throw Error(fmt::format("cannot {} on a moved-from stream", what));
  if (!failed_.empty()) {
    throw Error(fmt::format("cannot {}: recording this stream failed ({}); record a new Stream",
                            what, failed_));
  }
  if (ended_) {
    throw Error(
        fmt::format("cannot {} on a stream that was already submitted: a stream is "
                    "recorded once and replayed; record the new work on a new Stream",
                    what));
  }
}

void Stream::check_range(const BufferRange& range, const char* what) const {
  if (range.buffer == nullptr || !*range.buffer) {
    throw Error(fmt::format("{}: a buffer is empty (default-constructed or moved-from)", what));
  }
  if (&range.buffer->device() != device_) {
    throw Error(
        fmt::format("{}: a buffer belongs to another Device (device {}) than this stream "
                    "(device {}); copy it across with CrossDeviceCopy first",
                    what, range.buffer->device().info().index, device_->info().index));
  }
  if (range.offset > range.buffer->size() ||
      (range.bytes != BufferRange::kWhole && range.bytes > range.buffer->size() - range.offset)) {
    throw Error(fmt::format("{}: range of {} bytes at offset {} lies outside a buffer of {} bytes",
                            what, range.bytes, range.offset, range.buffer->size()));
  }
  if (range.size() == 0) throw Error(fmt::format("{}: a buffer range is empty", what));
}

void Stream::record_barrier(VkPipelineStageFlags dst_stage, VkAccessFlags dst_access,
                            bool counted) {
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask =
      transfer_only() ? VkAccessFlags{VK_ACCESS_TRANSFER_WRITE_BIT} : kWorkWrites;
  barrier.dstAccessMask = dst_access;
  record([barrier, src_stage = work_stages(), dst_stage](VkCommandBuffer commands) {
    vkCmdPipelineBarrier(commands, src_stage, dst_stage, 0, 1, &barrier, 0, nullptr, 0, nullptr);
  });
  if (counted) ++barriers_;
  pending_.clear();
}

void Stream::order(std::span<const Access> accesses) {
  bool hazard = false;
  for (const Access& now : accesses) {
    for (const Access& before : pending_) {
      if (before.buffer == now.buffer && (before.write || now.write) &&
          overlaps(before.offset, before.bytes, now.offset, now.bytes)) {
        hazard = true;
      }
    }
  }
  if (hazard) record_barrier(work_stages(), work_access());
  pending_.insert(pending_.end(), accesses.begin(), accesses.end());
}

VkDescriptorSet Stream::allocate_set(VkDescriptorSetLayout layout) {
  const VkDevice vk = device_->vk_device();
  VkDescriptorSetAllocateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  info.descriptorSetCount = 1;
  info.pSetLayouts = &layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  if (!descriptor_pools_.empty()) {
    info.descriptorPool = descriptor_pools_.back().get();
    const VkResult result = vkAllocateDescriptorSets(vk, &info, &set);
    if (result == VK_SUCCESS) return set;
    if (result != VK_ERROR_OUT_OF_POOL_MEMORY && result != VK_ERROR_FRAGMENTED_POOL) {
      detail::check(result, "vkAllocateDescriptorSets");
    }
  }
  // Pools grow in chunks: a stream's sets live as long as its command buffer.
  const VkDescriptorPoolSize sizes[] = {
      {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * 8},
      {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, kSetsPerPool * 4},
      {VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER, kSetsPerPool},
      {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, kSetsPerPool},
  };
  VkDescriptorPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  pool_info.maxSets = kSetsPerPool;
  pool_info.poolSizeCount = static_cast<std::uint32_t>(std::size(sizes));
  pool_info.pPoolSizes = sizes;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  VKT_CHECK(vkCreateDescriptorPool(vk, &pool_info, nullptr, &pool));
  descriptor_pools_.emplace_back(vk, pool);
  device_->count_created(DeviceObject::DescriptorPool);
  info.descriptorPool = pool;
  VKT_CHECK(vkAllocateDescriptorSets(vk, &info, &set));
  return set;
}

void Stream::dispatch(const Kernel& kernel, std::span<const BufferRange> buffers,
                      std::span<const std::byte> push, Groups groups) {
  check_recording("record a dispatch");
  const std::string where = fmt::format("dispatch of kernel '{}'", kernel.name());
  if (queue_ == QueueKind::Transfer) {
    throw Error(where +
                ": this stream records for the transfer queue, which runs copies only; "
                "record dispatches on a QueueKind::Compute stream");
  }
  if (&kernel.device() != device_) {
    throw Error(where +
                ": the kernel was built for another Device; get it from this stream's "
                "device with device.kernel(...)");
  }
  const auto& bindings = kernel.bindings();
  if (buffers.size() != bindings.size()) {
    std::string names;
    for (const auto& b : bindings) names += (names.empty() ? "" : ", ") + b.name;
    throw Error(fmt::format("{}: the shader takes {} buffer{} ({}) but {} were given", where,
                            bindings.size(), bindings.size() == 1 ? "" : "s", names,
                            buffers.size()));
  }
  if (push.size() != kernel.push_constant_bytes()) {
    throw Error(
        fmt::format("{}: the shader's push constants are {} bytes but {} were given; pass "
                    "a struct laid out like the shader's push_constant block",
                    where, kernel.push_constant_bytes(), push.size()));
  }
  const VkPhysicalDeviceLimits* limits = &device_->limits();
  for (int i = 0; i < 3; ++i) {
    if (groups[i] > limits->maxComputeWorkGroupCount[i]) {
      throw Error(
          fmt::format("{}: {} workgroups in dimension {} exceed the device's limit of {}; "
                      "use larger workgroups or loop inside the shader",
                      where, groups[i], "xyz"[i], limits -> maxComputeWorkGroupCount[i]));
    }
  }

  std::vector<Access> accesses;
  std::vector<VkDescriptorBufferInfo> infos(buffers.size());
  std::vector<VkBufferView> views(buffers.size(), VK_NULL_HANDLE);
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const std::string what = fmt::format("{}, buffer {} ({})", where, i, bindings[i].name);
    check_range(buffers[i], what.c_str());
    const bool texel = bindings[i].kind == detail::BindingKind::UniformTexelBuffer;
    if (bindings[i].kind != detail::BindingKind::StorageBuffer && !texel) {
      throw Error(what +
                  ": uniform buffers and storage texel buffers are not supported by "
                  "Stream; declare the binding as a storage buffer or a textureBuffer");
    }
    if (buffers[i].buffer->kind() != BufferKind::Storage) {
      throw Error(what +
                  ": a staging buffer cannot be bound to a kernel; copy it into a storage "
                  "buffer first");
    }
    const VkDeviceSize alignment =
        texel ? limits->minTexelBufferOffsetAlignment : limits->minStorageBufferOffsetAlignment;
    if (buffers[i].offset % alignment != 0) {
      throw Error(
          fmt::format("{}: offset {} is not a multiple of the device's {} buffer "
                      "alignment ({} bytes)",
                      what, buffers[i].offset, texel ? "texel" : "storage", alignment));
    }
    if (texel && buffers[i].size() % 16 != 0) {
      throw Error(
          fmt::format("{}: a texel buffer is read as RGBA32F texels, so its range must be a "
                      "multiple of 16 bytes; {} bytes were given",
                      what, buffers[i].size()));
    }
    // A range past the limit is a validation error or garbage on a GPU whose limit
    // is small (128 MiB on some): bind windows of at most the limit instead.
    const std::uint64_t max_range =
        texel ? device_->max_texel_buffer_range() : device_->max_storage_buffer_range();
    if (buffers[i].size() > max_range) {
      throw Error(fmt::format(
          "{}: a range of {} bytes is more than the device's {} of {} bytes; bind at most "
          "that much (split the tensor or the arena window)",
          what, buffers[i].size(),
          texel ? "texel buffer range (maxTexelBufferElements * 16)" : "max storage buffer range",
          max_range));
    }
    infos[i] = {buffers[i].buffer->vk_buffer(), buffers[i].offset, buffers[i].size()};
    accesses.push_back(
        {infos[i].buffer, buffers[i].offset, buffers[i].size(), !bindings[i].read_only});
  }
  // Views are made only once every check passed, and live as long as the stream.
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    if (bindings[i].kind != detail::BindingKind::UniformTexelBuffer) continue;
    VkBufferViewCreateInfo view_info{};
    view_info.sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO;
    view_info.buffer = infos[i].buffer;
    view_info.format = VK_FORMAT_R32G32B32A32_SFLOAT;  // required for uniform texel buffers
    view_info.offset = infos[i].offset;
    view_info.range = infos[i].range;
    VKT_CHECK(vkCreateBufferView(device_->vk_device(), &view_info, nullptr, &views[i]));
    views_.emplace_back(device_->vk_device(), views[i]);
    device_->count_created(DeviceObject::BufferView);
  }

  const VkDescriptorSet set = allocate_set(kernel.vk_set_layout());
  std::vector<VkWriteDescriptorSet> writes(buffers.size());
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = static_cast<std::uint32_t>(i);
    writes[i].descriptorCount = 1;
    if (views[i] != VK_NULL_HANDLE) {
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
      writes[i].pTexelBufferView = &views[i];
    } else {
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
  }
  vkUpdateDescriptorSets(device_->vk_device(), static_cast<std::uint32_t>(writes.size()),
                         writes.data(), 0, nullptr);

  order(accesses);
  record([kernel = &kernel, set, push = std::vector<std::byte>(push.begin(), push.end()),
          groups](VkCommandBuffer commands) {
    // Waits for the pipeline's build (Kernel): the one place that needs it.
    vkCmdBindPipeline(commands, VK_PIPELINE_BIND_POINT_COMPUTE, kernel->vk_pipeline());
    vkCmdBindDescriptorSets(commands, VK_PIPELINE_BIND_POINT_COMPUTE, kernel->vk_layout(), 0, 1,
                            &set, 0, nullptr);
    if (!push.empty()) {
      vkCmdPushConstants(commands, kernel->vk_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                         static_cast<std::uint32_t>(push.size()), push.data());
    }
    vkCmdDispatch(commands, groups[0], groups[1], groups[2]);
  });
  ++commands_;
  ++dispatches_;
  if (profile_start_) profile_command(kernel.name());
}

Groups Stream::groups_for(const Kernel& kernel, std::uint64_t threads_x, std::uint64_t threads_y,
                          std::uint64_t threads_z) {
  const auto local = kernel.local_size();
  const std::uint64_t threads[3] = {threads_x, threads_y, threads_z};
  Groups groups{};
  for (int i = 0; i < 3; ++i) {
    const std::uint64_t n = (threads[i] + local[i] - 1) / local[i];
    if (n > UINT32_MAX) {
      throw Error(fmt::format("kernel '{}': {} threads need more than 2^32 workgroups",
                              kernel.name(), threads[i]));
    }
    groups[i] = static_cast<std::uint32_t>(n);
  }
  return groups;
}

Groups Stream::linear_groups(const Kernel& kernel, std::uint64_t threads) {
  const std::uint64_t local = kernel.local_size()[0];
  const std::uint64_t groups = std::max<std::uint64_t>((threads + local - 1) / local, 1);
  const std::uint64_t max_x = kernel.device().limits().maxComputeWorkGroupCount[0];
  if (groups <= max_x) return {static_cast<std::uint32_t>(groups), 1, 1};
  const std::uint64_t y = (groups + max_x - 1) / max_x;
  if (y > kernel.device().limits().maxComputeWorkGroupCount[1]) {
    throw Error(fmt::format("kernel '{}': {} threads are more than one dispatch can run",
                            kernel.name(), threads));
  }
  return {static_cast<std::uint32_t>(max_x), static_cast<std::uint32_t>(y), 1};
}

void Stream::copy(BufferRange src, BufferRange dst) {
  check_recording("record a copy");
  check_range(src, "copy source");
  check_range(dst, "copy destination");
  if (src.size() != dst.size()) {
    throw Error(
        fmt::format("copy: the source range holds {} bytes but the destination {}; give "
                    "ranges of the same size",
                    src.size(), dst.size()));
  }
  if (src.buffer == dst.buffer && overlaps(src.offset, src.size(), dst.offset, dst.size())) {
    throw Error("copy: source and destination overlap in the same buffer");
  }
  const Access accesses[] = {{src.buffer->vk_buffer(), src.offset, src.size(), false},
                             {dst.buffer->vk_buffer(), dst.offset, dst.size(), true}};
  order(accesses);
  const VkBufferCopy region{src.offset, dst.offset, src.size()};
  record([region, from = src.buffer->vk_buffer(), to = dst.buffer->vk_buffer()](
             VkCommandBuffer commands) { vkCmdCopyBuffer(commands, from, to, 1, &region); });
  ++commands_;
  if (profile_start_) profile_command("copy");
}

void Stream::fill(BufferRange dst, std::uint32_t word) {
  check_recording("record a fill");
  check_range(dst, "fill");
  if (dst.offset % 4 != 0 || dst.size() % 4 != 0) {
    throw Error(fmt::format("fill: offset {} and size {} must be multiples of 4 bytes", dst.offset,
                            dst.size()));
  }
  const Access access[] = {{dst.buffer->vk_buffer(), dst.offset, dst.size(), true}};
  order(access);
  record([to = dst.buffer->vk_buffer(), offset = dst.offset, size = dst.size(),
          word](VkCommandBuffer commands) { vkCmdFillBuffer(commands, to, offset, size, word); });
  ++commands_;
  if (profile_start_) profile_command("fill");
}

void Stream::barrier() {
  check_recording("record a barrier");
  record_barrier(work_stages(), work_access());
}

Ticket Stream::submit(std::span<const Ticket> waits) {
  if (!pool_) throw Error("cannot submit a moved-from stream");
  end_recording();
  return submit_segments(0, segments_.size(), waits);
}

void Stream::end_recording() {
  if (!failed_.empty()) {
    throw Error(fmt::format("cannot submit: recording this stream failed ({}); record a new Stream",
                            failed_));
  }
  if (ended_) return;
  // Makes the work's writes visible to host reads once the ticket completes.
  record_barrier(VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT, /*counted=*/false);
  end_commands();
  ended_ = true;
  segments_.push_back(commands_buffer_);  // every segment, in order
  segment_values_.assign(segments_.size(), 0);
}

Ticket Stream::submit_segments(std::size_t first, std::size_t count,
                               std::span<const Ticket> waits) {
  if (!pool_) throw Error("cannot submit a moved-from stream");
  end_recording();
  if (count == 0 || first > segments_.size() || count > segments_.size() - first) {
    throw Error(fmt::format("submit_segments: segments [{}, {}) of a stream of {}", first,
                            first + count, segments_.size()));
  }
  segment_values_.resize(segments_.size());
  last_ = device_->submit(queue_, lane_,
                          std::span<const VkCommandBuffer>(segments_).subspan(first, count), waits);
  for (std::size_t k = 0; k < count; ++k)
    segment_values_[first + k] = last_.value - (count - 1 - k);
  return last_;
}

}  // namespace vkt
