// Data sets: seeded shuffles and splits, standardisation, and batches made on
// a background thread.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <numeric>

#include <vktower/runtime/io/dataset.h>

#include "../test_support.h"

using Catch::Matchers::Contains;

namespace {

vkt::Dataset iris() {
  return vkt::Dataset::from_csv(
      vkt::read_csv((vkt::test::samples_data_dir() / "iris.csv").string(), {.skip_lines = 1}),
      true);
}

}  // namespace

TEST_CASE("data sets shuffle and split by seed, keeping every example once") {
  const vkt::Dataset all = iris();
  REQUIRE(all.size() == 150);
  CHECK(all.columns().at("x").shape == vkt::Shape{150, 4});
  CHECK(all.columns().at("y").dtype == vkt::DType::I32);

  const vkt::Dataset a = all.shuffled(7), b = all.shuffled(7), c = all.shuffled(8);
  CHECK(a.columns().at("x").f32 == b.columns().at("x").f32);
  CHECK(a.columns().at("x").f32 != c.columns().at("x").f32);
  CHECK(a.columns().at("x").f32 != all.columns().at("x").f32);
  // Rows move whole: each label stays with its features (setosa: petal length < 2.5).
  const auto& x = a.columns().at("x").f32;
  const auto& y = a.columns().at("y").i32;
  for (std::size_t i = 0; i < y.size(); ++i) CHECK((x[i * 4 + 2] < 2.5f) == (y[i] == 0));

  const auto [train, test] = all.split(0.2, 42);
  CHECK(train.size() == 120);
  CHECK(test.size() == 30);
  const auto sum = [](const vkt::Dataset& d) {
    const auto& v = d.columns().at("x").f32;
    return std::accumulate(v.begin(), v.end(), 0.0);
  };
  CHECK(sum(train) + sum(test) == Approx(sum(all)).epsilon(1e-12));
  CHECK(all.split(0.2, 42).second.columns().at("y").i32 == test.columns().at("y").i32);
  CHECK_THAT(vkt::test::error_of([&] { all.split(1.0, 1); }), Contains("between 0 and 1"));
}

TEST_CASE("a standardizer fitted on the training split maps both splits") {
  const auto [train, test] = iris().split(0.3, 3);
  const vkt::Standardizer s = vkt::Standardizer::fit(train, "x");
  const vkt::Dataset train_std = train.map("x", s);
  const vkt::Dataset test_std = test.map("x", s);
  const auto& v = train_std.columns().at("x").f32;
  for (std::size_t j = 0; j < 4; ++j) {
    double mean = 0, sq = 0;
    for (std::size_t i = j; i < v.size(); i += 4) mean += v[i];
    mean /= static_cast<double>(train.size());
    for (std::size_t i = j; i < v.size(); i += 4) sq += (v[i] - mean) * (v[i] - mean);
    CHECK(mean == Approx(0.0).margin(1e-5));
    CHECK(std::sqrt(sq / static_cast<double>(train.size())) == Approx(1.0).epsilon(1e-4));
  }
  // The test split uses the training statistics, not its own.
  const float raw = test.columns().at("x").f32[1];
  CHECK(test_std.columns().at("x").f32[1] == (raw - s.mean[1]) / s.stddev[1]);
}

