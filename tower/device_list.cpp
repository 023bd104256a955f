#include "device_list.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "../runtime/vulkan/detail/log.h"
#include "../runtime/vulkan/error.h"
#include "../runtime/vulkan/instance.h"
#include "device_choice.h"

namespace vkt {
namespace {

// Once per process: the samples resolve VKT_DEVICES, then their Estimator's
// towers do again; one line says it.
std::atomic<bool> g_override_logged{false};

/// "0,0 (llvmpipe (LLVM 15.0.6, 256 bits))": the indices, then each name once.
std::string named(const std::vector<std::uint32_t>& indices, const Instance& instance) {
  std::vector<std::string> names;
  for (const std::uint32_t i : indices) {
    const std::string& name = instance.device(i).name;
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return fmt::format("{} ({})", fmt::join(indices, ","), fmt::join(names, ", "));
}

}  // namespace

std::vector<std::uint32_t> parse_device_list(std::string_view spec, const Instance& instance) {
  return parse_device_list(spec, instance.devices());
}

std::vector<std::uint32_t> device_list_from_environment(const Instance& instance,
                                                        std::vector<std::uint32_t> fallback) {
  if (const char* env = std::getenv("VKT_DEVICES"); env != nullptr) {
    std::vector<std::uint32_t> chosen;
    try {
      chosen = parse_device_list(env, instance);
    } catch (const Error& e) {
      throw Error(fmt::format("VKT_DEVICES: {}", e.what()));
    }
    if (!g_override_logged.exchange(true)) {
      const std::vector<std::uint32_t> program =
          fallback.empty() ? choose_default_devices(instance.devices()).devices : fallback;
      detail::log().info(
          "VKT_DEVICES='{}' overrides the program's device choice ({}{}): towers on devices {}",
          env, fallback.empty() ? "the default, " : "",
          program.empty() ? "no usable device" : fmt::format("{}", fmt::join(program, ",")),
          named(chosen, instance));
    }
    return chosen;
  }
  // Checked only here: VKT_DEVICES may move a program to a machine its list does not fit.
  for (std::uint32_t index : fallback) (void)instance.device(index);  // throws for unknown ones
  if (!fallback.empty()) return fallback;
  try {
    return parse_device_list("all", instance);
  } catch (const Error& e) {
    throw Error(fmt::format("no devices given (the default choice): {}", e.what()));
  }
}

namespace detail {
void forget_device_override_log() {
  g_override_logged = false;
}
}  // namespace detail

}  // namespace vkt
