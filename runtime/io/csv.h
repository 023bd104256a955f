#pragma once
// Reading numeric CSV files, plain or gzip-compressed.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vkt {

/// How read_csv reads a file.
struct CsvOptions {
  /// Lines to skip before the data (1 for a header line).
  int skip_lines = 0;
  /// The skipped first line names the columns (so label_name can be used).
  bool header_names_columns = false;
  /// The label column: by index (negative counts from the end; default: the
  /// last column), or by name (needs header_names_columns).
  int label_index = -1;
  std::optional<std::string> label_name{};
  char delimiter = ',';
};

/// A numeric table: every column but the label is a feature, row-major.
struct CsvTable {
  std::vector<std::string> feature_names;  ///< empty without a naming header
  std::int64_t rows = 0;
  std::int64_t features = 0;
  std::vector<float> x;  ///< [rows, features]
  std::vector<float> y;  ///< [rows], the label column as read
};

/// Reads `path` (gzip or plain: zlib tells them apart). Every cell must be a
/// number and every row must have the header's (or the first row's) number of
/// columns; otherwise vkt::Error names the file, the line and the problem.
///
///   vkt::CsvTable iris = vkt::read_csv("samples/data/iris.csv", {.skip_lines = 1});
CsvTable read_csv(const std::string& path, const CsvOptions& options = {});

}  // namespace vkt
