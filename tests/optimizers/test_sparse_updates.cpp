// Lazy sparse-row updates (an embedding's gradient): every optimizer changes
// only the rows named in the indices, parameters and slots, with duplicates
// summed first, against optimizer_reference.h's formulas applied row by row.
// The tables' widths cover both shader paths (vec4 rows, float rows) with one
// and with two work items per row.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <random>

#include <vktower/optimizers/adagrad.h>
#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/ftrl.h>
#include <vktower/optimizers/rmsprop.h>
#include <vktower/optimizers/sgd.h>
#include <vktower/optimizers/sparse_row_links.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/embedding.h>
#include <vktower/runtime/graph/ops/reduce.h>

#include "../shared_device.h"
#include "optimizer_reference.h"
#include "sparse_links_reference.h"

using vkt::Shape;
using vkt::Tensor;
using vkt::test::RefOptimizer;
using vkt::test::RefState;

namespace {

using Case = vkt::test::OptimizerCase;

/// One embedding table of the test: its shape, and the ids of each step (with
/// duplicates, out-of-range ids, a row named once then never again, and rows
/// never named).
struct Table {
  std::string name;
  int rows, width;
  std::vector<std::vector<std::int32_t>> ids;
  std::vector<int> never;  // rows no step names
  int once;                // a row only the first step names
};

const std::vector<Table>& tables() {
  static const std::vector<Table> t{
      {"a",
       9,
       5,  // width not a multiple of 4: the float path
       {{0, 3, 3, 4, 9, 1, 3},
        {2, 0, 2, -1, 5, 5, 0},
        {6, 1, 1, 1, 3, 2, 0},
        {5, 5, 5, 5, 5, 5, 5},
        {0, 1, 2, 3, 5, 6, 2}},
       {7, 8},
       4},
      {"b",
       6,
       8,  // the vec4 path
       {{0, 0, 3, 2, 2, 2},
        {4, 4, 6, 0, 2, 0},
        {4, 4, 4, 0, 2, 2},
        {2, 4, 0, 2, 4, 2},
        {0, 2, 2, 4, -3, 0}},
       {1, 5},
       3},
      {"c",
       5,
       68,  // 17 vec4s: a row takes two work items, the second partial
       {{1, 1, 3, 0, 3}, {0, 3, 3, 5, 0}, {3, 0, 0, -2, 0}, {4, 3, 0, 0, 4}, {0, 4, 0, 0, 3}},
       {2},
       1},
      {"d",
       4,
       18,  // 18 floats: two work items, the second partial
       {{2, 0, 2}, {0, 3, 0}, {3, 3, 4}, {0, 0, 0}, {3, 0, 3}},
       {1},
       2},
  };
  return t;
}

std::vector<double> doubles(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

/// The rows [row * width, (row + 1) * width) of `v`.
std::vector<float> row_of(const std::vector<float>& v, int row, int width) {
  return {v.begin() + row * width, v.begin() + (row + 1) * width};
}

/// Runs `c` on the two tables and a dense variable, all in one optimizer call,
/// comparing with the lazy reference after every step.
void check_lazy(const Case& c) {
  INFO(c.label);
  vkt::Graph g(vkt::test::shared_device(), {.seed = 3});
  std::unique_ptr<vkt::Optimizer> opt = c.make();
  std::vector<Tensor> vars;
  Tensor loss;
  for (const Table& t : tables()) {
    vars.push_back(g.variable(t.name, {t.rows, t.width}, vkt::Initializer::uniform(-1, 1)));
    const auto k = static_cast<std::int64_t>(t.ids[0].size());
    const Tensor ids = g.input("ids_" + t.name, {k}, vkt::DType::I32);
    const Tensor dy = g.input("dy_" + t.name, {k, t.width});  // the rows' gradient
    const Tensor term = vkt::reduce_sum(vkt::embedding_lookup(vars.back(), ids) * dy);
    loss = loss.valid() ? loss + term : term;
  }
  const Tensor dense = g.variable("dense", {3}, vkt::Initializer::uniform(-1, 1));
  loss = loss + vkt::reduce_sum(dense * g.input("dy_dense", {3}));
  const std::vector<vkt::GradVar> grads = opt->compute_gradients(loss);
  const std::size_t n = tables().size();
  REQUIRE(grads.size() == n + 1);
  for (std::size_t i = 0; i < n; ++i) CHECK(grads[i].grad.sparse());  // the sparse path
  CHECK_FALSE(grads[n].grad.sparse());
  vkt::Executor exec(g, {opt->apply_gradients(grads)});

  vars.push_back(dense);
  std::vector<RefState> ref(vars.size());
  std::vector<std::map<std::string, std::vector<float>>> initial_slots(vars.size());
  std::vector<std::vector<float>> initial(vars.size());
  for (std::size_t i = 0; i < vars.size(); ++i) {
    initial[i] = g.values(vars[i]);
    ref[i].p = doubles(initial[i]);
    for (const std::string& s : opt->slot_names()) {
      initial_slots[i][s] = g.values(opt->get_slot(vars[i], s));
      const double init = (s == "sum" || s == "accumulator") ? c.initial_slot : 0.0;
      ref[i].slot[s] = std::vector<double>(initial[i].size(), init);
    }
  }

  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto random = [&](std::size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
  };
  // The row named only at step 1, and its slots, just after that step.
  std::vector<std::vector<float>> once_rows;
  std::vector<std::map<std::string, std::vector<float>>> once_slots(n);
  const std::size_t steps = 5;
  for (std::size_t step = 0; step < steps; ++step) {
    const std::uint64_t t = step + 1;
    for (std::size_t i = 0; i < n; ++i) {
      const Table& tab = tables()[i];
      const std::vector<std::int32_t>& ids = tab.ids[step];
      const std::vector<float> dy = random(ids.size() * static_cast<std::size_t>(tab.width));
      exec.feed("ids_" + tab.name, ids);
      exec.feed("dy_" + tab.name, dy);
      vkt::test::lazy_sparse_step(c.ref, ref[i], static_cast<std::size_t>(tab.width), doubles(dy),
                                  std::vector<int>(ids.begin(), ids.end()), t);
    }
    const std::vector<float> dy_dense = random(3);
    exec.feed("dy_dense", dy_dense);
    c.ref.step(ref[n], doubles(dy_dense), t);
    exec.run();
    exec.wait();

    INFO("step " << t);
    double worst = 0;
    const auto compare = [&](const std::vector<float>& got, const std::vector<double>& want) {
      REQUIRE(got.size() == want.size());
      for (std::size_t j = 0; j < got.size(); ++j) {
        worst = std::max(worst, std::abs(got[j] - want[j]) / std::max(std::abs(want[j]), 1.0));
      }
    };
    for (std::size_t i = 0; i < vars.size(); ++i) {
      compare(g.values(vars[i]), ref[i].p);
      for (const std::string& s : opt->slot_names())
        compare(g.values(opt->get_slot(vars[i], s)), ref[i].slot[s]);
    }
    CHECK(worst < 1e-5);
    if (t == 1) {
      for (std::size_t i = 0; i < n; ++i) {
        const Table& tab = tables()[i];
        once_rows.push_back(row_of(g.values(vars[i]), tab.once, tab.width));
        for (const std::string& s : opt->slot_names())
          once_slots[i][s] = row_of(g.values(opt->get_slot(vars[i], s)), tab.once, tab.width);
      }
    }
  }

  // Rows no step named, and their slots, have their initial bits; the row named
  // only at step 1 kept its bits since (no decay of its slots, no weight decay).
  for (std::size_t i = 0; i < n; ++i) {
    const Table& tab = tables()[i];
    INFO("table " << tab.name);
    const std::vector<float> now = g.values(vars[i]);
    for (int row : tab.never) {
      CHECK(row_of(now, row, tab.width) == row_of(initial[i], row, tab.width));
      for (const std::string& s : opt->slot_names()) {
        CHECK(row_of(g.values(opt->get_slot(vars[i], s)), row, tab.width) ==
              row_of(initial_slots[i][s], row, tab.width));
      }
    }
    CHECK(row_of(now, tab.once, tab.width) == once_rows[i]);
    CHECK(row_of(now, tab.once, tab.width) != row_of(initial[i], tab.once, tab.width));
    for (const std::string& s : opt->slot_names())
      CHECK(row_of(g.values(opt->get_slot(vars[i], s)), tab.once, tab.width) == once_slots[i][s]);
  }
  CHECK(g.global_step() == steps);
}

}  // namespace

TEST_CASE("sparse rows: SGD and Momentum update only the named rows, duplicates summed") {
  const float lr = 0.05f;
  check_lazy({"SGD", [=] { return std::make_unique<vkt::SGD>(lr); }, {.kind = "sgd", .lr = lr}});
  check_lazy({"SGD momentum dampening weight_decay",
              [=] {
                return std::make_unique<vkt::SGD>(
                    lr,
                    vkt::SGDOptions{.momentum = 0.9f, .dampening = 0.1f, .weight_decay = 0.01f});
              },
              {.kind = "sgd", .lr = lr, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}});
  check_lazy({"Momentum nesterov",
              [=] { return std::make_unique<vkt::Momentum>(lr, 0.8f, true); },
              {.kind = "sgd", .lr = lr, .momentum = 0.8, .nesterov = true}});
}

TEST_CASE("sparse rows: Adam and AdamW are lazy (untouched rows keep m and v)") {
  const float lr = 0.05f;
  check_lazy({"Adam", [=] { return std::make_unique<vkt::Adam>(lr); }, {.kind = "adam", .lr = lr}});
  check_lazy({"Adam amsgrad weight_decay",
              [=] {
                return std::make_unique<vkt::Adam>(
                    lr, vkt::AdamOptions{
                            .beta1 = 0.8f, .beta2 = 0.99f, .weight_decay = 0.05f, .amsgrad = true});
              },
              {.kind = "adam",
               .lr = lr,
               .weight_decay = 0.05,
               .beta1 = 0.8,
               .beta2 = 0.99,
               .amsgrad = true}});
  check_lazy({"AdamW",
              [=] { return std::make_unique<vkt::AdamW>(lr); },
              {.kind = "adamw", .lr = lr, .weight_decay = 0.01}});
}

TEST_CASE("sparse rows: Adagrad adds to the sums of the named rows only") {
  const float lr = 0.05f;
  check_lazy({"Adagrad",
              [=] {
                return std::make_unique<vkt::Adagrad>(
                    lr, vkt::AdagradOptions{.lr_decay = 0.01f,
                                            .weight_decay = 0.02f,
                                            .initial_accumulator_value = 0.1f});
              },
              {.kind = "adagrad", .lr = lr, .weight_decay = 0.02, .eps = 1e-10, .lr_decay = 0.01},
              0.1});
}

TEST_CASE("sparse rows: RMSprop's averages decay only in the named rows") {
  const float lr = 0.05f;
  check_lazy({"RMSprop",
              [=] { return std::make_unique<vkt::RMSprop>(lr); },
              {.kind = "rmsprop", .lr = lr}});
  check_lazy({"RMSprop centered momentum weight_decay",
              [=] {
                return std::make_unique<vkt::RMSprop>(
                    lr,
                    vkt::RMSpropOptions{
                        .alpha = 0.9f, .weight_decay = 0.01f, .momentum = 0.5f, .centered = true});
              },
              {.kind = "rmsprop",
               .lr = lr,
               .momentum = 0.5,
               .weight_decay = 0.01,
               .alpha = 0.9,
               .centered = true}});
}

TEST_CASE("sparse rows: FTRL updates the named rows only") {
  check_lazy(
      {"Ftrl",
       [] { return std::make_unique<vkt::Ftrl>(0.1f, vkt::FtrlOptions{.l1 = 0.01f, .l2 = 0.1f}); },
       {.kind = "ftrl", .lr = 0.1, .l1 = 0.01, .l2 = 0.1},
       0.1});
}

TEST_CASE(
    "sparse rows: clipping by value clamps a row's summed gradient, the norm takes the "
    "values as given") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor table = g.variable("table", {4, 3}, vkt::Initializer::zeros());
  const Tensor d = g.variable("d", {1}, vkt::Initializer::zeros());
  const Tensor ids = g.constant_i32({3}, std::vector<std::int32_t>{1, 1, 2});
  const Tensor dy = g.constant({3, 3}, std::vector<float>{3, 0, 0.4f, 3, 0, 0.4f, 0, -0.3f, 0});
  const Tensor loss =
      vkt::reduce_sum(vkt::embedding_lookup(table, ids) * dy) + vkt::reduce_sum(d * 4.0f);
  SECTION("by value") {
    vkt::SGD sgd(1.0f, {.clipping = {.value = 0.5f}});
    vkt::Executor exec(g, {sgd.minimize(loss)});
    exec.run();
    // Row 1's gradient is (6, 0, 0.8) summed, clamped to 0.5 (not 0.4 each).
    CHECK(g.values(table) == std::vector<float>{0, 0, 0, -0.5f, 0, -0.5f, 0, 0.3f, 0, 0, 0, 0});
    CHECK(g.values(d) == std::vector<float>{-0.5f});
  }
  SECTION("by global norm") {
    vkt::SGD sgd(1.0f, {.clipping = {.global_norm = 1.0f}});
    vkt::Executor exec(g, {sgd.minimize(loss)});
    exec.run();
    // sqrt(3^2 + 0.4^2 + 3^2 + 0.4^2 + 0.3^2 + 4^2): each values row counts,
    // duplicates apart (summed first, it would be sqrt(36 + 0.64 + 0.09 + 16)).
    const double norm = std::sqrt(9 + 0.16 + 9 + 0.16 + 0.09 + 16);
    const std::vector<float> got = g.values(table);
    const double want[12] = {0, 0, 0, -6 / norm, 0, -0.8 / norm, 0, 0.3 / norm, 0, 0, 0, 0};
    for (int i = 0; i < 12; ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-5).margin(1e-7));
    CHECK(g.values(d)[0] == Approx(-4 / norm).epsilon(1e-5));
  }
}

