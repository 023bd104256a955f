#include "csv.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "../vulkan/error.h"

namespace vkt {
namespace {

/// Lines of a plain or gzip file, read through zlib. Not gzgets: it stops at
/// a NUL byte, which would silently cut a line (or end the file) there.
class LineReader {
 public:
  explicit LineReader(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (file_ == nullptr) {
      throw Error(fmt::format("cannot open '{}': {}; check the path", path, std::strerror(errno)));
    }
  }
  ~LineReader() { gzclose(file_); }
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  /// The next line without its end of line; false at the end of the file.
  bool next(std::string& line) {
    line.clear();
    bool any = false;
    while (true) {
      if (at_ == buffer_.size() && !fill()) break;
      any = true;
      const std::size_t end = buffer_.find('\n', at_);
      line.append(buffer_, at_, end == std::string::npos ? std::string::npos : end - at_);
      if (end != std::string::npos) {
        at_ = end + 1;
        break;
      }
      at_ = buffer_.size();
    }
    if (!any) return false;
    ++number_;
    while (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find('\0') != std::string::npos) {
      throw Error(fmt::format("'{}' line {}: a NUL byte; the file is not text (or is damaged)",
                              path_, number_));
    }
    return true;
  }
  std::int64_t number() const { return number_; }

 private:
  // Reads the next piece of the (decompressed) file; false at its end.
  bool fill() {
    buffer_.resize(1 << 16);
    const int n = gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
    int error = Z_OK;
    const char* message = gzerror(file_, &error);
    if (n < 0 || (error != Z_OK && error != Z_STREAM_END)) {
      throw Error(
          fmt::format("'{}' line {}: the file is damaged ({})", path_, number_ + 1, message));
    }
    buffer_.resize(static_cast<std::size_t>(n));
    at_ = 0;
    return n > 0;
  }

  std::string path_;
  gzFile file_;
  std::string buffer_;
  std::size_t at_ = 0;
  std::int64_t number_ = 0;
};

std::vector<std::string> split(const std::string& line, char delimiter) {
  std::vector<std::string> cells;
  std::string cell;
  for (char c : line) {
    if (c == delimiter) {
      cells.push_back(cell);
      cell.clear();
    } else if (c != ' ' && c != '\t') {
      cell += c;
    }
  }
  cells.push_back(cell);
  return cells;
}

}  // namespace

CsvTable read_csv(const std::string& path, const CsvOptions& options) {
  if (options.label_name && !options.header_names_columns) {
    throw Error(
        fmt::format("read_csv('{}'): a label given by name needs a header that names the "
                    "columns (header_names_columns with skip_lines >= 1)",
                    path));
  }
  LineReader reader(path);
  std::string line;
  std::vector<std::string> names;
  for (int i = 0; i < options.skip_lines; ++i) {
    if (!reader.next(line)) throw Error(fmt::format("'{}' has no data after its header", path));
    if (i == 0 && options.header_names_columns) names = split(line, options.delimiter);
  }

  CsvTable table;
  std::int64_t columns = names.empty() ? -1 : static_cast<std::int64_t>(names.size());
  std::int64_t label = -1;
  const auto resolve_label = [&] {
    if (options.label_name) {
      for (std::size_t i = 0; i < names.size(); ++i) {
        if (names[i] == *options.label_name) label = static_cast<std::int64_t>(i);
      }
      if (label < 0) {
        throw Error(fmt::format("'{}' has no column named '{}' (its columns: {})", path,
                                *options.label_name, fmt::join(names, ", ")));
      }
    } else {
      label = options.label_index < 0 ? columns + options.label_index : options.label_index;
      if (label < 0 || label >= columns) {
        throw Error(fmt::format("'{}': label column {} does not exist; the file has {} columns",
                                path, options.label_index, columns));
      }
    }
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(names.size()); ++i) {
      if (i != label) table.feature_names.push_back(names[static_cast<std::size_t>(i)]);
    }
    table.features = columns - 1;
  };
  if (columns >= 0) resolve_label();

  while (reader.next(line)) {
    if (line.empty()) continue;
    const std::vector<std::string> cells = split(line, options.delimiter);
    if (columns < 0) {
      columns = static_cast<std::int64_t>(cells.size());
      resolve_label();
    }
    if (static_cast<std::int64_t>(cells.size()) != columns) {
      throw Error(fmt::format("'{}' line {}: {} columns where the file has {}", path,
                              reader.number(), cells.size(), columns));
    }
    for (std::int64_t i = 0; i < columns; ++i) {
      const std::string& cell = cells[static_cast<std::size_t>(i)];
      char* end = nullptr;
      errno = 0;
      const float value = std::strtof(cell.c_str(), &end);
      if (cell.empty() || end != cell.c_str() + cell.size() || errno == ERANGE ||
          !std::isfinite(value)) {
        throw Error(fmt::format("'{}' line {}, column {}: '{}' is not a finite number", path,
                                reader.number(), i + 1, cell));
      }
      (i == label ? table.y : table.x).push_back(value);
    }
    ++table.rows;
  }
  if (table.rows == 0) throw Error(fmt::format("'{}' holds no data rows", path));
  return table;
}

}  // namespace vkt
