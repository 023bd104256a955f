#include "instance.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "detail/lifetime_lock.h"
#include "detail/log.h"
#include "detail/query_device.h"
#include "detail/vk_check.h"
#include "error.h"

namespace vkt {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

std::atomic<std::uint64_t> g_process_messages{0};

VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                VkDebugUtilsMessageTypeFlagsEXT,
                                                const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                void* user) {
  auto* counts = static_cast<Instance::MessageCounts*>(user);
  const char* text = data->pMessage != nullptr ? data->pMessage : "";
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    counts->errors.fetch_add(1);
    g_process_messages.fetch_add(1);
    detail::log().error("Vulkan validation: {}", text);
  } else if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    counts->warnings.fetch_add(1);
    g_process_messages.fetch_add(1);
    detail::log().warn("Vulkan validation: {}", text);
  } else {
    detail::log().debug("Vulkan: {}", text);
  }
  return VK_FALSE;
}

bool has_layer(const char* name) {
  std::uint32_t count = 0;
  vkEnumerateInstanceLayerProperties(&count, nullptr);
  std::vector<VkLayerProperties> layers(count);
  vkEnumerateInstanceLayerProperties(&count, layers.data());
  return std::any_of(layers.begin(), layers.end(), [&](const VkLayerProperties& l) {
    return std::strcmp(l.layerName, name) == 0;
  });
}

bool has_instance_extension(const char* name) {
  std::uint32_t count = 0;
  vkEnumerateInstanceExtensionProperties(nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  vkEnumerateInstanceExtensionProperties(nullptr, &count, extensions.data());
  return std::any_of(extensions.begin(), extensions.end(), [&](const VkExtensionProperties& e) {
    return std::strcmp(e.extensionName, name) == 0;
  });
}

}  // namespace

InstanceOptions InstanceOptions::from_environment() {
  InstanceOptions options;
  const char* env = std::getenv("VKT_VALIDATION");
  options.validation =
      env != nullptr && std::string_view(env) != "" && std::string_view(env) != "0";
  return options;
}

Instance::Instance(InstanceOptions options) : options_(std::move(options)) {
  std::uint32_t loader_version = VK_API_VERSION_1_0;
  if (vkEnumerateInstanceVersion(&loader_version) != VK_SUCCESS)
    loader_version = VK_API_VERSION_1_0;
  if (loader_version < VK_API_VERSION_1_1) {
    throw Error(
        fmt::format("the Vulkan loader supports API {}.{} only; vktower needs 1.1 or newer "
                    "(install a current loader: apt-get install libvulkan1)",
                    VK_API_VERSION_MAJOR(loader_version), VK_API_VERSION_MINOR(loader_version)));
  }

  std::vector<const char*> layers;
  std::vector<const char*> extensions;
  if (options_.validation) {
    if (!has_layer(kValidationLayer)) {
      throw Error(
          "VKT_VALIDATION is set but the Khronos validation layer is not installed: "
          "apt-get install vulkan-validationlayers (or unset VKT_VALIDATION)");
    }
    layers.push_back(kValidationLayer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  VkInstanceCreateFlags flags = 0;
  if (has_instance_extension(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    // MoltenVK and other portability drivers are listed only when asked for.
    extensions.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }

  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = options_.application_name.c_str();
  app.pEngineName = "vktower";
  app.apiVersion = std::min<std::uint32_t>(loader_version, VK_API_VERSION_1_3);

  VkDebugUtilsMessengerCreateInfoEXT messenger_info{};
  messenger_info.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
  messenger_info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                                   VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                                   VK_DEBUG_UTILS_MESSAGE_SEVERITY_INFO_BIT_EXT;
  messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger_info.pfnUserCallback = on_debug_message;
  messenger_info.pUserData = counts_.get();

  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  // Chained so that instance creation and destruction are validated too.
  info.pNext = options_.validation ? &messenger_info : nullptr;
  info.flags = flags;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = static_cast<std::uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<std::uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  {
    const std::unique_lock lifetime(detail::lifetime_lock());
    VKT_CHECK(vkCreateInstance(&info, nullptr, &instance_));
  }

  try {
    if (options_.validation) {
      auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
          vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
      if (create == nullptr)
        throw Error("vkCreateDebugUtilsMessengerEXT is missing from the loader");
      VKT_CHECK(create(instance_, &messenger_info, nullptr, &messenger_));
      detail::log().info("Vulkan validation layer on ({})", kValidationLayer);
    }
    std::uint32_t count = 0;
    VKT_CHECK(vkEnumeratePhysicalDevices(instance_, &count, nullptr));
    physical_.resize(count);
    VKT_CHECK(vkEnumeratePhysicalDevices(instance_, &count, physical_.data()));
    physical_.resize(count);
    for (std::uint32_t i = 0; i < count; ++i) {
      infos_.push_back(detail::query_device_info(instance_, physical_[i], i));
    }
  } catch (...) {
    release();
    throw;
  }
}

Instance::~Instance() {
  release();
}

void Instance::release() {
  if (messenger_ != VK_NULL_HANDLE) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    destroy(instance_, messenger_, nullptr);
    messenger_ = VK_NULL_HANDLE;
  }
  if (instance_ != VK_NULL_HANDLE) {
    const std::unique_lock lifetime(detail::lifetime_lock());
    vkDestroyInstance(instance_, nullptr);
    instance_ = VK_NULL_HANDLE;
  }
}

const DeviceInfo& Instance::device(std::uint32_t index) const {
  if (index < infos_.size()) return infos_[index];
  std::string listing;
  for (const DeviceInfo& d : infos_) listing += fmt::format("\n  {}: {}", d.index, d.name);
  if (infos_.empty()) {
    throw Error(
        fmt::format("device index {} does not exist: this machine has no Vulkan device. "
                    "Install a driver (apt-get install mesa-vulkan-drivers gives the "
                    "lavapipe CPU device)",
                    index));
  }
  throw Error(
      fmt::format("device index {} does not exist: this machine has {} Vulkan device{} "
                  "(indices 0 to {}); pick one of them (vkt-info lists them):{}",
                  index, infos_.size(), infos_.size() == 1 ? "" : "s", infos_.size() - 1, listing));
}

VkPhysicalDevice Instance::vk_physical_device(std::uint32_t index) const {
  (void)device(index);  // range check with the helpful message
  return physical_[index];
}

std::uint64_t Instance::validation_warnings() const {
  return counts_->warnings.load();
}
std::uint64_t Instance::validation_errors() const {
  return counts_->errors.load();
}
std::uint64_t Instance::process_validation_messages() {
  return g_process_messages.load();
}

}  // namespace vkt
