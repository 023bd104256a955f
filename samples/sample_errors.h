#pragma once
// How every sample fails: one line on stderr that starts with the program's
// name and speaks of its flags.
//
//   int main(int argc, char** argv) {
//     CLI::App app{...};  // the flags
//     if (const std::optional<int> exit = parse_flags(app, argc, argv, "vkt-x")) return *exit;
//     return run_sample("vkt-x", [&] { ...; return 0; });
//   }
//
// A flag refused: "vkt-x: <why>", a second line pointing at --help, exit 2 (a
// usage error). A vkt::Error: "vkt-x: <what(), in the flags' words>", exit 1.

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <vktower/runtime/vulkan/error.h>
#include <algorithm>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
#include "sample_flags.h"

/// The exit code of a command line the program refuses.
inline constexpr int kUsageExit = 2;

namespace sample_detail {

/// Edits (insert, delete, substitute, swap two neighbours) from `a` to `b`.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

/// The app's flags as typed: "--steps", "-h", "--no-self-test".
inline std::vector<std::string> flag_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& n : opt->get_snames()) names.push_back("-" + n);
    for (const std::string& n : opt->get_lnames()) names.push_back("--" + n);
  }
  return names;
}

inline std::string_view without_dashes(std::string_view flag) {
  return flag.substr(std::min(flag.find_first_not_of('-'), flag.size()));
}

/// The flag `typed` most likely meant: the nearest by edit distance when it is
/// at most 2 edits and at most a third of the name, else the one flag the name
/// begins (3 letters or more); "" when none is near.
inline std::string nearest_flag(std::string_view typed, const std::vector<std::string>& flags) {
  const std::string_view name = without_dashes(typed);
  std::string best;
  std::size_t best_distance = 3;
  for (const std::string& flag : flags) {
    const std::string_view candidate = without_dashes(flag);
    const std::size_t d = edit_distance(name, candidate);
    if (d < best_distance && 3 * d <= std::max(name.size(), candidate.size())) {
      best = flag;
      best_distance = d;
    }
  }
  if (!best.empty() || name.size() < 3) return best;
  for (const std::string& flag : flags) {
    if (without_dashes(flag).starts_with(name)) {
      if (!best.empty()) return {};  // two flags begin so: no guess
      best = flag;
    }
  }
  return best;
}

/// "unknown flag --stpes; did you mean --steps?" for the flags among the
/// arguments CLI11 could not place (tokens of argv that start with "-" and,
/// before any "=", name no flag of the app); "" when there is none.
inline std::string unknown_flags_message(const CLI::App& app) {
  const std::vector<std::string> flags = flag_names(app);
  std::vector<std::pair<std::string, std::string>> unknown;  // typed, suggestion
  for (const std::string& arg : app.remaining()) {
    if (arg == "--") break;  // the rest are values
    if (arg.size() < 2 || arg[0] != '-') continue;
    const std::string typed = arg.substr(0, arg.find('='));
    if (std::find(flags.begin(), flags.end(), typed) != flags.end()) continue;
    unknown.emplace_back(typed, nearest_flag(typed, flags));
  }
  if (unknown.empty()) return {};
  if (unknown.size() == 1) {
    const auto& [typed, suggestion] = unknown.front();
    return suggestion.empty() ? fmt::format("unknown flag {}", typed)
                              : fmt::format("unknown flag {}; did you mean {}?", typed, suggestion);
  }
  std::vector<std::string> items;
  for (const auto& [typed, suggestion] : unknown) {
    items.push_back(suggestion.empty() ? typed
                                       : fmt::format("{} (did you mean {}?)", typed, suggestion));
  }
  return fmt::format("unknown flags {}", fmt::join(items, ", "));
}

/// `text` on one line.
inline std::string one_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

}  // namespace sample_detail

/// Parses the command line into `app`, with --help showing the flags' ranges
/// as SampleHelpFormatter writes them. Returns nothing when the program goes
/// on; else the code to exit with: 0 after --help (or --version), 2 after one
/// line "<program>: <why>" and a pointer to --help on stderr.
inline std::optional<int> parse_flags(CLI::App& app, int argc, const char* const* argv,
                                      const char* program) {
  app.formatter(std::make_shared<SampleHelpFormatter>());
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    // --help, --version, and a callback's quiet stop print as CLI11 prints them.
    if (dynamic_cast<const CLI::CallForHelp*>(&e) || dynamic_cast<const CLI::CallForAllHelp*>(&e) ||
        dynamic_cast<const CLI::CallForVersion*>(&e) ||
        e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      return app.exit(e);
    }
    std::string why;
    if (dynamic_cast<const CLI::ExtrasError*>(&e)) why = sample_detail::unknown_flags_message(app);
    if (why.empty()) why = sample_detail::one_line(e.what());
    fmt::print(stderr, "{}: {}\nRun '{} --help' for the flags.\n", program, why, program);
    return kUsageExit;
  }
}

/// A library error's text in the words of a sample's user: the settings it
/// names become the flags that give them. The one table of such names.
inline std::string in_flag_words(std::string message) {
  static const std::pair<std::regex, const char*> kTable[] = {
      // A model dir from another model (before the plain RunConfig.model_dir).
      {std::regex(R"(; give another RunConfig\.model_dir, or build the model that wrote it)"),
       "; use another --model-dir (or the flags that trained it)"},
      // dataset_input(drop_remainder = true) on fewer training examples than a batch.
      {std::regex(R"(BatchStream: (\d+) examples make no full batch of (\d+) )"
                  R"(\(drop_remainder drops them all\); use a smaller batch)"),
       "$1 training examples make no full batch of $2; use a --batch-size of at most $1"},
      {std::regex(R"( \(dataset_input with drop_remainder = true\))"), ""},
      {std::regex(R"(use a batch size that)"), "use a --batch-size that"},
      {std::regex(R"(RunConfig\.model_dir)"), "--model-dir"},
      {std::regex(R"((RunConfig\.)?accumulate_steps)"), "--accumulate"},
      {std::regex(R"(RunConfig\.random_seed)"), "--seed"},
  };
  for (const auto& [pattern, replacement] : kTable) {
    message = std::regex_replace(message, pattern, replacement);
  }
  return message;
}

/// Runs `body` (returning the exit code) and turns what it throws into one
/// line on stderr and exit 1: a vkt::Error as "<program>: <its text, in the
/// flags' words>" (then `hint`, when given, on a line of its own), anything
/// else as "<program>: unexpected error: <what()>" (a bug, but not an abort).
template <class F>
int run_sample(const char* program, F&& body, std::string_view hint = {}) {
  try {
    return std::forward<F>(body)();
  } catch (const vkt::Error& e) {
    fmt::print(stderr, "{}: {}\n", program, sample_detail::one_line(in_flag_words(e.what())));
    if (!hint.empty()) fmt::print(stderr, "{}\n", hint);
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: unexpected error: {}\n", program, sample_detail::one_line(e.what()));
    return 1;
  }
}
