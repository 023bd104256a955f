#pragma once
// One Instance and Device per test process, shared by the test cases in it, so
// that kernels are built once. main() releases them before it reads the
// validation counter, so leaks reported at device destruction still count.

#include <memory>

#include <vktower/runtime/vulkan/device.h>
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

inline Device& shared_device() {
  SharedDevice& s = shared_slot();
  if (!s.device) {
    s.instance = std::make_unique<Instance>();
    s.device = std::make_unique<Device>(*s.instance, 0);
  }
  return *s.device;
}

inline void release_shared_device() {
  shared_slot().device.reset();
  shared_slot().instance.reset();
}

}  // namespace vkt::test
