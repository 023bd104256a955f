// vkt-bench-startup: how long vkt-digits takes from process start to its first
// training step (its own `startup_s=` line) with the disk caches cold and
// warm, and where the time goes. Each run is a new process on one tower
// (--devices 0 --steps 1). Two caches matter: vktower's (VKT_CACHE_DIR: the
// Vulkan pipeline cache, the tuning cache) and the driver's own (Mesa keeps
// compiled shaders in MESA_SHADER_CACHE_DIR); both are pointed at temporary
// directories, so "cold" is cold whatever the user's home holds:
//   cold           both empty (a new directory per run)
//   warm           both as the previous cold run and one untimed run left them
//   vktower only   vktower's warm, Mesa's empty
//   driver only    VKT_CACHE_DIR=off, Mesa's warm
// startup_s ends where the first step starts; first_step_s where it ends (on
// lavapipe the shaders' machine code is compiled at their first dispatch, so
// the driver's cache shows there; and pipelines build on worker threads while
// the step is recorded, so first_step_s is the figure to read). Then the same program's phases,
// cold and warm, timed inside one process (vkt-bench-startup --phases): dynamic loading, instance,
// device, data, an Estimator's model to its first step, the step, and every embedded shader's
// pipeline. Last line: first_step_warm_s=S (the start-up goal's figure).
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <vktower/runtime/vulkan/kernel.h>
#include <vktower/runtime/vulkan/shader_registry.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>
#include <vktower/vktower.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../samples/sample_throughput.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Where a run keeps its caches.
struct Caches {
  std::string vktower;  // VKT_CACHE_DIR ("off": none)
  std::string mesa;     // MESA_SHADER_CACHE_DIR
};

struct ChildResult {
  std::string output;
  double wall_s = 0;  // spawn to exit
};

// Runs `argv` with the caches in its environment; its stdout, and how long it ran.
ChildResult run_child(const std::vector<std::string>& argv, const Caches& caches) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.starts_with("VKT_CACHE_DIR=") || entry.starts_with("MESA_SHADER_CACHE_DIR=") ||
        entry.starts_with("VKT_VALIDATION=")) {
      continue;
    }
    env_strings.emplace_back(entry);
  }
  env_strings.push_back("VKT_CACHE_DIR=" + caches.vktower);
  env_strings.push_back("MESA_SHADER_CACHE_DIR=" + caches.mesa);
  std::vector<char*> envp, args;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (std::string& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  int out[2];
  if (::pipe(out) != 0) throw vkt::Error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  const Clock::time_point start = Clock::now();
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (spawned != 0) {
    ::close(out[0]);
    throw vkt::Error(fmt::format("cannot start {}: {}", argv[0], std::strerror(spawned)));
  }
  ChildResult result;
  char buffer[4096];
  for (ssize_t n; (n = ::read(out[0], buffer, sizeof(buffer))) > 0;)
    result.output.append(buffer, n);
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.wall_s = seconds(start, Clock::now());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw vkt::Error(
        fmt::format("{} failed (status {}); its output:\n{}", argv[0], status, result.output));
  }
  return result;
}

// The value of `name=` in a child's output.
double value_of(const std::string& output, const std::string& name) {
  const std::size_t at = output.rfind(name + "=");
  if (at == std::string::npos) {
    throw vkt::Error(fmt::format("no {}= in the output:\n{}", name, output));
  }
  return std::stod(output.substr(at + name.size() + 1));
}

struct Scenario {
  const char* name;
  std::vector<double> startup_s, first_step_s, wall_s;
};

