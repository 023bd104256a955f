// Builds against an installed vktower: lists the Vulkan devices, then trains
// DESIGN.md's scalar example one step (c = 10, SGD with learning rate 1,
// loss = sum |y - x c| with x = y = [[1], [2]]): c must become 7.
#include <vktower/vktower.h>

#include <exception>
#include <iostream>
#include <vector>

int main() {
  try {
    vkt::Instance instance;
    const auto& devices = instance.devices();
    std::cout << "vktower " << vkt::version() << " consumer: " << devices.size()
              << " Vulkan device(s)\n";
    if (devices.empty()) {
      std::cerr << "no Vulkan device; install one, e.g. apt-get install mesa-vulkan-drivers\n";
      return 1;
    }
    std::cout << "device 0: " << instance.devices()[0].name << "\n";

    vkt::Device device(instance, 0);
    vkt::Graph g(device);
    const vkt::Tensor c = g.variable("c", {}, vkt::Initializer::constant(10.0f));
    const vkt::Tensor x = g.input("x", {2, 1});
    const vkt::Tensor y = g.input("y", {2, 1});
    const vkt::Tensor loss = vkt::reduce_sum(vkt::abs(y - x * c));
    vkt::SGD sgd(1.0f);
    vkt::Executor step(g, {loss, sgd.minimize(loss)});
    step.feed("x", std::vector<float>{1, 2});
    step.feed("y", std::vector<float>{1, 2});
    step.run();
    const float loss_value = step.read(loss)[0];
    const float c_value = g.values(c)[0];
    std::cout << "loss " << loss_value << ", c " << c_value << "\n";
    return loss_value == 27.0f && c_value == 7.0f ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "vktower consumer: " << e.what() << "\n";
    return 1;
  }
}
