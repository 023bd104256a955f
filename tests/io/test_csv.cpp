// CSV reading on the real data sets in samples/data and on broken files.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include <vktower/runtime/io/csv.h>

#include "../test_support.h"

using Catch::Matchers::Contains;

namespace {

const std::string kData = vkt::test::samples_data_dir().string();

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path = "/tmp/vkt_test_" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("read_csv reads iris, breast_cancer and gzip-compressed digits") {
  const vkt::CsvTable iris = vkt::read_csv(kData + "/iris.csv", {.skip_lines = 1});
  CHECK(iris.rows == 150);
  CHECK(iris.features == 4);
  CHECK(iris.x.size() == 600);
  CHECK(std::vector<float>(iris.x.begin(), iris.x.begin() + 4) ==
        std::vector<float>{5.1f, 3.5f, 1.4f, 0.2f});
  for (float c : {0.0f, 1.0f, 2.0f}) CHECK(std::count(iris.y.begin(), iris.y.end(), c) == 50);

  const vkt::CsvTable cancer = vkt::read_csv(kData + "/breast_cancer.csv", {.skip_lines = 1});
  CHECK(cancer.rows == 569);
  CHECK(cancer.features == 30);
  CHECK(cancer.x[0] == 17.99f);
  CHECK(std::count(cancer.y.begin(), cancer.y.end(), 1.0f) == 357);  // benign
  CHECK(std::count(cancer.y.begin(), cancer.y.end(), 0.0f) == 212);  // malignant

  const vkt::CsvTable digits = vkt::read_csv(kData + "/digits.csv.gz");
  CHECK(digits.rows == 1797);
  CHECK(digits.features == 64);
  CHECK(*std::max_element(digits.x.begin(), digits.x.end()) == 16.0f);
  CHECK(*std::min_element(digits.x.begin(), digits.x.end()) == 0.0f);
  CHECK(digits.y.front() == 0.0f);
  for (int c = 0; c < 10; ++c) CHECK(std::count(digits.y.begin(), digits.y.end(), float(c)) > 150);
}

TEST_CASE("read_csv finds the label column by index or by name") {
  const std::string path = temp_file("named.csv", "id,label,a\n1,0,2.5\n2,1,-3\n");
  const vkt::CsvTable by_name =
      vkt::read_csv(path, {.skip_lines = 1, .header_names_columns = true, .label_name = "label"});
  CHECK(by_name.feature_names == std::vector<std::string>{"id", "a"});
  CHECK(by_name.x == std::vector<float>{1, 2.5f, 2, -3});
  CHECK(by_name.y == std::vector<float>{0, 1});
  const vkt::CsvTable first = vkt::read_csv(path, {.skip_lines = 1, .label_index = 0});
  CHECK(first.y == std::vector<float>{1, 2});
  CHECK(first.x == std::vector<float>{0, 2.5f, 1, -3});
  std::remove(path.c_str());
}

TEST_CASE("read_csv errors name the file, the line and the problem") {
  const std::string bad_cell = temp_file("bad_cell.csv", "1,2,3\n4,five,6\n");
  const std::string message = vkt::test::error_of([&] { vkt::read_csv(bad_cell); });
  CHECK_THAT(message, Contains(bad_cell));
  CHECK_THAT(message, Contains("line 2, column 2: 'five' is not a finite number"));
  const std::string short_row = temp_file("short_row.csv", "1,2,3\n4,5\n");
  CHECK_THAT(vkt::test::error_of([&] { vkt::read_csv(short_row); }),
             Contains("line 2: 2 columns where the file has 3"));
  CHECK_THAT(vkt::test::error_of([] { vkt::read_csv("/tmp/vkt_no_such_file.csv"); }),
             Contains("cannot open '/tmp/vkt_no_such_file.csv'"));
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::read_csv(short_row,
                             {.skip_lines = 1, .header_names_columns = true, .label_name = "y"});
             }),
             Contains("no column named 'y'"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::read_csv(bad_cell, {.label_index = 7}); }),
             Contains("label column 7 does not exist"));
  const std::string empty = temp_file("empty.csv", "a,b\n");
  CHECK_THAT(vkt::test::error_of([&] { vkt::read_csv(empty, {.skip_lines = 1}); }),
             Contains("holds no data rows"));
  for (const std::string& p : {bad_cell, short_row, empty}) std::remove(p.c_str());
}

TEST_CASE("read_csv refuses a NUL byte instead of cutting the line there") {
  const std::string path = "/tmp/vkt_test_nul.csv";
  std::ofstream(path, std::ios::binary) << std::string("1,2\n\0,3\n4,5\n", 12);
  // gzgets stopped at the NUL: line 2 read as empty and skipped, 2 rows of 3 kept.
  CHECK_THAT(vkt::test::error_of([&] { vkt::read_csv(path); }),
             Contains("'" + path + "' line 2: a NUL byte"));
  std::remove(path.c_str());
}

TEST_CASE("read_csv reads lines longer than any buffer and CRLF ends of line") {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += std::to_string(i) + ",";
  text += "7\r\n";
  const std::string path = temp_file("long_line.csv", text + text);
  const vkt::CsvTable t = vkt::read_csv(path);
  CHECK(t.rows == 2);
  CHECK(t.features == 20000);
  CHECK(t.x[19999] == 19999.0f);
  CHECK(t.y == std::vector<float>{7, 7});
  std::remove(path.c_str());
}
