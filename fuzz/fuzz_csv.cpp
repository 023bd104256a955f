// read_csv on any bytes, plain or gzip: a vkt::Error or a table, nothing else.
// The first byte picks the options and whether the rest is gzip-compressed
// first (so the decompressed text is fuzzed too, not only damaged streams).
#include <zlib.h>

#include <cstdio>

#include "../runtime/io/csv.h"
#include "../runtime/vulkan/error.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t pick = data[0];
  vkt::CsvOptions options;
  options.skip_lines = pick & 3;
  options.header_names_columns = options.skip_lines > 0 && (pick & 4) != 0;
  options.label_index = static_cast<int>((pick >> 3) & 3) - 2;  // -2 to 1
  if (options.header_names_columns && (pick & 32) != 0) options.label_name = "y";
  options.delimiter = (pick & 64) != 0 ? ';' : ',';
  std::string path;
  if ((pick & 128) != 0) {
    path = vkt::fuzz::to_file("csv.gz", nullptr, 0);
    gzFile out = gzopen(path.c_str(), "wb");
    if (size > 1) gzwrite(out, data + 1, static_cast<unsigned>(size - 1));
    gzclose(out);
  } else {
    path = vkt::fuzz::to_file("csv", data + 1, size - 1);
  }
  try {
    const vkt::CsvTable table = vkt::read_csv(path, options);
    if (table.x.size() != static_cast<std::size_t>(table.rows * table.features) ||
        table.y.size() != static_cast<std::size_t>(table.rows)) {
      __builtin_trap();  // a table that disagrees with its own sizes
    }
  } catch (const vkt::Error&) {
  }
  std::remove(path.c_str());
  return 0;
}
