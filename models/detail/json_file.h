#pragma once
// Reading the JSON files of a model folder (library-private: nlohmann_json is
// a private dependency). Every failure is one vkt::Error line naming the file.

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace vkt::models::detail {

/// A whole file's bytes; vkt::Error naming `path` when it cannot be read.
std::string read_whole_file(const std::filesystem::path& path);

/// `path` parsed as JSON; vkt::Error naming `path` and the parser's complaint
/// when it is not JSON.
nlohmann::json read_json_file(const std::filesystem::path& path);

}  // namespace vkt::models::detail