TEST_CASE(
    "sparse rows at a GPT's scale: 2048 ids over 114 rows of 128, AdamW clipped by the global "
    "norm, lazy") {
  constexpr int kRows = 114, kWidth = 128, kIds = 2048;
  vkt::Graph g(vkt::test::shared_device(), {.seed = 3});
  const Tensor table = g.variable("table", {kRows, kWidth}, vkt::Initializer::uniform(-1, 1));
  const Tensor ids = g.input("ids", {kIds}, vkt::DType::I32);
  const Tensor dy = g.input("dy", {kIds, kWidth});
  const Tensor loss = vkt::reduce_sum(vkt::embedding_lookup(table, ids) * dy);
  vkt::AdamW opt(0.01, vkt::AdamOptions{.weight_decay = 0.1, .clipping = {.global_norm = 1.0f}});
  vkt::Executor exec(g, {opt.minimize(loss)});
  RefState ref{.p = doubles(g.values(table)), .slot = {}};
  for (const std::string& s : opt.slot_names()) ref.slot[s].assign(ref.p.size(), 0.0);
  const RefOptimizer adamw{.kind = "adamw", .lr = 0.01, .weight_decay = 0.1};
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  for (std::uint64_t t = 1; t <= 3; ++t) {
    // Text-like: most ids among a few rows, some rows never named.
    std::vector<std::int32_t> id(kIds);
    for (auto& i : id) {
      const std::uint32_t r = rng();
      i = static_cast<std::int32_t>(r % 8 == 0 ? r % (kRows - 10) : r % 20);
    }
    std::vector<float> d(static_cast<std::size_t>(kIds) * kWidth);
    for (float& x : d) x = normal(rng);
    exec.feed("ids", id);
    exec.feed("dy", d);
    exec.run();
    double sq = 0;  // the norm over the rows as given, duplicates not summed
    for (const float x : d) sq += double{x} * x;
    vkt::test::lazy_sparse_step(adamw, ref, kWidth, doubles(d),
                                std::vector<int>(id.begin(), id.end()), t,
                                1.0 / std::max(std::sqrt(sq), 1.0));
    INFO("step " << t);
    const std::vector<float> got = g.values(table);
    double worst = 0;
    for (std::size_t j = 0; j < got.size(); ++j)
      worst = std::max(worst, std::abs(got[j] - ref.p[j]) / std::max(std::abs(ref.p[j]), 1.0));
    CHECK(worst < 1e-5);
  }
}

