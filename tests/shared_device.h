#pragma once
// One Instance and Device per test process, shared by the test cases in it, so
// that kernels are built once. main() makes the Instance before any test runs,
// so the Vulkan driver stays loaded for the whole process, and releases both
// before it reads the validation counter, so leaks reported at device
// destruction still count.

#include <memory>

#include <vktower/runtime/vulkan/device.h>
#include <vktower/runtime/vulkan/error.h>
#include <vktower/runtime/vulkan/instance.h>

namespace vkt::test {

struct SharedDevice {
  std::unique_ptr<Instance> instance;
  std::unique_ptr<Device> device;
};

inline SharedDevice& shared_slot() {
  static SharedDevice slot;
  return slot;
}

/// Makes the shared Instance now, before any test case. The loader loads the
/// driver for each Instance and unloads it with the last one; NVIDIA's driver
/// takes static thread-local storage that the C library never gives back, so
/// after a few dozen load and unload cycles every vkCreateInstance of the
/// process fails (docs/RELIABILITY.md). While this Instance lives, the
/// Instances the test cases make and destroy reuse the loaded driver. Where
/// no Instance can be made (no driver, no validation layer) it does nothing:
/// each test case then fails with the library's own message saying what to
/// install.
inline void keep_driver_loaded() {
  SharedDevice& s = shared_slot();
  if (s.instance) return;
  try {
    s.instance = std::make_unique<Instance>();
  } catch (const Error&) {
  }
}

inline Device& shared_device() {
  SharedDevice& s = shared_slot();
  if (!s.instance) s.instance = std::make_unique<Instance>();
  if (!s.device) s.device = std::make_unique<Device>(*s.instance, 0);
  return *s.device;
}

inline void release_shared_device() {
  shared_slot().device.reset();
  shared_slot().instance.reset();
}

}  // namespace vkt::test
