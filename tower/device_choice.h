#pragma once
// Which devices a run takes when none are named: TensorFlow's replicate_model_fn
// contract (every GPU; the CPU only when there is no GPU). Pure: no Vulkan, so
// the tests and the device-list fuzz target use it on made-up device lists.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../runtime/vulkan/device_info.h"

namespace vkt {

/// Discrete, integrated and virtual GPUs.
bool is_gpu(DeviceType type);

/// Whether a default run uses one device, and why (vkt-info prints it).
struct DeviceVerdict {
  std::uint32_t index = 0;  ///< DeviceInfo::index
  bool used = false;
  std::string reason;  ///< e.g. "discrete GPU", or why it is left out and how to pick it
};

/// The default choice over a machine's devices.
struct DeviceChoice {
  std::vector<std::uint32_t> devices;   ///< one tower per chosen device, in list order
  std::vector<DeviceVerdict> verdicts;  ///< one per listed device, in list order
};

/// The devices a run takes when none are named (an empty
/// ReplicateOptions::devices, `--devices all`, VKT_DEVICES unset): every usable
/// GPU; when no GPU is usable, every usable CPU device (lavapipe); when there is
/// neither, every other usable device. A device with an unusable_reason never.
/// A GPU is never paired with the CPU device by default: it would wait for it
/// on equal shards every step. Never throws; `devices` may come out empty.
///
///   vkt::DeviceChoice c = vkt::choose_default_devices(instance.devices());
DeviceChoice choose_default_devices(std::span<const DeviceInfo> devices);

/// One line naming `devices` for an error message: "this machine has 2 Vulkan
/// devices: 0: NAME (discrete GPU); 1: NAME (CPU, unusable: REASON)".
std::string describe_devices(std::span<const DeviceInfo> devices);

}  // namespace vkt
