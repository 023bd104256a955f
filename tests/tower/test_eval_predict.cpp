// Evaluation and prediction across towers: metrics over N towers equal the
// metrics over the whole batch (and a host computation of them); predictions
// come back in input order.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/softmax.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>

#include "../test_support.h"
#include "../tower_devices.h"

using vkt::HostBatch;
using vkt::HostTensor;
using vkt::Tensor;

namespace {

constexpr std::int64_t kBatch = 8, kIn = 4, kClasses = 3;

vkt::EstimatorSpec classifier(vkt::ModelContext&, const vkt::TensorDict& f,
                              const vkt::TensorDict& l, vkt::Mode mode, const vkt::Params&) {
  const Tensor logit = vkt::layers::dense(f.at("x"), 1, vkt::layers::Activation::None, "binary");
  const Tensor p = vkt::sigmoid(logit);
  const Tensor logits =
      vkt::layers::dense(f.at("x"), kClasses, vkt::layers::Activation::None, "cls");
  vkt::EstimatorSpec spec{.mode = mode};
  spec.predictions = {{"p", p}, {"class", vkt::argmax(logits, -1)}};
  spec.export_outputs = {
      {"serving",
       {vkt::ExportOutput::Kind::Classification,
        {{"scores", vkt::softmax(logits)}, {"classes", vkt::argmax(logits, -1)}}}}};
  spec.training_hooks = {std::make_shared<vkt::TrainingHook>()};
  if (mode == vkt::Mode::Eval) {
    spec.loss = vkt::sigmoid_cross_entropy(l.at("y"), logit);
    spec.eval_metric_ops = {{"auc", vkt::metrics::auc(l.at("y"), p)},
                            {"precision", vkt::metrics::precision(l.at("y"), p)},
                            {"recall", vkt::metrics::recall(l.at("y"), p)},
                            {"mse", vkt::metrics::mean_squared_error(l.at("y"), p)},
                            {"mean_p", vkt::metrics::mean(p)},
                            {"accuracy", vkt::metrics::accuracy(l.at("cls"), logits)}};
  }
  return spec;
}

struct Data {
  std::vector<HostBatch> features, labels;
};

Data make_data(int batches) {
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  Data d;
  for (int b = 0; b < batches; ++b) {
    std::vector<float> x(kBatch * kIn), y(kBatch);
    std::vector<std::int32_t> cls(kBatch);
    for (float& v : x) v = normal(rng);
    for (std::int64_t i = 0; i < kBatch; ++i) {
      y[i] = static_cast<float>(rng() % 2);
      cls[i] = static_cast<std::int32_t>(rng() % kClasses);
    }
    d.features.push_back({{"x", HostTensor::floats({kBatch, kIn}, x)}});
    d.labels.push_back(
        {{"y", HostTensor::floats({kBatch, 1}, y)}, {"cls", HostTensor::ints({kBatch}, cls)}});
  }
  return d;
}

std::shared_ptr<vkt::TowerRun> build(vkt::Instance& instance, int towers, vkt::Mode mode) {
  const auto replicated = vkt::replicate_model_fn(
      classifier, {.devices = std::vector<std::uint32_t>(static_cast<std::size_t>(towers), 0)});
  vkt::ModelContext root(instance, {{"x", {{kBatch, kIn}}}},
                         {{"y", {{kBatch, 1}}}, {"cls", {{kBatch}, vkt::DType::I32}}}, {.seed = 4});
  root.set_device_pool(&vkt::test::tower_devices());
  return replicated(root, {}, {}, mode, {}).run;
}

}  // namespace

