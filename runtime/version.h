#pragma once
// The library's version, as built.

#include <string_view>

namespace vkt {

/// "0.1.0": the version of the vktower library the program is linked with.
std::string_view version();

}  // namespace vkt
