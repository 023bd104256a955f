# Turns one SPIR-V binary into a C++ source holding its words (run with cmake -P).
file(READ "${SPV}" hex HEX)
string(LENGTH "${hex}" len)
math(EXPR rem "${len} % 8")
if(len EQUAL 0 OR NOT rem EQUAL 0)
  message(FATAL_ERROR "${SPV} is not a SPIR-V binary (size is not a multiple of 4 bytes)")
endif()
# SPIR-V files are written in the host's byte order (little-endian here); rebuild
# each 32-bit word from its four bytes.
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u," words "${hex}")
string(REGEX REPLACE "((0x[0-9a-f]+u,){8})" "\\1\n" words "${words}")
file(WRITE "${OUT}.tmp"
"// Generated from ${NAME}.comp by cmake/VktSpirvToCpp.cmake. Do not edit.
#include <cstdint>
#include <span>
namespace vkt::shaders {
namespace {
const std::uint32_t words[] = {
${words}
};
}  // namespace
extern const std::span<const std::uint32_t> spirv_${NAME};
const std::span<const std::uint32_t> spirv_${NAME}{words};
}  // namespace vkt::shaders
")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