TEST_CASE("a batch stream makes full and short batches over epochs, in order or reshuffled") {
  const vkt::Dataset all = iris();
  const auto count = [](vkt::BatchStream& s) {
    std::vector<std::int64_t> sizes;
    while (auto b = s.next()) sizes.push_back(b->at("x").shape[0]);
    return sizes;
  };
  vkt::BatchStream keep(all, 32, false);
  CHECK(count(keep) == std::vector<std::int64_t>{32, 32, 32, 32, 22});  // the short one kept
  vkt::BatchStream drop(all, 32, true, 2);
  CHECK(count(drop) == std::vector<std::int64_t>(8, 32));

  // In order, the batches are the data set; reshuffled, each epoch differs.
  vkt::BatchStream ordered(all, 40, false);
  std::vector<float> seen;
  while (auto b = ordered.next())
    seen.insert(seen.end(), b->at("x").f32.begin(), b->at("x").f32.end());
  CHECK(seen == all.columns().at("x").f32);
  vkt::BatchStream shuffled(all, 150, false, 2, 5);
  const auto first = shuffled.next(), second = shuffled.next();
  REQUIRE(first);
  REQUIRE(second);
  CHECK(first->at("y").i32 != second->at("y").i32);
  CHECK(first->at("x").f32 == all.shuffled(5).columns().at("x").f32);
  CHECK_FALSE(shuffled.next());

  vkt::BatchStream abandoned(all, 10, true, 100);  // destroyed mid-way: the thread stops
  CHECK(abandoned.next());
  CHECK_THAT(vkt::test::error_of([&] { vkt::BatchStream bad(all, 0, true); }),
             Contains("must be at least 1"));
}

TEST_CASE("a batch stream started at batch k gives what a whole stream gives from its k-th batch") {
  const vkt::Dataset all = iris();
  for (const bool drop : {true, false}) {
    vkt::BatchStream whole(all, 32, drop, 3, 9);
    std::vector<vkt::HostBatch> batches;
    while (auto b = whole.next()) batches.push_back(*b);
    for (const std::int64_t k : {0, 3, 4, 5, 9}) {  // mid-epoch, at an epoch's end, across one
      vkt::BatchStream resumed(all, 32, drop, 3, 9, k);
      for (std::size_t i = static_cast<std::size_t>(k); i < batches.size(); ++i) {
        const auto b = resumed.next();
        REQUIRE(b);
        CHECK(b->at("x").f32 == batches[i].at("x").f32);
        CHECK(b->at("y").i32 == batches[i].at("y").i32);
      }
      CHECK_FALSE(resumed.next());
    }
  }
  CHECK_THAT(vkt::test::error_of([&] { vkt::BatchStream bad(all, 200, true); }),
             Contains("150 examples make no full batch of 200"));
}

TEST_CASE("host tensors slice, pad and append rows") {
  const vkt::HostTensor t = vkt::HostTensor::floats({3, 2}, {1, 2, 3, 4, 5, 6});
  CHECK(t.slice_rows(1, 2).f32 == std::vector<float>{3, 4, 5, 6});
  CHECK(t.slice_rows(1, 2).shape == vkt::Shape({2, 2}));
  // Padding repeats the rows from the first: real values, never out of range.
  const vkt::HostTensor padded = t.padded_rows(8);
  CHECK(padded.shape == vkt::Shape({8, 2}));
  CHECK(padded.f32 == std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4});
  vkt::HostTensor labels;
  labels.append_rows(vkt::HostTensor::ints({2}, {7, 8}));
  labels.append_rows(vkt::HostTensor::ints({1}, {9}));
  CHECK(labels.shape == vkt::Shape({3}));
  CHECK(labels.i32 == std::vector<std::int32_t>{7, 8, 9});
  CHECK_THAT(vkt::test::error_of([&] { labels.append_rows(t); }), Contains("cannot append"));
  CHECK_THAT(vkt::test::error_of([&] { (void)t.slice_rows(2, 2); }), Contains("outside"));
  CHECK_THAT(vkt::test::error_of([&] { (void)t.padded_rows(2); }), Contains("cannot pad"));
}

TEST_CASE("host tensor row ranges are checked without overflowing") {
  const vkt::HostTensor t = vkt::HostTensor::floats(vkt::Shape{2, 1}, {1, 2});
  // begin + count wrapped to a negative number, passed the check and copied out of bounds.
  CHECK_THAT(vkt::test::error_of([&] { (void)t.slice_rows(1, INT64_MAX); }),
             Contains("lie outside a host tensor of shape [2, 1]"));
  CHECK_THAT(vkt::test::error_of([&] { (void)t.slice_rows(3, 0); }), Contains("outside"));
  CHECK(t.slice_rows(1, 1).f32 == std::vector<float>{2});
}

