// Builds against an installed vktower: lists the Vulkan devices, then trains
// the README's scalar example one step (c = 10, SGD with learning rate 1,
// loss = sum |y - x c| with x = y = [[1], [2]]): c must become 7, on one
// graph and again through the Estimator on two towers (Sum).
#include <vktower/runtime/mpi/process_group.h>
#include <vktower/vktower.h>

#include <exception>
#include <iostream>
#include <memory>
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
    // Links the MPI layer: a static libvktower built with MPI needs MPI's
    // libraries at this link, which the package must provide.
    std::cout << "MPI " << (vkt::mpi_available() ? "built in" : "not built in") << "\n";
    if (vkt::launched_by_mpirun()) std::cout << "rank " << vkt::mpi_world().rank() << "\n";
    // Links the tokenizers: a static libvktower needs sentencepiece and ICU at this link.
    if (vkt::models::gpt2_pre_tokenize("naïve café").size() != 2) return 1;
    try {
      vkt::models::load_tokenizer("/no-such-model-folder");
      return 1;
    } catch (const vkt::Error&) {
      std::cout << "tokenizers linked\n";
    }

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
    if (loss_value != 27.0f || c_value != 7.0f) return 1;

    const vkt::ModelFn model = [](vkt::ModelContext& ctx, const vkt::TensorDict& f,
                                  const vkt::TensorDict& l, vkt::Mode mode, const vkt::Params&) {
      const vkt::Tensor c = ctx.graph().variable("c", {}, vkt::Initializer::constant(10.0f));
      const vkt::Tensor loss = vkt::reduce_sum(vkt::abs(l.at("y") - f.at("x") * c));
      vkt::TowerOptimizer sgd(std::make_unique<vkt::SGD>(1.0f));
      return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = sgd.minimize(loss)};
    };
    vkt::Estimator estimator(
        vkt::replicate_model_fn(model,
                                {.loss_reduction = vkt::LossReduction::Sum, .devices = {0, 0}}),
        {.progress = false});
    const vkt::HostTensor ones_twos = vkt::HostTensor::floats({2, 1}, {1, 2});
    estimator.train(vkt::dataset_input(vkt::Dataset({{"x", ones_twos}, {"y", ones_twos}}),
                                       {.batch_size = 2, .drop_remainder = true}),
                    {.steps = 1});
    const float towers_c = estimator.variable_value("c").f32.at(0);
    std::cout << "Estimator on two towers: c " << towers_c << "\n";
    return towers_c == 7.0f ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "vktower consumer: " << e.what() << "\n";
    return 1;
  }
}
