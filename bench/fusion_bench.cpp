// vkt-bench-fusion: the fused dense layer (matmul_bias_act, dense_fused.h)
// against the unfused ops (matmul, bias_add, relu) in the same run, steps
// alternating between the two: one layer's forward and backward per kernel
// (device timestamps after every command), and the MLP 784-1024-1024-10
// training step (batch 256, SGD, one Executor) and vkt-digits' (64-256-128-10,
// dropout, Adam, batch 192): dispatches, device ms and
// examples/s, with the fused / unfused ratios (medians, and the fastest
// steps, which a shared machine's load disturbs least).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <vktower/vktower.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

using vkt::Tensor;
using vkt::layers::Activation;

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The fastest repetition: on a shared machine the others' load only adds.
double fastest(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}

std::vector<float> random_values(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  std::uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / 16777216.0f * 2.0f - 1.0f;
  }
  return v;
}

/// A dense layer, fused (layers::dense's ops) or as matmul, bias_add, activation.
enum class Path { Fused, FusedInMatmuls, Unfused };

Tensor layer(const Tensor& x, std::int64_t units, Activation act, const std::string& name,
             Path path) {
  vkt::Graph& g = x.graph();
  const Tensor w =
      g.variable(name + "/kernel", {x.shape()[1], units}, vkt::Initializer::glorot_uniform());
  const Tensor b = g.variable(name + "/bias", {units}, vkt::Initializer::zeros());
  if (path != Path::Unfused) {
    const auto backward =
        path == Path::Fused ? vkt::DenseBackward::Materialized : vkt::DenseBackward::InMatmuls;
    if (vkt::fuses_activation(act)) return vkt::matmul_bias_act(x, w, b, act, backward);
    return vkt::layers::activate(vkt::matmul_bias_act(x, w, b, Activation::None, backward), act);
  }
  return vkt::layers::activate(vkt::bias_add(vkt::matmul(x, w), b), act);
}

/// One program per path, run alternately.
struct Program {
  std::unique_ptr<vkt::Graph> graph;
  std::unique_ptr<vkt::Executor> exec;
  std::map<std::string, std::vector<double>> kernel_ms;  // "op kernel" -> per-step sums
  std::vector<double> device_ms, wall_ms;
};