// --runs times: a cold run on fresh caches, then warm and half-warm runs on them.
std::vector<Scenario> time_digits(const std::string& program, int runs, const fs::path& root) {
  std::vector<Scenario> scenarios{{"cold", {}, {}, {}},
                                  {"warm", {}, {}, {}},
                                  {"vktower cache only", {}, {}, {}},
                                  {"driver cache only", {}, {}, {}}};
  int fresh = 0;
  const auto new_dir = [&] {
    // Made here: Mesa disables its cache rather than make a missing parent.
    const fs::path dir = root / fmt::format("d{}", fresh++);
    fs::create_directories(dir);
    return dir.string();
  };
  for (int r = 0; r < runs; ++r) {
    const std::string dir = new_dir();
    const Caches warm{dir + "/vktower", dir + "/mesa"};
    const std::vector<Caches> caches{
        warm, warm, {warm.vktower, new_dir() + "/mesa"}, {"off", warm.mesa}};
    const auto run_digits = [&](const Caches& c) {
      return run_child(
          {program, "--devices", "0", "--steps", "1", "--model-dir", new_dir() + "/model"}, c);
    };
    for (std::size_t s = 0; s < scenarios.size(); ++s) {
      // Mesa writes its cache from a queue that a process's exit may cut short
      // (the warm run after a cold one measured 4x the driver-only run): one
      // untimed run completes the caches before the warm ones are timed.
      if (s == 1) run_digits(warm);
      const ChildResult child = run_digits(caches[s]);
      scenarios[s].startup_s.push_back(value_of(child.output, "startup_s"));
      scenarios[s].first_step_s.push_back(value_of(child.output, "first_step_s"));
      scenarios[s].wall_s.push_back(child.wall_s);
    }
  }
  return scenarios;
}

// ---- --phases: one process, each phase timed ----

vkt::EstimatorSpec digits_mlp(vkt::ModelContext& ctx, const vkt::TensorDict& f,
                              const vkt::TensorDict& l, vkt::Mode mode, const vkt::Params&) {
  using vkt::layers::Activation;
  const vkt::Tensor h1 = vkt::layers::dense(f.at("x"), 256, Activation::Relu, "hidden1");
  const vkt::Tensor h2 =
      vkt::layers::dense(vkt::dropout(h1, 0.2f, 1), 128, Activation::Relu, "hidden2");
  const vkt::Tensor logits =
      vkt::layers::dense(vkt::dropout(h2, 0.2f, 2), 10, Activation::None, "logits");
  const vkt::Tensor loss =
      vkt::sparse_softmax_cross_entropy(l.at("y"), logits, ctx.example_weights());
  vkt::TowerOptimizer adam([] { return std::make_unique<vkt::Adam>(1e-3f); });
  return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = adam.minimize(loss)};
}

// Every embedded shader's pipeline with its own workgroup size (those that
// need specialization constants are skipped): how many, and the seconds taken.
std::pair<int, double> build_every_pipeline(vkt::Device& device) {
  const Clock::time_point start = Clock::now();
  int built = 0;
  for (const auto& shader : vkt::shaders::all()) {
    try {
      // Built on the device's worker threads: waits for each, as a step would.
      device.kernel(vkt::KernelDesc{.shader = std::string(shader.first)}).vk_pipeline();
      ++built;
    } catch (const vkt::Error&) {
    }
  }
  return {built, seconds(start, Clock::now())};
}

// Marks when the first training step starts.
class FirstStep : public vkt::TrainingHook {
 public:
  void begin() override {
    if (!at) at = Clock::now();
  }
  void after_step(std::uint64_t, float) override {
    if (!done) done = Clock::now();
  }
  std::optional<Clock::time_point> at, done;
};

// Prints `phase_<name>_s=S` lines for one process's start-up, in order.
int phases(const std::string& data) {
  std::vector<std::pair<std::string, double>> t;
  t.emplace_back("loader", seconds_since_process_start());
  Clock::time_point at = Clock::now();
  const auto lap = [&](const char* name) {
    const Clock::time_point now = Clock::now();
    t.emplace_back(name, seconds(at, now));
    at = now;
  };
  vkt::Instance instance;
  lap("instance");
  vkt::Device device(instance, 0, vkt::DeviceOptions{.cache_dir = vkt::default_cache_dir()});
  lap("device");
  const auto [train, test] =
      vkt::Dataset::from_csv(vkt::read_csv(data), {.integer_labels = true, .classes = 10})
          .map("x",
               [](std::span<float> pixels) {
                 for (float& p : pixels) p /= 16.0f;
               })
          .split(0.2, 42);
  lap("data");
  {
    // What vkt-digits does from here: towers (an instance and a device each),
    // graph, pipelines, first uploads, until its first step starts.
    vkt::Estimator estimator(vkt::replicate_model_fn(digits_mlp, {.devices = {0}}),
                             {.log_step_count_steps = 0, .progress = false, .plot_loss = false});
    const auto first = std::make_shared<FirstStep>();
    estimator.train(vkt::dataset_input(train, {.batch_size = 192, .drop_remainder = true}),
                    {.steps = 1, .hooks = {first}});
    double before = 0;
    for (const auto& phase : t) before += phase.second;
    t.emplace_back("model", seconds(at, *first->at));
    t.emplace_back("startup", before + t.back().second);
    t.emplace_back("first_step", seconds(*first->at, *first->done));
    at = Clock::now();
  }
  lap("model_close");
  const auto [pipelines, pipelines_s] = build_every_pipeline(device);
  t.emplace_back("every_shader", pipelines_s);
  t.emplace_back("every_shader_pipelines", pipelines);
  for (const auto& [name, s] : t) fmt::print("phase_{}={:.4f}\n", name, s);
  return 0;
}

