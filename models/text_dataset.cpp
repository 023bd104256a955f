// models::read_documents, pack_documents and token_windows.
#include "text_dataset.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "../runtime/vulkan/error.h"
#include "tokenizer.h"

namespace vkt::models {
namespace {

bool json_lines(const std::string& path, const std::string& text) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".jsonl" || ext == ".json") return true;
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string::npos && text[first] == '{';
}

std::vector<std::string> parse_json_lines(const std::string& path, const std::string& text) {
  std::vector<std::string> documents;
  std::size_t begin = 0;
  for (std::int64_t line = 1; begin < text.size(); ++line) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string_view row(text.data() + begin, end - begin);
    begin = end + 1;
    if (row.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const nlohmann::json value = nlohmann::json::parse(row, nullptr, false);
    if (value.is_discarded() || !value.is_object()) {
      throw Error(
          fmt::format("{}:{}: not a JSON object; each line of a JSON lines file must be "
                      "an object with a \"text\" field",
                      path, line));
    }
    const auto field = value.find("text");
    if (field == value.end() || !field->is_string()) {
      throw Error(
          fmt::format("{}:{}: the object has no string field \"text\"; each line must "
                      "be like {{\"text\": \"...\"}}",
                      path, line));
    }
    documents.push_back(field->get<std::string>());
  }
  return documents;
}

}  // namespace

std::vector<std::string> read_documents(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error(
        fmt::format("--data '{}' is not a file; give a text file or JSON lines with a "
                    "\"text\" field",
                    path));
  }
  std::ifstream in(path, std::ios::binary);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (!in && !in.eof()) throw Error(fmt::format("--data '{}' cannot be read", path));
  std::vector<std::string> documents =
      json_lines(path, text) ? parse_json_lines(path, text) : std::vector<std::string>{text};
  std::size_t chars = 0;
  for (const std::string& d : documents) chars += d.size();
  if (chars == 0) throw Error(fmt::format("--data '{}' holds no text", path));
  return documents;
}

std::vector<std::int32_t> pack_documents(const std::vector<std::string>& documents,
                                         const Tokenizer& tokenizer,
                                         std::optional<std::int32_t> separator) {
  std::vector<std::int32_t> stream;
  for (const std::string& d : documents) {
    const std::vector<std::int32_t> ids = tokenizer.encode(d, {.add_bos = false, .add_eos = false});
    stream.insert(stream.end(), ids.begin(), ids.end());
    if (separator) stream.push_back(*separator);
  }
  return stream;
}

Dataset token_windows(const std::vector<std::int32_t>& tokens, std::int64_t context,
                      bool held_out) {
  if (context < 1)
    throw Error(fmt::format("token_windows: context must be positive, got {}", context));
  std::vector<std::int32_t> inputs, next;
  std::int64_t rows = 0;
  const auto size = static_cast<std::int64_t>(tokens.size());
  for (std::int64_t w = 0, start = 0; start + context + 1 <= size; ++w, start += context) {
    if ((w % 10 == 9) != held_out) continue;
    const auto first = tokens.begin() + start;
    inputs.insert(inputs.end(), first, first + context);
    next.insert(next.end(), first + 1, first + context + 1);
    ++rows;
  }
  if (rows == 0) return Dataset();
  return Dataset({{"tokens", HostTensor::ints({rows, context}, inputs)},
                  {"next", HostTensor::ints({rows, context}, next)}});
}

}  // namespace vkt::models