void run_once(Program& p, bool profile) {
  const auto start = std::chrono::steady_clock::now();
  p.exec->run();
  p.exec->wait();
  p.wall_ms.push_back(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  if (const auto ms = p.exec->device_ms()) p.device_ms.push_back(*ms);
  if (!profile) return;
  std::map<std::string, double> sums;
  for (const auto& c : p.exec->profile())
    sums[fmt::format("{} -> {} ({})", c.op, c.tensor, c.kernel)] += c.ms;
  for (const auto& [k, ms] : sums) p.kernel_ms[k].push_back(ms);
}

Program layer_program(vkt::Device& device, std::int64_t batch, std::int64_t in, std::int64_t units,
                      Path path) {
  Program p;
  p.graph = std::make_unique<vkt::Graph>(device, vkt::GraphOptions{.seed = 1});
  vkt::Graph& g = *p.graph;
  const Tensor x = g.input("x", {batch, in});
  const Tensor y = layer(x, units, Activation::Relu, "d", path);
  const Tensor c =
      g.constant({batch, units}, random_values(static_cast<std::size_t>(batch * units), 2));
  const Tensor loss = vkt::reduce_sum(y * c);
  const auto grads =
      vkt::gradients(loss, {x, *g.find_variable("d/kernel"), *g.find_variable("d/bias")});
  p.exec = std::make_unique<vkt::Executor>(
      g, std::vector<Tensor>{grads[0].dense, grads[1].dense, grads[2].dense},
      vkt::ExecutorOptions{.profile = true});
  p.exec->feed("x", random_values(static_cast<std::size_t>(batch * in), 1));
  return p;
}

/// An MLP trained by one Executor: vkt-bench-train's 784-1024-1024-10 with SGD, or
/// vkt-digits' 64-256-128-10 with dropout 0.2, example weights and Adam.
struct Model {
  std::vector<std::int64_t> widths;
  bool digits = false;
};

Program mlp_program(vkt::Device& device, std::int64_t batch, Path path, const Model& m,
                    vkt::Precision precision = vkt::Precision::F32, bool fuse = true) {
  Program p;
  p.graph =
      std::make_unique<vkt::Graph>(device, vkt::GraphOptions{.seed = 1, .precision = precision});
  vkt::Graph& g = *p.graph;
  const Tensor x = g.input("x", {batch, m.widths.front()});
  const Tensor labels = g.input("labels", {batch}, vkt::DType::I32);
  Tensor h = x;
  for (std::size_t l = 1; l < m.widths.size(); ++l) {
    const bool hidden = l + 1 < m.widths.size();
    h = layer(h, m.widths[l], hidden ? Activation::Relu : Activation::None, fmt::format("d{}", l),
              path);
    if (hidden && m.digits) h = vkt::dropout(h, 0.2f, static_cast<std::uint32_t>(l));
  }
  Tensor weights;
  if (m.digits) weights = g.input("weights", {batch});
  const Tensor loss = vkt::sparse_softmax_cross_entropy(labels, h, weights);
  std::unique_ptr<vkt::Optimizer> opt;
  if (m.digits)
    opt = std::make_unique<vkt::Adam>(1e-3);
  else
    opt = std::make_unique<vkt::SGD>(0.01f);
  const Tensor train = opt->minimize(loss);
  p.exec = std::make_unique<vkt::Executor>(g, std::vector<Tensor>{loss, train},
                                           vkt::ExecutorOptions{.timestamps = true, .fuse = fuse});
  p.exec->feed("x", random_values(static_cast<std::size_t>(batch * m.widths.front()), 3));
  std::vector<std::int32_t> l(static_cast<std::size_t>(batch));
  for (std::size_t i = 0; i < l.size(); ++i) l[i] = static_cast<std::int32_t>(i % 10);
  p.exec->feed("labels", l);
  if (m.digits) p.exec->feed("weights", std::vector<float>(static_cast<std::size_t>(batch), 1.0f));
  return p;
}

/// `reps` steps of each program, alternating, after one warm-up step each
/// (not timed).
void alternate(Program& a, Program& b, int reps) {
  for (int r = 0; r <= reps; ++r) {
    run_once(a, false);
    run_once(b, false);
    if (r == 0)
      for (auto* p : {&a, &b}) p->device_ms.clear(), p->wall_ms.clear();
  }
}

/// Steps alternating between the fused and the unfused model.
void compare_mlp(vkt::Device& device, std::int64_t batch, const Model& m, int reps,
                 const char* tag) {
  Program mf = mlp_program(device, batch, Path::Fused, m);
  Program mu = mlp_program(device, batch, Path::Unfused, m);
  alternate(mf, mu, reps);
  const double fw = median(mf.wall_ms), uw = median(mu.wall_ms);
  const double fd = median(mf.device_ms), ud = median(mu.device_ms);
  fmt::print("  fastest step: fused {:.2f} ms, unfused {:.2f} ms wall\n", fastest(mf.wall_ms),
             fastest(mu.wall_ms));
  fmt::print(
      "  fused:   {:7.0f} examples/s, step {:.2f} ms wall, {:.2f} ms device, {} dispatches\n",
      static_cast<double>(batch) / fw * 1e3, fw, fd, mf.exec->dispatch_count());
  fmt::print(
      "  unfused: {:7.0f} examples/s, step {:.2f} ms wall, {:.2f} ms device, {} dispatches\n",
      static_cast<double>(batch) / uw * 1e3, uw, ud, mu.exec->dispatch_count());
  fmt::print("{}_dispatches_fused={} {}_dispatches_unfused={}\n", tag, mf.exec->dispatch_count(),
             tag, mu.exec->dispatch_count());
  fmt::print("{}_fused_vs_unfused_examples_ratio={:.3f} (medians; fastest steps {:.3f})\n", tag,
             uw / fw, fastest(mu.wall_ms) / fastest(mf.wall_ms));
}

/// The MLP under a half precision with the Executor's chains fused and not:
/// on the kernels that multiply half tensors (a GPU's, or --matmul tiled) the
/// casts around each product run inside the neighbouring chains.
void compare_chains(vkt::Device& device, std::int64_t batch, const Model& m, int reps,
                    vkt::Precision precision) {
  Program on = mlp_program(device, batch, Path::Unfused, m, precision, true);
  Program off = mlp_program(device, batch, Path::Unfused, m, precision, false);
  alternate(on, off, reps);
  const double fw = median(on.wall_ms), uw = median(off.wall_ms);
  fmt::print("  chains fused:   {:7.0f} examples/s, {:.2f} ms device, {} dispatches\n",
             static_cast<double>(batch) / fw * 1e3, median(on.device_ms),
             on.exec->dispatch_count());
  fmt::print("  chains unfused: {:7.0f} examples/s, {:.2f} ms device, {} dispatches\n",
             static_cast<double>(batch) / uw * 1e3, median(off.device_ms),
             off.exec->dispatch_count());
  const std::string tag = fmt::format("mlp_{}", vkt::to_string(precision));
  fmt::print("{}_dispatches_chains_fused={} {}_dispatches_chains_unfused={}\n", tag,
             on.exec->dispatch_count(), tag, off.exec->dispatch_count());
  fmt::print("{}_chains_fused_vs_unfused_examples_ratio={:.3f} (medians; fastest steps {:.3f})\n",
             tag, uw / fw, fastest(off.wall_ms) / fastest(on.wall_ms));
  // The step's intermediate tensors at their peak, against the f32 model's
  // (its dense layers fused, as layers::dense makes them): the activations
  // the backward pass reads are kept in half where the products take half
  // kernels, as rounded f32 values where they take the texel kernel.
  const Program f32 = mlp_program(device, batch, Path::Fused, m);
  const double half_bytes = static_cast<double>(on.exec->activation_bytes());
  const double f32_bytes = static_cast<double>(f32.exec->activation_bytes());
  fmt::print("  activation arena: {:.2f} MiB at {}, {:.2f} MiB at fp32\n", half_bytes / 1048576.0,
             vkt::to_string(precision), f32_bytes / 1048576.0);
  fmt::print("{}_activation_bytes_vs_fp32_ratio={:.3f}\n", tag, half_bytes / f32_bytes);
}

/// Eight elementwise ops over [rows, 64] and a [64] row, one chain kernel when
/// fused: `half_out` ends with a cast to f16 (each invocation then computes two
/// elements). Its first Executor on `device` builds the chain kernel.
Program chain_program(vkt::Device& device, std::int64_t rows, bool fuse, bool half_out) {
  Program p;
  p.graph = std::make_unique<vkt::Graph>(device, vkt::GraphOptions{.seed = 1});
  vkt::Graph& g = *p.graph;
  const Tensor x = g.input("x", {rows, 64}), row = g.input("row", {64});
  const Tensor v = vkt::square(vkt::relu(vkt::sigmoid(vkt::tanh(x * row) + 0.5f) - x));
  const Tensor y = half_out ? vkt::cast(v, vkt::DType::F16) : vkt::neg(v);
  p.exec = std::make_unique<vkt::Executor>(g, std::vector<Tensor>{y},
                                           vkt::ExecutorOptions{.timestamps = true, .fuse = fuse});
  p.exec->feed("x", random_values(static_cast<std::size_t>(rows * 64), 4));
  p.exec->feed("row", random_values(64, 5));
  return p;
}

/// The chain kernel's build time on a fresh Device (the fused program's
/// construction and first step: what each new Device pays per distinct chain,
/// most of it the driver's compile) and its speed against the eight ops run
/// one kernel each.
void compare_elementwise_chain(vkt::Instance& instance, std::uint32_t device_index,
                               std::int64_t rows, int reps, bool half_out) {
  vkt::Device device(instance, device_index);
  const auto start = std::chrono::steady_clock::now();
  Program on = chain_program(device, rows, true, half_out);
  run_once(on, false);  // the kernels are built as the first run records them
  const double build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  Program off = chain_program(device, rows, false, half_out);
  alternate(on, off, reps);
  const std::string tag = half_out ? "chain8_f16_out" : "chain8_f32";
  fmt::print(
      "  {}: fused {:.3f} ms device ({} dispatch), unfused {:.3f} ms ({} dispatches); "
      "built and first run in {:.1f} ms\n",
      tag, median(on.device_ms), on.exec->dispatch_count(), median(off.device_ms),
      off.exec->dispatch_count(), build_ms);
  fmt::print("{}_fused_vs_unfused_device_ratio={:.3f}\n", tag,
             median(off.device_ms) / median(on.device_ms));
  fmt::print("{}_fused_build_ms={:.1f}\n", tag, build_ms);
}

void report_layer(Program& fused, Program& in_matmuls, Program& plain) {
  for (auto* p : {&fused, &in_matmuls, &plain}) {
    fmt::print("  {} path, device ms per command (fastest of the steps):\n",
               p == &fused        ? "fused (dpre materialized)"
               : p == &in_matmuls ? "fused (dpre in the matmuls)"
                                  : "unfused");
    double total = 0;
    for (const auto& [k, v] : p->kernel_ms) {
      fmt::print("    {:<64} {:8.3f}\n", k, fastest(v));
      total += fastest(v);
    }
    fmt::print("    {:<64} {:8.3f}  ({} dispatches)\n", "sum", total, p->exec->dispatch_count());
    p->device_ms = {total};
  }
  fmt::print("layer_fused_vs_unfused_device_ratio={:.3f}\n",
             plain.device_ms[0] / fused.device_ms[0]);
  fmt::print("layer_in_matmuls_vs_materialized_device_ratio={:.3f}\n",
             fused.device_ms[0] / in_matmuls.device_ms[0]);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vkt-bench-fusion: the fused dense layer against the unfused ops, same run"};
  int reps = 7;
  std::int64_t batch = 256, in = 1024, units = 1024;
  std::uint32_t device_index = 0;
  app.add_option("--reps", reps, "steps per path (alternating, after one warm-up)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--batch", batch, "rows")->capture_default_str();
  app.add_option("--in", in, "the layer's input width")->capture_default_str();
  app.add_option("--units", units, "the layer's output width")->capture_default_str();
  app.add_option("--device", device_index, "Vulkan device index")->capture_default_str();
  std::string precision = "fp32", matmul = "auto";
  app.add_option("--precision", precision,
                 "fp16 or bf16: also the MLP under that precision, chains fused and not")
      ->capture_default_str();
  app.add_option("--matmul", matmul,
                 "the device's matmul kernels: auto, tiled (the half products between casts, "
                 "as on a GPU) or texel")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    vkt::Instance instance;
    vkt::Device device(instance, device_index);
    device.set_matmul_kernels(vkt::parse_matmul_kernels(matmul, "--matmul"));
    const vkt::Precision half = vkt::parse_precision(precision, "--precision");
    const char* lp = std::getenv("LP_NUM_THREADS");
    const char* ob = std::getenv("OPENBLAS_CORETYPE");
    fmt::print(
        "device {}: {}; CPU {}; LP_NUM_THREADS={}, OPENBLAS_CORETYPE={} (no OpenBLAS here)\n",
        device_index, device.info().name, cpu_model(), lp ? lp : "unset", ob ? ob : "unset");

    fmt::print("an elementwise chain of 8 ops over {} x 64, fused and not:\n", batch * 64);
    for (const bool half_out : {false, true}) {
      compare_elementwise_chain(instance, device_index, batch * 64, reps, half_out);
    }

    fmt::print("dense layer {}x{} -> {} ReLU, forward and the gradients of x, kernel and bias:\n",
               batch, in, units);
    Program lf = layer_program(device, batch, in, units, Path::Fused);
    Program lm = layer_program(device, batch, in, units, Path::FusedInMatmuls);
    Program lu = layer_program(device, batch, in, units, Path::Unfused);
    for (int r = 0; r < reps; ++r) {
      run_once(lf, r > 0);  // the first run of each is a warm-up
      run_once(lm, r > 0);
      run_once(lu, r > 0);
    }
    report_layer(lf, lm, lu);

    fmt::print("MLP 784-1024-1024-10 ReLU, batch {}, SGD, one Executor (no towers):\n", batch);
    compare_mlp(device, batch, {.widths = {784, 1024, 1024, 10}}, reps, "mlp");
    fmt::print("vkt-digits' MLP 64-256-128-10, dropout 0.2, Adam, batch 192, one Executor:\n");
    compare_mlp(device, 192, {.widths = {64, 256, 128, 10}, .digits = true}, reps, "digits");
    if (half != vkt::Precision::F32) {
      fmt::print("MLP 784-1024-1024-10 ReLU, batch {}, SGD, --precision {}, --matmul {}:\n", batch,
                 precision, matmul);
      compare_chains(device, batch, {.widths = {784, 1024, 1024, 10}}, reps, half);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "vkt-bench-fusion: {}\n", e.what());
    return 1;
  }
  return 0;
}