TEST_CASE(
    "sparse rows: the occurrence links name each id's first and next occurrence, ids out of "
    "range none, the same bits on a rerun") {
  struct LinksCase {
    std::string label;
    std::int64_t rows;
    std::vector<std::int32_t> ids;
  };
  std::vector<LinksCase> cases{
      {"one id", 3, {2}},
      {"all alike", 5, std::vector<std::int32_t>(300, 4)},
      {"out of range", 4, {3, -1, 4, 3, 0x7fffffff, -2147483647 - 1, 0, 3, 4, 0}},
  };
  std::mt19937 rng(7);
  for (const int k : {17, 1000, 4099}) {
    // Text-like (a few ids most of the time) over a large table, so that the
    // hash table sees both collisions and long runs of one id.
    std::vector<std::int32_t> ids(static_cast<std::size_t>(k));
    for (auto& i : ids) {
      const std::uint32_t r = rng();
      i = static_cast<std::int32_t>(r % 4 == 0 ? r % 1000003 : (r % 23) * 65536);
    }
    cases.push_back({fmt::format("{} text-like ids", k), 2000000, ids});
  }
  for (const LinksCase& c : cases) {
    INFO(c.label);
    vkt::Graph g(vkt::test::shared_device());
    const auto k = static_cast<std::int64_t>(c.ids.size());
    const Tensor ids = g.input("ids", {k}, vkt::DType::I32);
    const Tensor links = vkt::detail::sparse_row_links(ids, c.rows);
    vkt::Executor exec(g, {links});
    exec.feed("ids", c.ids);
    const std::vector<std::int32_t> want = vkt::test::links_on_host(c.ids, c.rows);
    std::vector<std::int32_t> first;
    for (int run = 0; run < 2; ++run) {
      exec.run();
      exec.wait();
      std::vector<std::int32_t> got = exec.read_i32(links);
      got.resize(want.size());  // the rest is the kernels' scratch
      CHECK(got == want);
      if (run == 0) first = got;
      CHECK(got == first);
    }
  }
}