namespace {

/// A table of one feature column (0, 1, 2, ...) and the given labels.
vkt::CsvTable table_with_labels(const std::vector<float>& labels) {
  vkt::CsvTable table;
  table.rows = static_cast<std::int64_t>(labels.size());
  table.features = 1;
  for (std::size_t i = 0; i < labels.size(); ++i) table.x.push_back(static_cast<float>(i));
  table.y = labels;
  return table;
}

}  // namespace

TEST_CASE("from_csv refuses labels outside the model's classes, naming the file and data row") {
  const auto error_for = [](const std::vector<float>& labels, const vkt::FromCsvOptions& o) {
    return vkt::test::error_of([&] { vkt::Dataset::from_csv(table_with_labels(labels), o); });
  };
  const vkt::FromCsvOptions digits{.integer_labels = true, .classes = 10, .source = "digits.csv"};
  CHECK(error_for({0, 9, 12}, digits) ==
        "digits.csv: data row 3: label 12 is not a class: the model has 10 classes, labels 0..9");
  CHECK_THAT(error_for({-1, 0}, digits), Contains("digits.csv: data row 1: label -1 is not a"));
  CHECK_THAT(error_for({0, 1e10f}, digits),
             Contains("data row 2: label 10000000000 is not a class"));
  CHECK_THAT(error_for({0, 2.5f}, digits), Contains("data row 2: label 2.5 is not a class"));
  CHECK_THAT(error_for({std::nanf("")}, digits), Contains("data row 1: label nan is not a class"));

  // A binary label (sigmoid cross-entropy): f32 0 or 1, nothing else.
  const vkt::FromCsvOptions binary{.classes = 2, .source = "cancer.csv"};
  CHECK(error_for({0, 1, 7}, binary) ==
        "cancer.csv: data row 3: label 7 is not a class: the model has 2 classes, labels 0..1");
  CHECK_THAT(error_for({-1}, binary), Contains("cancer.csv: data row 1: label -1 is not a class"));
  CHECK_THAT(error_for({0.5f}, binary), Contains("label 0.5 is not a class"));
  const vkt::Dataset ok = vkt::Dataset::from_csv(table_with_labels({1, 0, 1}), binary);
  CHECK(ok.columns().at("y").dtype == vkt::DType::F32);
  CHECK(ok.columns().at("y").f32 == std::vector<float>{1, 0, 1});
  const vkt::Dataset ids = vkt::Dataset::from_csv(table_with_labels({9, 0, 3}), digits);
  CHECK(ids.columns().at("y").i32 == std::vector<std::int32_t>{9, 0, 3});
}

TEST_CASE("from_csv refuses class ids past the i32 range instead of casting them") {
  // A float label beyond int32 cast to int is undefined behaviour: it must
  // be refused before the cast, whatever the classes.
  for (const float bad : {1e10f, -1e10f, 2147483648.0f, INFINITY, -INFINITY}) {
    CHECK_THAT(vkt::test::error_of([&] {
                 vkt::Dataset::from_csv(table_with_labels({1, bad}), true);
               }),
               Contains("the CSV table: data row 2: label ") &&
                   Contains("is not a class id: a whole number in the i32 range"));
  }
  const vkt::Dataset negative = vkt::Dataset::from_csv(table_with_labels({-5, 7}), true);
  CHECK(negative.columns().at("y").i32 == std::vector<std::int32_t>{-5, 7});
}

TEST_CASE("from_csv of a CSV file with one column names the file and what it needs") {
  const vkt::test::TempDir dir;
  const std::string path = dir / "one_column.csv";
  {
    std::ofstream out(path);
    out << "1\n2\n3\n";
  }
  const std::string message = vkt::test::error_of([&] {
    vkt::Dataset::from_csv(vkt::read_csv(path), {.integer_labels = true, .source = path});
  });
  CHECK(message == path +
                       " has 1 column per row; a data set needs at least one feature column and a "
                       "label column");
}
