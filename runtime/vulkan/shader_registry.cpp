#include "shader_registry.h"

#include <fmt/format.h>

#include <string>

#include "error.h"

namespace vkt::shaders {

std::span<const std::uint32_t> find(std::string_view name) {
  std::string known;
  for (const auto& [shader, words] : all()) {
    if (shader == name) return words;
    known += known.empty() ? "" : ", ";
    known += shader;
  }
  throw Error(
      fmt::format("no shader named '{}' is embedded in vktower (known: {}); shaders are "
                  "the shaders/*.comp files, named without the extension",
                  name, known));
}

}  // namespace vkt::shaders
