#pragma once
// Strict checks of the samples' numeric flags. CLI11 2.1 converts with
// strtoull/strtod semantics: "-1" becomes 2^64-1, 1e30 saturates, "" is 0,
// "nan" passes PositiveNumber and Range. These look at the text first.

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

/// A whole decimal number in [lo, hi], digits only.
inline CLI::Validator whole_number(std::uint64_t lo, std::uint64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        std::uint64_t v = 0;
        const char* last = text.data() + text.size();
        const auto [end, ec] = std::from_chars(text.data(), last, v);
        if (text.empty() || ec != std::errc() || end != last || v < lo || v > hi) {
          return fmt::format("'{}' is not a whole number from {} to {}", text, lo, hi);
        }
        return {};
      },
      fmt::format("INT in [{} - {}]", lo, hi));
}

/// The finite number in `text`, or NaN when there is none (nothing else after it).
inline double finite_number(const std::string& text) {
  double v = 0;
  const char* last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(text.data(), last, v);
  return text.empty() || ec != std::errc() || end != last || !std::isfinite(v) ? NAN : v;
}

/// A finite number above 0 (a learning rate).
inline CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return finite_number(text) > 0 ? std::string()
                                       : fmt::format("'{}' is not a finite number above 0", text);
      },
      "FLOAT above 0");
}

/// A finite number in [lo, hi].
inline CLI::Validator real_number(double lo, double hi) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const double v = finite_number(text);
        return v >= lo && v <= hi ? std::string()
                                  : fmt::format("'{}' is not a number from {} to {}", text, lo, hi);
      },
      fmt::format("FLOAT in [{} - {}]", lo, hi));
}

/// The --accumulate flag (RunConfig::accumulate_steps), also for a sample
/// without the shared flags.
inline void add_accumulate_flag(CLI::App& app, int& accumulate) {
  app.add_option("--accumulate", accumulate,
                 "micro-batches per step (gradient accumulation): each step sums the gradients "
                 "of K batches and applies them once, as one batch K times as large")
      ->capture_default_str()
      ->check(whole_number(1, static_cast<std::uint64_t>(std::numeric_limits<int>::max())));
}
