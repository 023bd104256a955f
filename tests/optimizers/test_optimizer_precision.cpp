// Every optimizer (and the learning-rate schedules) trains a small MLP for 20
// steps on 1 tower and on 2 towers in each variable mode, and stays within
// 1e-4 of a reference computed entirely in double (forward, backward and the
// update, with the hyperparameters as the decimals the user wrote), as PyTorch
// in float64 would. The error is norm-wise per variable: max |got - want|
// over max |want| (checked above 0.01 for every variable: no floor needed).
// On 1 tower and on 2 towers with SharedLocalParameterServer the MLP starts
// with an embedding lookup, so the lazy sparse update is covered too (the
// other modes refuse sparse gradients).
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <memory>
#include <random>

#include <vktower/optimizers/adagrad.h>
#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/ftrl.h>
#include <vktower/optimizers/rmsprop.h>
#include <vktower/optimizers/sgd.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/embedding.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/matmul.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>

#include "../tower_devices.h"
#include "optimizer_reference.h"

using vkt::HostBatch;
using vkt::HostTensor;
using vkt::Tensor;
using vkt::test::RefOptimizer;
using vkt::test::RefState;

namespace {

constexpr std::int64_t kBatch = 4, kIn = 5, kHidden = 7, kOut = 3, kRows = 6;
constexpr int kSteps = 20;

/// The biases' optimizer of GPT-2's recipe, and both calls' clipping norm
/// (tf.clip_by_global_norm).
struct BiasOptimizer {
  std::function<std::unique_ptr<vkt::Optimizer>()> make;
  RefOptimizer ref;
  double clip_norm = 0.0;
};

/// An optimizer under test, its reference, and the reference's learning rate
/// at each step t = 1, 2, ... (the schedule in double).
struct Case {
  std::string group;  // the TEST_CASE that runs it
  std::string label;
  std::function<std::unique_ptr<vkt::Optimizer>()> make;
  RefOptimizer ref;
  std::function<double(std::uint64_t)> lr;
  double initial_slot = 0.0;  // of Adagrad's "sum" and FTRL's "accumulator"
  /// GPT-2's recipe: when set, `make` updates the matrices (the kernels and
  /// the embedding) and this the biases, each call clipping its own gradients.
  std::shared_ptr<const BiasOptimizer> biases{};
};

// Hyperparameters as a user writes them (doubles); the reference takes the
// same decimals. RMSprop with alpha close to 1 is the sensitive one: it has no
// bias correction, so an error in 1 - alpha goes straight into every step
// (formed in float32, 1 - 0.9995 is 1.2e-5 off), where Adam's bias
// corrections cancel most of an error in 1 - beta2.
std::vector<Case> cases() {
  const auto constant = [](double lr) { return [lr](std::uint64_t) { return lr; }; };
  // LearningRate::cosine_decay(0.02, 12, 0.1, 3) at step t (t - 1 steps done).
  const auto gpt2_rate = [](std::uint64_t t) {
    const double step = static_cast<double>(t - 1);
    if (step < 3) return 0.02 * step / 3.0;
    const double s = std::min(step - 3.0, 12.0);
    return 0.02 * (0.1 + 0.9 * 0.5 * (1.0 + std::cos(M_PI * s / 12.0)));
  };
  std::vector<Case> all{
      {"sgd",
       "SGD",
       [] { return std::make_unique<vkt::SGD>(0.1); },
       {.kind = "sgd"},
       constant(0.1)},
      {"sgd",
       "SGD momentum dampening weight_decay",
       [] {
         return std::make_unique<vkt::SGD>(
             0.1, vkt::SGDOptions{.momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
       },
       {.kind = "sgd", .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01},
       constant(0.1)},
      {"sgd",
       "SGD nesterov",
       [] {
         return std::make_unique<vkt::SGD>(0.1, vkt::SGDOptions{.momentum = 0.8, .nesterov = true});
       },
       {.kind = "sgd", .momentum = 0.8, .nesterov = true},
       constant(0.1)},
      {"sgd",
       "Momentum",
       [] { return std::make_unique<vkt::Momentum>(0.1, 0.9); },
       {.kind = "sgd", .momentum = 0.9},
       constant(0.1)},
      {"adam",
       "Adam",
       [] { return std::make_unique<vkt::Adam>(0.01); },
       {.kind = "adam"},
       constant(0.01)},
      {"adam",
       "Adam betas 0.99 0.9999",
       [] {
         return std::make_unique<vkt::Adam>(0.01, vkt::AdamOptions{.beta1 = 0.99, .beta2 = 0.9999});
       },
       {.kind = "adam", .beta1 = 0.99, .beta2 = 0.9999},
       constant(0.01)},
      {"adam",
       "Adam amsgrad weight_decay",
       [] {
         return std::make_unique<vkt::Adam>(
             0.01,
             vkt::AdamOptions{.beta1 = 0.8, .beta2 = 0.99, .weight_decay = 0.05, .amsgrad = true});
       },
       {.kind = "adam", .weight_decay = 0.05, .beta1 = 0.8, .beta2 = 0.99, .amsgrad = true},
       constant(0.01)},
      {"adam",
       "AdamW",
       [] { return std::make_unique<vkt::AdamW>(0.01); },
       {.kind = "adamw", .weight_decay = 0.01},
       constant(0.01)},
      {"rmsprop",
       "Adagrad",
       [] {
         return std::make_unique<vkt::Adagrad>(
             0.1, vkt::AdagradOptions{
                      .lr_decay = 0.01, .weight_decay = 0.02, .initial_accumulator_value = 0.1});
       },
       {.kind = "adagrad", .weight_decay = 0.02, .eps = 1e-10, .lr_decay = 0.01},
       constant(0.1),
       0.1},
      {"rmsprop",
       "RMSprop",
       [] { return std::make_unique<vkt::RMSprop>(0.01); },
       {.kind = "rmsprop"},
       constant(0.01)},
      {"rmsprop",
       "RMSprop alpha 0.9995",
       [] { return std::make_unique<vkt::RMSprop>(0.01, vkt::RMSpropOptions{.alpha = 0.9995}); },
       {.kind = "rmsprop", .alpha = 0.9995},
       constant(0.01)},
      {"rmsprop",
       "RMSprop centered momentum weight_decay",
       [] {
         return std::make_unique<vkt::RMSprop>(
             0.01, vkt::RMSpropOptions{
                       .alpha = 0.999, .weight_decay = 0.01, .momentum = 0.5, .centered = true});
       },
       {.kind = "rmsprop", .momentum = 0.5, .weight_decay = 0.01, .alpha = 0.999, .centered = true},
       constant(0.01)},
      {"ftrl/schedules",
       "Ftrl",
       [] { return std::make_unique<vkt::Ftrl>(0.1, vkt::FtrlOptions{.l1 = 0.01, .l2 = 0.1}); },
       {.kind = "ftrl", .l1 = 0.01, .l2 = 0.1},
       constant(0.1),
       0.1},
      {"ftrl/schedules",
       "Ftrl power -0.6",
       [] {
         return std::make_unique<vkt::Ftrl>(
             0.1, vkt::FtrlOptions{.learning_rate_power = -0.6, .l1 = 0.001, .l2 = 0.01});
       },
       {.kind = "ftrl", .power = -0.6, .l1 = 0.001, .l2 = 0.01},
       constant(0.1),
       0.1},
      {"ftrl/schedules",
       "Adam exponential_decay",
       [] {
         return std::make_unique<vkt::Adam>(vkt::LearningRate::exponential_decay(0.01, 5, 0.8));
       },
       {.kind = "adam"},
       [](std::uint64_t t) { return 0.01 * std::pow(0.8, static_cast<double>(t - 1) / 5.0); }},
      {"ftrl/schedules",
       "SGD momentum cosine_decay warm-up",
       [] {
         return std::make_unique<vkt::SGD>(vkt::LearningRate::cosine_decay(0.3, 12, 0.1, 3),
                                           vkt::SGDOptions{.momentum = 0.9});
       },
       {.kind = "sgd", .momentum = 0.9},
       [](std::uint64_t t) {
         const double step = static_cast<double>(t - 1);
         if (step < 3) return 0.3 * step / 3.0;
         const double s = std::min(step - 3.0, 12.0);
         return 0.3 * (0.1 + 0.9 * 0.5 * (1.0 + std::cos(M_PI * s / 12.0)));
       }},
      {"ftrl/schedules",
       "RMSprop step_decay",
       [] {
         return std::make_unique<vkt::RMSprop>(vkt::LearningRate::step_decay(0.004, 7, 0.5),
                                               vkt::RMSpropOptions{.alpha = 0.9999});
       },
       {.kind = "rmsprop", .alpha = 0.9999},
       [](std::uint64_t t) { return 0.004 * std::pow(0.5, static_cast<double>((t - 1) / 7)); }},
  };
  Case gpt2{"adam",
            "GPT-2's AdamW: decay on the matrices only, cosine warm-up, clipping per call",
            [] {
              return std::make_unique<vkt::AdamW>(
                  vkt::LearningRate::cosine_decay(0.02, 12, 0.1, 3),
                  vkt::AdamOptions{.weight_decay = 0.1, .clipping = {.global_norm = 0.3f}});
            },
            {.kind = "adamw", .weight_decay = 0.1},
            gpt2_rate};
  gpt2.biases = std::make_shared<const BiasOptimizer>(BiasOptimizer{
      [] {
        return std::make_unique<vkt::Adam>(vkt::LearningRate::cosine_decay(0.02, 12, 0.1, 3),
                                           vkt::AdamOptions{.clipping = {.global_norm = 0.3f}});
      },
      {.kind = "adam"},
      0.3});
  all.push_back(std::move(gpt2));
  return all;
}

/// The training data of every step: embedding ids, dense inputs, targets.
struct Data {
  std::vector<std::vector<std::int32_t>> ids;
  std::vector<std::vector<float>> x, y;
};

const Data& data() {
  static const Data d = [] {
    Data out;
    std::mt19937 rng(41);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (int s = 0; s < kSteps; ++s) {
      std::vector<std::int32_t> ids(kBatch);
      for (auto& i : ids) i = static_cast<std::int32_t>(rng() % kRows);
      std::vector<float> x(kBatch * kIn), y(kBatch * kOut);
      for (float& v : x) v = uniform(rng);
      for (float& v : y) v = uniform(rng);
      out.ids.push_back(ids);
      out.x.push_back(x);
      out.y.push_back(y);
    }
    return out;
  }();
  return d;
}

const std::vector<std::string> kDense = {"hidden/kernel", "hidden/bias", "out/kernel", "out/bias"};

/// tanh(x W1 + b1) W2 + b2 with the mean squared error; x is an embedding
/// table's rows when `embed`, else a dense feature.
vkt::ModelFn mlp(const Case& c, bool embed) {
  return [&c, embed](vkt::ModelContext& ctx, const vkt::TensorDict& f, const vkt::TensorDict& l,
                     vkt::Mode mode, const vkt::Params&) {
    vkt::Graph& g = ctx.graph();
    const auto var = [&g](const std::string& name, vkt::Shape shape, float range) {
      return g.variable(name, std::move(shape), vkt::Initializer::uniform(-range, range));
    };
    const Tensor x = embed
                         ? vkt::embedding_lookup(var("embedding", {kRows, kIn}, 1.0f), f.at("ids"))
                         : f.at("x");
    const Tensor w1 = var("hidden/kernel", {kIn, kHidden}, 0.8f);
    const Tensor b1 = var("hidden/bias", {kHidden}, 0.3f);
    const Tensor w2 = var("out/kernel", {kHidden, kOut}, 0.8f);
    const Tensor b2 = var("out/bias", {kOut}, 0.3f);
    const Tensor h = vkt::tanh(vkt::bias_add(vkt::matmul(x, w1), b1));
    const Tensor loss = vkt::mean_squared_error(l.at("y"), vkt::bias_add(vkt::matmul(h, w2), b2));
    vkt::TowerOptimizer opt(c.make());
    if (!c.biases) {
      return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = opt.minimize(loss)};
    }
    std::vector<Tensor> matrices{w1, w2};
    if (embed) matrices.push_back(*g.find_variable("embedding"));
    opt.minimize(loss, matrices);
    vkt::TowerOptimizer biases(c.biases->make());
    return vkt::EstimatorSpec{
        .mode = mode, .loss = loss, .train_op = biases.minimize(loss, std::vector<Tensor>{b1, b2})};
  };
}

/// The same MLP in double: the gradients of every variable (embedding: the
/// rows' gradients, one per example, for the lazy update).
struct RefMlp {
  std::map<std::string, RefState> vars;

  std::map<std::string, std::vector<double>> gradients(const std::vector<std::int32_t>& ids,
                                                       const std::vector<float>& xs,
                                                       const std::vector<float>& ys,
                                                       bool embed) const {
    const auto& w1 = vars.at("hidden/kernel").p;
    const auto& b1 = vars.at("hidden/bias").p;
    const auto& w2 = vars.at("out/kernel").p;
    const auto& b2 = vars.at("out/bias").p;
    std::map<std::string, std::vector<double>> d;
    for (const std::string& name : kDense) d[name].assign(vars.at(name).p.size(), 0.0);
    d["embedding"].assign(kBatch * kIn, 0.0);
    for (std::int64_t n = 0; n < kBatch; ++n) {
      std::vector<double> x(kIn), h(kHidden), dz(kHidden, 0.0);
      for (std::int64_t i = 0; i < kIn; ++i) {
        x[i] = embed ? vars.at("embedding").p[ids[n] * kIn + i] : xs[n * kIn + i];
      }
      for (std::int64_t j = 0; j < kHidden; ++j) {
        double z = b1[j];
        for (std::int64_t i = 0; i < kIn; ++i) z += x[i] * w1[i * kHidden + j];
        h[j] = std::tanh(z);
      }
      for (std::int64_t k = 0; k < kOut; ++k) {
        double out = b2[k];
        for (std::int64_t j = 0; j < kHidden; ++j) out += h[j] * w2[j * kOut + k];
        const double dout = 2.0 * (out - ys[n * kOut + k]) / (kBatch * kOut);
        d["out/bias"][k] += dout;
        for (std::int64_t j = 0; j < kHidden; ++j) {
          d["out/kernel"][j * kOut + k] += h[j] * dout;
          dz[j] += w2[j * kOut + k] * dout;
        }
      }
      for (std::int64_t j = 0; j < kHidden; ++j) {
        dz[j] *= 1.0 - h[j] * h[j];
        d["hidden/bias"][j] += dz[j];
        for (std::int64_t i = 0; i < kIn; ++i) {
          d["hidden/kernel"][i * kHidden + j] += x[i] * dz[j];
          d["embedding"][n * kIn + i] += w1[i * kHidden + j] * dz[j];
        }
      }
    }
    return d;
  }
};

/// Steps that GPT-2's recipe clipped in the reference (each call counts).
int gpt2_clipped_calls = 0;

/// One step of GPT-2's recipe in double: the matrices (and the embedding's
/// rows) and the biases each scaled by clip / max(their global norm, clip),
/// then AdamW on the matrices and Adam on the biases.
void ref_gpt2_step(const Case& c, RefMlp& ref, const std::map<std::string, std::vector<double>>& g,
                   const std::vector<std::int32_t>& ids, bool embed, std::uint64_t t) {
  const auto scale_of = [&](const std::vector<std::string>& names) {
    double sq = 0;
    for (const std::string& name : names) {
      for (const double x : g.at(name)) sq += x * x;
    }
    const double norm = std::sqrt(sq);
    if (norm > c.biases->clip_norm) ++gpt2_clipped_calls;
    return c.biases->clip_norm / std::max(norm, c.biases->clip_norm);
  };
  std::vector<std::string> matrices{"hidden/kernel", "out/kernel"};
  if (embed) matrices.push_back("embedding");
  const std::vector<std::string> biases{"hidden/bias", "out/bias"};
  const auto apply = [&](RefOptimizer opt, const std::vector<std::string>& names) {
    opt.lr = c.lr(t);
    const double scale = scale_of(names);
    for (const std::string& name : names) {
      if (name == "embedding") {
        vkt::test::lazy_sparse_step(opt, ref.vars[name], kIn, g.at(name), ids, t, scale);
        continue;
      }
      std::vector<double> scaled = g.at(name);
      for (double& x : scaled) x *= scale;
      opt.step(ref.vars[name], scaled, t);
    }
  };
  apply(c.ref, matrices);
  apply(c.biases->ref, biases);
}

/// Trains `c` on `towers` towers and returns the worst relative error of any
/// variable against the double reference.
double worst_error(vkt::Instance& instance, const Case& c, int towers, vkt::VariableMode mode,
                   bool embed) {
  const auto replicated = vkt::replicate_model_fn(
      mlp(c, embed), {.devices = std::vector<std::uint32_t>(towers, 0), .variable_mode = mode});
  std::map<std::string, vkt::InputSpec> features;
  if (embed) {
    features["ids"] = {{kBatch}, vkt::DType::I32};
  } else {
    features["x"] = {{kBatch, kIn}};
  }
  vkt::ModelContext root(instance, features, {{"y", {{kBatch, kOut}}}}, {.seed = 7});
  root.set_device_pool(&vkt::test::tower_devices());
  vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});