TEST_CASE("metrics over N towers equal the whole batch's and a host computation",
          "[device-matrix]") {
  vkt::Instance instance;
  const Data data = make_data(3);

  // The whole-batch predictions, for a host computation of every metric.
  auto predictor = build(instance, 1, vkt::Mode::Predict);
  std::vector<double> p, y;
  std::vector<std::int32_t> predicted_class, cls;
  for (std::size_t b = 0; b < data.features.size(); ++b) {
    const HostBatch out = predictor->predict_step(data.features[b]);
    p.insert(p.end(), out.at("p").f32.begin(), out.at("p").f32.end());
    predicted_class.insert(predicted_class.end(), out.at("class").i32.begin(),
                           out.at("class").i32.end());
    y.insert(y.end(), data.labels[b].at("y").f32.begin(), data.labels[b].at("y").f32.end());
    cls.insert(cls.end(), data.labels[b].at("cls").i32.begin(), data.labels[b].at("cls").i32.end());
  }
  double tp = 0, predicted = 0, positives = 0, se = 0, sum_p = 0, correct = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const bool pos = static_cast<float>(p[i]) >= 0.5f;
    tp += pos && y[i] == 1;
    predicted += pos;
    positives += y[i] == 1;
    se += (y[i] - p[i]) * (y[i] - p[i]);
    sum_p += p[i];
    correct += predicted_class[i] == cls[i];
  }
  // AUC as tf.metrics.auc: 200 thresholds, trapezoids.
  std::vector<double> th(200);
  th.front() = -1e-7;
  th.back() = 1 + 1e-7;
  for (int i = 1; i < 199; ++i) th[i] = static_cast<float>(i) / 199.0f;
  double auc = 0;
  const auto rates = [&](double t) {
    double tpc = 0, fpc = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (p[i] > static_cast<float>(t)) (y[i] == 1 ? tpc : fpc) += 1;
    }
    return std::pair{tpc / positives, fpc / (static_cast<double>(p.size()) - positives)};
  };
  for (int i = 0; i + 1 < 200; ++i) {
    const auto [tpr0, fpr0] = rates(th[i]);
    const auto [tpr1, fpr1] = rates(th[i + 1]);
    auc += (fpr0 - fpr1) * (tpr0 + tpr1) / 2;
  }
  const double n = static_cast<double>(p.size());

  std::map<std::string, double> one;
  for (int towers : {1, 2, 4}) {
    INFO(towers << " towers");
    auto eval = build(instance, towers, vkt::Mode::Eval);
    for (std::size_t b = 0; b < data.features.size(); ++b)
      eval->evaluate_step(data.features[b], data.labels[b]);
    const std::map<std::string, double> m = eval->metrics();
    CHECK(m.at("precision") == tp / predicted);
    CHECK(m.at("recall") == tp / positives);
    CHECK(m.at("accuracy") == correct / n);
    CHECK(m.at("auc") == Approx(auc).epsilon(1e-12));
    CHECK(m.at("mse") == Approx(se / n).epsilon(1e-6));
    CHECK(m.at("mean_p") == Approx(sum_p / n).epsilon(1e-6));
    if (towers == 1) {
      one = m;
    } else {
      CHECK(m.at("loss") == Approx(one.at("loss")).epsilon(1e-6));  // scaled, summed, averaged
    }
  }
}

TEST_CASE("predictions over N towers come back in input order", "[device-matrix]") {
  vkt::Instance instance;
  const Data data = make_data(1);
  const HostBatch whole = build(instance, 1, vkt::Mode::Predict)->predict_step(data.features[0]);
  for (int towers : {2, 4}) {
    INFO(towers << " towers");
    const HostBatch split =
        build(instance, towers, vkt::Mode::Predict)->predict_step(data.features[0]);
    CHECK(split.at("p").shape == vkt::Shape{kBatch, 1});
    CHECK(split.at("class").i32 == whole.at("class").i32);
    CHECK(split.at("serving/classes").i32 == whole.at("class").i32);
    CHECK(split.at("serving/scores").shape == vkt::Shape{kBatch, kClasses});
    for (std::size_t i = 0; i < split.at("serving/scores").f32.size(); ++i) {
      CHECK(split.at("serving/scores").f32[i] ==
            Approx(whole.at("serving/scores").f32[i]).epsilon(1e-6));
    }
    for (std::int64_t i = 0; i < kBatch; ++i)
      CHECK(split.at("p").f32[i] == Approx(whole.at("p").f32[i]).epsilon(1e-6));
  }
}

TEST_CASE("the merged spec carries the last tower's hooks, and export outputs are checked",
          "[device-matrix]") {
  vkt::Instance instance;
  const auto replicated = vkt::replicate_model_fn(classifier, {.devices = {0, 0, 0}});
  vkt::ModelContext root(instance, {{"x", {{6, kIn}}}},
                         {{"y", {{6, 1}}}, {"cls", {{6}, vkt::DType::I32}}});
  root.set_device_pool(&vkt::test::tower_devices());
  // One model's hooks, run once per step: the last tower's, as TensorFlow takes them.
  const vkt::EstimatorSpec merged = replicated(root, {}, {}, vkt::Mode::Predict, {});
  REQUIRE(merged.training_hooks.size() == 1);
  CHECK(merged.training_hooks[0] == merged.run->tower_spec(2).training_hooks.at(0));
  CHECK(merged.training_hooks[0] != merged.run->tower_spec(0).training_hooks.at(0));

  const auto bad = [](vkt::ModelContext& ctx, const vkt::TensorDict& f, const vkt::TensorDict&,
                      vkt::Mode mode, const vkt::Params&) {
    const Tensor y = vkt::layers::dense(f.at("x"), 1, vkt::layers::Activation::None, "r");
    vkt::EstimatorSpec spec{.mode = mode, .predictions = {{"y", y}}};
    spec.export_outputs = {{"serving", {vkt::ExportOutput::Kind::Regression, {{"scores", y}}}}};
    (void)ctx;
    return spec;
  };
  const auto bad_replicated = vkt::replicate_model_fn(bad, {.devices = {0}});
  CHECK_THAT(vkt::test::error_of([&] { bad_replicated(root, {}, {}, vkt::Mode::Predict, {}); }),
             Catch::Matchers::Contains("a regression output holds one tensor named \"value\""));
}
