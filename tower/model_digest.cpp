#include "model_digest.h"

#include <fmt/format.h>

#include "../runtime/mpi/process_group.h"
#include "../runtime/vulkan/error.h"

namespace vkt {

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    start = end == std::string::npos ? text.size() : end + 1;
  }
  return lines;
}

}  // namespace

void check_same_model(ProcessGroup& processes, const std::vector<std::string>& description) {
  std::string mine;
  for (const std::string& line : description) mine += line + "\n";
  const std::vector<std::string> all = processes.allgather(mine, "start-up: the model check");
  const std::vector<std::string> first = lines_of(all.front());
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all.front()) continue;
    const std::vector<std::string> theirs = lines_of(all[r]);
    std::size_t k = 0;
    while (k < first.size() && k < theirs.size() && first[k] == theirs[k]) ++k;
    const auto line = [&](const std::vector<std::string>& lines) {
      return k < lines.size() ? fmt::format("'{}'", lines[k]) : std::string("nothing");
    };
    throw Error(fmt::format(
        "rank {} built a different model than rank 0: where rank 0 has {}, rank {} has {}; "
        "every process must run the same program with the same flags and data shapes",
        r, line(first), r, line(theirs)));
  }
}

}  // namespace vkt