  std::vector<std::string> names = kDense;
  if (embed) names.push_back("embedding");
  std::unique_ptr<vkt::Optimizer> probe = c.make();  // for its slot names
  RefMlp ref;
  for (const std::string& name : names) {
    const std::vector<float> initial = spec.run->variable(name);
    RefState& s = ref.vars[name];
    s.p.assign(initial.begin(), initial.end());
    for (const std::string& slot : probe->slot_names()) {
      const bool accumulator = slot == "sum" || slot == "accumulator";
      s.slot[slot].assign(s.p.size(), accumulator ? c.initial_slot : 0.0);
    }
  }
  const Data& d = data();
  for (int step = 0; step < kSteps; ++step) {
    HostBatch features_in;
    if (embed) {
      features_in = {{"ids", HostTensor::ints({kBatch}, d.ids[step])}};
    } else {
      features_in = {{"x", HostTensor::floats({kBatch, kIn}, d.x[step])}};
    }
    spec.run->train_step(features_in, {{"y", HostTensor::floats({kBatch, kOut}, d.y[step])}});

    const auto t = static_cast<std::uint64_t>(step + 1);
    RefOptimizer opt = c.ref;
    opt.lr = c.lr(t);
    const auto grads = ref.gradients(d.ids[step], d.x[step], d.y[step], embed);
    if (c.biases) {
      ref_gpt2_step(c, ref, grads, d.ids[step], embed, t);
      continue;
    }
    for (const std::string& name : kDense) opt.step(ref.vars[name], grads.at(name), t);
    if (embed) {
      vkt::test::lazy_sparse_step(opt, ref.vars["embedding"], kIn, grads.at("embedding"),
                                  d.ids[step], t);
    }
  }
  double worst = 0;
  for (const std::string& name : names) {
    const std::vector<float> got = spec.run->variable(name);
    const std::vector<double>& want = ref.vars[name].p;
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      diff = std::max(diff, std::abs(got[i] - want[i]));
      scale = std::max(scale, std::abs(want[i]));
    }
    INFO(name << ": max |got - want| " << diff << ", max |want| " << scale);
    CHECK(scale > 0.01);
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

/// Trains every case of `group` on 1 tower and on 2 towers in each variable
/// mode.
void check_group(const std::string& group) {
  using Mode = vkt::VariableMode;
  struct Run {
    int towers;
    Mode mode;
    bool embed;
    const char* label;
  };
  const Run runs[] = {{1, Mode::SharedLocalParameterServer, true, "1 tower"},
                      {2, Mode::SharedLocalParameterServer, true, "2 towers, parameter server"},
                      {2, Mode::Mirrored, false, "2 towers, Mirrored"},
                      {2, Mode::RoundRobin, false, "2 towers, RoundRobin"}};
  vkt::Instance instance;
  int checked = 0;
  for (const Case& c : cases()) {
    if (c.group != group) continue;
    ++checked;
    for (const Run& r : runs) {
      INFO(c.label << ", " << r.label);
      CHECK(worst_error(instance, c, r.towers, r.mode, r.embed) < 1e-4);
    }
  }
  CHECK(checked >= 4);
}

}  // namespace

TEST_CASE("SGD and Momentum train an MLP within 1e-4 of float64, 1 and 2 towers",
          "[optimizers][device-matrix]") {
  check_group("sgd");
}

TEST_CASE("Adam and AdamW train an MLP within 1e-4 of float64, 1 and 2 towers",
          "[optimizers][device-matrix]") {
  gpt2_clipped_calls = 0;
  check_group("adam");
  CHECK(gpt2_clipped_calls > 10);  // the clipping was exercised, not a no-op
}

TEST_CASE("Adagrad and RMSprop train an MLP within 1e-4 of float64, 1 and 2 towers",
          "[optimizers][device-matrix]") {
  check_group("rmsprop");
}

TEST_CASE("Ftrl and learning-rate schedules train an MLP within 1e-4 of float64, 1 and 2 towers",
          "[optimizers][device-matrix]") {
  check_group("ftrl/schedules");
}
