#pragma once
// The SPIR-V of every shader in shaders/, embedded at build time.

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

namespace vkt::shaders {

/// Every embedded shader as (name, words); the name is the .comp file's stem.
std::span<const std::pair<std::string_view, std::span<const std::uint32_t>>> all();

/// The words of shader `name`; throws vkt::Error listing the known names if none.
std::span<const std::uint32_t> find(std::string_view name);

}  // namespace vkt::shaders