std::map<std::string, double> phase_values(const std::string& output) {
  std::map<std::string, double> values;
  std::size_t at = 0;
  while ((at = output.find("phase_", at)) != std::string::npos) {
    const std::size_t eq = output.find('=', at);
    values[output.substr(at + 6, eq - at - 6)] = std::stod(output.substr(eq + 1));
    at = eq;
  }
  return values;
}

void print_phases(const std::string& self, const std::string& data, const fs::path& root) {
  const std::string dir = (root / "phases").string();
  fs::create_directories(dir);  // Mesa makes no missing parent
  const Caches caches{dir + "/vktower", dir + "/mesa"};
  const auto cold = phase_values(run_child({self, "--phases", "--data", data}, caches).output);
  const auto warm = phase_values(run_child({self, "--phases", "--data", data}, caches).output);
  fmt::print("\nwhere the time goes, one process (vkt-bench-startup --phases), seconds:\n");
  fmt::print("{:<34} {:>8} {:>8}\n", "phase", "cold", "warm");
  const std::vector<std::pair<const char*, const char*>> rows{
      {"loader", "process start to main (loader)"},
      {"instance", "vkt::Instance"},
      {"device", "vkt::Device (bare)"},
      {"data", "digits CSV read, split"},
      {"model", "Estimator to first step"},
      {"startup", "  = start-up (sum of the above)"},
      {"first_step", "first step (compiles on lavapipe)"},
      {"model_close", "Estimator closed (caches saved)"},
      {"every_shader", "every embedded shader's pipeline"}};
  for (const auto& [key, label] : rows) {
    fmt::print("{:<34} {:>8.3f} {:>8.3f}\n", label, cold.at(key), warm.at(key));
  }
  fmt::print("({} pipelines in the last row)\n", cold.at("every_shader_pipelines"));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "vkt-bench-startup: vkt-digits' start-up (process start to first step), caches "
      "cold and warm, and where its time goes"};
  std::string program = VKT_DIGITS_PROGRAM;
  std::string data = VKT_DIGITS_DATA;
  int runs = 3;
  bool phase_mode = false;
  app.add_option("--program", program, "the vkt-digits to start")->capture_default_str();
  app.add_option("--data", data, "the digits CSV (for --phases)")->capture_default_str();
  app.add_option("--runs", runs, "runs of each case (the median is shown)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_flag("--phases", phase_mode, "time this process's start-up phases (run by the bench)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (phase_mode) return phases(data);
    const fs::path root = fs::temp_directory_path() / fmt::format("vkt-startup-{}", ::getpid());
    fs::create_directories(root);
    const std::vector<Scenario> scenarios = time_digits(program, runs, root);
    vkt::Instance instance;
    fmt::print("vkt-digits --devices 0 --steps 1 on {}, {} runs each (median); validation off\n",
               instance.device(0).name, runs);
    fmt::print("{:<20} {:>10} {:>13} {:>10}\n", "caches", "startup_s", "first_step_s", "process_s");
    for (const Scenario& s : scenarios) {
      fmt::print("{:<20} {:>10.3f} {:>13.3f} {:>10.3f}\n", s.name, median(s.startup_s),
                 median(s.first_step_s), median(s.wall_s));
    }
    print_phases(fs::canonical("/proc/self/exe").string(), data, root);
    fs::remove_all(root);
    const double cold = median(scenarios[0].startup_s), warm = median(scenarios[1].startup_s);
    fmt::print("startup_cold_s={:.3f}\nstartup_warm_s={:.3f}\n", cold, warm);
    fmt::print("first_step_cold_s={:.3f}\nfirst_step_warm_s={:.3f}\n",
               median(scenarios[0].first_step_s), median(scenarios[1].first_step_s));
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "vkt-bench-startup: {}\n", e.what());
    return 1;
  }
}
