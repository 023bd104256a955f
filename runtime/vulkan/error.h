#pragma once
// The one exception type of vktower.

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

}  // namespace vkt
