// The checks load_checkpoint and read_checkpoint run on a file's bytes (the
// Graph-side rest needs Vulkan): a vkt::Error or tensors that fit the file.
// An input whose first byte is odd gets its header_crc32 recomputed first, so
// the fuzzer also reaches the field checks behind the header checksum.
#include <fmt/format.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <string_view>
#include <vector>

#include "../runtime/io/checkpoint_file.h"
#include "../runtime/io/host_tensor.h"
#include "../runtime/vulkan/error.h"

namespace {

void fix_header_crc(std::vector<char>& file) {
  if (file.size() < 8) return;
  std::uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  if (n > file.size() - 8) return;
  const std::string_view key = R"("header_crc32":")";
  const std::size_t at = std::string_view(file.data() + 8, n).find(key);
  if (at == std::string_view::npos || at + key.size() + 8 > n) return;
  char* digits = file.data() + 8 + at + key.size();
  std::memset(digits, '0', 8);
  const uLong crc = ::crc32(::crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(file.data()),
                            static_cast<uInt>(8 + n));
  const std::string hex = fmt::format("{:08x}", crc);
  std::memcpy(digits, hex.data(), 8);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::vector<char> bytes(data + 1, data + size);
  if ((data[0] & 1) != 0) fix_header_crc(bytes);
  try {
    const vkt::detail::CheckpointFile header_only("fuzz", bytes, /*check_data=*/false);
    (void)header_only.global_step();
    // Measured shard weights come out finite and above 0, or the file is refused.
    for (const double w : header_only.shard_weights()) {
      if (!(w > 0) || !std::isfinite(w)) __builtin_trap();
    }
    // Bit 1 of the first byte: read as warm start reads any safetensors file.
    const bool any_safetensors = (data[0] & 2) != 0;
    const vkt::detail::CheckpointFile file("fuzz", bytes, true, any_safetensors);
    std::uint64_t total = 0;
    for (const auto& [name, entry] : file.entries()) {
      // What read_checkpoint builds of each tensor.
      const vkt::HostTensor t = vkt::HostTensor::floats(entry.shape, file.values(name));
      // One value per element, whatever its stored type (f16 and bf16 widen).
      if (static_cast<std::int64_t>(t.f32.size()) != entry.shape.elements()) __builtin_trap();
      total += entry.end - entry.begin;
    }
    if (total > bytes.size()) __builtin_trap();  // more bytes read than the file holds
  } catch (const vkt::Error&) {
  }
  return 0;
}
