#pragma once
// The one exception type of vktower.

#include <cstdint>
#include <stdexcept>
#include <string>

namespace vkt {

/// Every failure a user can cause or meet: a bad argument, a missing device, a
/// Vulkan call that failed (the message then names the VkResult and the call).
/// Messages say what was wrong and how to fix it. Thrown before any state changes.
///
///   try { vkt::Device device(instance, 7); }
///   catch (const vkt::Error& e) { std::cerr << e.what() << "\n"; }
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A device that stopped working (VK_ERROR_DEVICE_LOST from a submit or a
/// wait, or the fault DeviceOptions::lose_device_at_submit injects). The
/// Device refuses every later submit; the work that used it is to be given up
/// and, to go on, redone from saved state on the devices that remain (the
/// Estimator does that under RunConfig::on_device_loss = Continue).
///
///   try { estimator.train(input, {.max_steps = 1000}); }
///   catch (const vkt::DeviceLost& e) { std::cerr << e.what() << "\n"; }
class DeviceLost : public Error {
 public:
  DeviceLost(const std::string& message, std::uint32_t device_index)
      : Error(message), device_index_(device_index) {}
  /// The lost device's index among the Instance's devices (vkt-info's numbering).
  std::uint32_t device_index() const { return device_index_; }

 private:
  std::uint32_t device_index_;
};

}  // namespace vkt
