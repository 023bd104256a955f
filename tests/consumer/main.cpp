// Builds against an installed vktower and lists the Vulkan devices.
#include <vktower/vktower.h>

#include <exception>
#include <iostream>

int main() {
  try {
    vkt::Instance instance;
    const auto& devices = instance.devices();
    std::cout << "vktower consumer: " << devices.size() << " Vulkan device(s)\n";
    if (devices.empty()) {
      std::cerr << "no Vulkan device; install one, e.g. apt-get install mesa-vulkan-drivers\n";
      return 1;
    }
    std::cout << "device 0: " << instance.devices()[0].name << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "vktower consumer: " << e.what() << "\n";
    return 1;
  }
}
