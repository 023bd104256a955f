#pragma once
// JSON of Hugging Face files (internal; nlohmann stays out of public headers):
// parsed strictly, because the files are untrusted and nlohmann keeps the last
// of two equal keys silently, which would let one entry shadow another.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace vkt::models::detail {

/// `text` parsed as JSON. Throws vkt::Error "`context`: ..." when it is not
/// valid JSON or an object holds a key twice (naming the key).
nlohmann::json parse_json_strict(std::string_view text, const std::string& context);

/// `text` as a JSON string literal (quoted, escaped, invalid UTF-8 replaced):
/// names taken from a file keep an error message on one line.
std::string json_quoted(std::string_view text);

}  // namespace vkt::models::detail