TEST_CASE(
    "sparse rows: a row named 3000 times sums its values rows in occurrence order (SGD, the bits "
    "of a float sum in that order)") {
  constexpr int kRows = 7, kWidth = 6, kIds = 3000;  // width 6: the float path
  vkt::Graph g(vkt::test::shared_device(), {.seed = 3});
  const Tensor table = g.variable("table", {kRows, kWidth}, vkt::Initializer::zeros());
  const Tensor ids = g.input("ids", {kIds}, vkt::DType::I32);
  const Tensor dy = g.input("dy", {kIds, kWidth});
  vkt::SGD sgd(1.0f);
  vkt::Executor exec(g, {sgd.minimize(vkt::reduce_sum(vkt::embedding_lookup(table, ids) * dy))});
  std::mt19937 rng(3);
  std::vector<std::int32_t> id(kIds);
  for (auto& i : id) i = static_cast<std::int32_t>(rng() % 3 == 0 ? rng() % kRows : 2);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> d(static_cast<std::size_t>(kIds) * kWidth);
  for (float& x : d) x = uniform(rng);
  exec.feed("ids", id);
  exec.feed("dy", d);
  exec.run();
  std::vector<float> want(static_cast<std::size_t>(kRows) * kWidth, 0.0f);
  for (std::size_t j = 0; j < id.size(); ++j) {
    for (int c = 0; c < kWidth; ++c) {
      // Summed first (in occurrence order), then subtracted from 0 once.
      want[static_cast<std::size_t>(id[j]) * kWidth + c] += d[j * kWidth + c];
    }
  }
  for (float& w : want) w = 0.0f - w;
  CHECK(g.values(table) == want);
}
