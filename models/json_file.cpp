// Reading the JSON files of a model folder.
#include "detail/json_file.h"

#include <fstream>
#include <iterator>

#include "../runtime/vulkan/error.h"

namespace vkt::models::detail {

std::string read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path.string() + "'; check that it exists and is readable");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error("reading '" + path.string() + "' failed");
  return bytes;
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
  const std::string text = read_whole_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's messages are one line: "[json.exception.parse_error.101] parse error at line 1,
    // ..."
    throw Error("'" + path.string() + "' is not valid JSON: " + e.what());
  }
}

}  // namespace vkt::models::detail
